"""The report's first answer: does distributed training pay off here, and by how much. Per group, strategy and
bandwidth, by the group's one yardstick (analysis/tables/yardstick.py), said once with why: where every run
learned on the same data, the time each node count took to reach the target loss and its ratio to one
machine's (analysis/tables/payoff.py's time to target; where steady samples/s point the other way, one sentence
says both and why); else the time each node count would take to train the job and its steady speedup over one
node (the summary table, analysis/tables/speedup.py).

The first section is the answer at a glance (analysis/tables/glance.py): one figure
(analysis/figures/answer_figure.py), the table (glance.csv) as bandwidth x node count, at most one sentence per
bandwidth and the cost model's break-even in one labelled sentence. The section below it gives the details: every
point's sentence with its repeats' range, the points left out, and the cost model's PREDICTION sentences."""
from __future__ import annotations

import html
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.figures import answer_figure, figures
from analysis.report.markup import table_html
from analysis.tables import faithful, glance, payoff, speedup, spread, stability, tables, trends, yardstick
from analysis.tables.glance import duration
from analysis.text import mbit


def section_tables(exp: tables.Experiment) -> dict[str, pd.DataFrame]:
    """glance (the answer at a glance: glance.table), the summary (per configuration: steady samples/s, the speedup,
    the projected time to train the job) and, where a run learned, time_to_target (per setting, as
    analysis/tables/payoff.py's communication table)."""
    out = {"glance": glance.table(exp),
           "summary": speedup.summary(tables.counted_runs(exp), speedup.training_job(exp))}
    learned = yardstick.learning(exp)
    if learned["learns"].any():
        out["time_to_target"] = payoff.per_setting(learned[payoff.RUN_COLUMNS])
    return out


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
    learned = yardstick.learning(exp)
    reached = t.get("time_to_target", pd.DataFrame(columns=payoff.SETTING_COLUMNS))
    ok, out, stated = tables.ok_runs(runs), [], stability.stated_target(exp) is not None
    groups = list(s.groupby(tables.GROUP_KEYS, dropna=False, sort=False))
    for key, g in groups:
        model, engine, batch, fixed = key
        label = f" ({model}, {engine}, batch {batch:g} per worker)" if len(groups) > 1 else ""
        first = g.iloc[0]
        samples = first["job_samples"]
        said = (job.describe(samples, first["job_epochs"], first["job_samples_per_epoch"]) if np.isfinite(samples)
                else "unknown (no samples per epoch recorded)")
        stick = yardstick.choose(ok[tables.same_values(ok, dict(zip(tables.GROUP_KEYS, key)))], learned)
        here = reached[tables.same_values(reached, {"engine": engine, "model": model, "batch_per_worker": batch})] \
            if stick.kind == yardstick.TARGET else reached.iloc[0:0]
        out.append(" ".join(x for x in (f"The job{label}: {said}.", MODE_NOTE.get(fixed, ""),
                                        _yardstick_sentence(stick, here, stated)) if x))
        shown = g[g["strategy"] != "single"] if (g["strategy"] != "single").any() else g
        many_strategies = shown["strategy"].nunique() > 1
        shown = shown.assign(_set=shown["communication"] != "none").sort_values(["strategy", "_set", "communication"])
        for (strategy, _, setting, bw), rows in shown.groupby(["strategy", "_set", "communication", "bw_bps"],
                                                              sort=False):
            rows = rows.sort_values("hosts")
            gone = left_out[(left_out["bw_bps"] == bw) & (left_out["strategy"] == strategy)]
            say = many_strategies or strategy != "allreduce"
            if stick.kind == yardstick.TARGET:
                out.append(_target_at(g, strategy, bw, rows, runs, here, say, gone, setting))
                continue
            out.append(_answer_at(g, strategy, bw, rows, runs, samples, say, gone, setting,
                                  _same_point(bounded, key, strategy, setting, bw)))
    return out


def _yardstick_sentence(stick: yardstick.Yardstick, reached: pd.DataFrame, stated: bool) -> str:
    """'Yardstick: ...': which one the group's sentences use, and why, in a few words."""
    if stick.kind != yardstick.TARGET:
        return (f"Yardstick: the projected time of the job at steady samples per second, as {stick.why}.")
    targets = " and ".join(f"{v:.3g}" for v in dict.fromkeys(reached["target_loss"].dropna()))
    source = "report.target_loss" if stated else "the highest of the runs' lowest such means"
    return (f"Yardstick: the time to reach the target loss {targets} (the mean of {stability.SMOOTH_STEPS} steps' "
            f"losses; {source}), as {stick.why} (the job's projected time at steady samples per second: "
            "tables/summary.csv).")


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
    head = f"At {mbit(bw)}" + (f" ({named})" if say_strategy or setting != "none" else "")
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
    return head + ", " + "; ".join(parts) + "." + (FEW if any(few) else "")


FEW = (" Ranges that far apart come about by chance alone too often with so few repeats: run more (sweep.repeats) "
       "to decide.")


def _target_at(g, strategy, bw, rows, runs, reached: pd.DataFrame, say_strategy, degraded, setting="none") -> str:
    """One bandwidth's sentence by time to the target loss (`reached`: the group's time_to_target rows): one
    machine's time (at this bandwidth, else at the others: it sends nothing), each node count's and its ratio
    to one machine's (payoff's vs_one_machine and verdict); where steady samples/s point the other way, a
    sentence with both and why."""
    named = strategy if setting == "none" else f"{strategy}, {setting}"
    head = f"At {mbit(bw)}" + (f" ({named})" if say_strategy or setting != "none" else "")
    ones = reached[reached["setting"] == payoff.ONE]
    at_bw = (ones["bw_bps"] == bw).any()
    ones = ones[ones["bw_bps"] == bw] if at_bw else ones
    one_rows = g[(g["hosts"] == 1) & ((g["bw_bps"] == bw) | (not at_bw))]
    one_runs = pd.concat([_point_runs(runs, b) for b in one_rows.itertuples()]) if len(one_rows) else runs.iloc[0:0]
    done = ones[ones["time_to_target_s"].notna()]
    n_one = int(done["runs"].sum())
    parts, few, both, verb = [], [], [], " reached the target"
    if len(ones):
        kinds = sorted(set(ones["strategy"]))
        who = machines(1, one_runs) + (f" ({', '.join(kinds)})" if kinds != [strategy] else "")
        where = "" if at_bw else " (at the other bandwidths: one machine sends nothing)"
        if len(done) == len(ones):
            mean = float((done["time_to_target_s"] * done["runs"]).sum() / n_one)
            lo, hi = done["time_to_target_min_s"].min(), done["time_to_target_max_s"].max()
            parts.append(f"{who} reached the target in {_span(mean, lo, hi)}{where}")
            verb = ""
        else:
            parts.append(f"{who}: {int(ones['reached'].sum())} of {int(ones['runs'].sum())} runs reached the target")
    for r in rows[rows["hosts"] > 1].itertuples():
        point = _point_runs(runs, r)
        who = machines(int(r.hosts), point)
        hit = reached[tables.same_values(reached, {k: getattr(r, k) for k in ("bw_bps", "hosts", "strategy",
                                                                              "communication")})]
        if hit.empty:
            parts.append(f"{who}: no loss to compare by")
            continue
        p = hit.iloc[0]
        if not np.isfinite(p["time_to_target_s"]):
            parts.append(f"{who}: {int(p['reached'])} of {int(p['runs'])} runs reached the target")
            continue
        text = f"{who}{verb} in " \
               f"{_span(p['time_to_target_s'], p['time_to_target_min_s'], p['time_to_target_max_s'])}"
        verb = ""
        if np.isfinite(p["vs_one_machine"]):
            verdict = tables.text(p["vs_one_machine_verdict"])
            text += (f": {trends.speed_words(p['vs_one_machine'])}, "
                     f"{trends.spread_words(verdict, n_one, int(p['runs']), short=True)}")
            few.append(verdict == spread.TOO_FEW)
            if yardstick.opposite(r.speedup, p["vs_one_machine"]):
                both.append(_both(who, r.speedup, p["vs_one_machine"],
                                  yardstick.per_sample_reasons(point, one_runs, strategy)))
        parts.append(text)
    if not len(ones):
        parts.append("no one-node run to compare with")
    gone = sorted(set(degraded["hosts"].astype(int)) - set(rows["hosts"].astype(int)) - {1})
    if gone:
        parts.append(f"{' and '.join(map(str, gone))} node(s): not counted, this machine could not emulate them "
                     "faithfully (see Degraded runs)")
    return head + ", " + "; ".join(parts) + "." + "".join(" " + b for b in both) + (FEW if any(few) else "")


def _span(mean, lo, hi) -> str:
    """'3.4 s', '1.1 s (1 s to 1.2 s)'."""
    span = duration(lo) == duration(hi) or not (np.isfinite(lo) and np.isfinite(hi))
    return duration(mean) + ("" if span else f" ({duration(lo)} to {duration(hi)})")


def _both(who: str, speed: float, ratio: float, reasons: list[str]) -> str:
    """One sentence where steady samples/s and time to the target point different ways: both, and why."""
    less = ratio < 1
    return (f"{who} process samples {trends.speed_words(speed)} but learn {'less' if less else 'more'} from each: "
            f"they reach the target {(1 / ratio if less else ratio):.3g}× {'later' if less else 'sooner'}"
            + (f" ({'; '.join(reasons)})" if reasons else "") + ".")


def prediction_sentences(exp: tables.Experiment) -> list[str]:
    """The cost model's break-even (a PREDICTION), where analysis.model.predict provides it."""
    from analysis.model import predict
    if not hasattr(predict, "break_even_sentences"):
        return []
    return list(predict.break_even_sentences(exp))


def yardstick_line(exp: tables.Experiment, g: pd.DataFrame) -> str:
    """'Yardstick: time to the target loss 1.9, as every run learned.' (per job where several), `g` the glance
    table."""
    ok = tables.ok_runs(tables.counted_runs(exp))
    learned = yardstick.learning(exp)
    labels = glance.job_labels(g)
    said = []
    for key, rows in g.groupby(tables.GROUP_KEYS, dropna=False, sort=False):
        group = dict(zip(tables.GROUP_KEYS, key))
        stick = yardstick.choose(ok[tables.same_values(ok, group)], learned)
        why = "every run learned" if stick.kind == yardstick.TARGET else stick.why
        label = labels[key]
        said.append(f"Yardstick{f' ({label})' if label else ''}: {glance.goal_words(rows)}, as {why}.")
    return " ".join(said)


ALT = ("the time by the yardstick against the number of machines, a line per bandwidth: measured solid, one "
       "machine dotted, the cost model's prediction dashed and hollow")


def glance_parts(exp: tables.Experiment, t: dict[str, pd.DataFrame], figdir: Path | None = None,
                 exp_dir: Path | None = None) -> list[str]:
    """The first section: the yardstick in one line, the figure, the table, a sentence per bandwidth, the
    break-even."""
    e = html.escape
    g = t["glance"]
    out = ["<h2>Does distributed training pay off here?</h2>"]
    if g.empty:
        return out + ["<p>No successful run, so there is no answer.</p>"]
    out.append(f"<p class='yardstick'>{e(yardstick_line(exp, g))}</p>")
    if figdir is not None:
        try:
            path = answer_figure.draw(exp, g, Path(figdir))
            rel = path.relative_to(Path(exp_dir)).as_posix() if exp_dir is not None else path.name
            out.append(f"<figure class='answer'><img src='{e(rel)}' alt='{e(ALT)}'></figure>")
        except figures.FigureSkipped:
            pass
    shown = table_html("glance", glance.pivot(g))
    out.append(shown.replace('class="dataframe tbl"', "class='glance dataframe tbl'", 1))
    common = glance.common_verdict(g)
    if common:
        out.append(f"<p class='verdict'>Verdict on every factor: {e(glance.SAID.get(common, common))}.</p>")
    out.append("<ul class='glance'>" + "".join(f"<li>{e(x)}</li>" for x in glance.bandwidth_sentences(g)) + "</ul>")
    from analysis.model import predict
    even = predict.break_even_summary(exp)
    if even:
        out.append(f"<p class='break-even'>{e(even)}</p>")
    return out


def parts(exp: tables.Experiment, t: dict[str, pd.DataFrame], figdir: Path | None = None,
          exp_dir: Path | None = None) -> list[str]:
    """The section's HTML: the answer at a glance (glance_parts), then the answer in detail: every point's
    sentence, and the prediction where the cost model gives one."""
    e = html.escape
    predicted = prediction_sentences(exp)
    return [*glance_parts(exp, t, figdir, exp_dir),
            "<h2>The answer in detail</h2><p>Measured, by one yardstick per job, said with it: "
            "where every run learned on the same data, the time each point took to reach the target loss; else the "
            "time each point would take to train the job (its warm-up plus the job at its steady throughput) and "
            "the speedup (steady samples per second against one node's), which the tables and figures of this "
            "report use.</p><ul class='answer'>"
            + "".join(f"<li>{e(x)}</li>" for x in answer_sentences(exp, t)) + "</ul>"
            + ("<p class='prediction'><b>PREDICTION</b> of the cost model, not measured: where more machines "
               "would beat one machine's steady samples per second (not its time to a target loss).</p>"
               "<ul class='prediction'>" + "".join(f"<li>{e(x)}</li>" for x in predicted)
               + "</ul>" if predicted else "")]
