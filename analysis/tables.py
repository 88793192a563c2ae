"""Read an experiment folder's result tables and derive the views the report shows.

Only pandas; no root, no Mininet, no TensorFlow. Column names follow docs/developer/contracts.md
("Result tables"). ``runs.csv`` is required; ``checks.csv``, ``steps.csv``, ``usage.csv`` and ``evals.csv``
are optional and come back as empty frames with the right columns when absent (only caption
runs with evaluation on write ``evals.csv``, so its absence is not reported as missing).

Conventions used by the derived tables:

* "nodes" is the ``hosts`` column (every host of the run, ps/chief included).
* ``net_bytes_total`` is read as the bytes *sent* by all hosts of the run during training
  (sum of tx). Bytes on the wire per step per worker = net_bytes_total / steps / workers.
* ``usage.csv`` byte counters are cumulative per node (as testbed/run/monitor.py samples them):
  a node sent max - min of ``tx_bytes``; its throughput is (sent + received) * 8 / time span,
  the same as ``net_throughput_mean_bps`` in runs.csv (monitor.summarize).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

RUNS_COLUMNS = [
    "experiment", "run_id", "repeat", "hosts", "bw_bps", "bw", "strategy", "engine", "model",
    "params", "gradient_bytes", "global_batch", "workers", "servers", "asynchronous",
    "status", "reason", "started_at", "wall_time_s", "training_time_s", "time_per_step_s",
    "samples_per_s", "final_loss", "steps", "cpu_mean_pct", "mem_peak_bytes",
    "net_bytes_total", "net_throughput_mean_bps",
]
# Faithful compute (issue 19): absent in older results, read as dilation 1, compute "shared" (the
# nodes shared the machine without budgets) and no fidelity verdict (not degraded).
FAITHFUL_COLUMNS = ["dilation", "compute", "cores", "node_cores", "machine_cores", "fidelity",
                    "compute_per_step_s", "training_time_wall_s", "time_per_step_wall_s"]
CHECKS_COLUMNS = ["experiment", "run_id", "tool", "src", "dst", "configured_bps",
                  "measured_bps", "ratio", "rtt_ms", "passed", "detail"]
STEPS_COLUMNS = ["experiment", "run_id", "role", "task_index", "host", "kind", "epoch",
                 "step", "time_s", "loss", "samples_per_s", "t"]
USAGE_COLUMNS = ["experiment", "run_id", "node", "role", "t", "cpu_pct", "rss_bytes",
                 "tx_bytes", "rx_bytes"]
EVALS_COLUMNS = ["experiment", "run_id", "epoch", "metric", "value"]
FAULTS_COLUMNS = ["experiment", "run_id", "fault", "action", "target", "at", "duration_s", "applied_step",
                  "applied_t", "undone_step", "undone_t", "outcome", "extra_s", "steps_replayed"]
LINK_CHANGES_COLUMNS = ["experiment", "run_id", "link", "row", "loop", "trace_t", "step", "t", "late_s", "bw_bps",
                        "delay_ms", "loss_pct", "outcome"]     # links that follow a trace

OPTIONAL_TABLES = {"checks.csv": CHECKS_COLUMNS, "steps.csv": STEPS_COLUMNS,
                   "usage.csv": USAGE_COLUMNS}

_NUMERIC = {
    "runs.csv": ["repeat", "hosts", "bw_bps", "params", "gradient_bytes", "global_batch",
                 "workers", "servers", "wall_time_s", "training_time_s", "time_per_step_s",
                 "samples_per_s", "final_loss", "steps", "cpu_mean_pct", "mem_peak_bytes",
                 "net_bytes_total", "net_throughput_mean_bps"],
    "checks.csv": ["configured_bps", "measured_bps", "ratio", "rtt_ms"],
    "steps.csv": ["task_index", "epoch", "step", "time_s", "loss", "samples_per_s", "t"],
    "usage.csv": ["t", "cpu_pct", "rss_bytes", "tx_bytes", "rx_bytes"],
    "evals.csv": ["epoch", "value"],
    "faults.csv": ["fault", "duration_s", "applied_step", "applied_t", "undone_step", "undone_t", "extra_s",
                   "steps_replayed"],
    "link_changes.csv": ["row", "loop", "trace_t", "step", "t", "late_s", "bw_bps", "delay_ms", "loss_pct"],
}

# Keys that identify one configuration; repeats of a configuration are averaged.
CONFIG_KEYS = ["model", "engine", "strategy", "hosts", "bw_bps"]


@dataclass
class Experiment:
    """The tables of one experiment folder."""
    path: Path
    name: str
    runs: pd.DataFrame
    checks: pd.DataFrame
    steps: pd.DataFrame
    usage: pd.DataFrame
    missing: list[str] = field(default_factory=list)  # optional files that were absent
    evals: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=EVALS_COLUMNS))
    faults: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=FAULTS_COLUMNS))
    link_changes: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=LINK_CHANGES_COLUMNS))
    include_degraded: bool = False   # count degraded runs in trends, tables and fits (they are marked anyway)


def read_table(path: Path, columns: list[str]) -> pd.DataFrame:
    """Read one CSV; absent or empty file -> empty frame; absent columns are added as NaN."""
    if path.is_file() and path.stat().st_size > 0:
        df = pd.read_csv(path)
    else:
        df = pd.DataFrame(columns=columns)
    for col in columns:
        if col not in df.columns:
            df[col] = np.nan
    for col in _NUMERIC.get(path.name, []):
        df[col] = pd.to_numeric(df[col], errors="coerce")
    for col in ("status", "strategy", "model", "bw", "reason", "tool", "role", "node"):
        if col in df.columns:
            df[col] = df[col].astype("object")
    return df


def load_experiment(exp_dir) -> Experiment:
    """Load runs.csv (required) and the optional tables of ``exp_dir``."""
    exp_dir = Path(exp_dir)
    runs_path = exp_dir / "runs.csv"
    if not runs_path.is_file():
        raise FileNotFoundError(f"{runs_path}: no runs.csv, nothing to report")
    runs = with_faithful_defaults(read_table(runs_path, RUNS_COLUMNS))
    runs["status"] = runs["status"].fillna("failed").astype(str)
    missing = [n for n in OPTIONAL_TABLES if not (exp_dir / n).is_file()]
    tables = {n: read_table(exp_dir / n, cols) for n, cols in OPTIONAL_TABLES.items()}
    names = runs["experiment"].dropna().unique()
    name = str(names[0]) if len(names) else exp_dir.name
    return Experiment(exp_dir, name, runs, tables["checks.csv"], tables["steps.csv"],
                      tables["usage.csv"], missing, read_table(exp_dir / "evals.csv", EVALS_COLUMNS),
                      read_table(exp_dir / "faults.csv", FAULTS_COLUMNS),
                      read_table(exp_dir / "link_changes.csv", LINK_CHANGES_COLUMNS))


def with_faithful_defaults(runs: pd.DataFrame) -> pd.DataFrame:
    """runs with the faithful-compute columns, older results read as dilation 1, compute shared and
    no fidelity verdict."""
    runs = runs.copy()
    for col in FAITHFUL_COLUMNS:
        if col not in runs:
            runs[col] = np.nan
    for col in ("dilation", "cores", "machine_cores", "compute_per_step_s", "training_time_wall_s",
                "time_per_step_wall_s"):
        runs[col] = pd.to_numeric(runs[col], errors="coerce")
    runs["dilation"] = runs["dilation"].fillna(1.0)
    runs["engine"] = with_engine(runs)
    for col, absent in (("compute", "shared"), ("fidelity", ""), ("node_cores", "")):
        runs[col] = runs[col].astype(object).where(runs[col].notna(), absent).astype(str)
    return runs


def is_degraded(runs: pd.DataFrame) -> pd.Series:
    """Runs whose fidelity verdict is 'degraded: <reasons>' (the emulation did not keep up)."""
    if "fidelity" not in runs:
        return pd.Series(False, index=runs.index)
    return runs["fidelity"].fillna("").astype(str).str.startswith("degraded")


def counted_runs(exp: "Experiment") -> pd.DataFrame:
    """The runs trends, tables and fits count: every run but the degraded ones, unless
    exp.include_degraded."""
    return exp.runs if exp.include_degraded else exp.runs[~is_degraded(exp.runs)]


def degraded_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """The degraded runs, with their reasons (the fidelity verdict without its 'degraded:')."""
    cols = ["run_id", "hosts", "bw", "strategy", "repeat", "status", "time_per_step_s", "reasons"]
    out = runs[is_degraded(runs)].copy()
    out["reasons"] = out["fidelity"].str.replace(r"^degraded:?\s*", "", regex=True)
    return out.reindex(columns=cols).reset_index(drop=True)


def ok_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """Runs with status ok and a training time (engine tensorflow where results predate PyTorch)."""
    out = runs[(runs["status"] == "ok") & runs["training_time_s"].notna()].copy()
    out["engine"] = with_engine(out)
    return out


def with_engine(runs: pd.DataFrame) -> pd.Series:
    """runs.csv's engine, tensorflow where results predate PyTorch (no column, or empty)."""
    if "engine" not in runs:
        return pd.Series("tensorflow", index=runs.index, dtype=object)
    return runs["engine"].astype(object).where(runs["engine"].notna(), "tensorflow").astype(str)


def failed_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """Runs that did not finish ok, with their reason."""
    cols = ["run_id", "hosts", "bw", "strategy", "repeat", "status", "reason"]
    out = runs.loc[runs["status"] != "ok", cols].copy()
    out["reason"] = out["reason"].fillna("(no reason recorded)")
    return out.reset_index(drop=True)


def baseline_time(summary: pd.DataFrame, row) -> tuple[float, str]:
    """1-node mean time for the row's model/bw: same strategy, else 'single', else any."""
    one = summary[(summary["hosts"] == 1) & (summary["model"] == row["model"])
                  & (summary["bw_bps"] == row["bw_bps"]) & (summary["engine"] == row["engine"])]
    for strat in (row["strategy"], "single", "allreduce"):
        hit = one[one["strategy"] == strat]
        if len(hit):
            return float(hit["time_mean_s"].iloc[0]), strat
    if len(one):
        return float(one["time_mean_s"].iloc[0]), str(one["strategy"].iloc[0])
    return np.nan, ""


def time_summary(runs: pd.DataFrame) -> pd.DataFrame:
    """Mean/std of training time over repeats (ok runs) per configuration, with speedup.

    speedup = T(1 node, same model/bw/strategy) / T(n); efficiency = speedup / n.
    When no 1-node run of the same strategy exists the 1-node run of strategy 'single'
    (then 'allreduce') at the same bandwidth is the baseline; ``baseline_strategy`` says which.
    """
    ok = ok_runs(runs)
    cols = CONFIG_KEYS + ["bw", "n_runs", "time_mean_s", "time_std_s", "time_min_s", "time_max_s",
                          "time_per_step_mean_s", "baseline_time_s", "baseline_strategy", "speedup", "efficiency"]
    if ok.empty:
        return pd.DataFrame(columns=cols)
    g = ok.groupby(CONFIG_KEYS, dropna=False)
    summary = g.agg(bw=("bw", "first"), n_runs=("training_time_s", "size"),
                    time_mean_s=("training_time_s", "mean"),
                    time_std_s=("training_time_s", "std"), time_min_s=("training_time_s", "min"),
                    time_max_s=("training_time_s", "max"),
                    time_per_step_mean_s=("time_per_step_s", "mean")).reset_index()
    base = [baseline_time(summary, r) for _, r in summary.iterrows()]
    summary["baseline_time_s"] = [b[0] for b in base]
    summary["baseline_strategy"] = [b[1] for b in base]
    summary["speedup"] = summary["baseline_time_s"] / summary["time_mean_s"]
    summary["efficiency"] = summary["speedup"] / summary["hosts"]
    summary = summary.sort_values(["model", "strategy", "bw_bps", "hosts"])
    return summary[cols].reset_index(drop=True)


def usage_per_run(usage: pd.DataFrame) -> pd.DataFrame:
    """Per run from usage.csv: mean CPU % per node, peak RSS, bytes sent, mean traffic per node."""
    cols = ["run_id", "cpu_mean_pct", "mem_peak_bytes", "net_bytes_total",
            "net_throughput_mean_bps"]
    if usage.empty:
        return pd.DataFrame(columns=cols)
    per_node = usage.groupby(["run_id", "node"]).agg(
        cpu=("cpu_pct", "mean"), rss=("rss_bytes", "max"),
        tx_min=("tx_bytes", "min"), tx_max=("tx_bytes", "max"),
        rx_min=("rx_bytes", "min"), rx_max=("rx_bytes", "max"),
        t_min=("t", "min"), t_max=("t", "max")).reset_index()
    per_node["tx"] = per_node["tx_max"] - per_node["tx_min"]
    span = (per_node["t_max"] - per_node["t_min"]).replace(0, np.nan)
    moved = per_node["tx"] + per_node["rx_max"] - per_node["rx_min"]
    per_node["rate_bps"] = moved * 8 / span
    out = per_node.groupby("run_id").agg(
        cpu_mean_pct=("cpu", "mean"), mem_peak_bytes=("rss", "max"),
        net_bytes_total=("tx", "sum"), net_throughput_mean_bps=("rate_bps", "mean"))
    return out.reset_index()[cols]


def with_usage(runs: pd.DataFrame, usage: pd.DataFrame) -> pd.DataFrame:
    """runs with the resource columns filled from usage.csv where runs.csv left them empty."""
    runs = runs.copy()
    per_run = usage_per_run(usage).set_index("run_id")
    if per_run.empty:
        return runs
    for col in per_run.columns:
        fill = runs["run_id"].map(per_run[col])
        runs[col] = runs[col].fillna(fill)
    return runs


def ring_bytes_per_worker(n, s_bytes):
    """Ring all-reduce bytes each worker sends per step: 2(N-1)/N * S."""
    n = np.asarray(n, dtype=float)
    return 2 * (n - 1) / n * np.asarray(s_bytes, dtype=float)


def network_per_run(runs: pd.DataFrame, usage: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per ok run: bytes on the wire per step (total and per worker) and the theory for it.

    Theory per worker and step: ring all-reduce 2(N-1)/N*S, parameter server 2*S
    (push S, pull S; the servers send as much as the workers push).
    """
    cols = ["run_id", "model", "engine", "strategy", "hosts", "workers", "bw_bps", "bw", "steps",
            "gradient_bytes", "net_bytes_total", "bytes_per_step", "bytes_per_worker_step",
            "theory_bytes_per_worker_step", "ratio_to_theory", "net_throughput_mean_bps",
            "link_utilisation"]
    df = ok_runs(with_usage(runs, usage) if usage is not None else runs)
    if df.empty:
        return pd.DataFrame(columns=cols)
    workers = df["workers"].fillna(df["hosts"]).clip(lower=1)
    df["workers"] = workers
    df["bytes_per_step"] = df["net_bytes_total"] / df["steps"]
    df["bytes_per_worker_step"] = df["bytes_per_step"] / workers
    ring = ring_bytes_per_worker(workers, df["gradient_bytes"])
    df["theory_bytes_per_worker_step"] = np.where(df["strategy"] == "ps",
                                                  2.0 * df["gradient_bytes"], ring)
    theory = df["theory_bytes_per_worker_step"].replace(0, np.nan)
    df["ratio_to_theory"] = df["bytes_per_worker_step"] / theory
    df["link_utilisation"] = df["net_throughput_mean_bps"] / df["bw_bps"]
    return df[cols].sort_values(["strategy", "bw_bps", "hosts", "run_id"]).reset_index(drop=True)


def resource_summary(runs: pd.DataFrame, usage: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per configuration: mean CPU %, peak memory and mean network throughput (fig. 19)."""
    cols = CONFIG_KEYS + ["bw", "n_runs", "cpu_mean_pct", "mem_peak_bytes",
                          "net_throughput_mean_bps"]
    df = ok_runs(with_usage(runs, usage) if usage is not None else runs)
    if df.empty:
        return pd.DataFrame(columns=cols)
    out = df.groupby(CONFIG_KEYS, dropna=False).agg(
        bw=("bw", "first"), n_runs=("run_id", "size"), cpu_mean_pct=("cpu_mean_pct", "mean"),
        mem_peak_bytes=("mem_peak_bytes", "max"),
        net_throughput_mean_bps=("net_throughput_mean_bps", "mean")).reset_index()
    return out[cols].sort_values(["model", "strategy", "bw_bps", "hosts"]).reset_index(drop=True)


def bleu_summary(runs: pd.DataFrame, evals: pd.DataFrame) -> pd.DataFrame:
    """Per node count, metric and epoch: mean/std of the evaluation value over the ok runs
    (repeats and any other swept axis), and how many runs that is (thesis fig. 14)."""
    cols = ["hosts", "metric", "epoch", "n_runs", "value_mean", "value_std"]
    df = evals.merge(ok_runs(runs)[["run_id", "hosts"]], on="run_id")
    if df.empty:
        return pd.DataFrame(columns=cols)
    out = df.groupby(["hosts", "metric", "epoch"]).agg(
        n_runs=("run_id", "nunique"), value_mean=("value", "mean"),
        value_std=("value", "std")).reset_index()
    return out[cols].sort_values(["hosts", "metric", "epoch"]).reset_index(drop=True)


def iperf_checks(checks: pd.DataFrame) -> pd.DataFrame:
    """The iperf3 rows with a configured and a measured rate."""
    cols = ["run_id", "src", "dst", "configured_bps", "measured_bps", "ratio", "passed"]
    df = checks[(checks["tool"] == "iperf3") & checks["configured_bps"].notna()
                & checks["measured_bps"].notna()]
    return df[cols].reset_index(drop=True)


def fault_costs(faults: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """One row per fault: where it was applied and undone, its outcome and its cost (faults.csv), with
    its run's status, restarts and time lost (runs.csv)."""
    cols = ["run_id", "fault", "action", "target", "at", "applied_step", "undone_step", "outcome", "extra_s",
            "steps_replayed", "status", "restarts", "time_lost_s"]
    if faults.empty:
        return pd.DataFrame(columns=cols)
    extra = [c for c in ("status", "restarts", "time_lost_s") if c in runs]
    out = faults.merge(runs[["run_id", *extra]], on="run_id", how="left")
    return out.reindex(columns=cols).reset_index(drop=True)


def fault_windows(faults: pd.DataFrame, steps: pd.DataFrame) -> pd.DataFrame:
    """Per fault and task with step rows: its median step before the fault and while the fault was in
    force (until undone, else to the end of the run), and their ratio. In synchronous all-reduce a
    straggler slows every worker: the ratio rises on all of them, not only on the slowed host."""
    cols = ["run_id", "fault", "action", "target", "role", "task_index", "host", "steps_before",
            "median_before_s", "steps_during", "median_during_s", "slowdown"]
    rows = []
    steps = steps[steps["kind"] == "step"]
    lasting = faults["applied_t"].notna() & ~faults["action"].isin(["kill", "link_up"])   # no window
    for f in faults[lasting].itertuples():
        end = f.undone_t if pd.notna(f.undone_t) else np.inf
        for (role, index, host), s in steps[steps["run_id"] == f.run_id].groupby(["role", "task_index", "host"]):
            before = s[(s["t"] < f.applied_t) & (s["step"] > 1)]        # step 1 builds the graph
            during = s[(s["t"] >= f.applied_t) & (s["t"] - s["time_s"] <= end)]
            if before.empty or during.empty:
                continue
            b, d = before["time_s"].median(), during["time_s"].median()
            rows.append([f.run_id, f.fault, f.action, f.target, role, index, host, len(before), b, len(during), d,
                         d / b if b > 0 else np.nan])
    return pd.DataFrame(rows, columns=cols)


def steady_steps(steps: pd.DataFrame) -> dict:
    """run_id -> median step time of the run's lead task (chief, else worker 0, else single),
    leaving out the first step to complete (it traces the function)."""
    s = steps[(steps["kind"] == "step") & steps["time_s"].notna()]
    out = {}
    for run_id, rows in s.groupby("run_id"):
        for role in ("chief", "worker", "single"):
            lead = rows[(rows["role"] == role) & (rows["task_index"].fillna(0) == 0)]
            if len(lead) >= 3:
                lead = lead.sort_values("t") if lead["t"].notna().all() else lead.sort_values("step")
                out[run_id] = float(lead["time_s"].iloc[1:].median())
                break
    return out
