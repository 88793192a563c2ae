"""The communication section's figure: the bytes each run's workers sent against the theory's
(analysis/tables/payoff.py makes the table it draws)."""
from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from analysis.figures.plotstyle import RC, FigureSkipped, legend, save
from analysis.tables.payoff import setting_name


def wire_figure(net: pd.DataFrame, outdir: Path) -> Path:
    """Measured bytes per worker step against the theory's, per run (steady steps where measured, else the
    whole run), one marker per setting, on log axes with the line where they are equal."""
    steady = net["steady_ratio_to_theory"].notna()
    x = net["theory_steady_bytes_per_worker_step"].where(steady, net["theory_bytes_per_worker_step"])
    y = net["steady_bytes_per_worker_step"].where(steady, net["bytes_per_worker_step"])
    keep = (x > 0) & (y > 0) & (net["hosts"] > 1)
    if not keep.any():
        raise FigureSkipped("no multi-node run with measured bytes and a theory")
    with plt.rc_context(RC):
        fig, ax = plt.subplots(figsize=(7.5, 5))
        engines = net.loc[keep, "engine"].nunique() > 1
        for (setting, strategy, engine), rows in net[keep].groupby(["communication", "strategy", "engine"], sort=True):
            name = setting_name(strategy, setting, 2) + (f" ({engine})" if engines else "")
            ax.scatter(x[rows.index] / 1e3, y[rows.index] / 1e3, s=45, zorder=3, label=name,
                       marker="o" if steady[rows.index].all() else "s")
        lo, hi = float(min(x[keep].min(), y[keep].min())) / 1e3, float(max(x[keep].max(), y[keep].max())) / 1e3
        ax.plot([lo * 0.8, hi * 1.25], [lo * 0.8, hi * 1.25], "k--", lw=1.2, label="measured = theory")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("theory: gradient bytes per worker step (kB)")
        ax.set_ylabel("measured: bytes sent per worker step (kB)")
        ax.set_title("The wire against the theory, per run (circles: steady steps; squares: whole run)", fontsize=11)
        legend(ax, loc="upper left", title="setting")
        return save(fig, outdir / "communication_wire.png")
