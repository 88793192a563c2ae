"""The report's first answer: does distributed training pay off here, and by how much. Per group, strategy and
bandwidth, the time each node count would take to train the job and its steady speedup over one node (the
summary table, analysis/tables/speedup.py), then the cost model's break-even, marked PREDICTION."""
from __future__ import annotations

import html

import numpy as np
import pandas as pd

from analysis.figures import figures
from analysis.tables import faithful, speedup, tables, trends


def section_tables(exp: tables.Experiment) -> dict[str, pd.DataFrame]:
    """The summary (per configuration: steady samples/s, the speedup, the projected time to train the job)."""
    return {"summary": speedup.summary(tables.counted_runs(exp), speedup.training_job(exp))}


def duration(seconds: float) -> str:
    """'45 s', '3.1 min', '2.5 h': two significant figures, whole numbers from 10 up."""
    if not np.isfinite(seconds):
        return "?"
    value, unit = ((seconds, "s") if seconds < 120 else (seconds / 60, "min") if seconds < 7200
                   else (seconds / 3600, "h"))
    return f"{value:.2g} {unit}" if value < 10 else f"{value:.0f} {unit}"


def _point_runs(runs: pd.DataFrame, row) -> pd.DataFrame:
    """The counted ok runs of one summary row."""
    ok = tables.ok_runs(runs)
    return ok[tables.same_values(ok, {k: getattr(row, k) for k in tables.CONFIG_KEYS})]


def machines(n: int, runs: pd.DataFrame) -> str:
    """'4 one-core machines', 'one 2-core machine', '4 nodes sharing this machine's 2 cores', '2 machines'."""
    runs = tables.with_faithful_defaults(runs)
    many = n != 1
    count = f"{n}" if many else "one"
    if len(runs) and tables.own_machines(runs).all():
        cores = runs["cores"].dropna().unique()
        if len(cores) == 1:
            size = "one-core" if cores[0] == 1 else f"{cores[0]:g}-core"
            return f"{count} {size} machine{'s' * many}"
        if (runs["node_cores"] != "").any():
            return f"{count} machine{'s' * many} of different sizes" if many else "one machine"
    if len(runs) and (runs["compute"] == "shared").all():
        machine = runs["machine_cores"].dropna().unique()
        where = f"this machine's {machine[0]:g} cores" if len(machine) == 1 else "this machine's cores"
        return f"{n} nodes sharing {where}" if many else f"one node on {where}"
    return f"{count} machine{'s' * many}"


def _projected(row) -> str:
    """'3.1 min (2.9 to 3.3 min)'."""
    lo, hi = row.projected_time_min_s, row.projected_time_max_s
    span = duration(lo) == duration(hi) or not (np.isfinite(lo) and np.isfinite(hi))
    return duration(row.projected_time_s) + ("" if span else f" ({duration(lo)} to {duration(hi)})")


MODE_NOTE = {
    "data": "Every node count trained the same data (workload.fixed: data).",
    "steps": "Under fixed steps (workload.fixed: steps) every worker ran the same steps, so N nodes trained N× the "
             "samples of one and their training times are not comparable; the projection uses each point's steady "
             "throughput.",
    "script": "Your script decided what each node count trained (workload.fixed: script); the projection uses each "
              "point's steady throughput.",
}


def answer_sentences(exp: tables.Experiment, t: dict[str, pd.DataFrame]) -> list[str]:
    """The report's first answer: per group (model, engine, batch, mode), strategy and bandwidth, the time to
    train the job on one node and on each larger node count (warm-up + job / steady samples/s), and the
    steady speedup said as faster or slower, with whether it lies beyond the spread of the repeats. Points
    not judged are said so, with the reason."""
    s = t["summary"]
    if s.empty:
        return ["No successful run, so there is no answer."]
    runs = tables.counted_runs(exp)
    left_out = exp.runs[tables.is_degraded(exp.runs) & (exp.runs["status"] == "ok")] if not exp.include_degraded \
        else exp.runs.iloc[0:0]
    job = speedup.training_job(exp)
    bounded = _bounded_summary(runs, left_out, job)
    out = []
    groups = list(s.groupby(tables.GROUP_KEYS, dropna=False, sort=False))
    for key, g in groups:
        model, engine, batch, fixed = key
        label = f" ({model}, {engine}, batch {batch:g} per worker)" if len(groups) > 1 else ""
        first = g.iloc[0]
        samples = first["job_samples"]
        said = (job.describe(samples, first["job_epochs"], first["job_samples_per_epoch"]) if np.isfinite(samples)
                else "unknown (no samples per epoch recorded)")
        out.append(f"The job{label}: {said}. " + MODE_NOTE.get(fixed, ""))
        shown = g[g["strategy"] != "single"] if (g["strategy"] != "single").any() else g
        many_strategies = shown["strategy"].nunique() > 1
        shown = shown.assign(_set=shown["communication"] != "none").sort_values(["strategy", "_set", "communication"])
        for (strategy, _, setting, bw), rows in shown.groupby(["strategy", "_set", "communication", "bw_bps"],
                                                              sort=False):
            rows = rows.sort_values("hosts")
            out.append(_answer_at(g, strategy, bw, rows, runs, samples, many_strategies or strategy != "allreduce",
                                  left_out[(left_out["bw_bps"] == bw) & (left_out["strategy"] == strategy)], setting,
                                  _same_point(bounded, key, strategy, setting, bw)))
    return out


def _bounded_summary(counted: pd.DataFrame, left_out: pd.DataFrame, job) -> pd.DataFrame:
    """The summary with the left-out multi-node runs that could only have run slower (faithful.slower_only) added
    to the counted runs: their speedups over a counted one-node point are lower bounds."""
    slower = left_out[(left_out["hosts"] > 1) & left_out["fidelity"].map(faithful.slower_only).astype(bool)] \
        if len(left_out) else left_out
    if slower.empty:
        return pd.DataFrame(columns=speedup.SUMMARY_COLUMNS)
    return speedup.summary(pd.concat([counted, slower], ignore_index=True), job)


def _same_point(s: pd.DataFrame, group: tuple, strategy, setting, bw) -> pd.DataFrame:
    """The rows of summary `s` of one group (GROUP_KEYS values), strategy, communication setting and bandwidth."""
    return s[tables.same_values(s, dict(zip(tables.GROUP_KEYS, group), strategy=strategy, communication=setting,
                                        bw_bps=bw))]


def _lower_bound(bounded: pd.DataFrame, hosts: int) -> str:
    """What a left-out point's runs still show: a speedup above 1 even in their slowest repeat against one
    node's fastest, which the machine's shortfall could only have lowered ('' when they show nothing)."""
    hit = bounded[bounded["hosts"] == hosts]
    if hit.empty or not np.isfinite(hit.iloc[0]["speedup_min"]) or hit.iloc[0]["speedup_min"] <= 1:
        return ""
    return (f"at least {trends.speed_words(hit.iloc[0]['speedup_min'])} (a lower bound: this machine gave them "
            "less than the machines they stand for, which could only have slowed them; see Degraded runs)")


def _answer_at(g, strategy, bw, rows, runs, samples, say_strategy, degraded, setting="none",
               bounded: pd.DataFrame | None = None) -> str:
    named = strategy if setting == "none" else f"{strategy}, {setting}"
    head = f"At {figures.mbit(bw)}" + (f" ({named})" if say_strategy or setting != "none" else "")
    what = f"{speedup.count(samples)} samples" if np.isfinite(samples) else "the job"
    multi = rows[rows["hosts"] > 1]
    base_name = next((tables.text(b) for b in multi["baseline_strategy"] if tables.text(b)), "") \
        if len(multi) else strategy
    base = g[(g["hosts"] == 1) & (g["bw_bps"] == bw) & (g["strategy"] == (base_name or strategy))]
    base = base.iloc[np.argsort((base["communication"] != "none").to_numpy(), kind="stable")]  # as the speedup's
    parts, few = [], []
    if len(base):
        b = next(base.itertuples())
        who = machines(1, _point_runs(runs, b)) + (f" ({b.strategy})" if b.strategy != strategy else "")
        parts.append(f"{who} would train {what} in {_projected(b)}" if b.n_steady else
                     f"{who}: not judged ({tables.text(b.not_judged)})")
        first = False
    else:
        first = True
    for r in multi.itertuples():
        who = machines(int(r.hosts), _point_runs(runs, r))
        if not r.n_steady:
            parts.append(f"{who}: not judged ({tables.text(r.not_judged)})")
            continue
        text = f"{who}{' would train ' + what if first else ''} in {_projected(r)}"
        first = False
        if np.isfinite(r.speedup):
            one = base.iloc[0]
            text += (f": {trends.speed_words(r.speedup)}, "
                     f"{trends.spread_words(tables.text(r.speedup_verdict), one['n_steady'], r.n_steady, short=True)}"
                     + (f" ({tables.text(r.not_judged)})" if tables.text(r.not_judged) else ""))
            few.append(r.speedup_verdict == "too few repeats to judge")
        elif len(base) and base.iloc[0]["n_steady"]:
            text += f" (no speedup: {tables.text(r.not_judged)})"
        parts.append(text)
    if not len(base):
        parts.append("no one-node run to compare with, so no speedup")
    gone = sorted(set(degraded["hosts"].astype(int)) - set(rows["hosts"].astype(int)))
    bounds = {h: _lower_bound(bounded, h) for h in gone} if bounded is not None and len(base) \
        and base.iloc[0]["n_steady"] else {}
    parts += [f"{machines(h, degraded[degraded['hosts'] == h])}: {bounds[h]}" for h in gone if bounds.get(h)]
    gone = [h for h in gone if not bounds.get(h)]
    if gone:
        parts.append(f"{' and '.join(map(str, gone))} node(s): not counted, this machine could not emulate them "
                     "faithfully (see Degraded runs)")
    return head + ", " + "; ".join(parts) + "." + (" Ranges that far apart come about by chance alone too often "
                                                    "with so few repeats: run more (sweep.repeats) to decide."
                                                    if any(few) else "")


def prediction_sentences(exp: tables.Experiment) -> list[str]:
    """The cost model's break-even (a PREDICTION), where analysis.model.predict provides it."""
    from analysis.model import predict
    if not hasattr(predict, "break_even_sentences"):
        return []
    return list(predict.break_even_sentences(exp))


def parts(exp: tables.Experiment, t: dict[str, pd.DataFrame]) -> list[str]:
    """The section's HTML: the answer's sentences, then the prediction where the cost model gives one."""
    e = html.escape
    predicted = prediction_sentences(exp)
    return ["<h2>Does distributed training pay off here?</h2><p>Measured: the time each point would take to train "
            "the job (its warm-up plus the job at its steady throughput), and the speedup (steady samples per second "
            "against one node's), which every table and figure of this report uses.</p><ul class='answer'>"
            + "".join(f"<li>{e(x)}</li>" for x in answer_sentences(exp, t)) + "</ul>"
            + ("<p class='prediction'><b>PREDICTION</b> of the cost model, not measured: where more machines "
               "would pay off.</p><ul class='prediction'>" + "".join(f"<li>{e(x)}</li>" for x in predicted)
               + "</ul>" if predicted else "")]
