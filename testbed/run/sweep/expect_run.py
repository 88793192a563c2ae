"""The experiment file's expectations during a sweep: the per-point ones judged after each point on the tables
written so far, every one after the sweep, into expectations.csv; the end's table and the JUnit file.
analysis/comparisons/expectations.py judges; this gives it the file's run points and writes what it says."""
from __future__ import annotations

import datetime as dt
import socket
from pathlib import Path

from rich.console import Console
from rich.table import Table

from analysis.comparisons import expectations, junit
from analysis.tables import speedup, tables
from analysis.comparisons.expectations import FAIL, NOT_JUDGED, PASS, Outcome, shown
from testbed.run import results
from testbed.spec.keypaths import get_in, parse_path

FILE = "expectations.csv"


def point_values(exp, run_points) -> dict[str, dict]:
    """run id -> the point's values at every key path an expectation's where names (JSON form)."""
    paths = {key for item in exp.expect for key in item.where}
    out = {}
    for point in run_points:
        dump = point.spec.model_dump(mode="json") if paths else {}
        out[point.run_id] = {key: get_in(dump, parse_path(key)) for key in paths}
    return out


class Judge:
    """The expectations of one sweep over its results folder."""

    def __init__(self, exp, run_points, exp_dir: Path):
        self.expectations = [item.model_dump(mode="json") for item in exp.expect]
        self.points = point_values(exp, run_points)
        self.path = Path(exp_dir) / FILE
        self.outcomes: list[Outcome] = []
        if not self.expectations:
            self.path.unlink(missing_ok=True)       # judged by an earlier version of the file

    def after_point(self, run_id: str) -> list[Outcome]:
        """Every per-point expectation on the points recorded so far (written), and those of `run_id`."""
        if not self.expectations:
            return []
        folder = self.path.parent
        runs = tables.read_table(folder / "runs.csv", tables.RUNS_COLUMNS)
        checks = tables.read_table(folder / "checks.csv", tables.CHECKS_COLUMNS)
        self.outcomes = expectations.point_outcomes(self.expectations, runs, checks, self.points)
        self._write()
        return [o for o in self.outcomes if o.point == run_id]

    def finish(self) -> list[Outcome]:
        """Every expectation on the file's recorded points, the summary's and the stored folders' included."""
        if not self.expectations:
            return []
        exp = tables.load_experiment(self.path.parent)
        self.outcomes = expectations.evaluate(self.expectations, exp, self.points, speedup.training_job(exp))
        self._write()
        return self.outcomes

    def _write(self) -> None:
        results.atomic_write_text(self.path, tables.csv_text(expectations.frame(self.outcomes)))


def point_line(outcomes: list[Outcome]) -> str:
    """'expect: 2 pass, 1 fail (steady_samples_per_s >= 100: 80.3)' for one point."""
    n = expectations.counts(outcomes)
    said = ", ".join(f"{v} {k}" for k, v in n.items() if v)
    bad = [f"{o.expectation}: {shown(o.measured)}" for o in outcomes if o.outcome == FAIL]
    return f"expect: {said}" + (f" ({'; '.join(bad)})" if bad else "")


def show(outcomes: list[Outcome], folder: Path, console: Console) -> None:
    """One row per expectation: how many points passed, failed, were not judged, and the first failure (or
    the first reason it was not judged)."""
    if not outcomes:
        return
    table = Table(title="Expectations", title_justify="left")
    for column in ("expectation", PASS, FAIL, NOT_JUDGED, "first failure, or why not judged"):
        table.add_column(column, justify="right" if column in (PASS, FAIL, NOT_JUDGED) else "left")
    for index in dict.fromkeys(o.index for o in outcomes):
        mine = [o for o in outcomes if o.index == index]
        n = expectations.counts(mine)
        first = next((o for o in mine if o.outcome == FAIL), None) or next((o for o in mine if o.outcome == NOT_JUDGED),
                                                                           None)
        note = "" if first is None else (f"{first.point or 'all'}: {shown(first.measured)}, bound {first.bound}"
                                         if first.outcome == FAIL else f"{first.point or 'all'}: {first.detail}")
        style = "red" if n[FAIL] else "yellow" if n[NOT_JUDGED] else "green"
        table.add_row(mine[0].expectation, str(n[PASS]), str(n[FAIL]), str(n[NOT_JUDGED]), note, style=style)
    console.print(table)
    n = expectations.counts(outcomes)
    console.print(f"expectations: {n[PASS]} pass, {n[FAIL]} fail, {n[NOT_JUDGED]} not judged; every row in "
                  f"{folder / FILE}", highlight=False)


def write_junit(path: Path, exp, run_ids: list[str], folder: Path, outcomes: list[Outcome],
                started: dt.datetime) -> None:
    """`run --junit`: every run point of the file (as runs.csv records it, or not run) and every judged
    expectation."""
    runs = tables.read_table(Path(folder) / "runs.csv", tables.RUNS_COLUMNS).drop_duplicates("run_id", keep="last")
    rows = {str(r["run_id"]): r for r in runs.to_dict("records")}
    points = [dict(run_id=i, status=rows[i]["status"] if i in rows else None,
                   reason=rows.get(i, {}).get("reason"), wall_time_s=rows.get(i, {}).get("wall_time_s"))
              for i in run_ids]
    stamp = started.astimezone().replace(tzinfo=None).isoformat(timespec="seconds")
    text = junit.junit_xml(exp.name, points, outcomes, stamp, socket.gethostname(),
                           properties={"experiment file": exp.location(())[0], "results": str(folder)})
    results.atomic_write_text(Path(path), text)
