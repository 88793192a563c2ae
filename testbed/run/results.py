"""Where results go and how they are written (atomically) and read back as DataFrames."""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pandas as pd

from analysis import outputs
from analysis.tables.tables import csv_text

from testbed.owner import ProcessLock

RUNS_COLUMNS = [
    "experiment", "run_id", "repeat", "hosts", "node_kinds", "bw_bps", "bw", "strategy", "engine", "model", "params",
    "gradient_bytes", "global_batch", "workers", "servers", "asynchronous", "status", "reason",
    "started_at", "wall_time_s", "training_time_s", "tf_import_s", "torch_import_s", "tf_threads", "time_per_step_s", "samples_per_s", "final_loss",
    "steps", "cpu_mean_pct", "mem_peak_bytes", "net_bytes_total", "net_throughput_mean_bps",
    "monitor_overhead_pct", "timer_p50_ms", "timer_p99_ms", "timer_max_ms", "restarts", "time_lost_s",
    "advisor_choice", "predicted_step_s_allreduce", "predicted_step_s_ps", "switches",
    "dilation", "byte_scale", "compute", "cores", "node_cores", "machine_cores", "profile", "compute_per_step_s", "compute_slicing", "fidelity",
    "training_time_wall_s", "time_per_step_wall_s", "samples_per_wall_s",
    "compression", "rank", "start_step", "sync_every", "outer", "theory_bytes_per_worker_step",
    "steady_bytes_per_worker_step", "theory_steady_bytes_per_worker_step",
]
CHECKS_COLUMNS = ["experiment", "run_id", "tool", "src", "dst", "configured_bps", "measured_bps", "ratio",
                  "rtt_ms", "passed", "detail"]
STEPS_COLUMNS = ["experiment", "run_id", "role", "task_index", "host", "strategy", "kind", "epoch", "step",
                 "time_s", "loss", "samples_per_s", "t"]
USAGE_COLUMNS = ["experiment", "run_id", "node", "role", "t", "cpu_pct", "rss_bytes", "tx_bytes", "rx_bytes"]
EVALS_COLUMNS = ["experiment", "run_id", "epoch", "metric", "value"]
FAULTS_COLUMNS = ["experiment", "run_id", "fault", "action", "target", "at", "duration_s", "applied_step",
                  "applied_t", "undone_step", "undone_t", "outcome", "extra_s", "steps_replayed"]
LINK_CHANGES_COLUMNS = ["experiment", "run_id", "link", "row", "loop", "trace_t", "step", "t", "late_s", "bw_bps",
                        "delay_ms", "loss_pct", "outcome"]    # links that follow a trace (run/faults/traces.py)
TUNNELS_COLUMNS = ["experiment", "run_id", "tunnel", "server_a", "server_b", "address_a", "address_b", "links",
                   "capacity_bps", "rtt_ms", "loss_pct"]   # cluster runs: the fidelity guard's measurements
TABLES = {"runs": RUNS_COLUMNS, "checks": CHECKS_COLUMNS, "steps": STEPS_COLUMNS, "usage": USAGE_COLUMNS,
          "faults": FAULTS_COLUMNS, "link_changes": LINK_CHANGES_COLUMNS, "tunnels": TUNNELS_COLUMNS,
          "evals": EVALS_COLUMNS}


def atomic_write_text(path: Path, text: str) -> None:
    """Write via a temporary file and rename, so readers see the old or the new file, never half; an existing
    target that is not a regular file is refused (analysis.outputs)."""
    outputs.write_text(path, text)


def folder_lock(exp_dir: Path) -> ProcessLock:
    """One writer per results folder: a sweep holds it throughout, each table write takes it again."""
    return ProcessLock(Path(exp_dir) / ".lock", f"the results folder {exp_dir}")


def read_table(exp_dir: Path, name: str) -> pd.DataFrame:
    path = Path(exp_dir) / f"{name}.csv"
    if not path.exists() or path.stat().st_size == 0:
        return pd.DataFrame(columns=TABLES[name])
    return pd.read_csv(path)


def replace_run_rows(exp_dir: Path, name: str, run_id: str, rows: list[dict],
                     extra_columns: list[str] = ()) -> pd.DataFrame:
    """Replace every row of `run_id` in table `name` with `rows` (a retried run leaves one set);
    LockHeld when another process writes to the folder."""
    with folder_lock(exp_dir):
        return _replace_rows(exp_dir, name, run_id, rows, extra_columns)


def _replace_rows(exp_dir: Path, name: str, run_id: str, rows: list[dict], extra_columns) -> pd.DataFrame:
    old = read_table(exp_dir, name)
    old = old[old["run_id"] != run_id] if "run_id" in old else old
    new = pd.DataFrame(rows)
    columns = TABLES[name][:3] + [c for c in extra_columns if c not in TABLES[name]] + TABLES[name][3:]
    frames = [f for f in (old, new) if not f.empty]
    table = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=columns)
    ordered = [c for c in columns if c in table] + [c for c in table if c not in columns]
    table = table.reindex(columns=ordered)
    atomic_write_text(Path(exp_dir) / f"{name}.csv", csv_text(table))
    return table


def run_dir(exp_dir: Path, run_id: str) -> Path:
    path = Path(exp_dir) / "runs" / run_id
    path.mkdir(parents=True, exist_ok=True)
    return path


def write_json(path: Path, data) -> None:
    atomic_write_text(path, json.dumps(data, indent=2, default=str) + "\n")
