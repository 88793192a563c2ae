"""Read an experiment folder's result tables and derive the views the report shows.

Only pandas; no root, no Mininet, no TensorFlow. Column names follow docs/developer/contracts.md ("Result
tables"). ``runs.csv`` is required; ``checks.csv``, ``steps.csv``, ``usage.csv`` and ``evals.csv`` are optional
and come back as empty frames with the right columns when absent (only caption runs with evaluation on write
``evals.csv``, so its absence is not reported as missing).

Conventions used by the derived tables:

* "nodes" is the ``hosts`` column (every host of the run, ps/chief included).
* ``net_bytes_total`` is read as the bytes *sent* by all hosts of the run during training (sum of tx). Bytes
  on the wire per step per worker = net_bytes_total / steps / workers.
* ``usage.csv`` byte counters are cumulative per node (as testbed/run/training/monitor.py samples them): a node
  sent max - min of ``tx_bytes``; its throughput is (sent + received) * 8 / time span, the same as
  ``net_throughput_mean_bps`` in runs.csv (monitor.summarize).
* Every run has the work and steady columns (``STEADY_COLUMNS``): the runner records them; results recorded
  before them get them here, from steps.csv with analysis.tables.steady (``with_steady_columns``), so that
  every consumer reads the same figures.
* The speedup is the one the report states everywhere: steady samples/s at N nodes over steady samples/s at
  one node of the same model, engine, batch per worker, bandwidth and ``fixed`` mode (``summary``). Training
  times include the warm-up, and under fixed steps N nodes train N times the samples of one: they are never
  divided into a speedup.
"""
from __future__ import annotations

import copy
import functools
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from analysis.model import communication
from analysis.tables import steady

RUNS_COLUMNS = [
    "experiment", "run_id", "repeat", "hosts", "bw_bps", "bw", "strategy", "engine", "model",
    "params", "gradient_bytes", "global_batch", "workers", "servers", "asynchronous",
    "status", "reason", "started_at", "wall_time_s", "training_time_s", "time_per_step_s",
    "samples_per_s", "final_loss", "steps", "cpu_mean_pct", "mem_peak_bytes",
    "net_bytes_total", "net_throughput_mean_bps",
]
# Faithful compute: absent in older results, read as dilation 1, compute "shared" (the
# nodes shared the machine without budgets) and no fidelity verdict (not degraded).
FAITHFUL_COLUMNS = ["dilation", "byte_scale", "compute", "cores", "node_cores", "machine_cores", "fidelity",
                    "compute_per_step_s", "training_time_wall_s", "time_per_step_wall_s"]
# What a point trained and its warm-up and steady state (testbed/run/point/record.py: work_columns and
# analysis.tables.steady); older results get them from steps.csv (with_steady_columns).
WORK_COLUMNS = ["fixed", "steps_per_epoch", "samples_per_step", "samples_per_epoch", "samples_trained"]
STEADY_COLUMNS = WORK_COLUMNS + ["warmup_steps", "warmup_s", "steady_steps", "steady_step_s", "steady_step_q1_s",
                                 "steady_step_q3_s", "steady_samples_per_s", "steady"]
_STEADY_NUMERIC = [c for c in STEADY_COLUMNS if c not in ("fixed", "steady")]
FIXED_MODES = ("data", "steps", "script")
MODE_TEXT = {"data": "same data at every node count",
             "steps": "same steps per worker: N nodes train N× the samples",
             "script": "your script decides what each node count trains"}
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
                 "net_bytes_total", "net_throughput_mean_bps", *communication.NUMERIC_COLUMNS,
                 "theory_bytes_per_worker_step", "steady_bytes_per_worker_step", "theory_steady_bytes_per_worker_step"],
    "checks.csv": ["configured_bps", "measured_bps", "ratio", "rtt_ms"],
    "steps.csv": ["task_index", "epoch", "step", "time_s", "loss", "samples_per_s", "t"],
    "usage.csv": ["t", "cpu_pct", "rss_bytes", "tx_bytes", "rx_bytes"],
    "evals.csv": ["epoch", "value"],
    "faults.csv": ["fault", "duration_s", "applied_step", "applied_t", "undone_step", "undone_t", "extra_s",
                   "steps_replayed"],
    "link_changes.csv": ["row", "loop", "trace_t", "step", "t", "late_s", "bw_bps", "delay_ms", "loss_pct"],
}

# Keys that identify one configuration; repeats of a configuration are averaged. A speedup compares
# the configurations of one GROUP (and bandwidth) at different node counts. communication: the
# workload.communication setting's label (analysis.model.communication.label; "none" in older results).
GROUP_KEYS = ["model", "engine", "batch_per_worker", "fixed"]
CONFIG_KEYS = GROUP_KEYS + ["strategy", "communication", "hosts", "bw_bps"]
COMMUNICATION_COLUMNS = communication.COLUMNS     # runs.csv, as recorded (the keys of workloads/communication/)


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
    specs: dict = field(default_factory=dict)   # run_id -> runs/<run_id>/spec.yaml (where kept)


FORMULA_START = ("=", "+", "-", "@", "\t", "\r")     # what spreadsheets read as the start of a formula


def _neutral(value):
    """A text cell that a spreadsheet would run as a formula, prefixed with ' (OWASP's advice for CSV
    injection: it then shows as the text it is); numbers written as text, e.g. '-1.5', stay as they are."""
    if not isinstance(value, str) or not value.startswith(FORMULA_START):
        return value
    try:
        float(value)
        return value
    except ValueError:
        return "'" + value


def csv_text(df: pd.DataFrame) -> str:
    """A table as CSV text, every text cell a spreadsheet would run as a formula neutralised: every table
    the testbed writes goes through here (names, reasons and messages come from the input)."""
    out = df.copy()
    for col in out.columns:
        if pd.api.types.is_object_dtype(out[col]) or pd.api.types.is_string_dtype(out[col]):
            out[col] = out[col].map(_neutral)
    return out.to_csv(index=False)


class ResultsError(ValueError):
    """A results folder's file that cannot be read as the table the testbed writes (the message names it)."""


TEXT_COLUMNS = ("experiment", "run_id", "status", "strategy", "engine", "model", "bw", "reason", "tool", "role",
                "node", "host", "fixed", "steady", "fidelity", "compute", *communication.TEXT_COLUMNS, "communication")


def read_table(path: Path, columns: list[str]) -> pd.DataFrame:
    """Read one CSV; absent or empty file -> empty frame; absent columns are added as NaN; numeric columns
    as numbers (what is not a number: NaN), the text columns as text whatever they hold. ResultsError,
    naming the file, for a file that is no CSV of UTF-8 text."""
    if path.is_file() and path.stat().st_size > 0:
        try:
            with open(path, "rb") as fh:
                if b"\0" in fh.read(65536):         # (a table the testbed writes holds no NUL byte)
                    raise ResultsError(f"{path}: holds no table the testbed writes (NUL bytes: a binary file)")
        except OSError as err:
            raise ResultsError(f"{path}: cannot be read ({err.strerror})") from None
        try:
            df = pd.read_csv(path, encoding="utf-8", dtype={c: str for c in TEXT_COLUMNS}, low_memory=False)
        except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, ValueError, OSError) as err:
            why = "not UTF-8 text" if isinstance(err, UnicodeDecodeError) else str(err).strip().splitlines()[0][:200]
            raise ResultsError(f"{path}: not a table the testbed writes ({why})") from None
        if columns and not set(df.columns) & set(columns):
            header = ", ".join(repr(str(c)[:20]) for c in list(df.columns)[:3])
            raise ResultsError(f"{path}: holds no table the testbed writes (none of its columns; its first line "
                               f"reads {header or 'nothing'})")
    else:
        df = pd.DataFrame(columns=columns)
    for col in columns:
        if col not in df.columns:
            df[col] = np.nan
    for col in _NUMERIC.get(path.name, []):
        if col in df:          # those past `columns` only where the file has them (workload.communication's)
            df[col] = pd.to_numeric(df[col], errors="coerce")
    for col in TEXT_COLUMNS:
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
    runs = runs.drop_duplicates("run_id", keep="last").reset_index(drop=True)   # a run's last row is its own
    missing = [n for n in OPTIONAL_TABLES if not (exp_dir / n).is_file()]
    tables = {n: read_table(exp_dir / n, cols) for n, cols in OPTIONAL_TABLES.items()}
    specs = run_specs(exp_dir, runs["run_id"])
    runs = with_steady_columns(runs, tables["steps.csv"], specs)
    names = runs["experiment"].dropna().unique()
    name = str(names[0]) if len(names) else exp_dir.name
    return Experiment(exp_dir, name, runs, tables["checks.csv"], tables["steps.csv"],
                      tables["usage.csv"], missing, read_table(exp_dir / "evals.csv", EVALS_COLUMNS),
                      read_table(exp_dir / "faults.csv", FAULTS_COLUMNS),
                      read_table(exp_dir / "link_changes.csv", LINK_CHANGES_COLUMNS), specs=specs)


OWN_MACHINES = ("budgets", "replay")   # runs.csv `compute` where every node was a machine of its own size
TIMING_ONLY = "replay"                  # ... and where it replayed its compute: no loss, no BLEU


def own_machines(runs: pd.DataFrame) -> pd.Series:
    """Which runs' nodes were each a machine of their own size (held to a budget, or replaying their compute)."""
    return runs["compute"].isin(OWN_MACHINES)


def with_faithful_defaults(runs: pd.DataFrame) -> pd.DataFrame:
    """runs with the faithful-compute columns, older results read as dilation 1, compute shared and
    no fidelity verdict."""
    runs = runs.copy()
    for col in FAITHFUL_COLUMNS:
        if col not in runs:
            runs[col] = np.nan
    for col in ("dilation", "byte_scale", "cores", "machine_cores", "compute_per_step_s", "training_time_wall_s",
                "time_per_step_wall_s"):
        runs[col] = pd.to_numeric(runs[col], errors="coerce")
    runs["dilation"] = runs["dilation"].fillna(1.0)
    runs["byte_scale"] = runs["byte_scale"].fillna(1.0)
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


def degraded_ok(exp) -> pd.DataFrame:
    """The ok runs whose fidelity verdict is degraded (crossed in the figures)."""
    runs = exp.runs if has_steady_columns(exp.runs) else with_steady_columns(exp.runs, exp.steps)
    ok = ok_runs(runs)
    return ok[is_degraded(ok)]


def degraded_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """The degraded runs, with their reasons (the fidelity verdict without its 'degraded:')."""
    cols = ["run_id", "hosts", "bw", "strategy", "repeat", "status", "time_per_step_s", "reasons"]
    out = runs[is_degraded(runs)].copy()
    out["reasons"] = out["fidelity"].str.replace(r"^degraded:?\s*", "", regex=True)
    return out.reindex(columns=cols).reset_index(drop=True)


def ok_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """Runs with status ok and a training time (engine tensorflow where results predate PyTorch; the
    communication setting's label, none where they predate it)."""
    out = with_groups(runs[(runs["status"] == "ok") & runs["training_time_s"].notna()].copy())
    out["engine"] = with_engine(out)
    out["communication"] = communication_labels(out)
    return out


def communication_labels(runs: pd.DataFrame) -> pd.Series:
    """Each run's workload.communication as the report names it ('none', 'local SGD every 8', ...: its
    method's label), from runs.csv's communication columns (none where absent), with its workload.balance where
    it balanced ('balance static', 'fp16, balance static'): a setting of its own, not plain all-reduce."""
    cols = {c: runs[c] if c in runs else pd.Series(np.nan, index=runs.index) for c in COMMUNICATION_COLUMNS}
    said = [communication.label(dict(zip(cols, cells))) for cells in zip(*cols.values())]
    bal = [text(b) for b in (runs["balance"] if "balance" in runs else [np.nan] * len(runs))]
    said = [x if b in ("", "none") else f"balance {b}" if x == "none" else f"{x}, balance {b}"
            for x, b in zip(said, bal)]
    return pd.Series(said, index=runs.index, dtype=object)


def plain(runs: pd.DataFrame) -> pd.DataFrame:
    """The runs of the usual all-reduce (or ps, or one node): communication none."""
    return runs[communication_labels(runs) == "none"]


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


def blank_as_nan(df: pd.DataFrame, columns) -> pd.DataFrame:
    """Empty text as NaN, as the table reads back from its CSV (text(v) reads it as '')."""
    for col in columns:
        df[col] = df[col].astype(object).where(df[col].astype(str).str.strip() != "", np.nan)
    return df


def text(value) -> str:
    """A text cell of a table: '' for NaN."""
    return "" if value is None or (isinstance(value, float) and np.isnan(value)) else str(value)


def same_value(a, b) -> bool:
    return (pd.isna(a) and pd.isna(b)) or a == b


def same_values(df: pd.DataFrame, values: dict) -> np.ndarray:
    """Which rows of `df` hold every one of `values` (column -> value; NaN matches NaN)."""
    return np.logical_and.reduce([[same_value(v, want) for v in df[k]] for k, want in values.items()])


# the stored spec's figures the analysis reads: each, where set, a number (> 0 but target_loss)
SPEC_NUMBERS = (("report", "job", "samples"), ("report", "job", "epochs"), ("report", "job", "samples_per_epoch"),
                ("report", "target_loss"), ("workload", "epochs"), ("workload", "steps_per_epoch"),
                ("workload", "samples_per_epoch"), ("workload", "batch_per_worker"))


def _spec_problem(spec: dict) -> str | None:
    """What makes a stored spec unusable here: a figure the analysis reads that is not a number."""
    for path in SPEC_NUMBERS:
        value = spec
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or \
                (value <= 0 and path[-1] != "target_loss"):
            return f"{'.'.join(path)}: {str(value)[:40]!r} is not a positive number"
    params = (spec.get("workload") or {}).get("model_params") if isinstance(spec.get("workload"), dict) else None
    if params is not None and not isinstance(params, dict):
        return "workload.model_params: not a mapping"
    return None


@functools.lru_cache(maxsize=1024)
def _parsed(text: str):
    """A stored spec.yaml's text parsed, once per text: a report reads each nine times."""
    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def run_specs(exp_dir, run_ids) -> dict:
    """run_id -> its runs/<run_id>/spec.yaml as a dict (absent or unreadable: left out); ResultsError, naming
    the file, for one whose figures the analysis reads are not numbers (_spec_problem)."""
    out = {}
    for run_id in dict.fromkeys(str(r) for r in run_ids if pd.notna(r)):
        path = Path(exp_dir) / "runs" / run_id / "spec.yaml"
        try:
            spec = copy.deepcopy(_parsed(path.read_text())) if path.is_file() else None
        except (OSError, yaml.YAMLError, ValueError):
            spec = None
        if isinstance(spec, dict):
            problem = _spec_problem(spec)
            if problem:
                raise ResultsError(f"{path}: {problem} (the run's resolved experiment file, which the report reads)")
            out[run_id] = spec
    return out


def samples_per_step(runs: pd.DataFrame) -> pd.Series:
    """Samples one step trains, from runs.csv's global_batch (batch_per_worker x workers under every
    strategy): the global batch under all-reduce, PyTorch and single; one worker's batch under ps (a
    step is one worker's closure)."""
    batch = pd.to_numeric(runs["global_batch"], errors="coerce") if "global_batch" in runs \
        else pd.Series(np.nan, index=runs.index)
    workers = pd.to_numeric(runs["workers"], errors="coerce").where(lambda w: w > 0) if "workers" in runs \
        else pd.Series(np.nan, index=runs.index)
    return batch.where(runs["strategy"] != "ps", batch / workers)


def with_groups(runs: pd.DataFrame) -> pd.DataFrame:
    """runs with the group keys a speedup is taken within: batch_per_worker (global_batch / workers) and fixed (older
    results: 'steps', they ran steps_per_epoch on every worker; 'script' for a user's script)."""
    if "batch_per_worker" in runs and "fixed" in runs and runs["fixed"].notna().all():
        return runs
    runs = runs.copy()
    if "batch_per_worker" not in runs:
        batch = pd.to_numeric(runs.get("global_batch", pd.Series(np.nan, index=runs.index)), errors="coerce")
        workers = pd.to_numeric(runs.get("workers", pd.Series(np.nan, index=runs.index)), errors="coerce")
        runs["batch_per_worker"] = batch / workers.where(workers > 0, 1)
    model = runs.get("model", pd.Series("", index=runs.index)).astype(str)
    older = np.where(model.str.startswith("script"), "script", "steps")
    fixed = runs["fixed"] if "fixed" in runs else pd.Series(np.nan, index=runs.index)
    runs["fixed"] = fixed.astype(object).where(fixed.notna() & (fixed.astype(str).str.strip() != ""), older)
    return runs


def has_steady_columns(runs: pd.DataFrame) -> bool:
    """Whether runs has every steady column (else with_steady_columns fills them)."""
    return set(STEADY_COLUMNS) <= set(runs) and "epochs" in runs and "batch_per_worker" in runs


def with_steady_columns(runs: pd.DataFrame, steps: pd.DataFrame | None = None, specs: dict | None = None
                        ) -> pd.DataFrame:
    """runs with every STEADY_COLUMNS column (plus batch_per_worker and epochs), the one place results recorded
    before them get them: from steps.csv, the lead task's step times split by analysis.tables.steady (steady
    "no step timings ..." without steps.csv rows); fixed 'steps' (they ran steps_per_epoch on every worker);
    samples per step from global_batch and the strategy (samples_per_step); steps per epoch from spec.yaml's
    workload.steps_per_epoch, else the lead task's steps over its epochs; samples per epoch = steps per epoch
    x samples per step; samples trained = steps x samples per step. Values runs.csv has are kept. epochs:
    spec.yaml's workload.epochs, else steps / steps per epoch."""
    runs = runs.copy()
    specs = specs or {}
    for col in STEADY_COLUMNS:
        if col not in runs:
            runs[col] = np.nan
    for col in _STEADY_NUMERIC:
        runs[col] = pd.to_numeric(runs[col], errors="coerce")
    for col in ("fixed", "steady"):
        runs[col] = runs[col].astype(object)
    blank = lambda col: runs[col].isna() | (runs[col].astype(str).str.strip() == "")     # noqa: E731
    old_work, old_steady = blank("fixed"), blank("steady")
    per_step = samples_per_step(runs)
    if old_work.any():
        spec_steps = pd.Series([_workload(specs, r).get("steps_per_epoch") for r in runs["run_id"]],
                               index=runs.index, dtype=float)
        counted = _steps_per_epoch(steps)
        spe = spec_steps.fillna(runs["run_id"].map(counted))
        fill = dict(samples_per_step=per_step, steps_per_epoch=spe, samples_per_epoch=spe * per_step,
                    samples_trained=pd.to_numeric(runs["steps"], errors="coerce") * per_step)
        for col, values in fill.items():
            runs[col] = runs[col].where(~old_work | runs[col].notna(), values)
    if old_steady.any():
        times = steady.lead_times(steps) if steps is not None and len(steps) else {}
        for i in runs.index[old_steady]:
            r = runs.loc[i]
            split = steady.split(times.get(r["run_id"], []), asynchronous=r.get("strategy") == "ps")
            per = r["samples_per_step"] if pd.notna(r["samples_per_step"]) else per_step[i]
            for col, value in split.columns(per).items():
                if col == "steady" or pd.isna(runs.at[i, col]):
                    runs.at[i, col] = value
    runs = with_groups(runs)
    epochs = pd.Series([_workload(specs, r).get("epochs") for r in runs["run_id"]], index=runs.index, dtype=float)
    by_steps = (pd.to_numeric(runs["steps"], errors="coerce") / runs["steps_per_epoch"]).round()
    runs["epochs"] = epochs.fillna(by_steps.where(by_steps > 0))
    return runs


def _workload(specs: dict, run_id) -> dict:
    return (specs.get(str(run_id)) or {}).get("workload") or {}


def _steps_per_epoch(steps: pd.DataFrame | None) -> dict:
    """run_id -> the lead task's step rows over its epochs (results without spec.yaml)."""
    if steps is None or steps.empty:
        return {}
    s = steps[(steps["kind"] == "step") & steps["time_s"].notna()]
    out = {}
    for run_id, rows in s.groupby("run_id"):
        for role in steady.LEAD_ROLES:
            lead = rows[(rows["role"] == role) & (rows["task_index"].fillna(0) == 0)]
            if len(lead):
                out[run_id] = len(lead) / max(1, lead["epoch"].nunique())
                break
    return out


def usage_per_run(usage: pd.DataFrame) -> pd.DataFrame:
    """Per run from usage.csv: mean CPU % per node, peak RSS, bytes sent, mean traffic per node."""
    cols = ["run_id", "cpu_mean_pct", "mem_peak_bytes", "net_bytes_total", "net_throughput_mean_bps"]
    if usage.empty:
        return pd.DataFrame(columns=cols)
    per_node = usage.groupby(["run_id", "node"]).agg(
        cpu=("cpu_pct", "mean"), rss=("rss_bytes", "max"), tx_min=("tx_bytes", "min"), tx_max=("tx_bytes", "max"),
        rx_min=("rx_bytes", "min"), rx_max=("rx_bytes", "max"), t_min=("t", "min"), t_max=("t", "max")).reset_index()
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
        runs[col] = runs[col].fillna(runs["run_id"].map(per_run[col]))
    return runs


def ring_bytes_per_worker(n, s_bytes):
    """Ring all-reduce bytes each worker sends per step: 2(N-1)/N * S."""
    n = np.asarray(n, dtype=float)
    return 2 * (n - 1) / n * np.asarray(s_bytes, dtype=float)


def network_per_run(runs: pd.DataFrame, usage: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per ok run: bytes on the wire per step (total and per worker) and the theory for it.

    Theory per worker and step (analysis/model/communication.py; runs.csv's theory_bytes_per_worker_step where
    recorded): ring all-reduce 2(N-1)/N*S, parameter server 2*S (push S, pull S; the servers send as much
    as the workers push), fewer with workload.communication. The steady columns: what the lead worker's
    node sent per step over its steady steps (runs.csv steady_bytes_per_worker_step, from its step events)
    against the theory of the same steps: no start-up traffic in them.
    """
    cols = ["run_id", "model", "engine", "strategy", "communication", "hosts", "workers", "bw_bps", "bw", "steps",
            "gradient_bytes", "net_bytes_total", "bytes_per_step", "bytes_per_worker_step",
            "theory_bytes_per_worker_step", "ratio_to_theory", "steady_bytes_per_worker_step",
            "theory_steady_bytes_per_worker_step", "steady_ratio_to_theory", "net_throughput_mean_bps",
            "link_utilisation"]
    df = ok_runs(with_usage(runs, usage) if usage is not None else runs)
    if df.empty:
        return pd.DataFrame(columns=cols)
    workers = df["workers"].fillna(df["hosts"]).clip(lower=1)
    df["workers"] = workers
    df["bytes_per_step"] = df["net_bytes_total"] / df["steps"]
    df["bytes_per_worker_step"] = df["bytes_per_step"] / workers
    ring = ring_bytes_per_worker(workers, df["gradient_bytes"])
    older = pd.Series(np.where(df["strategy"] == "ps", 2.0 * df["gradient_bytes"], ring), index=df.index)
    for col in ("theory_bytes_per_worker_step", "steady_bytes_per_worker_step", "theory_steady_bytes_per_worker_step"):
        df[col] = pd.to_numeric(df[col], errors="coerce") if col in df else np.nan
    df["theory_bytes_per_worker_step"] = df["theory_bytes_per_worker_step"].fillna(older)
    theory = df["theory_bytes_per_worker_step"].replace(0, np.nan)
    df["ratio_to_theory"] = df["bytes_per_worker_step"] / theory
    df["steady_ratio_to_theory"] = df["steady_bytes_per_worker_step"] / \
        df["theory_steady_bytes_per_worker_step"].replace(0, np.nan)
    df["link_utilisation"] = df["net_throughput_mean_bps"] / df["bw_bps"]
    return df[cols].sort_values(["strategy", "communication", "bw_bps", "hosts", "run_id"]).reset_index(drop=True)


def resource_summary(runs: pd.DataFrame, usage: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per configuration: mean CPU %, peak memory and mean network throughput (fig. 19)."""
    cols = CONFIG_KEYS + ["bw", "n_runs", "cpu_mean_pct", "mem_peak_bytes", "net_throughput_mean_bps"]
    df = ok_runs(with_usage(runs, usage) if usage is not None else runs)
    if df.empty:
        return pd.DataFrame(columns=cols)
    out = df.groupby(CONFIG_KEYS, dropna=False).agg(
        bw=("bw", "first"), n_runs=("run_id", "size"), cpu_mean_pct=("cpu_mean_pct", "mean"),
        mem_peak_bytes=("mem_peak_bytes", "max"), net_throughput_mean_bps=("net_throughput_mean_bps", "mean")
    ).reset_index()
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
