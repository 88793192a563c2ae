"""Build exp_dir/report.html (+ figures/*.png, tables/*.csv) from stored result tables.

Usage: ``run_experiment.py report RESULTS/EXPERIMENT`` (testbed/cli/report.py) or ``build_report(exp_dir)``.
Every HTML table is ``DataFrame.to_html`` of the frame written to ``tables/<name>.csv``.
"""
from __future__ import annotations

import html
from pathlib import Path

import numpy as np
import pandas as pd

from analysis import outputs
from analysis.comparisons import reference, thesis
from analysis.figures import figures
from analysis.model import advisor, costmodel
from analysis.tables import faithful, payoff, speedup, stability, tables, trends
from analysis.tables.health import HEALTHY_MAX_MS
from analysis.figures.plotstyle import THESIS_FIG14, THESIS_FIG17

MISSING_MEANS = {
    "checks.csv": "no iperf3/ping checks, so no bandwidth-check figure (thesis fig. 17)",
    "steps.csv": "no per-step timings",
    "usage.csv": "no per-node samples; resource figures use runs.csv summary columns only",
}


def _fmt(x) -> str:
    return f"{x:.3g}" if isinstance(x, (float, np.floating)) else str(x)


def derived_tables(exp: tables.Experiment) -> dict[str, pd.DataFrame]:
    """The tables the report shows, by name (also the CSV file stem). Degraded runs are left out
    of them (and listed in degraded_runs) unless exp.include_degraded."""
    ev = costmodel.evaluate_cached(exp)
    runs = tables.counted_runs(exp)
    bleu = tables.bleu_summary(runs, exp.evals)
    degraded = tables.degraded_runs(exp.runs)
    derived = {
        "summary": speedup.summary(runs, speedup.training_job(exp)),
        "failed_runs": tables.failed_runs(exp.runs),
        **({"degraded_runs": degraded} if len(degraded) else {}),
        "time_split": faithful.time_split(runs, exp.steps, exp.usage),
        "iperf_checks": tables.iperf_checks(exp.checks),
        "resources": tables.resource_summary(runs, exp.usage),
        "network": tables.network_per_run(runs, exp.usage),
        # residuals of every run (fitted on all), of the held-out runs (fitted on the others) and of
        # the degraded runs (not fitted)
        "cost_model": pd.concat([f for f in (ev["in_sample"], ev["held_out"], ev["degraded"], ev["not_judged"])
                                 if len(f)], ignore_index=True) if ev else pd.DataFrame(),
        "cost_model_accuracy": ev["accuracy"] if ev else pd.DataFrame(),
        "cost_model_params": model_params(ev["model"]) if ev else pd.DataFrame(),
        **({"cost_model_floor": ev["floor"]} if ev and len(ev["floor"]) else {}),   # configurations measured twice
        **({"advisor": advisor.scorecard(exp.runs)} if "advisor_choice" in exp.runs else {}),  # strategy auto
        **({"bleu": bleu} if len(bleu) else {}),  # caption runs with evaluation only
        **_stability_tables(exp),                 # ps and all-reduce, with per-step losses
        **payoff.section(exp),                    # workload.communication settings: time to target
        **({"faults": tables.fault_costs(exp.faults, exp.runs),                 # runs with faults only
            "fault_windows": tables.fault_windows(exp.faults, exp.steps)} if len(exp.faults) else {}),
    }
    return {**derived, "thesis_vs_measured": thesis.side_by_side(exp, derived)}


def _qualifier(trend, many_groups: bool, many_modes: bool) -> str:
    """', mlp, tensorflow, batch 32' and the mode, where the report has several of them."""
    model, engine, batch = (trend.group + (None, None, None))[:3]
    out = f", {model}, {engine}, batch {batch:g}" if many_groups and model is not None else ""
    return out + (f"; {tables.MODE_TEXT.get(trend.fixed, trend.fixed)}" if many_modes else "")


def _trend_nodes(found: list[trends.NodeTrend], many_groups: bool = False, many_modes: bool = False) -> list[str]:
    """Sentences on training time vs nodes per group, strategy and bandwidth."""
    how = {"grows": "grows with every node added", "falls": "falls with every node added",
           "mixed": "does not change monotonically with the number of nodes"}
    return [f"At {figures.mbit(n.bw_bps)} ({n.strategy}{_qualifier(n, many_groups, many_modes)}) training time "
            f"{how[n.shape]}: " + " → ".join(f"{v:.3g} s ({h})" for h, v in zip(n.hosts, n.times_s))
            + " [mean over repeats, (nodes)]"
            + _overlap_note([f"{a} and {b} nodes" for a, b in n.overlaps]) + "." for n in found]


def _trend_speedups(found: list[trends.NodeTrend], many_groups: bool, many_modes: bool) -> list[str]:
    """Per group and strategy measured at two bandwidths or more: the steady speedup of the most nodes
    over one at each bandwidth, and whether the gap to one node narrows as bandwidth rises (thesis fig. 18)."""
    out = []
    by = {}
    for n in found:
        if n.speedup is not None:
            by.setdefault((n.group, n.fixed, n.strategy), []).append(n)
    for (_, _, strategy), rows in by.items():
        if len(rows) < 2:
            continue
        rows = sorted(rows, key=lambda n: n.bw_bps)
        rising = all(b.speedup > a.speedup for a, b in zip(rows, rows[1:]))
        out.append(f"In steady throughput ({strategy}{_qualifier(rows[0], many_groups, many_modes)}), the most nodes "
                   "against one: " + ", ".join(f"{n.most[0]} nodes {trends.speed_words(n.speedup)} at "
                                               f"{figures.mbit(n.bw_bps)}" for n in rows)
                   + (": the gap to one node narrows as bandwidth rises (as in thesis fig. 18)." if rising
                      else ": the gap to one node does not narrow steadily as bandwidth rises."))
    return out


# -- the report's first answer: does distributed training pay off here, and by how much ----------------
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


def _overlap_note(pairs: list[str]) -> str:
    """Where neighbouring points' repeats overlap, so that the step between their means is within the noise."""
    return (f"; the repeats' ranges overlap between {', '.join(pairs)}, so that step is within the noise"
            if pairs else "")


def _stability_tables(exp: tables.Experiment) -> dict[str, pd.DataFrame]:
    found = stability.analyse(exp)
    if found is None:
        return {}
    _, runs, target = found
    return {"stability_runs": runs.assign(target_loss=target), "stability": stability.per_strategy(runs)}


def _trend_stability(t: dict[str, pd.DataFrame]) -> list[str]:
    if "stability" not in t:
        return []
    return stability.sentences(t["stability"], float(t["stability_runs"]["target_loss"].iloc[0]), figures.mbit)


def _trend_bw(found: list[trends.BandwidthTrend], many_groups: bool = False, many_modes: bool = False) -> list[str]:
    """Sentences on training time vs bandwidth at each node count > 1."""
    return [f"With {b.hosts} nodes ({b.strategy}{_qualifier(b, many_groups, many_modes)}) training time "
            f"{'falls' if b.falls else 'does not fall steadily'} as bandwidth rises "
            f"({figures.mbit(b.bws_bps[0])}: {b.times_s[0]:.3g} s, "
            f"{figures.mbit(b.bws_bps[-1])}: {b.times_s[-1]:.3g} s, means over repeats)"
            + _overlap_note([f"{figures.mbit(x)} and {figures.mbit(y)}" for x, y in b.overlaps]) + "."
            for b in found]


def _modes_sentence(s: pd.DataFrame) -> list[str]:
    """Which mode the comparisons below are of (one sentence; each comparison stays within one mode)."""
    modes = [m for m in dict.fromkeys(s["fixed"]) if isinstance(m, str)] if "fixed" in s else []
    if len(modes) == 1:
        return [f"Every comparison below is between points of one mode: {tables.MODE_TEXT.get(modes[0], modes[0])} "
                f"(workload.fixed: {modes[0]})" + (", so training times of different node counts are of different "
                                                   "work; the steady speedup is the ratio to read." if modes[0] == "steps"
                                                   else ".")]
    if len(modes) > 1:
        return ["This experiment ran several modes (workload.fixed: " + ", ".join(modes) + "): each comparison "
                "below stays within one and names it."]
    return []


def trend_text(exp: tables.Experiment, t: dict[str, pd.DataFrame]) -> list[str]:
    """Sentences computed from the data, compared with the thesis's findings."""
    s = t["summary"]
    s = s[s["strategy"] != "single"]
    if s.empty:
        return _trend_bleu(t) + _trend_faults(t) or ["No successful runs, so no trend can be stated."]
    found, bandwidth = trends.node_trends(s), trends.bandwidth_trends(s)
    many_groups = len({n.group for n in found} | {b.group for b in bandwidth}) > 1
    many_modes = len({n.fixed for n in found} | {b.fixed for b in bandwidth}) > 1
    falls_all = all(b.falls for b in bandwidth) if bandwidth else None
    out = (_modes_sentence(s) + _trend_nodes(found, many_groups, many_modes)
           + _trend_bw(bandwidth, many_groups, many_modes) + _trend_speedups(found, many_groups, many_modes))
    grows_all = bool(found) and all(n.shape == "grows" for n in found)
    noisy = any(n.overlaps for n in found) or any(b.overlaps for b in bandwidth)
    if grows_all and falls_all:
        out.append("This matches the thesis (figs. 15 and 18): training time grew with every node added and fell "
                   "as bandwidth rose" + (" on the means; where the repeats' ranges overlap (above) the step is "
                                          "within the noise." if noisy else "."))
    elif grows_all and falls_all is None:
        out.append("Training time grew with every node added, as in the thesis (figs. 15/18); no node count was "
                   "measured at two bandwidths, so whether more bandwidth is faster is not tested here.")
    elif found:
        out.append("This does NOT fully match the thesis (figs. 15/18: training time grew with every "
                   "node and fell as bandwidth rose); see the sentences above for where.")
    out += faithful.domination_sentences(t["time_split"])    # what dominates, from measured compute only
    out += thesis.one_against_two(t["summary"], t["resources"])
    r = trends.iperf_ratios(t["iperf_checks"])
    if len(r):
        out.append(f"iperf3 measured {r.min():.3f} to {r.max():.3f} of the configured rate "
                   f"(median {r.median():.3f}); TCP over HTB carries about {figures.HTB_TCP_CEILING:.3f} of it at "
                   "most (a receiver's count over a few seconds can read slightly above) "
                   f"(thesis fig. 17: {THESIS_FIG17[1] / 1e6:g} of {THESIS_FIG17[0] / 1e6:g} Mbit/s).")
        out += _timer_sentence(exp.runs)
    out += _cost_model_sentences(t) + costmodel.fit_notes(exp) + advisor.switch_sentences(exp.runs, exp.steps)
    net = t["network"]
    net = net[(net["hosts"] > 1) & net["ratio_to_theory"].notna()]
    for strat, rows in net.groupby("strategy"):
        if strat == "ps":       # its steps are the coordinator's, shared unevenly by the workers, and a
            continue            # worker on a parameter server's host sends nothing over the network
        out.append(f"{strat}: bytes sent per worker per step are {rows['ratio_to_theory'].median():.3g}"
                   f"× the theoretical minimum (median over {len(rows)} runs).")
    return out + _trend_stability(t) + _trend_bleu(t) + _trend_faults(t)


def _trend_faults(t: dict[str, pd.DataFrame]) -> list[str]:
    """Each fault's cost, each recovered run's restarts, and whether a straggler made everyone wait."""
    f, out = t.get("faults", pd.DataFrame()), []
    if f.empty:
        return out
    for r in f.itertuples():
        what = f"Fault #{r.fault} ({r.action} {r.target} at {r.at}, run {r.run_id})"
        if pd.isna(r.applied_step):
            out.append(f"{what} was not applied: {r.outcome}.")
            continue
        undone = f", undone after step {int(r.undone_step)}" if pd.notna(r.undone_step) else ""
        out.append(f"{what} hit after step {int(r.applied_step)}{undone}: it cost {r.extra_s:.3g} s beyond the "
                   f"median step and {int(r.steps_replayed)} step(s) replayed (outcome: {r.outcome}).")
    for run_id, rows in f[f["restarts"].fillna(0) > 0].groupby("run_id"):
        out.append(f"Run {run_id} restarted {int(rows['restarts'].iloc[0])} time(s) from its last backup and "
                   f"lost {rows['time_lost_s'].iloc[0]:.3g} s to it.")
    w = t["fault_windows"]
    for (run_id, fault), rows in w.groupby(["run_id", "fault"]):
        if len(rows) < 2:
            continue
        each = "; ".join(f"{r.role} {r.task_index} on {r.host} {r.median_before_s:.3g} s → {r.median_during_s:.3g} s"
                         for r in rows.itertuples())
        verdict = ("every task slowed, not only the one the fault hit: in synchronous training everyone waits "
                   "for the slowest" if (rows["slowdown"] > 1.5).all() else "not every task slowed")
        out.append(f"While fault #{fault} ({rows['action'].iloc[0]} {rows['target'].iloc[0]}, run {run_id}) was "
                   f"in force, the median step went from before to during: {each}: {verdict}.")
    return out


def model_params(model: costmodel.CostModel) -> pd.DataFrame:
    """The fitted parameters per strategy (docs/cost-model.md)."""
    rows = [dict(strategy="all", parameter=k, value=getattr(model, k), fitted_on_runs=np.nan,
                 from_defaults=False) for k in ("cores", "u", "rho", "rtt_s")]
    for name, f in model.fits.items():
        rows += [dict(strategy=name, parameter=k, value=v, fitted_on_runs=f.n_runs,
                      from_defaults=k in f.defaulted) for k, v in f.params.items()]
    return pd.DataFrame(rows)


def _cost_model_sentences(t: dict[str, pd.DataFrame]) -> list[str]:
    """The model's accuracy, in sample and on held-out runs, per strategy."""
    acc = t.get("cost_model_accuracy", pd.DataFrame())
    out = []
    score = t.get("advisor", pd.DataFrame())
    judged = score[score["right"].notna()] if len(score) else score
    if len(score):
        out.append(f"strategy auto chose {', '.join(f'{c} {n} time(s)' for c, n in score['advisor_choice'].value_counts().items())}"
                   + (f"; where both strategies were also measured it chose the one with more samples/s in "
                      f"{int(judged['right'].astype(bool).sum())} of {len(judged)} points." if len(judged) else
                      " (no point measured both strategies to judge it)."))
    for strat, rows in acc.groupby("strategy", sort=False) if len(acc) else ():
        parts = []
        for r in rows.itertuples():
            what = ("fitted on every run" if r.split == "in-sample" else
                    "on the runs with the most workers, predicted from a fit on the others")
            parts.append(f"{r.median_abs_rel_error:.1%} {what} (max {r.max_abs_rel_error:.1%}, "
                         f"{int(r.runs)} runs)")
        out.append(f"The cost model ({strat}) predicts the steady step with median |relative "
                   f"error| " + "; ".join(parts) + ".")
    floor = t.get("cost_model_floor", pd.DataFrame())
    for r in floor.itertuples():
        out.append(f"{r.strategy}: {int(r.configurations)} configurations were measured more than once; their "
                   f"runs lie {r.median_abs_rel_error:.1%} (median, max {r.max_abs_rel_error:.1%}) from the "
                   f"geometric mean of their own measurements, an error no model of the configuration can beat.")
    return out


def _trend_bleu(t: dict[str, pd.DataFrame]) -> list[str]:
    """Best BLEU-1 per node count, against the thesis's figure 14."""
    return [f"With {figures.plural(b.hosts, 'node')} the best BLEU-1 on the held-out images is {b.value:.3f}, "
            f"after epoch {b.epoch} of {b.last_epoch} (thesis fig. 14: {THESIS_FIG14[1]:g} after epoch "
            f"{THESIS_FIG14[0]} of 20, on the full Flickr8k)." for b in trends.best_bleu(t.get("bleu", pd.DataFrame()))]


def _timer_sentence(runs: pd.DataFrame) -> list[str]:
    """Say when low iperf ratios come from the machine (late kernel timers), not from the shaper."""
    if "timer_max_ms" not in runs or runs["timer_max_ms"].dropna().empty:
        return []
    worst = runs["timer_max_ms"].max()
    if worst <= HEALTHY_MAX_MS:
        return [f"Kernel timers fired on time during the checks (worst overshoot {worst:.0f} ms)."]
    return [f"This machine's timers overshot by up to {worst:.0f} ms during the checks (median run "
            f"p99 {runs['timer_p99_ms'].median():.0f} ms): its host stalls the VM, so every "
            "timer-driven shaper delivers less than its rate, and effective bandwidths are below the "
            "configured ones; read the training times against the measured bandwidths."]


def _table_html(name: str, df: pd.DataFrame) -> str:
    if df.empty:
        return f"<p><em>(table {name} is empty)</em></p>"
    return df.to_html(index=False, float_format=_fmt, na_rep="", classes="tbl", border=0)


CSS = """body{font-family:sans-serif;max-width:1200px;margin:2em auto;padding:0 1em}
.tbl{border-collapse:collapse;font-size:13px}.tbl td,.tbl th{padding:2px 8px;
border-bottom:1px solid #ddd;text-align:right}figure{margin:1.5em 0}
figcaption{font-style:italic}img{max-width:100%}.skip{color:#a33}"""


def _against_reference(ref_dir, exp: tables.Experiment, figdir: Path, e) -> tuple[list[str], pd.DataFrame]:
    """The report's section on `exp` against the reference results in `ref_dir`, and its table."""
    ref = tables.load_experiment(ref_dir)
    ref.include_degraded = exp.include_degraded
    table = reference.against(ref, exp)
    parts = [f"<h2>Against the reference results</h2><p>Reference: <code>{e(str(ref_dir))}</code>. "
             "Each side's spread is the range of its repeats; two configurations differ beyond the spread "
             "when those ranges do not overlap.</p><ul>"
             + "".join(f"<li>{e(x)}</li>" for x in reference.sentences(table, ref, exp)) + "</ul>"]
    try:
        path, _ = reference.figure(table, exp, figdir)
        parts.append(f"<figure><img src='{e(path.relative_to(exp.path).as_posix())}' alt='against_reference'>"
                     "<figcaption>Steady samples per second against nodes: the reference dashed over the band "
                     "of its repeats, yours solid from your slowest to your fastest repeat.</figcaption></figure>")
    except figures.FigureSkipped as why:
        parts.append(f"<p class='skip'>Figure against_reference skipped: {e(str(why))}.</p>")
    return parts, table


def _communication_parts(t: dict, figdir: Path, exp_dir: Path, e) -> list[str]:
    """The communication settings compared by time to target, the wire against theory, and the pay-off
    (analysis/tables/payoff.py)."""
    compare, wire, pays = payoff.sentences(t)
    parts = ["<h2>Communication settings</h2><p>Time to the target loss on the same work (each setting's mean and the "
             "range of its repeats; two settings differ beyond the spread when those ranges lie apart with enough "
             "repeats), and the bytes each worker sent against the theory.</p><ul>"
             + "".join(f"<li>{e(x)}</li>" for x in compare + wire) + "</ul>"]
    try:
        path = payoff.wire_figure(t["network"], figdir)
        parts.append(f"<figure><img src='{e(path.relative_to(exp_dir).as_posix())}' alt='communication_wire'>"
                     "<figcaption>Bytes each worker sent per step against the theory of its setting (tables/network.csv"
                     ").</figcaption></figure>")
    except figures.FigureSkipped as why:
        parts.append(f"<p class='skip'>Figure communication_wire skipped: {e(str(why))}.</p>")
    parts.append("<h2>What would make it pay off here</h2><ul class='payoff'>"
                 + "".join(f"<li>{e(x)}</li>" for x in pays or ["Nothing to rank: no setting reached the target "
                                                               "in every run."]) + "</ul>")
    return parts


def build_report(exp_dir, include_degraded: bool = False, reference_dir=None) -> Path:
    """Write exp_dir/report.html, exp_dir/figures/*.png and exp_dir/tables/*.csv. Degraded runs
    (fidelity 'degraded: ...') are marked in the figures and left out of the trends, tables and
    cost model fit unless include_degraded. reference_dir: stored results of the same set-up to
    draw these over and compare with (a section, figures/against_reference.png and
    tables/against_reference.csv)."""
    exp_dir = Path(exp_dir)
    exp = tables.load_experiment(exp_dir)
    exp.include_degraded = include_degraded
    figdir, tabdir = exp_dir / "figures", exp_dir / "tables"
    tabdir.mkdir(parents=True, exist_ok=True)
    t = derived_tables(exp)
    against_parts = []
    (tabdir / "against_reference.csv").unlink(missing_ok=True)
    (figdir / "against_reference.png").unlink(missing_ok=True)
    if reference_dir is not None:
        against_parts, t["against_reference"] = _against_reference(Path(reference_dir), exp, figdir, html.escape)
    for name, df in t.items():
        outputs.write_text(tabdir / f"{name}.csv", tables.csv_text(df))
    made, skipped = {}, {}
    for name, (func, caption) in figures.FIGURES.items():
        try:
            made[name] = (func(exp, figdir)[0], caption)
        except figures.FigureSkipped as e:
            skipped[name] = str(e)
    n_ok = int((exp.runs["status"] == "ok").sum())
    n_bad = len(exp.runs) - n_ok
    e = html.escape
    setup = f"{faithful.setup_sentence(exp.runs)} {faithful.dilation_note(exp.runs)}".strip()
    predicted = prediction_sentences(exp)
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>{e(exp.name)}</title>"
             f"<style>{CSS}</style></head><body>",
             f"<h1>Experiment {e(exp.name)}</h1>",
             f"<p class='setup'>{e(setup)}</p>",
             "<h2>Does distributed training pay off here?</h2><p>Measured: the time each point would take to train "
             "the job (its warm-up plus the job at its steady throughput), and the speedup (steady samples per second "
             "against one node's), which every table and figure of this report uses.</p><ul class='answer'>"
             + "".join(f"<li>{e(x)}</li>" for x in answer_sentences(exp, t)) + "</ul>"
             + ("<p class='prediction'><b>PREDICTION</b> of the cost model, not measured: where more machines "
                "would pay off.</p><ul class='prediction'>" + "".join(f"<li>{e(x)}</li>" for x in predicted)
                + "</ul>" if predicted else ""),
             f"<p>{len(exp.runs)} runs: <b>{n_ok} ok</b>, <b>{n_bad} failed or skipped</b>. "
             f"Source: <code>{e(str(exp_dir))}</code>.</p>"]
    note = faithful.degraded_note(exp.runs, include_degraded)
    if note:
        parts.append(f"<h2>Degraded runs</h2><p>{e(note)}</p><ul>" + "".join(
            f"<li><code>{e(str(r.run_id))}</code>: {e(str(r.reasons))}</li>"
            for r in tables.degraded_runs(exp.runs).itertuples()) + "</ul>")
    if n_bad:
        parts.append("<h2>Failed runs</h2><ul>" + "".join(
            f"<li><code>{e(str(r.run_id))}</code> ({e(str(r.status))}): {e(str(r.reason))}</li>"
            for r in t["failed_runs"].itertuples()) + "</ul>")
        parts.append(_table_html("failed_runs", t["failed_runs"]))
    parts.append("<h2>What the trend says</h2><ul>"
                 + "".join(f"<li>{e(x)}</li>" for x in trend_text(exp, t)) + "</ul>")
    if "communication" in t:
        parts += _communication_parts(t, figdir, exp_dir, e)
    if len(t["thesis_vs_measured"]):
        parts.append("<h2>The thesis and this experiment, side by side</h2>"
                     "<p>Compare shapes and trends, not absolute times: the machines, models and data differ.</p>"
                     + _table_html("thesis_vs_measured", t["thesis_vs_measured"]))
    parts += against_parts
    if exp.missing or skipped:
        parts.append("<h2>Missing data</h2><ul>")
        parts += [f"<li class='skip'>{e(m)} is missing: {e(MISSING_MEANS[m])}.</li>"
                  for m in exp.missing]
        parts += [f"<li class='skip'>Figure <b>{e(n)}</b> skipped: {e(why)}.</li>"
                  for n, why in skipped.items()]
        parts.append("</ul>")
    parts.append("<h2>Figures</h2>")
    for name, (path, caption) in made.items():
        rel = path.relative_to(exp_dir).as_posix()
        parts.append(f"<figure><img src='{e(rel)}' alt='{e(name)}'>"
                     f"<figcaption>{e(caption)}</figcaption></figure>")
    parts.append("<h2>Tables</h2>")
    for name, df in t.items():
        if name in ("failed_runs", "thesis_vs_measured"):
            continue
        parts.append(f"<h3>{e(name)} <small>(tables/{e(name)}.csv)</small></h3>")
        parts.append(_table_html(name, df))
    parts.append("</body></html>")
    out = exp_dir / "report.html"
    outputs.write_text(out, "\n".join(parts))
    return out
