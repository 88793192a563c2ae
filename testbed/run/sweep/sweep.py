"""Many runs: order, resume, progress, failures recorded and not fatal."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from testbed.cleanup import run_lock
from testbed.run.sweep import expect_run
from testbed.run import phases, results
from testbed.run.point import point, switch_capacity
from testbed.run.bringup.network_up import preflight
from testbed.run.sweep.runner import run_point
from testbed.spec import expand_points


@dataclass
class SweepSummary:
    done: list[str] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    interrupted: bool = False
    run_ids: list[str] = field(default_factory=list)        # every point of the file, in order
    expectations: list = field(default_factory=list)        # analysis.comparisons.expectations.Outcome, as judged last


def completed_ids(exp_dir: Path, retry_failed: bool) -> set[str]:
    """Run ids to skip on resume: ok runs, and failed ones unless they are to be retried."""
    runs = results.read_table(exp_dir, "runs")
    if runs.empty:
        return set()
    keep = runs["status"] == "ok" if retry_failed else runs["status"].isin(["ok", "failed"])
    return set(runs.loc[keep, "run_id"])


def eta_text(durations: list[float], remaining: int) -> str:
    if not durations or remaining == 0:
        return "-"
    seconds = sum(durations) / len(durations) * remaining
    return time.strftime("%H:%M:%S", time.gmtime(seconds))


def run_sweep(exp, exp_dir: Path, *, retry_failed: bool = False, quiet: bool = False,
              console: Console | None = None) -> SweepSummary:
    """Every point not yet recorded in exp_dir, holding the results folder's lock and the network
    lock from before the first point to after the last (LockHeld, at once, when another run has
    either)."""
    console = console or Console(stderr=True)
    with results.folder_lock(exp_dir), run_lock():
        return _sweep(exp, exp_dir, retry_failed, quiet, console)


def _sweep(exp, exp_dir: Path, retry_failed: bool, quiet: bool, console: Console) -> SweepSummary:
    run_points = expand_points(exp)
    say = lambda msg: console.print(msg, highlight=False)  # noqa: E731
    points = point.resolve_all(run_points, point.machine_cores(), progress=say,
                               switch=lambda kind: switch_capacity.capacity(kind, say))
    preflight(exp, points, progress=lambda msg: console.print(msg, highlight=False))
    skip = completed_ids(exp_dir, retry_failed)
    todo = [p for p in points if p.run_id not in skip]
    summary = SweepSummary(skipped=[p.run_id for p in points if p.run_id in skip],
                           run_ids=[p.run_id for p in points])
    judge = expect_run.Judge(exp, run_points, exp_dir)
    if summary.skipped:
        console.print(f"resuming: {len(summary.skipped)} of {len(points)} point(s) already recorded in {exp_dir}")
    durations: list[float] = []
    log = (lambda msg: None) if quiet else (lambda msg: console.print(f"  {msg}", highlight=False))
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TextColumn("{task.fields[status]}"), console=console, disable=quiet) as bar:
        task = bar.add_task("sweep", total=len(todo), status="")
        for i, resolved in enumerate(todo):
            status = (f"ok {len(summary.done)} failed {len(summary.failed)} "
                      f"left {len(todo) - i} ETA {eta_text(durations, len(todo) - i)}")
            bar.update(task, description=resolved.run_id, status=status)
            console.print(f"[bold]run {i + 1}/{len(todo)}[/bold] {resolved.run_id}", highlight=False)
            started = time.monotonic()
            try:
                with phases.recording() as timing:
                    row = run_point(resolved, exp_dir, progress=log)
            except KeyboardInterrupt:
                summary.interrupted = True
                console.print(f"interrupted: {resolved.run_id} was cleaned up and is not recorded; "
                              "run the same command again to resume")
                break
            durations.append(time.monotonic() - started)
            if row["status"] == "ok":
                summary.done.append(resolved.run_id)
                console.print(f"  ok: training {row.get('training_time_s') or float('nan'):.2f} s, "
                              f"wall {row['wall_time_s']:.1f} s", highlight=False)
            else:
                summary.failed.append((resolved.run_id, row["reason"]))
                console.print(f"  [red]failed[/red]: {row['reason']}", highlight=False)
            console.print(f"  {timing.text(total=durations[-1])}", highlight=False)
            judged = judge.after_point(resolved.run_id)
            if judged:
                console.print(f"  {expect_run.point_line(judged)}", highlight=False, markup=False)
            bar.advance(task)
    summary.expectations = judge.outcomes if summary.interrupted else judge.finish()
    return summary
