"""What-if without running: the cost model fitted on a results folder, evaluated anywhere.

    run_experiment.py predict RESULTS_DIR [RESULTS_DIR...] --nodes 1,2,4,...,1024 --bw 10mbit,1gbit \\
        [--strategy allreduce,ps] [--cpu 1,0.5,1/0.25] [--servers 1] [--steps N] \\
        [--machine separate|shared] [--gradient-size 22mb] [--batch 32] [--rtt 1ms] [--out DIR]

Nodes are hosts, as in runs.csv: all-reduce runs one worker per node; ps runs a coordinator,
``--servers`` parameter servers and a worker on every other node (variables sharded evenly over
the servers). ``--cpu`` values are CPU per node as a fraction of the machine the model was
fitted on (P cores); ``A/B`` gives the nodes A, B, A, B, ... (heterogeneous compute: under
all-reduce the slowest worker sets the step, under ps the fast workers do more steps).
``--machine separate`` (default) gives every node a machine of its own; ``shared`` puts all of
them on one P-core machine, as this testbed does. Prints the table, writes predict.csv and
predict.png to --out (default RESULTS_DIR/predict/).

Columns: time_per_step_s (steady step + warm-up / steps, as runs.csv records it), samples_per_s,
speedup = samples/s over one node's (1 worker, same bandwidth and CPU), bound (what limits the
step) and better (the strategy with more samples per second at that point).
"""
from __future__ import annotations

import sys
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from analysis import costmodel, tables
from analysis.plotstyle import RC, Palette, mark_degraded, mbit, save, style

COLUMNS = ["nodes", "bw", "bw_bps", "cpu", "strategy", "workers", "servers", "steady_step_s",
           "warmup_s", "time_per_step_s", "samples_per_step", "samples_per_s", "speedup", "bound",
           "better"]


# -- arguments (the command line's parsing is testbed/cli/predict.py) ----------------------
def parse_nodes(text: str) -> list[int]:
    """'1,2,4,...,1024' (geometric), '2,4,...,16' / '1,2,...,8' (arithmetic), or a plain list."""
    items = [t.strip() for t in str(text).split(",") if t.strip()]
    if "..." not in items:
        out = [int(t) for t in items]
    else:
        i = items.index("...")
        head, tail = [int(t) for t in items[:i]], [int(t) for t in items[i + 1:]]
        if len(head) < 2 or len(tail) != 1:
            raise ValueError(f"{text!r}: write at least two values before '...' and one after")
        a, b, end = head[-2], head[-1], tail[0]
        geometric = len(head) >= 3 and head[-3] * b == a * a and b % a == 0 and b > a
        out = list(head)
        while True:
            nxt = out[-1] * (b // a) if geometric else out[-1] + (b - a)
            if nxt > end or nxt <= out[-1]:
                break
            out.append(nxt)
        if out[-1] != end:
            out.append(end)
    if not out or min(out) < 1:
        raise ValueError(f"{text!r}: node counts are whole numbers >= 1")
    return sorted(set(out))


def parse_cpus(text: str | None) -> list[tuple[float, ...]]:
    """'1,0.5,1/0.25' -> [(1.0,), (0.5,), (1.0, 0.25)]: fractions of the fitted machine, above 1
    for a bigger machine."""
    if not text:
        return [(1.0,)]
    out = []
    for item in str(text).split(","):
        mix = tuple(float(x) for x in item.strip().split("/") if x.strip())
        if not mix or min(mix) <= 0:
            raise ValueError(f"--cpu {item!r}: a positive fraction, or A/B/... for a mix")
        out.append(mix)
    return out


def cpu_label(mix) -> str:
    return "/".join(f"{x:g}" for x in mix)


# -- the grid --------------------------------------------------------------------------------
def predict_grid(model: costmodel.CostModel, nodes, bandwidths, strategies=("allreduce", "ps"),
                 cpus=((1.0,),), servers: int = 1, steps: int | None = None, shared: bool = False,
                 gradient_bytes: float | None = None, batch: float | None = None,
                 rtt_s: float | None = None, ref_s_bits: float | None = None,
                 ref_batch: float | None = None) -> pd.DataFrame:
    """Predicted time per step, samples/s, speedup and the better strategy per point.
    gradient_bytes / batch default to the fitted runs' (ref_s_bits, ref_batch)."""
    s_bits = gradient_bytes * 8 if gradient_bytes else (ref_s_bits or model.work / 32)
    b = batch or ref_batch or 32
    work = s_bits * b
    rows = []
    for mix in cpus:
        for bw in bandwidths:
            goodput = bw * model.rho
            base = one_node_step(model, s_bits, goodput, steps, list(mix[:1]), shared, rtt_s, work)
            for n in nodes:
                for strat in strategies:
                    workers = n if strat != "ps" else n - 1 - servers
                    if workers < 1:
                        continue
                    # ps: the worker hosts are the last ones; their CPU follows the host order
                    fr = [mix[(i + (0 if strat != "ps" else 1 + servers)) % len(mix)]
                          for i in range(workers)]
                    t = model.terms(strat, workers, s_bits, goodput, servers=servers, shards=servers,
                                    rtt_s=rtt_s, fractions=fr, shared=shared, work=work)
                    step = t["steady_s"] + t["warmup_s"] / (steps or model.steps)
                    per_step = b * workers if strat != "ps" else b
                    rows.append(dict(nodes=n, bw=mbit(bw), bw_bps=bw, cpu=cpu_label(mix), strategy=strat,
                                     workers=workers, servers=servers if strat == "ps" else 0,
                                     steady_step_s=t["steady_s"], warmup_s=t["warmup_s"],
                                     time_per_step_s=step, samples_per_step=per_step,
                                     samples_per_s=per_step / step, speedup=(per_step / step) / (b / base),
                                     bound=t["bound"]))
    df = pd.DataFrame(rows, columns=COLUMNS)
    if df.empty:
        return df
    best = df.loc[df.groupby(["nodes", "bw_bps", "cpu"])["samples_per_s"].idxmax()]
    key = best.set_index(["nodes", "bw_bps", "cpu"])["strategy"]
    df["better"] = [key.get((n, b_, c), "") for n, b_, c in zip(df["nodes"], df["bw_bps"], df["cpu"])]
    return df.sort_values(["cpu", "bw_bps", "nodes", "strategy"]).reset_index(drop=True)


def one_node_step(model, s_bits, goodput, steps, fractions, shared, rtt_s, work) -> float:
    """Time per step of one worker alone (the speedup's baseline): the all-reduce fit's compute
    and warm-up, or the ps fit's when the results have no all-reduce run."""
    if not model.fits["allreduce"].n_runs and model.fits["ps"].n_runs:
        p = model.fits["ps"].params
        m = costmodel.CostModel(fits={"allreduce": costmodel.StrategyFit(
            dict(costmodel.DEFAULTS["allreduce"], c=p["c"], w=p["w"]))},
            **{k: v for k, v in model.to_dict().items() if k != "fits"})
        return m.step("allreduce", 1, s_bits, goodput, steps=steps, fractions=fractions, shared=shared,
                      rtt_s=rtt_s, work=work)
    return model.step("allreduce", 1, s_bits, goodput, steps=steps, fractions=fractions, shared=shared,
                      rtt_s=rtt_s, work=work)


def reference(feats: pd.DataFrame) -> dict:
    """The fitted runs' gradient size and batch per worker (medians)."""
    if feats.empty:
        return {}
    return dict(ref_s_bits=float(feats["s_bits"].median()), ref_batch=float(feats["batch"].median()))


# -- the figure ------------------------------------------------------------------------------
def figure(pred: pd.DataFrame, outpath: Path, title: str, measured: pd.DataFrame | None = None,
           steps: int | None = None):
    """Time per step and speedup vs nodes (log-log), one line per bandwidth and strategy (and CPU
    mix), the measured runs as black-edged markers; titled PREDICTION."""
    pal = Palette(list(pred["bw_bps"]) + (list(measured["bw_bps"]) if measured is not None else []))
    cpus = list(dict.fromkeys(pred["cpu"]))
    widths = [1.2, 2.2, 0.9, 3.0]
    with plt.rc_context(RC):
        fig, axes = plt.subplots(1, 2, figsize=(13.5, 5.2))
        a1, a2 = axes
        for (cpu, strat, bw), rows in pred.groupby(["cpu", "strategy", "bw_bps"], sort=True):
            m, ls = style(strat)
            lw = widths[cpus.index(cpu) % len(widths)] + 0.6
            label = f"{mbit(bw)}, {strat}" + (f", cpu {cpu}" if len(cpus) > 1 else "")
            kw = dict(color=pal.colour("bw", bw), ls=ls, lw=lw, marker=m, ms=3.5, label=label)
            a1.plot(rows["nodes"], rows["time_per_step_s"], **kw)
            a2.plot(rows["nodes"], rows["speedup"], **kw)
        if measured is not None and len(measured):
            for (strat, bw), rows in measured.groupby(["strategy", "bw_bps"]):
                m, _ = style(strat)
                a1.scatter(rows["hosts"], rows["measured_step_s"], marker=m, s=70, zorder=4,
                           facecolors=pal.colour("bw", bw), edgecolors="black", linewidths=1.5,
                           label=f"MEASURED, {mbit(bw)}, {strat}")
        if measured is not None and "degraded" in measured:
            deg = measured[measured["degraded"] == True]   # noqa: E712 (NaN: not degraded)
            mark_degraded(a1, deg["hosts"], deg["measured_step_s"],
                          counted=(deg["split"] != costmodel.DEGRADED_SPLIT).all())
        a2.axhline(1, color="black", lw=1, ls=":", label="one node's samples/s")
        ticks = sorted(set(pred["nodes"]))
        for ax in axes:
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xticks(ticks if len(ticks) <= 12 else ticks[::max(1, len(ticks) // 11)])
            ax.set_xlabel("nodes")
        a1.set_ylabel(f"time per step (s), runs of {steps} steps" if steps else "time per step (s)")
        a2.set_ylabel("speedup: samples/s over one node's")
        a1.set_title("Time per step")
        a2.set_title("Speedup")
        h1, l1 = a1.get_legend_handles_labels()
        h2, l2 = a2.get_legend_handles_labels()
        a2.legend(h1 + h2[-1:], l1 + l2[-1:], loc="center left", bbox_to_anchor=(1.01, 0.5),
                  framealpha=0.9, fontsize=9)
        fig.suptitle(title, fontsize=13, color="#8b0000")
        path = save(fig, Path(outpath))
    return path


# -- the command ---------------------------------------------------------------------------------
def _fmt_table(df: pd.DataFrame) -> str:
    show = df.assign(time_per_step_s=df["time_per_step_s"].map(lambda v: f"{v:.4g}"),
                     steady_step_s=df["steady_step_s"].map(lambda v: f"{v:.4g}"),
                     samples_per_s=df["samples_per_s"].map(lambda v: f"{v:.4g}"),
                     speedup=df["speedup"].map(lambda v: f"{v:.3g}"))
    cols = ["nodes", "bw", "cpu", "strategy", "workers", "steady_step_s", "time_per_step_s",
            "samples_per_s", "speedup", "bound", "better"]
    return show[cols].to_string(index=False)


def run(results: list[Path], names: str, nodes: list[int], bws: list[int], strategies: list[str], cpus,
        servers: int = 1, steps: int | None = None, machine: str = "separate", gradient_bytes: float | None = None,
        batch: float | None = None, rtt_s: float | None = None, out: Path | None = None) -> int:
    """`run_experiment.py predict` once its arguments are parsed: fit, predict, write predict.csv and
    predict.png to `out` (default RESULTS/predict), print the model and the table; 2 when nothing fits."""
    feats = costmodel.features_of(results)
    if feats.empty:
        print(f"error: {names}: no successful run to fit the model on", file=sys.stderr)
        return 2
    model = costmodel.fit_features(feats, source=" + ".join(map(str, results)))
    pred = predict_grid(model, nodes, bws, strategies, cpus, servers=servers, steps=steps,
                        shared=machine == "shared", gradient_bytes=gradient_bytes, batch=batch,
                        rtt_s=rtt_s, **reference(feats))
    out = out or Path(results[0]) / "predict"
    out.mkdir(parents=True, exist_ok=True)
    pred.to_csv(out / "predict.csv", index=False)
    measured = costmodel.comparison(feats, model)
    where = ("one machine per node" if machine == "separate"
             else f"all nodes on one {model.cores:g}-core machine")
    png = figure(pred, out / "predict.png", f"PREDICTION, not measured: cost model fitted on "
                 f"{names} ({where}); black-edged points are measured", measured,
                 steps=steps or model.steps)
    print(model.describe())
    unfitted = [s for s in strategies if not model.fits[s].n_runs]
    if unfitted:
        print(f"note: the results have no {' or '.join(unfitted)} run: its parameters are the rough "
              "defaults (docs/cost-model.md)")
    print(f"prediction ({where}, {steps or model.steps} steps per run"
          + (f", gradient {gradient_bytes} bytes" if gradient_bytes else "") + "):")
    print(_fmt_table(pred))
    print(f"wrote {out / 'predict.csv'} and {png}")
    return 0


