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

Columns: the steady step and the steady samples/s (samples per step: the global batch, batch x
workers, under all-reduce and ddp; one worker's batch under ps), speedup = steady samples/s over
one node's (1 worker, same engine, bandwidth, CPU, batch per worker), efficiency = speedup /
nodes, the warm-up, and a job's projected time: warm-up + job samples / steady samples/s (the job:
``--steps`` steps of one node, steps x batch samples, else the fitted runs' samples trained);
bound (what limits the steady step) and better (the strategy with more steady samples/s).

``break_even_sentences(exp)``: from the model fitted on an experiment, the node count from which N
machines beat one machine's steady samples/s at each measured bandwidth, and the bandwidth from
which the measured node counts do; each sentence a PREDICTION naming the range it was fitted on.
"""
from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

import workloads.communication as methods
from analysis import outputs
from analysis.model import communication, costmodel
from analysis.tables import tables
from analysis.figures.plotstyle import RC, Palette, mark_degraded, save, style
from analysis.text import mbit, plural

COLUMNS = ["nodes", "bw", "bw_bps", "cpu", "strategy", "communication", "balance", "workers", "servers", "samples_per_step",
           "steady_step_s", "steady_samples_per_s", "speedup", "efficiency", "warmup_s", "job_samples",
           "job_time_s", "bound", "better"]


# -- arguments (the command line's parsing is testbed/cli/results/predict.py) ----------------------
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
                 ref_batch: float | None = None, samples: float | None = None,
                 setting: "Setting | None" = None, balance: str = "none") -> pd.DataFrame:
    """Predicted steady step and samples/s, speedup, efficiency, warm-up, a job's time and the
    better strategy per point. gradient_bytes / batch default to the fitted runs' (ref_s_bits,
    ref_batch); the job is `samples`, else `steps` steps of one node (steps x batch samples), else
    the fitted runs' samples trained (model.samples); setting: a workload.communication setting of the
    all-reduce strategies (parse_setting), plain all-reduce by default; balance: workload.balance of the
    all-reduce strategies (none: a mixed cluster's step is set by its slowest node; static or dynamic: by the
    mean speed, each worker's batch proportional to its speed)."""
    setting = setting or Setting()
    balanced = balance != "none"
    s_bits = gradient_bytes * 8 if gradient_bytes else (ref_s_bits or model.work / 32)
    b = batch or ref_batch or 32
    work = s_bits * b
    job = job_samples(model, b, steps, samples)
    rows = []
    for mix in cpus:
        for bw in bandwidths:
            goodput = bw * model.rho
            for strat in strategies:
                base = one_node_rate(model, strat, s_bits, goodput, b, list(mix[:1]), shared, rtt_s, work)
                for n in nodes:
                    workers = n if strat != "ps" else n - 1 - servers
                    if workers < 1:
                        continue
                    # ps: the worker hosts are the last ones; their CPU follows the host order
                    fr = [mix[(i + (0 if strat != "ps" else 1 + servers)) % len(mix)]
                          for i in range(workers)]
                    comm = {} if strat == "ps" else dict(bytes_factor=setting.bytes_factor,
                                                         sync_every=setting.sync_every, balanced=balanced)
                    t = model.rates(strat, workers, s_bits, goodput, b, samples=job, servers=servers,
                                    shards=servers, rtt_s=rtt_s, fractions=fr, shared=shared, work=work, **comm)
                    speedup = t["steady_samples_per_s"] / base
                    rows.append(dict(nodes=n, bw=mbit(bw), bw_bps=bw, cpu=cpu_label(mix), strategy=strat,
                                     communication="none" if strat == "ps" else setting.name,
                                     balance="none" if strat == "ps" else balance,
                                     workers=workers, servers=servers if strat == "ps" else 0,
                                     samples_per_step=t["samples_per_step"], steady_step_s=t["steady_s"],
                                     steady_samples_per_s=t["steady_samples_per_s"], speedup=speedup,
                                     efficiency=speedup / n, warmup_s=t["warmup_s"], job_samples=job,
                                     job_time_s=t["job_s"], bound=t["bound"]))
    df = pd.DataFrame(rows, columns=COLUMNS)
    if df.empty:
        return df
    best = df.loc[df.groupby(["nodes", "bw_bps", "cpu"])["steady_samples_per_s"].idxmax()]
    key = best.set_index(["nodes", "bw_bps", "cpu"])["strategy"]
    df["better"] = [key.get((n, b_, c), "") for n, b_, c in zip(df["nodes"], df["bw_bps"], df["cpu"])]
    return df.sort_values(["cpu", "bw_bps", "nodes", "strategy"]).reset_index(drop=True)


@dataclass(frozen=True)
class Setting:
    """A workload.communication setting as the cost model takes it: its name, bytes factor and sync every."""
    name: str = "none"
    bytes_factor: float = 1.0
    sync_every: int = 1


def parse_setting(text: str | None, feats: pd.DataFrame | None = None, specs: dict | None = None) -> Setting:
    """--communication: a method's form (workloads/communication/: none, sync:H, ...), its bytes factor
    and sync every from the method's theory (a method that reads the model's shapes reads the fitted runs'
    built-in model, its parameters from their spec.yaml), or a bytes factor as a number (0.1: a tenth of the
    bytes)."""
    text = str(text or "none").strip().lower()
    found = methods.predict_setting(text)
    if found is not None:
        method, c = found
        models = getattr(method, "MODELS", None)
        if models is None:
            plan = communication.method_plan(method, c, 1.0, 1.0, lambda: [])
        else:
            model, params = _fitted_model(feats, specs)
            if model not in models:
                raise ValueError(f"--communication {method.PREDICT} needs results of the built-in "
                                 f"{' or '.join(models)} (their shapes); give the bytes factor as a number instead, "
                                 "e.g. --communication 0.05")
            plan = communication.plan(model, params, "allreduce", 2, c)
        factor, every = communication.factor(plan)
        return Setting(method.label(c) if hasattr(method, "label") else method.NAME, factor, every)
    try:
        factor = float(text)
    except ValueError:
        factor = math.nan
    if not 0 < factor <= 1:
        raise ValueError(f"--communication {text!r}: {', '.join(methods.predict_forms())} or a bytes factor in (0, 1]")
    return Setting(f"bytes x {factor:g}", factor)


def _fitted_model(feats, specs) -> tuple[str, dict]:
    """The built-in model (name, model_params) of the fitted runs: the first run whose spec.yaml is known."""
    for run_id, model in zip(feats["run_id"], feats["model"]) if feats is not None else ():
        spec = (specs or {}).get(str(run_id))
        if spec is not None:
            return str(model), (spec.get("workload") or {}).get("model_params") or {}
    return "", {}


def job_samples(model, batch, steps=None, samples=None) -> float:
    """The job a projection is for: `samples`, else `steps` steps of one node (steps x batch), else
    the fitted runs' samples trained; NaN when none is known."""
    if samples:
        return float(samples)
    if steps:
        return float(steps) * float(batch)
    return float(model.samples) if model.samples else math.nan


def baseline_model(model: costmodel.CostModel, strategy: str) -> tuple[costmodel.CostModel, str]:
    """The model and family one node alone is predicted with (the speedup's baseline): ddp's fit
    for ddp, else TensorFlow's all-reduce fit (one worker: compute only), or, when the results have
    no all-reduce run but ps runs, the all-reduce formulas with the ps fit's compute and warm-up."""
    family = "ddp" if strategy == "ddp" else "allreduce"
    if family == "allreduce" and not model.fits["allreduce"].n_runs and model.fits["ps"].n_runs:
        p = model.fits["ps"].params
        fits = dict(model.fits, allreduce=costmodel.StrategyFit(
            dict(costmodel.DEFAULTS["allreduce"], c=p["c"], w=p["w"])))
        model = costmodel.CostModel(fits=fits, **{k: v for k, v in model.to_dict().items() if k != "fits"})
    return model, family


def one_node_rate(model, strategy, s_bits, goodput, batch, fractions, shared, rtt_s, work) -> float:
    """Steady samples/s of one worker alone on one node (the speedup's baseline for `strategy`)."""
    m, family = baseline_model(model, strategy)
    return m.rates(family, 1, s_bits, goodput, batch, fractions=fractions, shared=shared, rtt_s=rtt_s,
                   work=work)["steady_samples_per_s"]


def reference(feats: pd.DataFrame) -> dict:
    """The fitted runs' gradient size and batch per worker (medians)."""
    if feats.empty:
        return {}
    return dict(ref_s_bits=float(feats["s_bits"].median()), ref_batch=float(feats["batch"].median()))


def node_cores(feats: pd.DataFrame, model: costmodel.CostModel) -> float:
    """Cores of one node for the break-even and the report's prediction: the measured nodes' cores
    (the median under compute budgets), else a machine of 1 core."""
    budgets = feats[(feats["shared"].astype(object) == False) & (feats["fractions"] != "")]   # noqa: E712
    cores = [f * model.cores for fr in budgets["fractions"] for f in json.loads(fr) if np.isfinite(f)]
    return float(np.median(cores)) if cores else 1.0


def measured_speedups(rows: pd.DataFrame, base: pd.DataFrame | None = None,
                      rate: str = "steady_samples_per_s") -> pd.Series:
    """Per row: its steady samples/s (column `rate`) over the mean of the one-worker runs' in `base`
    (default: rows; strategy single or all-reduce, ddp's for ddp) of the same model, batch per
    worker, bandwidth and fixed mode; NaN where `base` has no such run."""
    base = rows if base is None else base
    key = ["model", "batch", "bw_bps", "fixed"]

    def keyed(df):
        k = df.reindex(columns=key).astype(object)
        return k.where(k.notna(), "")
    one = base[(base["workers"] == 1) & (base["family"] != "ps")]
    means = pd.concat([one[["family"]], keyed(one)], axis=1).assign(r=one[rate]) \
        .groupby(["family"] + key)["r"].mean()
    k = keyed(rows)
    idx = pd.MultiIndex.from_arrays([rows["family"].where(rows["family"] == "ddp", "allreduce")]
                                    + [k[c] for c in key])
    return pd.Series(rows[rate].to_numpy(dtype=float) / means.reindex(idx).to_numpy(dtype=float),
                     index=rows.index)


# -- break-even --------------------------------------------------------------------------------
MAX_NODES = 1024
BW_RANGE = (1e6, 1e11)          # the bandwidth search: 1 Mbit/s to 100 Gbit/s (configured)
LABEL = {"allreduce": "all-reduce", "ps": "ps", "ddp": "PyTorch DDP"}


def break_even_sentences(exp) -> list[str]:
    """From the model fitted on `exp` (costmodel.evaluate_cached), per strategy with a multi-worker
    run: at each measured bandwidth, the node counts (2..1024 machines of the measured nodes'
    cores, else of 1 core) whose steady samples/s beat one machine's; per measured node count above
    1, the link bandwidth (1 Mbit/s..100 Gbit/s) from which they do. Each sentence says it is a
    PREDICTION and the range the model was fitted on; [] without a fit."""
    ev = costmodel.evaluate_cached(exp)
    return break_even(ev["model"], ev["features"]) if ev else []


def break_even(model: costmodel.CostModel, feats: pd.DataFrame) -> list[str]:
    """break_even_sentences for a model and the feature rows it was fitted on."""
    cores = node_cores(feats, model)
    out = []
    for fam in costmodel.STRATEGIES:
        rows = feats[feats["family"] == fam]
        rows = rows[rows["communication"] == "none"] if "communication" in rows else rows   # plain all-reduce
        if rows.empty or not (rows["workers"] > 1).any():
            continue
        job = _BreakEven(model, rows, cores / model.cores)
        machines = f"machines of {cores:g} core{'s' if cores != 1 else ''}"
        where = (f"PREDICTION of the cost model, fitted on {plural(len(rows), LABEL[fam] + ' run')} of "
                 f"{_span(rows['hosts'], 'node')} at {_span(rows['bw_bps'], None)}")
        for bw in sorted(rows["bw_bps"].dropna().unique()):
            goodput = float(rows.loc[rows["bw_bps"] == bw, "bw_meas_bps"].median())
            out.append(f"{where}: at {mbit(bw)} ({mbit(_round(goodput))} measured), "
                       + job.nodes_text(goodput, machines) + ".")
        layouts = rows[rows["hosts"] > 1][["hosts", "workers", "servers", "shards"]].drop_duplicates()
        for lay in layouts.sort_values("hosts").itertuples(index=False):
            out.append(f"{where}: " + job.bandwidth_text(lay, machines) + ".")
    return out


def break_even_summary(exp) -> str:
    """The cost model's break-even in one labelled sentence ('' without a fit): per strategy with a multi-worker
    run (plain all-reduce), at each measured bandwidth the fewest machines (2..MAX_NODES, of the measured nodes'
    cores) whose predicted steady samples/s beat one machine's, or none."""
    ev = costmodel.evaluate_cached(exp)
    return break_even_line(ev["model"], ev["features"]) if ev else ""


def break_even_line(model: costmodel.CostModel, feats: pd.DataFrame) -> str:
    """break_even_summary for a model and the feature rows it was fitted on."""
    cores = node_cores(feats, model)
    parts = []
    families = [f for f in costmodel.STRATEGIES if ((feats["family"] == f) & (feats["workers"] > 1)).any()]
    for fam in families:
        rows = feats[feats["family"] == fam]
        rows = rows[rows["communication"] == "none"] if "communication" in rows else rows
        if rows.empty or not (rows["workers"] > 1).any():
            continue
        job = _BreakEven(model, rows, cores / model.cores)
        said, never = [], []
        for bw in sorted(rows["bw_bps"].dropna().unique()):
            ns, speedup = job.nodes_speedups(float(rows.loc[rows["bw_bps"] == bw, "bw_meas_bps"].median()))
            beat = ns[speedup > 1]
            (said.append(f"{beat[0]}+ at {mbit(bw)}") if len(beat) else never.append(mbit(bw)))
        if never:
            said.insert(0, f"none up to {MAX_NODES} at {' and '.join(never)}")
        parts.append((f"under {LABEL[fam]} with " if len(families) > 1 else "") + ", ".join(said))
    if not parts:
        return ""
    size = "one-core" if cores == 1 else f"{cores:g}-core"
    return (f"Break-even (a PREDICTION of the cost model, by steady samples/s): {size} machines beat one "
            + ("with " if len(parts) == 1 else "") + "; ".join(parts) + ".")


class _BreakEven:
    """One strategy's predictions for the break-even: its runs' gradient, batch, servers; nodes of
    `fraction` of the fitted machine, each a machine of its own."""

    def __init__(self, model, rows: pd.DataFrame, fraction: float):
        self.model, self.family, self.fraction = model, str(rows["family"].iloc[0]), fraction
        self.s_bits, self.batch = float(rows["s_bits"].median()), float(rows["batch"].median())
        self.servers = max(int(rows["servers"].median()), 1) if self.family == "ps" else 0
        self.shards = max(int(rows["shards"].median()), 1) if self.family == "ps" else 1

    def rate(self, workers: int, goodput: float, servers=None, shards=None) -> float:
        return self.model.rates(self.family, workers, self.s_bits, goodput, self.batch,
                                servers=servers or self.servers, shards=shards or self.shards,
                                fractions=[self.fraction] * workers, shared=False,
                                work=self.s_bits * self.batch)["steady_samples_per_s"]

    def one(self, goodput: float) -> float:
        return one_node_rate(self.model, self.family, self.s_bits, goodput, self.batch, [self.fraction],
                             False, None, self.s_bits * self.batch)

    def nodes_speedups(self, goodput: float) -> tuple[np.ndarray, np.ndarray]:
        """(node counts from the fewest the strategy runs on to MAX_NODES, their predicted speedups)."""
        first = 2 + self.servers if self.family == "ps" else 2
        ns = np.arange(first, MAX_NODES + 1)
        workers = ns - 1 - self.servers if self.family == "ps" else ns
        return ns, np.array([self.rate(int(w), goodput) for w in workers]) / self.one(goodput)

    def nodes_text(self, goodput: float, machines: str) -> str:
        ns, speedup = self.nodes_speedups(goodput)
        first = int(ns[0])
        beat = ns[speedup > 1]
        top = int(np.argmax(speedup))
        if not len(beat):
            return (f"no number of {machines} from {first} to {MAX_NODES} beats one machine's steady samples/s "
                    f"(at best {speedup[top]:.2g}x, with {ns[top]})")
        last = (f", up to {beat[-1]}" if beat[-1] < MAX_NODES else "")
        gaps = "" if beat[-1] - beat[0] + 1 == len(beat) else " (not at every count between)"
        return (f"{beat[0]} or more {machines}{last} beat one machine's steady samples/s{gaps} "
                f"({speedup[ns == beat[0]][0]:.2g}x with {beat[0]}; at most {speedup[top]:.2g}x, with {ns[top]})")

    def bandwidth_text(self, lay, machines: str) -> str:
        workers, servers = int(lay.workers), max(int(lay.servers), 1)
        shards = max(int(lay.shards or 1), 1)
        who = (f"{lay.hosts} {machines}" + (f" ({LABEL[self.family]}: {plural(workers, 'worker')}, "
                                            f"{plural(servers, 'server')})" if self.family == "ps" else ""))

        def speedup(bw):
            goodput = bw * self.model.rho
            return self.rate(workers, goodput, servers, shards) / self.one(goodput)

        grid = np.logspace(math.log10(BW_RANGE[0]), math.log10(BW_RANGE[1]), 51)
        values = [speedup(b) for b in grid]
        above = [i for i, v in enumerate(values) if v > 1]
        span = f"{mbit(BW_RANGE[0])} to {mbit(BW_RANGE[1])}"
        if not above:
            return (f"{who} do not beat one machine's steady samples/s at any link bandwidth from {span} "
                    f"(at {mbit(BW_RANGE[1])}: {values[-1]:.2g}x)")
        i = above[0]
        if i == 0:
            return (f"{who} beat one machine's steady samples/s at every link bandwidth from {span} "
                    f"({values[0]:.2g}x at {mbit(BW_RANGE[0])})")
        lo, hi = math.log(grid[i - 1]), math.log(grid[i])
        for _ in range(30):                 # the speedup grows with the bandwidth: bisect the crossing
            mid = (lo + hi) / 2
            lo, hi = (lo, mid) if speedup(math.exp(mid)) > 1 else (mid, hi)
        return (f"{who} beat one machine's steady samples/s from about {mbit(_round(math.exp(hi)))} of link "
                f"bandwidth (searched {span}; {values[-1]:.2g}x at {mbit(BW_RANGE[1])})")


def _round(x: float) -> float:
    """Two significant digits."""
    return float(f"{x:.2g}")


def _span(values, noun: str | None) -> str:
    v = sorted(set(pd.Series(values).dropna()))
    text = (lambda x: f"{x:g}") if noun else (lambda x: mbit(x))
    body = text(v[0]) if len(v) == 1 else f"{text(v[0])}-{text(v[-1])}"
    if noun:
        return f"{body} {noun}{'s' if len(v) > 1 or v[0] != 1 else ''}"
    return body


# -- the figure ------------------------------------------------------------------------------
def figure(pred: pd.DataFrame, outpath: Path, title: str, measured: pd.DataFrame | None = None):
    """Steady samples/s and speedup vs nodes (log-log), one line per bandwidth and strategy (and CPU
    mix); measured runs (``measured_samples_per_s``, ``measured_speedup``) as black-edged markers;
    titled PREDICTION."""
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
            a1.plot(rows["nodes"], rows["steady_samples_per_s"], **kw)
            a2.plot(rows["nodes"], rows["speedup"], **kw)
        if measured is not None and len(measured):
            for (strat, bw), rows in measured.groupby(["family", "bw_bps"]):
                m, _ = style(strat)
                kw = dict(marker=m, s=70, zorder=4, facecolors=pal.colour("bw", bw), edgecolors="black",
                          linewidths=1.5)
                a1.scatter(rows["hosts"], rows["measured_samples_per_s"], label=f"MEASURED, {mbit(bw)}, {strat}",
                           **kw)
                a2.scatter(rows["hosts"], rows["measured_speedup"], **kw)
            if "degraded" in measured:
                deg = measured[measured["degraded"] == True]   # noqa: E712 (NaN: not degraded)
                counted = (deg["split"] != costmodel.DEGRADED_SPLIT).all()
                mark_degraded(a1, deg["hosts"], deg["measured_samples_per_s"], counted=counted)
                mark_degraded(a2, deg["hosts"], deg["measured_speedup"], counted=counted)
        a2.axhline(1, color="black", lw=1, ls=":", label="one node's steady samples/s")
        ticks = sorted(set(pred["nodes"]))
        for ax in axes:
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xticks(ticks if len(ticks) <= 12 else ticks[::max(1, len(ticks) // 11)])
            ax.set_xlabel("nodes")
        a1.set_ylabel("steady samples/s")
        a2.set_ylabel("speedup: steady samples/s over one node's")
        a1.set_title("Steady samples per second")
        a2.set_title("Speedup")
        h1, l1 = a1.get_legend_handles_labels()
        h2, l2 = a2.get_legend_handles_labels()
        a2.legend(h1 + h2[-1:], l1 + l2[-1:], loc="center left", bbox_to_anchor=(1.01, 0.5),
                  framealpha=0.9, fontsize=9)
        fig.suptitle(title, fontsize=13, color="#8b0000")
        path = save(fig, Path(outpath))
    return path


def measured_points(ev: dict) -> pd.DataFrame:
    """The runs an evaluation fitted (in_sample) and its degraded ones, with their measured steady
    speedup over the fitted one-worker runs' (``measured_speedups``)."""
    frames = [f for f in (ev.get("in_sample"), ev.get("degraded")) if f is not None and len(f)]
    if not frames:
        return pd.DataFrame(columns=costmodel.COMPARISON + ["measured_speedup"])
    cmp = pd.concat(frames, ignore_index=True)
    fitted = cmp[cmp["split"] != costmodel.DEGRADED_SPLIT]
    return cmp.assign(measured_speedup=measured_speedups(cmp, fitted, "measured_samples_per_s"))


# -- the command ---------------------------------------------------------------------------------
def _fmt_table(df: pd.DataFrame) -> str:
    fmt = {"steady_step_s": "{:.4g}", "steady_samples_per_s": "{:.4g}", "speedup": "{:.3g}",
           "efficiency": "{:.2f}", "warmup_s": "{:.3g}", "job_time_s": "{:.4g}"}
    show = df.assign(**{c: df[c].map(lambda v, f=f: f.format(v)) for c, f in fmt.items()})
    cols = ["nodes", "bw", "cpu", "strategy", "workers", "steady_step_s", "steady_samples_per_s", "speedup",
            "efficiency", "warmup_s", "job_time_s", "bound", "better"]
    return show[cols].to_string(index=False)


def run(results: list[Path], names: str, nodes: list[int], bws: list[int], strategies: list[str], cpus,
        servers: int = 1, steps: int | None = None, machine: str = "separate", gradient_bytes: float | None = None,
        batch: float | None = None, rtt_s: float | None = None, out: Path | None = None,
        samples: float | None = None, communication_setting: str | None = None, balance: str = "none") -> int:
    """`run_experiment.py predict` once its arguments are parsed: fit, predict, write predict.csv and
    predict.png to `out` (default RESULTS/predict), print the model and the table; 2 when nothing fits.
    The job projected: `samples`, else `steps` steps of one node, else the fitted runs' samples;
    communication_setting: --communication (parse_setting)."""
    feats = costmodel.features_of(results)
    if feats.empty:
        print(f"error: {names}: no successful run whose steady state was judged to fit the model on",
              file=sys.stderr)
        return 2
    try:
        specs = {k: v for r in results for k, v in tables.run_specs(r, feats["run_id"]).items()}
        setting = parse_setting(communication_setting, feats, specs)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    model = costmodel.fit_features(feats, source=" + ".join(map(str, results)))
    ref = reference(feats)
    pred = predict_grid(model, nodes, bws, strategies, cpus, servers=servers, steps=steps,
                        shared=machine == "shared", gradient_bytes=gradient_bytes, batch=batch,
                        rtt_s=rtt_s, samples=samples, setting=setting, balance=balance, **ref)
    out = out or Path(results[0]) / "predict"
    out.mkdir(parents=True, exist_ok=True)
    outputs.write_text(out / "predict.csv", tables.csv_text(pred))
    measured = measured_points(dict(in_sample=costmodel.comparison(feats, model), features=feats))
    where = ("one machine per node" if machine == "separate"
             else f"all nodes on one {model.cores:g}-core machine")
    png = figure(pred, out / "predict.png", f"PREDICTION, not measured: cost model fitted on "
                 f"{names} ({where}); black-edged points are measured", measured)
    print(model.describe())
    unfitted = [s for s in strategies if not model.fits[s].n_runs]
    if unfitted:
        print(f"note: the results have no {' or '.join(unfitted)} run: its parameters are the rough "
              "defaults (docs/cost-model.md)")
    job = pred["job_samples"].iloc[0] if len(pred) else math.nan
    print(f"prediction ({where}" + (f", gradient {gradient_bytes} bytes" if gradient_bytes else "")
          + (f"; job_time_s: warm-up + {job:.6g} samples / steady samples/s" if np.isfinite(job) else "")
          + "):")
    print(_fmt_table(pred))
    print(f"wrote {out / 'predict.csv'} and {png}")
    return 0
