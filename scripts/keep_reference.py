#!/usr/bin/env python3
"""Keep an experiment's results as reference results of its set-up file.

    .venv/bin/python run_experiment.py run topologies/thesis_fig15.yaml --out /tmp/fig15
    .venv/bin/python scripts/keep_reference.py /tmp/fig15 thesis_fig15

copies what the report reads, and nothing else, into results/reference/<NAME>/ (NAME: the set-up
file's name without .yaml): the result tables (*.csv) and each run's spec.yaml, topology.json and
small JSON records (no logs, no trained models). It then draws the report there and prints how long
the experiment took, from its runs' start times and wall times. `report --compare
results/reference/<NAME> YOURS` compares a run of the same file with it.
"""
from __future__ import annotations

import argparse
import re
import shutil
import sys
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from analysis.outputs import OutputError, check_folder  # noqa: E402
from analysis.report import build_report  # noqa: E402

RUN_FILES = ("spec.yaml", "topology.json", "result.json", "faults.json", "switch.json")


def keep(source: Path, dest: Path) -> Path:
    """Copy the tables and each run's small records of `source` into `dest` (emptied first)."""
    if not (source / "runs.csv").is_file():
        raise SystemExit(f"error: {source} has no runs.csv: run the experiment first")
    try:
        check_folder(dest)
    except OutputError as err:
        raise SystemExit(f"error: {err}") from None
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    for table in source.glob("*.csv"):
        shutil.copy2(table, dest / table.name)
    for run in sorted(p for p in (source / "runs").glob("*") if p.is_dir()):
        for name in RUN_FILES:
            if (run / name).is_file():
                (dest / "runs" / run.name).mkdir(parents=True, exist_ok=True)
                shutil.copy2(run / name, dest / "runs" / run.name / name)
    return dest


def duration_s(runs: pd.DataFrame) -> float:
    """From the first run's start to the last run's end (started_at + wall_time_s)."""
    raw = runs["started_at"]
    start = (pd.to_datetime(raw, unit="s", utc=True) if pd.api.types.is_numeric_dtype(raw) else
             pd.to_datetime(raw, utc=True, format="ISO8601"))
    end = start + pd.to_timedelta(runs["wall_time_s"].fillna(0), unit="s")
    return (end.max() - start.min()).total_seconds()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("results", type=Path, help="the experiment's results folder")
    p.add_argument("name", help="the set-up file's name without .yaml, e.g. thesis_fig15")
    args = p.parse_args(argv)
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", args.name) or ".." in args.name:
        raise SystemExit(f"error: {args.name!r} is not a set-up's name (letters, digits, _ . -)")
    dest = keep(args.results, REPO / "results" / "reference" / args.name)
    runs = pd.read_csv(dest / "runs.csv")
    report = build_report(dest)
    ok = int((runs["status"] == "ok").sum())
    print(f"{report}\n{len(runs)} runs, {ok} ok, {duration_s(runs) / 60:.1f} min from the first run's start "
          "to the last run's end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
