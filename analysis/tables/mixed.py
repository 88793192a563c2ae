"""Machines of different speeds (docs/mixed-machines.md): per worker and per steady step, its compute, its wait
for the others and the wire; what the slowest node costs (the time lost waiting, and the samples/s the same
nodes would reach if all were as fast as the fastest); and what each balancing setting (workload.balance,
workloads/balance/) bought on each link against no balancing, by analysis/tables/yardstick.py's yardstick.

A worker's compute per step is runs.csv's worker_compute_s (its compute probe at its own batch, or its replayed
step); the wire is the theory's bytes a worker sends in a steady step, with their headers, at the link's rate
(analysis/model/communication.py); the wait is the rest of the steady step. DDP overlaps part of the wire with
the backward pass, so the wait is a lower bound there."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from analysis.model import communication
from analysis.tables import payoff, tables, yardstick

PLAIN = "none"
WORKER_COLUMNS = ["run_id", "bw", "balance", "host", "cores", "batch", "step_s", "compute_s", "wire_s", "wait_s"]
COST_COLUMNS = ["run_id", "bw", "balance", "workers", "steady_samples_per_s", "step_s", "slowest", "fastest",
                "waiting_share", "if_all_fastest_samples_per_s"]


def _pairs(text) -> dict[str, float]:
    """'h1=1;h2=0.5' -> {'h1': 1.0, 'h2': 0.5} (empty for blanks)."""
    out = {}
    for item in str(text if isinstance(text, str) else "").split(";"):
        name, sep, value = item.partition("=")
        try:
            if sep:
                out[name.strip()] = float(value)
        except ValueError:
            continue
    return out


def balance_labels(runs: pd.DataFrame) -> pd.Series:
    """Each run's workload.balance ('none' where results predate it)."""
    col = runs["balance"] if "balance" in runs else pd.Series(np.nan, index=runs.index)
    return col.astype(object).where(col.notna() & (col.astype(str).str.strip() != ""), PLAIN).astype(str)


def mixed_runs(exp: tables.Experiment) -> pd.DataFrame:
    """The counted ok all-reduce runs of nodes of different speeds (node_cores differ) or with a balancing
    setting, each with its balance label."""
    runs = tables.ok_runs(tables.counted_runs(exp))
    if runs.empty or "worker_compute_s" not in runs:
        return runs.iloc[0:0]
    runs = runs.assign(balance=balance_labels(runs))
    speeds = runs.get("node_cores", pd.Series("", index=runs.index)).map(lambda t: set(_pairs(t).values()))
    mixed = (speeds.map(len) > 1) | (runs["balance"] != PLAIN)
    return runs[mixed & (runs["strategy"] == "allreduce") & runs["worker_compute_s"].notna()]


def per_worker(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per run and worker: its cores, batch, the steady step, and that step split into compute, wire
    and waiting for the others (seconds)."""
    rows = []
    for _, r in runs.iterrows():
        compute, cores = _pairs(r["worker_compute_s"]), _pairs(r.get("node_cores"))
        batches = [int(b) for b in str(r.get("batches") or "").split("/") if b.strip().isdigit()]
        step = float(r.get("steady_step_s", math.nan))
        wire = _wire_s(r)
        for i, (host, seconds) in enumerate(compute.items()):
            batch = batches[i] if i < len(batches) else r.get("batch_per_worker", math.nan)
            rows.append({"run_id": r["run_id"], "bw": r.get("bw"), "balance": r["balance"], "host": host,
                         "cores": cores.get(host, math.nan), "batch": batch, "step_s": step, "compute_s": seconds,
                         "wire_s": wire, "wait_s": max(0.0, step - seconds - wire) if math.isfinite(step) else math.nan})
    return pd.DataFrame(rows, columns=WORKER_COLUMNS)


def _wire_s(r) -> float:
    theory, bw = r.get("theory_steady_bytes_per_worker_step", math.nan), r.get("bw_bps", math.nan)
    try:
        theory, bw = float(theory), float(bw)
    except (TypeError, ValueError):
        return 0.0
    return communication.on_the_wire(theory) * 8 / bw if math.isfinite(theory) and bw > 0 else 0.0


def slowest_cost(runs: pd.DataFrame, workers: pd.DataFrame) -> pd.DataFrame:
    """Per run: its slowest and fastest worker (compute per sample), the share of the workers' steady step
    spent waiting, and the samples/s the same nodes would reach if every one computed as fast as the fastest
    (each at batch_per_worker, the wire as measured)."""
    rows = []
    for _, r in runs.iterrows():
        w = workers[workers["run_id"] == r["run_id"]]
        if w.empty:
            continue
        per_sample = w["compute_s"] / pd.to_numeric(w["batch"], errors="coerce")
        bpw, n = float(r["global_batch"]) / max(1, len(w)), len(w)
        fast_step = float(per_sample.min()) * bpw + float(w["wire_s"].iloc[0])
        rows.append({"run_id": r["run_id"], "bw": r.get("bw"), "balance": r["balance"], "workers": n,
                     "steady_samples_per_s": r.get("steady_samples_per_s"), "step_s": r.get("steady_step_s"),
                     "slowest": w["host"].iloc[int(np.argmax(per_sample.to_numpy()))],
                     "fastest": w["host"].iloc[int(np.argmin(per_sample.to_numpy()))],
                     "waiting_share": float((w["wait_s"] / w["step_s"]).mean()),
                     "if_all_fastest_samples_per_s": float(r["global_batch"]) / fast_step if fast_step > 0 else math.nan})
    return pd.DataFrame(rows, columns=COST_COLUMNS)


def bought(exp: tables.Experiment, runs: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """What each balancing setting bought on each link against balance none: by time to the target loss where
    the yardstick says so for the link's runs (every run learns on the same data), else by steady samples/s;
    a table (bw, balance, runs, yardstick, value, gain) and a sentence per setting and link."""
    learned = yardstick.learning(exp)
    times = payoff.per_run(exp).set_index("run_id")["time_to_target_s"] if not learned.empty else pd.Series(dtype=float)
    rows, words = [], []
    for bw, link in runs.groupby("bw", sort=False):
        stick = yardstick.choose(link, learned)
        target = stick.kind == yardstick.TARGET
        value = link["run_id"].map(times) if target else pd.to_numeric(link["steady_samples_per_s"], errors="coerce")
        means = value.groupby(link["balance"]).mean()
        base = means.get(PLAIN, math.nan)
        for setting, mean in means.items():
            gain = (base / mean if target else mean / base) if math.isfinite(base) and mean > 0 else math.nan
            rows.append({"bw": bw, "balance": setting, "runs": int((link["balance"] == setting).sum()),
                         "yardstick": stick.kind, "value": mean, "gain_vs_none": gain})
            if setting != PLAIN and math.isfinite(gain):
                what = "time to the target loss" if target else "steady samples/s"
                words.append(f"At {bw}, balance {setting} made training {gain:.2f}x as fast as no balancing "
                             f"({what}: {_fmt(mean, target)} against {_fmt(base, target)}; {stick.why}).")
    return pd.DataFrame(rows, columns=["bw", "balance", "runs", "yardstick", "value", "gain_vs_none"]), words


def _fmt(value: float, seconds: bool) -> str:
    return f"{value:.1f} s" if seconds else f"{value:,.0f} samples/s"


def section(exp: tables.Experiment) -> dict[str, pd.DataFrame]:
    """mixed_workers, mixed_slowest and mixed_balance, when a run mixed node speeds or balanced."""
    runs = mixed_runs(exp)
    if runs.empty:
        return {}
    workers = per_worker(runs)
    table, _ = bought(exp, runs)
    return {"mixed_balance": table, "mixed_slowest": slowest_cost(runs, workers), "mixed_workers": workers}
