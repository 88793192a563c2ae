"""Build exp_dir/report.html (+ figures/*.png, tables/*.csv) from stored result tables.

Usage: ``run_experiment.py report RESULTS/EXPERIMENT`` (testbed/cli/report.py) or ``build_report(exp_dir)``.
Every HTML table is ``DataFrame.to_html`` of the frame written to ``tables/<name>.csv``.
"""
from __future__ import annotations

import html
from pathlib import Path

import numpy as np
import pandas as pd

from analysis import advisor, costmodel, faithful, figures, reference, stability, tables, thesis, trends
from analysis.health import HEALTHY_MAX_MS
from analysis.plotstyle import THESIS_FIG14, THESIS_FIG17

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
        "summary": tables.time_summary(runs),
        "failed_runs": tables.failed_runs(exp.runs),
        **({"degraded_runs": degraded} if len(degraded) else {}),
        "time_split": faithful.time_split(runs, exp.steps),
        "iperf_checks": tables.iperf_checks(exp.checks),
        "resources": tables.resource_summary(runs, exp.usage),
        "network": tables.network_per_run(runs, exp.usage),
        # residuals of every run (fitted on all), of the held-out runs (fitted on the others) and of
        # the degraded runs (not fitted)
        "cost_model": pd.concat([f for f in (ev["in_sample"], ev["held_out"], ev["degraded"]) if len(f)],
                                ignore_index=True) if ev else pd.DataFrame(),
        "cost_model_accuracy": ev["accuracy"] if ev else pd.DataFrame(),
        "cost_model_params": model_params(ev["model"]) if ev else pd.DataFrame(),
        **({"cost_model_floor": ev["floor"]} if ev and len(ev["floor"]) else {}),   # configurations measured twice
        **({"advisor": advisor.scorecard(exp.runs)} if "advisor_choice" in exp.runs else {}),  # strategy auto
        **({"bleu": bleu} if len(bleu) else {}),  # caption runs with evaluation only
        **_stability_tables(exp),                 # ps and all-reduce, with per-step losses
        **({"faults": tables.fault_costs(exp.faults, exp.runs),                 # runs with faults only
            "fault_windows": tables.fault_windows(exp.faults, exp.steps)} if len(exp.faults) else {}),
    }
    return {**derived, "thesis_vs_measured": thesis.side_by_side(exp, derived)}


def _trend_nodes(found: list[trends.NodeTrend]) -> list[str]:
    """Sentences on time vs nodes per strategy and bandwidth."""
    how = {"grows": "grows with every node added", "falls": "falls with every node added",
           "mixed": "does not change monotonically with the number of nodes"}
    return [f"At {figures.mbit(n.bw_bps)} ({n.strategy}) training time {how[n.shape]}: "
            + " → ".join(f"{v:.3g} s ({h})" for h, v in zip(n.hosts, n.times_s))
            + " [mean over repeats, (nodes)]"
            + _overlap_note([f"{a} and {b} nodes" for a, b in n.overlaps]) + "." for n in found]


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


def _trend_bw(found: list[trends.BandwidthTrend]) -> list[str]:
    """Sentences on time vs bandwidth at each node count > 1."""
    return [f"With {b.hosts} nodes ({b.strategy}) training time {'falls' if b.falls else 'does not fall steadily'} "
           f"as bandwidth rises ({figures.mbit(b.bws_bps[0])}: {b.times_s[0]:.3g} s, "
           f"{figures.mbit(b.bws_bps[-1])}: {b.times_s[-1]:.3g} s, means over repeats)"
           + _overlap_note([f"{figures.mbit(x)} and {figures.mbit(y)}" for x, y in b.overlaps]) + "."
           for b in found]


def trend_text(exp: tables.Experiment, t: dict[str, pd.DataFrame]) -> list[str]:
    """Sentences computed from the data, compared with the thesis's findings."""
    s = t["summary"]
    s = s[s["strategy"] != "single"]
    if s.empty:
        return _trend_bleu(t) + _trend_faults(t) or ["No successful runs, so no trend can be stated."]
    found, bandwidth = trends.node_trends(s), trends.bandwidth_trends(s)
    falls_all = all(b.falls for b in bandwidth) if bandwidth else None
    out = _trend_nodes(found) + _trend_bw(bandwidth)
    grows_all = bool(found) and all(n.shape == "grows" for n in found)
    with_one_node = [n for n in found if n.gap is not None]
    for strat in sorted({n.strategy for n in with_one_node}):
        g = sorted((n.bw_bps, n.gap) for n in with_one_node if n.strategy == strat)
        if len(g) >= 2:
            narrows = all(b[1] < a[1] for a, b in zip(g, g[1:]))
            out.append(f"The gap between one node and the most nodes ({strat}) is "
                       + ", ".join(f"×{r:.3g} at {figures.mbit(bw)}" for bw, r in g)
                       + (": it narrows as bandwidth rises (as in thesis fig. 18)." if narrows
                          else ": it does not narrow steadily as bandwidth rises."))
    noisy = any(n.overlaps for n in found) or any(b.overlaps for b in bandwidth)
    if grows_all and falls_all:
        out.append("This matches the thesis (figs. 15 and 18): more nodes are slower and more "
                   "bandwidth is faster" + (" on the means; where the repeats' ranges overlap (above) the step "
                                            "is within the noise." if noisy else "."))
    elif grows_all and falls_all is None:
        out.append("Time grows with every node added, as in the thesis (figs. 15/18); no node count was "
                   "measured at two bandwidths, so whether more bandwidth is faster is not tested here.")
    elif found:
        out.append("This does NOT fully match the thesis (figs. 15/18: time grows with every "
                   "node and falls as bandwidth rises); see the sentences above for where.")
    out += faithful.domination_sentences(t["time_split"])    # what dominates, from measured compute only
    out += thesis.one_against_two(tables.counted_runs(exp), t["resources"])
    r = trends.iperf_ratios(t["iperf_checks"])
    if len(r):
        out.append(f"iperf3 measured {r.min():.3f} to {r.max():.3f} of the configured rate "
                   f"(median {r.median():.3f}); TCP over HTB carries about {figures.HTB_TCP_CEILING:.3f} of it at "
                   "most (a receiver's count over a few seconds can read slightly above) "
                   f"(thesis fig. 17: {THESIS_FIG17[1] / 1e6:g} of {THESIS_FIG17[0] / 1e6:g} Mbit/s).")
        out += _timer_sentence(exp.runs)
    out += _cost_model_sentences(t) + advisor.switch_sentences(exp.runs, exp.steps)   # strategy switch
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
        out.append(f"The cost model ({strat}) predicts the time per step with median |relative "
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
                     "<figcaption>Training time against nodes: the reference dashed over the band of its "
                     "repeats, yours solid from your fastest to your slowest repeat.</figcaption></figure>")
    except figures.FigureSkipped as why:
        parts.append(f"<p class='skip'>Figure against_reference skipped: {e(str(why))}.</p>")
    return parts, table


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
        df.to_csv(tabdir / f"{name}.csv", index=False)
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
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>{e(exp.name)}</title>"
             f"<style>{CSS}</style></head><body>",
             f"<h1>Experiment {e(exp.name)}</h1>",
             f"<p class='setup'>{e(setup)}</p>",
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
    out.write_text("\n".join(parts), encoding="utf-8")
    return out
