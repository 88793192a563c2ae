"""The figure of a report's section against stored reference results (analysis/comparisons/reference.py
judges; this draws its table)."""
from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from analysis.figures.plotstyle import RC, FigureSkipped, Palette, legend, log_if_wide, node_axis, save, style
from analysis.tables import tables
from analysis.text import mbit


def figure(table: pd.DataFrame, yours: tables.Experiment, outdir) -> tuple:
    """Steady samples per second against nodes from `against`'s table: the reference dashed over the band
    of its repeats, yours solid with bars from its slowest to its fastest repeat; one colour per bandwidth,
    one panel per fixed mode."""
    t = table[(table["metric"] == "steady_samples_per_s") & (table["strategy"] != "single")
              & ((table["reference_runs"] > 0) | (table["yours_runs"] > 0))]
    if t.empty:
        raise FigureSkipped("no run judged steady on either side")
    pal = Palette(list(t["bw_bps"]))
    found = [m for m in tables.FIXED_MODES if m in set(t["fixed"])] + sorted(set(t["fixed"]) - set(tables.FIXED_MODES))
    with plt.rc_context(RC):
        fig, axes = plt.subplots(len(found), 1, figsize=(7.5, 5 * len(found)), squeeze=False)
        for ax, mode in zip(axes[:, 0], found):
            of = t[t["fixed"] == mode]
            for (strat, bw), rows in of.groupby(["strategy", "bw_bps"], sort=True):
                rows = rows.sort_values("hosts")
                marker, _ = style(strat)
                colour = pal.colour("bw", bw)
                ref = rows[rows["reference_runs"] > 0]
                ax.fill_between(ref["hosts"], ref["reference_min"], ref["reference_max"], color=colour, alpha=0.15,
                                lw=0)
                ax.plot(ref["hosts"], ref["reference_mean"], ls="--", marker=marker, mfc="none", color=colour,
                        alpha=0.8, label=f"reference: {mbit(bw)}, {strat}")
                mine = rows[rows["yours_runs"] > 0]
                err = [mine["yours_mean"] - mine["yours_min"], mine["yours_max"] - mine["yours_mean"]]
                ax.errorbar(mine["hosts"], mine["yours_mean"], yerr=err, marker=marker, ls="-", capsize=4,
                            color=colour, label=f"yours: {mbit(bw)}, {strat}")
            node_axis(ax, of["hosts"])
            log_if_wide(ax, pd.concat([of["reference_mean"], of["yours_mean"]]))
            ax.set_ylabel("steady samples per second: mean, range of repeats")
            ax.set_title(f"{yours.name} against the reference ({tables.MODE_TEXT.get(mode, mode)})", fontsize=11)
            legend(ax, loc="center left", bbox_to_anchor=(1.01, 0.5), title="reference (dashed, band) / yours")
        path = save(fig, outdir / "against_reference.png")
    return path, t.reset_index(drop=True)
