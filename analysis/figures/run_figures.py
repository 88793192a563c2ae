"""Figures of what happened inside the runs (the report draws them with analysis/figures/figures.py's): BLEU per
epoch, loss against training time per strategy, and the timeline of a run's faults and link changes.
Each takes the loaded Experiment and an output folder and returns (path, plotted), as figures.py's."""
from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from analysis.tables import stability, tables
from analysis.figures.plotstyle import RC, FigureSkipped, legend, log_if_wide, mark_degraded, palette_for, save
from analysis.text import THESIS_FIG14, mbit, plural


# 9 ------------------------------------------------------------------------------------------
def bleu(exp, outdir: Path):
    """BLEU-1..4 on the held-out images vs epoch: one line per n, one panel per node count."""
    b = tables.bleu_summary(tables.counted_runs(exp), exp.evals)
    if b.empty:
        raise FigureSkipped("no evaluation rows of ok runs in evals.csv (the caption model "
                            "writes them when evaluation is on)")
    pal = palette_for(exp)
    deg = exp.evals.merge(tables.degraded_ok(exp)[["run_id", "hosts"]], on="run_id")
    nodes = sorted(set(b["hosts"]) | set(deg["hosts"]))      # a node count of degraded runs only: crosses
    with plt.rc_context(RC):
        fig, axes = plt.subplots(1, len(nodes), figsize=(5 * len(nodes) + 2, 4.6), sharey=True,
                                 squeeze=False)
        for ax, h in zip(axes[0], nodes):
            rows = b[b["hosts"] == h]
            mark_degraded(ax, deg.loc[deg["hosts"] == h, "epoch"], deg.loc[deg["hosts"] == h, "value"],
                          exp.include_degraded)
            for metric, r in rows.groupby("metric"):
                ax.errorbar(r["epoch"], r["value_mean"], yerr=r["value_std"].fillna(0), marker="o",
                            capsize=3, color=pal.colour("metric", metric),
                            label=metric.replace("bleu", "BLEU-"))
            ax.scatter(*THESIS_FIG14, marker="*", s=180, facecolors="none", edgecolors="black",
                       zorder=3, label="thesis fig. 14: best BLEU-1, 0.578 at epoch 2")
            ax.set_xticks(sorted(set(rows["epoch"]) | set(deg.loc[deg["hosts"] == h, "epoch"])))
            ax.set_xlabel("epoch")
            ax.set_title(f"{plural(h, 'node')} ({plural(rows['n_runs'].max() if len(rows) else 0, 'run')})")
        axes[0][0].set_ylabel("BLEU on the held-out images")
        axes[0][0].set_ylim(0, max(1.05 * b["value_mean"].max(), THESIS_FIG14[1] * 1.1))
        legend(axes[0][-1], loc="center left", bbox_to_anchor=(1.01, 0.5))
        fig.suptitle("Caption quality per epoch: BLEU-1..4 (mean ± std over runs)", fontsize=13)
        path = save(fig, outdir / "bleu.png")
    return path, b


# 10 -----------------------------------------------------------------------------------------
TIMELINE_RUNS = 8       # panels of the timeline figure at most
SHADES = ["#ff7f0e", "#2ca02c", "#9467bd", "#8c564b"]     # fault windows, in the order of a run's faults


def convergence(exp, outdir: Path):
    """Loss against training time, PS and all-reduce, every repeat its own line, one panel per
    bandwidth; the target loss dashed, each run's time to it marked."""
    found = stability.analyse(exp)
    if found is None:
        raise FigureSkipped("not both ps and all-reduce runs with per-step losses")
    curves, runs, target = found
    pal = palette_for(exp)
    bws = sorted(set(curves["bw_bps"]))
    with plt.rc_context(RC):
        fig, axes = plt.subplots(1, len(bws), figsize=(5.5 * len(bws) + 2, 4.6), sharey=True, squeeze=False)
        for ax, bw in zip(axes[0], bws):
            for run_id, c in curves[curves["bw_bps"] == bw].groupby("run_id", sort=False):
                strat = c["strategy"].iloc[0]
                ax.plot(c["elapsed_s"], c["loss"], color=pal.colour("strategy", strat), lw=1.2, alpha=0.8,
                        label=strat)
                hit = runs.loc[runs["run_id"] == run_id, "time_to_target_s"].iloc[0]
                if pd.notna(hit):
                    ax.plot([hit], [target], marker="o", color=pal.colour("strategy", strat))
            ax.axhline(target, color="black", ls="--", lw=1, label=f"target loss {target:.3g}")
            ax.set_xlabel("training time (s)")
            ax.set_title(mbit(bw))
            handles, labels = ax.get_legend_handles_labels()
            unique = dict(zip(labels, handles))
            ax.legend(unique.values(), unique.keys(), fontsize=9)
        axes[0][0].set_ylabel("loss (lead task, per step)")
        fig.suptitle("Convergence: loss against training time, each repeat a line", fontsize=13)
        path = save(fig, outdir / "convergence.png")
    return path, curves


def timeline(exp, outdir: Path):
    """Time per step against step for each run with faults or with links that followed a trace (one
    panel per run, one line per task), each fault's window shaded from the step it hit to the step
    that ended after its undo, labelled; a fault with no duration is a line. Steps run again after a
    restart are drawn dashed. A traced link's rate is a grey step line under the steps (right axis),
    changing between the step each change landed after and the next."""
    f = exp.faults[exp.faults["applied_step"].notna()]
    changes = exp.link_changes[exp.link_changes["outcome"].astype(str) == "ok"]
    if f.empty and changes.empty:
        raise FigureSkipped("no fault was applied and no link followed a trace (faults.csv and link_changes.csv "
                            "are missing or empty)")
    run_ids = list(dict.fromkeys([*f["run_id"], *changes["run_id"]]))[:TIMELINE_RUNS]
    steps = exp.steps[(exp.steps["kind"] == "step") & exp.steps["run_id"].isin(run_ids)].sort_values("t")
    if steps.empty:
        raise FigureSkipped("the runs with faults or traces have no step rows in steps.csv")
    drawn = []
    with plt.rc_context(RC):
        fig, axes = plt.subplots(len(run_ids), 1, figsize=(10, 3.4 * len(run_ids)), squeeze=False,
                                 layout="constrained")
        for ax, run_id in zip(axes[:, 0], run_ids):
            tasks = steps[steps["run_id"] == run_id].groupby(["role", "task_index"])
            for colour, ((role, index), rows) in enumerate(tasks):
                attempt = (rows["step"].diff() <= 0).cumsum()      # a step not above the last: started again
                for n, part in rows.groupby(attempt):
                    ax.plot(part["step"], part["time_s"], marker=".", ls="--" if n else "-", color=f"C{colour}",
                            label=f"{role} {index}" + (f", after restart {n}" if n else ""))
                    drawn.append(part.assign(attempt=n))
            for k, row in enumerate(f[f["run_id"] == run_id].itertuples()):
                lo = row.applied_step + 0.5
                label = f"#{row.fault} {row.action} {row.target}"
                if pd.notna(row.undone_step):
                    ax.axvspan(lo, row.undone_step + 1.5, color=SHADES[k % len(SHADES)], alpha=0.2, label=label)
                else:
                    ax.axvline(lo, color="black", ls=":", lw=1.5, label=label)
            log_if_wide(ax, steps.loc[steps["run_id"] == run_id, "time_s"])
            ax.set_ylabel("time per step (s)")
            bad = tables.degraded_runs(exp.runs[exp.runs["run_id"] == run_id])
            ax.set_title(f"run {run_id}" + (f", DEGRADED: {bad['reasons'].iloc[0]}" if len(bad) else ""))
            rates = _link_rates(ax, changes[changes["run_id"] == run_id],
                                steps.loc[steps["run_id"] == run_id, "step"].max())
            handles = [h for a in (ax, rates) if a is not None for h in a.get_legend_handles_labels()[0]]
            ax.legend(handles=handles, framealpha=0.9, loc="center left",
                      bbox_to_anchor=(1.01 if rates is None else 1.08, 0.5))
        axes[-1, 0].set_xlabel("step")
        shown = [what for what, there in (("fault windows shaded", not f.empty), ("link rates grey", not changes.empty))
                 if there]
        fig.suptitle(f"Time per step during training: {', '.join(shown)}", fontsize=13)
        path = save(fig, outdir / "timeline.png")
    return path, pd.concat(drawn, ignore_index=True)


def _link_rates(ax, changes: pd.DataFrame, last_step: float):
    """The traced links' rates against step on a right-hand axis under `ax`'s lines: a step line per
    link, from half a step after the step each change landed at (links that changed alike share one)."""
    if changes.empty:
        return None
    lines: dict[tuple, list[str]] = {}
    for link, rows in changes.sort_values("t").groupby("link", sort=False):
        x = [*(rows["step"].fillna(0) + 0.5), max(last_step, rows["step"].max()) + 0.5]
        y = [*(rows["bw_bps"] / 1e6), rows["bw_bps"].iloc[-1] / 1e6]
        lines.setdefault((tuple(x), tuple(y)), []).append(link)
    rates = ax.twinx()
    rates.set_zorder(ax.get_zorder() - 1)     # under the steps
    ax.patch.set_visible(False)
    for k, ((x, y), links) in enumerate(lines.items()):
        shown = ", ".join(links[:3]) + (f" and {len(links) - 3} more" if len(links) > 3 else "")
        rates.step(x, y, where="post", color="grey", lw=2.5, alpha=0.45, ls=["-", "--", ":"][k % 3],
                   label=f"rate of {shown}")
    rates.set_ylim(bottom=0)
    rates.set_ylabel("link rate (Mbit/s)", color="grey")
    return rates
