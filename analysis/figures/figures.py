"""Figures of the report (matplotlib, Agg backend, PNG).

Every figure function takes the loaded ``Experiment`` and an output folder, and returns
``(path, plotted)`` where ``plotted`` is the DataFrame of exactly the numbers drawn, or raises
``FigureSkipped(reason)`` when the experiment has no data for it. Colours come from one
mapping, ``Palette.colour(kind, value)``, so a bandwidth or a strategy has the same colour
in every figure (see analysis/figures/plotstyle.py; the topology picture is in
analysis/figures/topology_figure.py). Lines, bars and means count the runs of ``tables.counted_runs``
(degraded runs left out unless ``exp.include_degraded``); every degraded run is crossed
(``mark_degraded``) wherever runs are drawn.
"""
from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from analysis.model import costmodel
from analysis.tables import faithful, speedup, tables
from analysis.figures.plotstyle import (RC, FigureSkipped, Palette, legend, log_if_wide, mark_degraded, node_axis,
                                        palette_for, role_kind, save, series, style)
from analysis.text import HTB_TCP_CEILING, THESIS_FIG17, mbit, plural
from analysis.figures.run_figures import bleu, convergence, timeline
from analysis.figures.topology_figure import find_topology, layout, topology  # noqa: F401


# 1 ------------------------------------------------------------------------------------------
def modes(df: pd.DataFrame) -> list[str]:
    """The fixed modes present, in tables.FIXED_MODES order (a figure draws each in a panel of its own)."""
    present = set(df["fixed"].dropna()) if "fixed" in df else {"steps"}
    return [m for m in tables.FIXED_MODES if m in present] + sorted(present - set(tables.FIXED_MODES))


def mode_title(mode: str) -> str:
    return tables.MODE_TEXT.get(mode, f"mode {mode}")


def lines(df: pd.DataFrame):
    """(label, strategy, bw_bps, rows) per line of a figure of one mode: series (strategy, engine, bandwidth),
    split further by model and batch per worker where they vary."""
    more = [k for k in ("model", "batch_per_worker") if k in df and df[k].nunique(dropna=False) > 1]
    parts = df.groupby(more, dropna=False) if more else [((), df)]
    for key, rows in parts:
        key = key if isinstance(key, tuple) else (key,)
        extra = ", ".join(f"batch {v:g}" if k == "batch_per_worker" else str(v) for k, v in zip(more, key))
        for strat, bw, r in series(rows):
            yield (f"{strat}, {extra}" if extra else strat), strat, bw, r


def _mode_axes(n_modes: int, per_row: int, size=(7.5, 5)):
    """One row of `per_row` axes per mode."""
    fig, axes = plt.subplots(n_modes, per_row, figsize=(size[0] * per_row, size[1] * n_modes), squeeze=False)
    return fig, axes


def training_time(exp, outdir: Path):
    """Measured training time vs nodes, one line per bandwidth (and strategy), error bars = std over
    repeats; one panel per fixed mode. Not a ratio: the speedup (scaling) is the one to read."""
    s = speedup.summary(tables.counted_runs(exp), speedup.training_job(exp))
    if s.empty:
        raise FigureSkipped("no successful runs")
    pal = palette_for(exp)
    found = modes(s)
    with plt.rc_context(RC):
        fig, axes = _mode_axes(len(found), 1)
        for ax, mode in zip(axes[:, 0], found):
            rows_of = s[s["fixed"] == mode]
            for label, strat, bw, rows in lines(rows_of):
                m, ls = style(strat)
                ax.errorbar(rows["hosts"], rows["time_mean_s"], yerr=rows["time_std_s"].fillna(0),
                            marker=m, ls=ls, capsize=4, color=pal.colour("bw", bw), label=f"{mbit(bw)}, {label}")
            deg = tables.degraded_ok(exp)
            deg = deg[deg["fixed"] == mode]
            mark_degraded(ax, deg["hosts"], deg["training_time_s"], exp.include_degraded)
            node_axis(ax, rows_of["hosts"])
            log_if_wide(ax, rows_of["time_mean_s"])
            ax.set_ylabel("training time (s), mean ± std over repeats")
            ax.set_title(f"Measured training time ({mode_title(mode)})", fontsize=11)
            legend(ax, loc="center left", bbox_to_anchor=(1.01, 0.5), title="bandwidth, strategy")
        fig.suptitle("Training time vs number of nodes (warm-up included; the speedup is in scaling.png)",
                     fontsize=12)
        path = save(fig, outdir / "training_time.png")
    return path, s[s["strategy"] != "single"].reset_index(drop=True)


# 2 ------------------------------------------------------------------------------------------
def degraded_speedups(exp, summary: pd.DataFrame) -> pd.DataFrame:
    """The degraded ok runs judged steady, with their speedup: their steady samples/s over the one-node
    mean of their configuration's baseline (the counted runs')."""
    deg = tables.degraded_ok(exp)
    deg = deg[deg["steady"].astype(str).eq("ok") & deg["steady_samples_per_s"].gt(0)]
    base = [speedup.baseline_row(summary, r) for _, r in deg.iterrows()]
    rate = np.array([b["steady_samples_per_s_mean"] if b is not None else np.nan for b in base], dtype=float)
    return deg.assign(speedup=deg["steady_samples_per_s"].to_numpy(dtype=float) / rate)


def scaling(exp, outdir: Path):
    """The speedup (steady samples/s over one node's, bars: the range over repeats) and the scaling
    efficiency speedup/n vs nodes; one row of panels per fixed mode."""
    every = speedup.summary(tables.counted_runs(exp), speedup.training_job(exp))
    s = every[every["speedup"].notna() & (every["strategy"] != "single")].reset_index(drop=True)
    if s.empty:
        raise FigureSkipped("no speedup: no one-node run judged steady to compare with (see summary.csv "
                            "not_judged)")
    pal = palette_for(exp)
    found = modes(s)
    deg = degraded_speedups(exp, every)
    with plt.rc_context(RC):
        fig, axes = _mode_axes(len(found), 2, size=(6, 4.8))
        for (a1, a2), mode in zip(axes, found):
            rows_of = s[s["fixed"] == mode]
            for label, strat, bw, rows in lines(rows_of):
                m, ls = style(strat)
                kw = dict(marker=m, ls=ls, color=pal.colour("bw", bw), label=f"{mbit(bw)}, {label}")
                err = [rows["speedup"] - rows["speedup_min"], rows["speedup_max"] - rows["speedup"]]
                a1.errorbar(rows["hosts"], rows["speedup"], yerr=np.clip(np.nan_to_num(err), 0, None), capsize=4, **kw)
                a2.plot(rows["hosts"], rows["efficiency"], **kw)
            d = deg[deg["fixed"] == mode]
            mark_degraded(a1, d["hosts"], d["speedup"], exp.include_degraded)
            mark_degraded(a2, d["hosts"], d["speedup"] / d["hosts"].to_numpy(dtype=float), exp.include_degraded)
            a1.axhline(1, color="black", lw=1, ls=":", label="as fast as one node")
            for ax in (a1, a2):
                node_axis(ax, rows_of["hosts"])
            log_if_wide(a1, rows_of["speedup"], ratio=20)
            log_if_wide(a2, rows_of["efficiency"], ratio=20)
            a1.set_ylabel("speedup: steady samples/s over one node's")
            a2.set_ylabel("scaling efficiency = speedup / n")
            a1.set_title(f"Speedup ({mode_title(mode)})", fontsize=11)
            a2.set_title("Scaling efficiency", fontsize=11)
            handles, labels = a1.get_legend_handles_labels()
            a2.legend(handles, labels, loc="center left", bbox_to_anchor=(1.01, 0.5),
                      title="bandwidth, strategy", framealpha=0.9)
        fig.suptitle("Speedup and scaling efficiency vs number of nodes (steady state, bars: range of repeats)",
                     fontsize=13)
        path = save(fig, outdir / "scaling.png")
    return path, s


# 3 ------------------------------------------------------------------------------------------
def bandwidth_checks(exp, outdir: Path):
    """Measured vs configured bandwidth of every iperf3 check, with the HTB/TCP ceiling.

    Left: measured vs configured with y = x and y = 0.956 x. Right: the ratio, where the
    few-percent gap between the two lines is visible.
    """
    if "checks.csv" in exp.missing:
        raise FigureSkipped("checks.csv is missing")
    df = tables.iperf_checks(exp.checks)
    if df.empty:
        raise FigureSkipped("no iperf3 checks in checks.csv")
    df = df.assign(configured_mbps=df["configured_bps"] / 1e6,
                   measured_mbps=df["measured_bps"] / 1e6,
                   ratio=df["measured_bps"] / df["configured_bps"])
    pal = palette_for(exp)
    thesis_x, thesis_y = THESIS_FIG17[0] / 1e6, THESIS_FIG17[1] / 1e6
    with plt.rc_context(RC):
        fig, (a1, a2) = plt.subplots(1, 2, figsize=(13, 5.2))
        lo, hi = df["configured_mbps"].min(), df["configured_mbps"].max()
        xs = np.geomspace(min(lo, thesis_x) * 0.7, max(hi, thesis_x) * 1.4, 50)
        a1.plot(xs, xs, color="black", lw=1, ls=":", label="ideal, measured = configured")
        a1.plot(xs, HTB_TCP_CEILING * xs, color="grey", lw=1.5, ls="--",
                label=f"TCP over HTB ceiling, {HTB_TCP_CEILING:.3f} × configured")
        a2.axhline(1.0, color="black", lw=1, ls=":")
        a2.axhline(HTB_TCP_CEILING, color="grey", lw=1.5, ls="--")
        for bw, rows in df.groupby("configured_bps"):
            ok = rows["passed"].astype(str).str.lower().isin(["true", "1"])
            c = pal.colour("bw", bw)
            for sel, marker, suffix in ((ok, "o", ""), (~ok, "x", ", failed check")):
                if sel.any():
                    r = rows[sel]
                    a1.scatter(r["configured_mbps"], r["measured_mbps"], color=c, s=45,
                               marker=marker, zorder=3, label=f"iperf3 at {mbit(bw)}{suffix}")
                    a2.scatter(r["configured_mbps"], r["ratio"], color=c, s=45, marker=marker,
                               zorder=3)
        deg = df[df["run_id"].isin(tables.degraded_ok(exp)["run_id"])]
        mark_degraded(a1, deg["configured_mbps"], deg["measured_mbps"], exp.include_degraded)
        mark_degraded(a2, deg["configured_mbps"], deg["ratio"], exp.include_degraded)
        for ax, y in ((a1, thesis_y), (a2, thesis_y / thesis_x)):
            ax.scatter([thesis_x], [y], marker="*", s=180, facecolors="none",
                       edgecolors="black", zorder=2, label="thesis fig. 17 (iperf2): 9.75 of 10")
        if max(hi, thesis_x) / min(lo, thesis_x) > 5:
            a1.set_xscale("log")
            a1.set_yscale("log")
            a2.set_xscale("log")
        a2.set_ylim(min(0.5, df["ratio"].min() - 0.05), 1.05)
        for ax in (a1, a2):
            ax.set_xlabel("configured bandwidth (Mbit/s)")
        a1.set_ylabel("measured TCP throughput (Mbit/s)")
        a2.set_ylabel("measured / configured")
        a1.set_title("Measured vs configured")
        a2.set_title("Ratio (ceiling 0.956 dashed)")
        h, lab = a1.get_legend_handles_labels()
        a2.legend(h, lab, loc="center left", bbox_to_anchor=(1.01, 0.5), framealpha=0.9)
        fig.suptitle("iperf3 check: measured vs configured bandwidth", fontsize=13)
        path = save(fig, outdir / "bandwidth_checks.png")
    return path, df


# 4 ------------------------------------------------------------------------------------------
def resources(exp, outdir: Path):
    """Mean CPU %, peak memory and mean network throughput per node count (three panels; a row per
    fixed mode)."""
    r = tables.resource_summary(tables.counted_runs(exp), exp.usage)
    cols = ["cpu_mean_pct", "mem_peak_bytes", "net_throughput_mean_bps"]
    if r.empty or r[cols].isna().all().all():
        raise FigureSkipped("no CPU/memory/network columns in runs.csv and no usage.csv samples")
    pal = palette_for(exp)
    found = modes(r)
    with plt.rc_context(RC):
        fig, grid = _mode_axes(len(found), 3, size=(5, 4.8))
        spec = [("cpu_mean_pct", 1, "mean CPU per node (%)", "CPU"),
                ("mem_peak_bytes", 1e6, "peak memory of a node (MB)", "Memory"),
                ("net_throughput_mean_bps", 1e6, "traffic per node, sent + received (Mbit/s)",
                 "Network")]
        for axes, mode in zip(grid, found):
            rows_of = r[r["fixed"] == mode]
            for ax, (col, f, ylabel, title) in zip(axes, spec):
                for label, strat, bw, rows in lines(rows_of):
                    rows = rows[rows[col].notna()]
                    m, ls = style(strat)
                    ax.plot(rows["hosts"], rows[col] / f, marker=m, ls=ls,
                            color=pal.colour("bw", bw), label=f"{mbit(bw)}, {label}")
                deg = tables.with_usage(tables.degraded_ok(exp), exp.usage)
                deg = deg[deg["fixed"] == mode]
                mark_degraded(ax, deg["hosts"], deg[col] / f, exp.include_degraded)
                node_axis(ax, rows_of["hosts"])
                ax.set_ylabel(ylabel)
                ax.set_title(title + (f" ({mode_title(mode)})" if len(found) > 1 else ""), fontsize=11)
                if col == "net_throughput_mean_bps":
                    log_if_wide(ax, rows_of[col])
                if ax.get_yscale() == "linear":
                    ax.set_ylim(0, ax.get_ylim()[1] * 1.08)
            legend(axes[2], loc="center left", bbox_to_anchor=(1.01, 0.5),
                   title="bandwidth, strategy")
        fig.suptitle("Resource use per node count" + (f" ({mode_title(found[0])})" if len(found) == 1 else ""),
                     fontsize=13)
        path = save(fig, outdir / "resources.png")
    return path, r


# 5 ------------------------------------------------------------------------------------------
def strategies(exp, outdir: Path):
    """All-reduce vs parameter server: steady samples per second per (nodes, bandwidth) where both ran
    (bars: the range over repeats); the training time is not compared, a ps step trains one worker's
    batch and an all-reduce step every worker's."""
    s = speedup.summary(tables.counted_runs(exp), speedup.training_job(exp))
    s = s[s["communication"] == "none"]         # the strategies as they are (settings: the pay-off section)
    have = set(s["strategy"])
    if "ps" not in have:
        raise FigureSkipped("no parameter-server runs")
    if "allreduce" not in have:
        raise FigureSkipped("no all-reduce runs")
    both = s[s["strategy"].isin(["allreduce", "ps"]) & s["steady_samples_per_s_mean"].notna()]
    point = ["model", "engine", "batch_per_worker", "fixed", "hosts", "bw_bps"]
    keys = both.groupby(point, dropna=False)["strategy"].nunique()
    keys = keys[keys == 2].index
    df = both.set_index(point).loc[list(keys)].reset_index() if len(keys) else both.iloc[0:0]
    if df.empty:
        raise FigureSkipped("no node count and bandwidth with both all-reduce and ps runs judged steady")
    df = df.sort_values(["fixed", "bw_bps", "hosts", "strategy"]).reset_index(drop=True)
    pal = palette_for(exp)
    groups = list(dict.fromkeys(zip(df["hosts"], df["bw_bps"], df["fixed"])))
    many = df["fixed"].nunique() > 1
    with plt.rc_context(RC):
        fig, ax = plt.subplots(figsize=(max(6, 1.8 * len(groups) + 2), 5))
        width = 0.38
        for j, strat in enumerate(["allreduce", "ps"]):
            rows = df[df["strategy"] == strat].set_index(["hosts", "bw_bps", "fixed"]).loc[groups]
            x = np.arange(len(groups)) + (j - 0.5) * width
            err = [rows["steady_samples_per_s_mean"] - rows["steady_samples_per_s_min"],
                   rows["steady_samples_per_s_max"] - rows["steady_samples_per_s_mean"]]
            ax.bar(x, rows["steady_samples_per_s_mean"], width, yerr=err, capsize=4,
                   color=pal.colour("strategy", strat), label=strat)
            deg = tables.degraded_ok(exp)
            deg = deg[(deg["strategy"] == strat) & deg["steady"].astype(str).eq("ok")]
            at = [(groups.index(g) + (j - 0.5) * width, v) for g, v in
                  zip(zip(deg["hosts"], deg["bw_bps"], deg["fixed"]), deg["steady_samples_per_s"]) if g in groups]
            mark_degraded(ax, [a for a, _ in at], [v for _, v in at], exp.include_degraded)
        ax.set_xticks(np.arange(len(groups)),
                      [f"{int(h)} nodes\n{mbit(b)}" + (f"\n{m}" if many else "") for h, b, m in groups])
        log_if_wide(ax, df["steady_samples_per_s_mean"])
        ax.set_xlabel("nodes and link bandwidth")
        ax.set_ylabel("steady samples per second, mean and range")
        ax.set_title("All-reduce vs parameter server: steady throughput"
                     + ("" if many else f" ({mode_title(df['fixed'].iloc[0])})"), fontsize=11)
        legend(ax, title="strategy")
        path = save(fig, outdir / "strategies.png")
    return path, df


# 6 ------------------------------------------------------------------------------------------
# 7 ------------------------------------------------------------------------------------------
def wire_bytes(exp, outdir: Path):
    """Bytes sent per step per worker vs the gradient size and the all-reduce theory."""
    net = tables.network_per_run(tables.counted_runs(exp), exp.usage)
    net = net[net["bytes_per_worker_step"].notna() & (net["workers"] > 0)].reset_index(drop=True)
    if net.empty:
        raise FigureSkipped("no net_bytes_total in runs.csv and no usage.csv byte counters")
    pal = palette_for(exp)
    with plt.rc_context(RC):
        fig, ax = plt.subplots(figsize=(7.5, 5))
        many = net["engine"].nunique() > 1
        for (strat, engine), rows in net.groupby(["strategy", "engine"]):
            strat = f"{strat} ({engine})" if many else strat
            m, _ = style(strat)
            ax.scatter(rows["workers"], rows["bytes_per_worker_step"] / 1e6, marker=m, s=45,
                       zorder=3, color=pal.colour("strategy", strat),
                       label=f"measured, {strat}")
        deg = tables.network_per_run(tables.degraded_ok(exp), exp.usage)
        mark_degraded(ax, deg["workers"], deg["bytes_per_worker_step"] / 1e6, exp.include_degraded)
        nmax = int(net["workers"].max())
        ns = np.arange(1, nmax + 1)
        for s_bytes in sorted(net["gradient_bytes"].dropna().unique()):
            sz = f"S = {s_bytes / 1e6:.3g} MB"
            ax.plot(ns, tables.ring_bytes_per_worker(ns, s_bytes) / 1e6, "k--", lw=1.2,
                    label=f"ring all-reduce 2(N-1)/N·S, {sz}")
            ax.axhline(s_bytes / 1e6, color="grey", ls=":", lw=1.2, label=f"gradient size {sz}")
            if (net["strategy"] == "ps").any():
                ax.axhline(2 * s_bytes / 1e6, color=pal.colour("strategy", "ps"), ls="-.",
                           lw=1.2, label="parameter server 2·S (push + pull)")
        ax.set_xticks(ns)
        ax.set_xlabel("number of workers N")
        ax.set_ylabel("bytes sent per step per worker (MB)")
        ax.set_title("Bytes on the wire per step vs gradient size")
        ax.set_ylim(bottom=0)
        legend(ax, loc="upper left", bbox_to_anchor=(1.01, 1.0))
        path = save(fig, outdir / "wire_bytes.png")
    return path, net


# 8 ------------------------------------------------------------------------------------------
def cost_model(exp, outdir: Path):
    """Cost model vs measurement: the steady step per node count (model fitted on every run, and
    predictions for the largest worker count from a fit on the others), predicted vs measured."""
    ev = costmodel.evaluate_cached(exp)
    if not ev:
        raise FigureSkipped("no successful run with a steady step to fit the model on")
    ins, held = ev["in_sample"], ev["held_out"]
    acc = ev["accuracy"].set_index(["strategy", "split"])["median_abs_rel_error"]
    pal = palette_for(exp)
    with plt.rc_context(RC):
        fig, (a1, a2) = plt.subplots(1, 2, figsize=(13, 5))
        for (strat, bw), rows in ins.groupby(["family", "bw_bps"]):     # ddp: PyTorch's, fitted apart
            m, _ = style(strat)
            c = pal.colour("bw", bw)
            g = rows.groupby("hosts")[["measured_steady_s", "predicted_steady_s"]].mean()
            a1.scatter(rows["hosts"], rows["measured_steady_s"], marker=m, color=c, s=40,
                       zorder=3, label=f"measured, {mbit(bw)}, {strat}")
            a1.plot(g.index, g["predicted_steady_s"], ls="--", color=c)
            a2.scatter(rows["measured_steady_s"], rows["predicted_steady_s"], marker=m, color=c,
                       s=40, zorder=3)
        for (strat, bw), rows in held.groupby(["family", "bw_bps"]):
            c = pal.colour("bw", bw)
            kw = dict(marker="D", s=70, facecolors="none", edgecolors=c, linewidths=1.6, zorder=4)
            a1.scatter(rows["hosts"], rows["predicted_steady_s"], **kw)
            a2.scatter(rows["measured_steady_s"], rows["predicted_steady_s"], **kw)
        deg = ev["degraded"]
        for rows, counted in ((deg, False), (ins[ins["degraded"] == True], True)):   # noqa: E712 (NaN: no)
            mark_degraded(a1, rows["hosts"], rows["measured_steady_s"], counted)
            mark_degraded(a2, rows["measured_steady_s"], rows["predicted_steady_s"], counted)
        a1.plot([], [], "k--", label="model fitted on every run (dashed)")
        if len(held):
            a1.scatter([], [], marker="D", facecolors="none", edgecolors="k",
                       label=f"held out: predicted from {held['trained_on'].iloc[0]}")
        both = pd.concat([ins, held, deg])[["measured_steady_s", "predicted_steady_s"]]
        lim = np.array([both.min().min() * 0.7, both.max().max() * 1.4])
        a2.plot(lim, lim, "k:", lw=1, label="prediction = measurement")
        a2.fill_between(lim, lim * 0.8, lim * 1.2, color="grey", alpha=0.15, label="±20 %")
        node_axis(a1, ins["hosts"])
        log_if_wide(a1, both["measured_steady_s"])
        a1.set_ylabel("steady step (s)")
        a1.set_title("Steady step: measured and model")
        a2.set_xscale("log")
        a2.set_yscale("log")
        a2.set_xlim(*lim)
        a2.set_ylim(*lim)
        a2.set_xlabel("measured steady step (s)")
        a2.set_ylabel("predicted steady step (s)")
        a2.set_title("Predicted vs measured: " + "; ".join(
            f"{st} median |err| {v:.0%} {sp}" for (st, sp), v in acc.items()), fontsize=10)
        h1, l1 = a1.get_legend_handles_labels()
        h2, l2 = a2.get_legend_handles_labels()
        more = [(h, lab) for h, lab in zip(h2, l2) if lab not in l1]     # the degraded cross once
        a2.legend(h1 + [h for h, _ in more], l1 + [lab for _, lab in more], loc="center left",
                  bbox_to_anchor=(1.01, 0.5), framealpha=0.9)
        path = save(fig, outdir / "cost_model.png")
    return path, pd.concat([f for f in (ins, held, deg) if len(f)], ignore_index=True)


PREDICT_NODES = "1,2,4,...,1024"


def prediction(exp, outdir: Path):
    """What the fitted model predicts far beyond the measured points: steady samples/s and speedup
    (steady samples/s over one node's) up to 1024 nodes, each a machine of the measured nodes' cores
    (else of 1 core), at the measured bandwidths; measured runs drawn with their steady figures."""
    from analysis.model import predict
    ev = costmodel.evaluate_cached(exp)
    if not ev:
        raise FigureSkipped("no successful run with a judged steady state to fit the model on")
    model, feats = ev["model"], ev["features"]
    strategies = [s for s in costmodel.STRATEGIES if model.fits[s].n_runs]
    multi = feats[feats["workers"] > 1]
    if multi.empty:
        raise FigureSkipped("no multi-node run: the model has no communication measured to predict from")
    bws = sorted({int(b) for b in feats["bw_bps"].dropna()})
    cores = predict.node_cores(feats, model)
    pred = predict.predict_grid(model, predict.parse_nodes(PREDICT_NODES), bws, strategies,
                                cpus=[(cores / model.cores,)], **predict.reference(feats))
    path = predict.figure(pred, outdir / "prediction.png",
                          f"PREDICTION, not measured: model fitted on {exp.name}, one machine of "
                          f"{plural(cores, 'core') if cores == int(cores) else f'{cores:g} cores'} per node; "
                          "black-edged points are measured here", predict.measured_points(ev))
    return path, pred


# 11 -----------------------------------------------------------------------------------------
WIRE_COLOUR = "#ff7f0e"


def time_split(exp, outdir: Path):
    """Where the steady step went, per point: compute (the workload's probe: one worker's local steps
    without the collective), the wire (the measured bytes a worker sent per step at the link's rate) and
    the rest (the collective's own CPU, latency and waiting), stacked; above in seconds, below as shares of
    the step. A point without a compute measurement is one hatched bar; points not judged steady are left
    out (time_split.csv says why)."""
    split = faithful.time_split(tables.counted_runs(exp), exp.steps, exp.usage)
    split = split[split["steady_step_s"].notna()]
    if split.empty:
        raise FigureSkipped("no successful run judged steady (time_split.csv: not_judged)")
    split = split.sort_values(["fixed", "model", "strategy", "bw_bps", "hosts"]).reset_index(drop=True)
    pal = palette_for(exp)
    x = np.arange(len(split))
    total = split["steady_step_s"].to_numpy(dtype=float)
    compute = np.minimum(split["compute_s"].to_numpy(dtype=float), total)   # the probe can read above a short step
    wire = np.clip(np.nan_to_num(split["wire_s"].to_numpy(dtype=float)), 0, total - np.nan_to_num(compute))
    rest = np.clip(total - compute - wire, 0, None)          # below 0 from noise: drawn as 0, kept in the table
    known = np.isfinite(compute)
    many_models = split["model"].nunique() > 1
    many_modes = split["fixed"].nunique() > 1
    names = [f"{plural(r.hosts, 'node')}\n{mbit(r.bw_bps)}\n{r.strategy}" + (f"\n{r.model}" if many_models else "")
             + ("" if r.communication == "none" else f"\n{r.communication}")
             + (f"\n{r.fixed}" if many_modes else "") for r in split.itertuples()]
    with plt.rc_context(RC):
        rows = 2 if known.any() else 1
        fig, axes = plt.subplots(rows, 1, squeeze=False, sharex=True,
                                 figsize=(max(7, 0.95 * len(split) + 3), 4.2 * rows))
        a1, a2 = axes[0][0], axes[-1][0]
        for ax, scale in ((a1, np.ones_like(total)), (a2, 100 / total))[:rows]:
            if known.any():
                bottom = np.zeros(known.sum())
                for part, values, colour, label in (
                        ("compute", compute, pal.colour("part", "compute"),
                         "compute: one worker's steps without the collective (measured)"),
                        ("wire", wire, WIRE_COLOUR, "the wire: measured bytes per worker step at the link's rate"),
                        ("rest", rest, pal.colour("part", "rest"),
                         "the rest: the collective's CPU, latency and waiting")):
                    height = (values * scale)[known]
                    ax.bar(x[known], height, bottom=bottom, color=colour, label=label)
                    bottom = bottom + height
            if (~known).any():
                ax.bar(x[~known], (total * scale)[~known], color=pal.colour("part", "unsplit"), hatch="//",
                       label="not split: compute not measured")
            ax.set_xticks(x, names)
        keys = list(zip(split["model"], split["fixed"], split["strategy"], split["hosts"], split["bw_bps"]))
        deg = tables.degraded_ok(exp)
        at = [(keys.index(k), t) for k, t in zip(zip(deg["model"], deg["fixed"], deg["strategy"], deg["hosts"],
                                                     deg["bw_bps"]), deg["steady_step_s"]) if k in keys]
        mark_degraded(a1, [a for a, _ in at], [t for _, t in at], exp.include_degraded)
        a1.set_ylabel("steady step (s), mean over runs")
        if known.any():
            a2.set_ylabel("share of the steady step (%)")
            a2.set_ylim(0, 100)
            a1.set_title("Steady step: compute, the wire and the rest")
            a2.set_title("Shares of the step")
        else:
            a1.set_title("Steady step (compute not measured, so not split)")
        legend(a1, loc="center left", bbox_to_anchor=(1.01, 0.5))
        fig.suptitle("Where the steady step went"
                     + ("" if many_modes else f" ({mode_title(split['fixed'].iloc[0])})"), fontsize=13)
        path = save(fig, outdir / "time_split.png")
    return path, split


# name -> (function, caption); the report shows them in this order.
FIGURES = {
    "training_time": (training_time, "Measured training time vs number of nodes, one line per bandwidth, one "
                      "panel per mode (reproduces thesis figures 15 and 18). The ratio to read between node counts "
                      "is the speedup (scaling.png, summary.csv), not a ratio of these times: they include the "
                      "warm-up, and under fixed steps N nodes trained N× the samples of one."),
    "scaling": (scaling, "The speedup, steady samples per second over one node's (bars: from the slowest to the "
                "fastest ratio of the repeats), and the scaling efficiency speedup/n, one row per mode "
                "(the answer to thesis figures 15 and 18)."),
    "time_split": (time_split, "Where the steady step went, per point: compute (one worker's local steps "
                   "without the collective, measured after training), the wire (the measured bytes a worker "
                   "sent per step at the link's rate) and the rest (the collective's own CPU, latency and "
                   "waiting), in seconds and as shares of the step."),
    "bandwidth_checks": (bandwidth_checks, "iperf3 measured vs configured bandwidth with the "
                         "TCP-over-HTB ceiling (reproduces thesis figure 17)."),
    "resources": (resources, "Mean CPU, peak memory and network throughput per node count "
                  "(reproduces thesis figure 19, without GPU)."),
    "strategies": (strategies, "All-reduce vs parameter server: steady samples per second, mean and range of "
                   "the repeats (companion plan: both strategies measured on the same network)."),
    "convergence": (convergence, "Loss against training time for PS and all-reduce on the same network, "
                    "every repeat a line, with the time each run took to reach the target loss (the "
                    "companion abstract: PS faster, all-reduce more stable)."),
    "topology": (topology, "The emulated network of one run: hosts with roles, switches, link "
                 "bandwidths (the thesis set-up of figure 16, as configured here)."),
    "wire_bytes": (wire_bytes, "Bytes on the wire per step per worker vs the gradient size and "
                   "the ring all-reduce theory (explains figures 15/18: traffic per node "
                   "grows with N)."),
    "cost_model": (cost_model, "Cost model vs measurement, on the steady step: fitted on every run (dashed) and, "
                   "hollow diamonds, the largest worker count predicted from a fit on the smaller "
                   "ones (explains the trend of thesis figures 15 and 18)."),
    "prediction": (prediction, "PREDICTION (not measured): steady samples/s and speedup up to 1024 "
                   "nodes from the cost model fitted on these runs, each node a machine of its own; "
                   "the measured points are drawn with black edges."),
    "bleu": (bleu, "BLEU-1 to BLEU-4 of the caption model on the held-out images after each "
             "epoch, one panel per node count (reproduces thesis figure 14)."),
    "timeline": (timeline, "Faults and changing links during training: time per step against step for each "
                 "run with faults or a link trace, every task a line, fault windows shaded and labelled, "
                 "traced links' rates in grey (the straggler experiment: the slowest node makes everyone "
                 "wait; a slower link, slower steps)."),
}
