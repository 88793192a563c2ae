"""Shared plotting style: the one palette, font sizes, labels, saving, and FigureSkipped.

``Palette.colour(kind, value)`` is the single colour mapping: kind 'bw' (bits/s, ordered low
to high on the plasma colormap), 'strategy', 'role', 'metric' (bleu1..bleu4) or 'part' (of a
step: compute, rest). ``mark_degraded`` crosses the points of degraded runs, the same in every figure.
"""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from analysis import outputs  # noqa: E402
from analysis.tables import tables


RC = {"font.size": 11, "axes.titlesize": 12, "axes.labelsize": 11, "xtick.labelsize": 10,
      "ytick.labelsize": 10, "legend.fontsize": 10, "figure.dpi": 110,
      "axes.grid": True, "grid.alpha": 0.3}

STRATEGY_COLOURS = {"allreduce": "#1f77b4", "ps": "#d62728", "single": "#7f7f7f", "ddp": "#2ca02c"}
ROLE_COLOURS = {"chief": "#9467bd", "worker": "#1f77b4", "ps": "#d62728",
                "single": "#7f7f7f", "switch": "#ff7f0e", "idle": "#c7c7c7"}
METRIC_COLOURS = {"bleu1": "#1b3a6b", "bleu2": "#2c7fb8", "bleu3": "#41ae76", "bleu4": "#e6550d"}
PART_COLOURS = {"compute": "#2ca02c", "rest": "#9467bd", "unsplit": "#c7c7c7"}
STRATEGY_STYLE = {"allreduce": ("o", "-"), "ps": ("s", "--"), "single": ("^", ":"), "ddp": ("v", "-")}
_EXTRA = ["#2ca02c", "#8c564b", "#e377c2", "#17becf", "#bcbd22"]


class FigureSkipped(Exception):
    """The experiment has no data for this figure; the message says why."""


class Palette:
    """One colour per bandwidth (ordered low -> high) and per strategy / role / metric."""

    def __init__(self, bandwidths):
        bws = sorted({float(b) for b in bandwidths if pd.notna(b)})
        cmap = matplotlib.colormaps["plasma"]
        pos = np.linspace(0.0, 0.8, len(bws)) if len(bws) > 1 else [0.0]
        self._bw = {b: matplotlib.colors.to_hex(cmap(p)) for b, p in zip(bws, pos)}

    def colour(self, kind: str, value) -> str:
        """Colour for kind 'bw' (bits/s), 'strategy', 'role' or 'metric'."""
        if kind == "bw":
            return self._bw.get(float(value), "#333333")
        table = {"strategy": STRATEGY_COLOURS, "metric": METRIC_COLOURS, "part": PART_COLOURS}.get(kind, ROLE_COLOURS)
        if value not in table:
            return _EXTRA[sum(map(ord, str(value))) % len(_EXTRA)]
        return table[value]


def palette_for(exp: tables.Experiment) -> Palette:
    """The palette of an experiment: every configured bandwidth of runs and checks."""
    return Palette(list(exp.runs["bw_bps"]) + list(exp.checks["configured_bps"]))


def role_kind(label) -> str:
    """'chief0' -> 'chief', 'ps0+worker1' -> 'ps' (first task), '' -> 'idle'."""
    if not isinstance(label, str) or not label:
        return "idle"
    first = label.split("+")[0]
    return first.rstrip("0123456789") or "idle"


def style(strategy):
    """Marker and line style of a strategy, or of a series label 'allreduce (pytorch)' (series): a
    PyTorch series keeps its strategy's marker and is dotted."""
    name, _, engine = str(strategy).partition(" (")
    marker, line = STRATEGY_STYLE.get(name, ("D", "-."))
    return marker, (":" if engine.startswith("pytorch") else line)


def plain_number(value, _pos=None) -> str:
    """Tick label of a log axis as a plain number: 0.02, 0.5, 3, 1000, 2e+05."""
    if value <= 0:
        return ""
    return f"{value:g}" if 1e-4 <= value < 1e5 else f"{value:.0e}"


def readable_log_ticks(fig) -> None:
    """Every log axis of `fig` gets plain-number labels on major ticks only (matplotlib labels
    minor ticks of a log axis spanning less than a decade as '2x10^-2', and they overlap), with
    majors at 1, 2, 5 x 10^n (or 1..9 x 10^n on a narrow axis, or 10^n on a wide one).
    Explicit ticks (set_xticks) keep their places and only get plain labels."""
    from matplotlib import ticker
    # (an axis's view limits settle when read: no draw of the figure is needed for them, and a draw costs as
    # much as the save)
    for ax in fig.axes:
        for axis, scale in ((ax.xaxis, ax.get_xscale()), (ax.yaxis, ax.get_yscale())):
            if scale != "log":
                continue
            lo, hi = sorted(axis.get_view_interval())
            if not isinstance(axis.get_major_locator(), ticker.FixedLocator) and lo > 0:
                decades = np.log10(hi / lo)
                subs = ((1.0,) if decades > 4 else (1.0, 2.0, 5.0) if decades > 1.2 else
                        (1.0, 2.0, 3.0, 5.0) if decades > 0.5 else tuple(np.arange(1.0, 10.0)))
                axis.set_major_locator(ticker.LogLocator(base=10, subs=subs))
            axis.set_major_formatter(ticker.FuncFormatter(plain_number))
            axis.set_minor_formatter(ticker.NullFormatter())


def save(fig, path: Path) -> Path:
    outputs.check_file(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    readable_log_ticks(fig)
    fig.savefig(path, bbox_inches="tight")
    plt.close(fig)
    return path


def node_axis(ax, hosts):
    ticks = sorted({int(h) for h in hosts if pd.notna(h)})
    ax.set_xticks(ticks)
    ax.set_xlabel("number of nodes")


def log_if_wide(ax, values, axis="y", ratio=30):
    v = pd.Series(values, dtype=float)
    v = v[v > 0]
    if len(v) and v.max() / v.min() > ratio:
        (ax.set_yscale if axis == "y" else ax.set_xscale)("log")


def series(summary: pd.DataFrame):
    """Iterate (strategy, bw_bps, rows) over non-single strategies, sorted; with more than one
    engine the strategy reads 'allreduce (pytorch)', one series per engine; a communication setting other
    than the usual all-reduce reads 'allreduce, fp16', one series per setting."""
    df = summary[summary["strategy"] != "single"]
    engines = df["engine"] if "engine" in df else pd.Series("tensorflow", index=df.index)
    settings = df["communication"] if "communication" in df else pd.Series("none", index=df.index)
    many = engines.nunique() > 1
    for (strat, engine, setting, bw), rows in df.assign(engine=engines, _setting=settings).groupby(
            ["strategy", "engine", "_setting", "bw_bps"], sort=True):
        name = (f"{strat} ({engine})" if many else strat) + ("" if setting == "none" else f", {setting}")
        yield name, bw, rows.sort_values("hosts").drop(columns="_setting")


def legend(ax, **kw):
    if ax.get_legend_handles_labels()[0]:
        ax.legend(framealpha=0.9, **kw)


DEGRADED_LABEL = "degraded run (fidelity): not in the trend or fit"
DEGRADED_COUNTED_LABEL = "degraded run (fidelity): counted, as asked"


def mark_degraded(ax, x, y, counted: bool = False) -> None:
    """Cross the points (x, y) of degraded runs in black, with one legend entry per axes."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    keep = np.isfinite(x) & np.isfinite(y)
    if not keep.any():
        return
    label = DEGRADED_COUNTED_LABEL if counted else DEGRADED_LABEL
    seen = label in ax.get_legend_handles_labels()[1]
    ax.scatter(x[keep], y[keep], marker="X", s=90, facecolors="none", edgecolors="black", linewidths=1.4,
               zorder=6, label=None if seen else label)
