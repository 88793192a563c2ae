"""The figure that opens the report: per job and setting, the time by the job's yardstick (analysis/tables/glance.py)
against the node count, one line per bandwidth; one machine's time a dotted reference line; the cost model's
prediction (one machine's time over the predicted speedup in steady samples/s) dashed with hollow markers, apart
from the measured solid line with filled markers; the points not counted (degraded) named in the panel."""
from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from analysis.figures.plotstyle import RC, FigureSkipped, legend, log_if_wide, palette_for, save
from analysis.text import mbit
from analysis.model import costmodel
from analysis.tables import glance, tables, yardstick

PREDICT_UP_TO = 16          # the prediction's node counts: 1, 2, 4, ... up to this, or the most measured
FAMILY = {("tensorflow", "allreduce"): "allreduce", ("tensorflow", "ps"): "ps", ("pytorch", "allreduce"): "ddp"}


def predicted_speedups(exp: tables.Experiment, group: dict, strategy: str, bws, nodes) -> pd.DataFrame:
    """The cost model's predicted speedup (steady samples/s over one machine's) at each of `nodes` and `bws` for
    one job's plain all-reduce or ps (empty without a fit of its family on multi-worker runs)."""
    from analysis.model import predict
    family = FAMILY.get((group["engine"], strategy))
    ev = costmodel.evaluate_cached(exp)
    if not ev or family is None or not ev["model"].fits[family].n_runs:
        return pd.DataFrame(columns=predict.COLUMNS)
    model, feats = ev["model"], ev["features"]
    mine = feats[(feats["family"] == family) & (feats["model"] == group["model"])]
    if not (mine["workers"] > 1).any():
        return pd.DataFrame(columns=predict.COLUMNS)
    cores = predict.node_cores(feats, model)
    return predict.predict_grid(model, nodes, list(bws), [family], cpus=[(cores / model.cores,)],
                                **predict.reference(mine))


def _panels(g: pd.DataFrame) -> list[tuple[dict, str, pd.DataFrame]]:
    out = []
    for key, rows in g.groupby(tables.GROUP_KEYS, dropna=False, sort=False):
        group = dict(zip(tables.GROUP_KEYS, key))
        settings = list(dict.fromkeys(rows.loc[rows["setting"] != glance.ONE, "setting"])) or [glance.ONE]
        for setting in settings:
            out.append((group, setting, rows[(rows["setting"] == setting) | (rows["setting"] == glance.ONE)]))
    return out


def _draw_panel(ax, exp, group: dict, setting: str, rows: pd.DataFrame, pal, title: str) -> list[str]:
    """One panel; returns the points not counted, as words."""
    gone = []
    most = int(rows["hosts"].max())
    nodes = sorted({1, *[2 ** i for i in range(1, 11) if 2 ** i <= max(PREDICT_UP_TO, most)], *rows["hosts"]})
    strategy = rows.loc[rows["setting"] == setting, "strategy"].iloc[0] if setting != glance.ONE else "single"
    plain = rows.loc[rows["setting"] == setting, "communication"].eq("none").all()
    pred = predicted_speedups(exp, group, strategy, sorted(set(rows["bw_bps"].dropna())), nodes) \
        if setting != glance.ONE and plain else pd.DataFrame()
    for bw, here in rows.groupby("bw_bps", sort=True):
        colour = pal.colour("bw", bw)
        one = here[(here["setting"] == glance.ONE) & here["time_s"].notna()]
        mine = here[(here["setting"] == setting) & here["time_s"].notna()] if setting != glance.ONE else one
        line = pd.concat([one, mine]).drop_duplicates(subset=["hosts"]).sort_values("hosts")
        if len(line):
            err = np.vstack([line["time_s"] - line["time_min_s"], line["time_max_s"] - line["time_s"]]).clip(0)
            ax.errorbar(line["hosts"], line["time_s"], yerr=np.nan_to_num(err), color=colour, marker="o", ms=7,
                        lw=2, capsize=3, label=f"{mbit(bw)}, measured")
        if len(one):
            ax.axhline(float(one["time_s"].iloc[0]), color=colour, ls=":", lw=1.3)
            p = pred[pred["bw_bps"] == bw] if len(pred) else pred
            if len(p):
                ax.plot(p["nodes"], float(one["time_s"].iloc[0]) / p["speedup"], ls="--", lw=1.3, color=colour,
                        marker="o", ms=6, markerfacecolor="none", label=f"{mbit(bw)}, predicted (cost model)")
        gone += [f"{int(h)} at {mbit(bw)}" for h in here.loc[here["verdict"] == glance.NOT_COUNTED, "hosts"]]
    ax.plot([], [], "k:", lw=1.3, label="one machine (reference)")
    ax.set_xscale("log", base=2)
    ticks = sorted({*nodes, *rows["hosts"]})
    ax.set_xticks(ticks, [str(int(t)) for t in ticks])
    drawn = [y for line in ax.get_lines() for y in line.get_ydata() if np.isfinite(y) and y > 0]
    log_if_wide(ax, drawn, ratio=10)
    ax.set_xlabel("machines")
    ax.set_title(title, fontsize=10)
    if gone:
        ax.text(0.02, 0.02, "not counted (degraded): " + ", ".join(gone), transform=ax.transAxes, fontsize=8,
                va="bottom")
    return gone


def draw(exp: tables.Experiment, g: pd.DataFrame, outdir: Path) -> Path:
    """figures/answer.png from the glance table `g` (glance.table(exp)); FigureSkipped when it is empty."""
    if g.empty or not g["time_s"].notna().any():
        raise FigureSkipped("no point with a time to draw")
    panels = _panels(g)
    cols = min(3, len(panels))
    n_rows = -(-len(panels) // cols)
    pal = palette_for(exp)
    labels = glance.job_labels(g)
    with plt.rc_context(RC):
        fig, axes = plt.subplots(n_rows, cols, figsize=(5.2 * cols + 1, 4.2 * n_rows), squeeze=False)
        fig.subplots_adjust(hspace=0.35, wspace=0.25)
        for ax, (group, setting, rows) in zip(axes.flat, panels):
            title = ", ".join(x for x in (labels[tuple(group.values())],
                                          "" if len(panels) == 1 and setting == glance.PLAIN else setting) if x)
            _draw_panel(ax, exp, group, setting, rows, pal, title)
        for ax in list(axes.flat)[len(panels):]:
            ax.axis("off")
        sticks = set(g["yardstick"])
        what = ("time to the target loss (s)" if sticks == {yardstick.TARGET} else
                "time to train the job (s)" if sticks == {yardstick.THROUGHPUT} else "time by the job's yardstick (s)")
        for ax in axes[:, 0]:
            ax.set_ylabel(what)
        if len(panels) == 1:
            legend(axes.flat[0], loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=8)
        else:
            _figure_legend(fig, axes)
        fig.suptitle("Does it pay off? Lower is faster; solid: measured, dashed: predicted", fontsize=12)
        return save(fig, outdir / "answer.png")


def _figure_legend(fig, axes) -> None:
    seen = {}
    for ax in axes.flat:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            seen.setdefault(lab, h)
    fig.legend(list(seen.values()), list(seen.keys()), loc="center left", bbox_to_anchor=(0.91, 0.5), fontsize=8)
