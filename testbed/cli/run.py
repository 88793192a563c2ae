"""`run FILE`: every point of an experiment file, then the report."""
from __future__ import annotations

import datetime as dt
import json
import time
from pathlib import Path

from testbed.cli.common import (EXPECTATION_FAILED, Command, add_set_argument, console, interrupt_on_signals, load,
                                need_root)
from testbed.cli.presets import PRESETS

INTERRUPTED = 130


def add_arguments(p) -> None:
    p.add_argument("file")
    add_set_argument(p)
    p.add_argument("--out", help="results folder (default results/<name>)")
    p.add_argument("--dry-run", action="store_true", help="list the run points and exit (no root)")
    p.add_argument("--retry-failed", action="store_true", help="rerun points recorded as failed")
    p.add_argument("--quiet", action="store_true", help="no progress bar or per-run detail (CI logs)")
    p.add_argument("--no-report", action="store_true", help="skip the report at the end")
    p.add_argument("--report", action="store_true", help="draw the report at the end even under a preset that skips it")
    p.add_argument("--preset", choices=sorted(PRESETS), help="; ".join(f"{p.name}: {p.help}" for p in PRESETS.values()))
    p.add_argument("--junit", type=Path, metavar="FILE", help="write a JUnit XML file for CI: one testcase per run "
                   "point and one per judged expectation")


def exit_code(failed: int, interrupted: bool, outcomes) -> int:
    """130 when interrupted; else the number of failed points (at most 100); else 101 when an expectation
    failed (not judged is no failure); else 0. Bad files, refused preflights and locks taken return 2 before."""
    if interrupted:
        return INTERRUPTED
    if failed:
        return min(failed, 100)
    return EXPECTATION_FAILED if any(o.outcome == "fail" for o in outcomes) else 0


def apply_preset(args) -> bool:
    """The preset's overrides put before the command line's own --set (which win); whether to draw the report."""
    preset = PRESETS.get(args.preset) if getattr(args, "preset", None) else None
    if preset is None:
        return not args.no_report
    args.overrides = [*preset.overrides, *args.overrides]
    console.print(preset.describe(), highlight=False, markup=False)
    return not args.no_report and (preset.report or args.report)


def install_zoo_packages(args) -> bool:
    """The zoo packages the file (or --set) names a model of, installed on first use; False after saying why
    they could not be."""
    from testbed import zoo_packages
    if args.dry_run:
        return True                 # (validate says what is missing)
    try:
        text = Path(args.file).read_text(errors="replace")[:10_000_000]
    except OSError:
        return True                 # load() names the file
    try:
        zoo_packages.install(zoo_packages.wanted(text + "\n" + "\n".join(args.overrides)),
                             lambda msg: console.print(msg, highlight=False, markup=False))
    except zoo_packages.InstallError as err:
        console.print(f"{args.file}: {err}", highlight=False, markup=False)
        return False
    return True


def run(args) -> int:
    from testbed.owner import LockHeld
    from testbed.spec import SpecError
    draw_report = apply_preset(args)
    if not install_zoo_packages(args):
        return 2
    loaded = load(args)
    if loaded is None:
        return 2
    exp, points = loaded
    out = Path(args.out or Path("results") / exp.name)
    from analysis.outputs import OutputError, check_file, check_folder
    try:                            # before anything starts: where the results and the JUnit file go
        check_folder(out)
        if args.junit:
            check_file(args.junit)
    except OutputError as err:
        console.print(f"error: {err}", highlight=False, markup=False)
        return 2
    if args.dry_run:
        for p in points:
            print(p.run_id, json.dumps(p.params, default=str))
        print(f"{len(points)} run point(s) -> {out}")
        return 0
    need_root("run")
    from testbed.run.sweep.sweep import run_sweep
    interrupt_on_signals()
    out.mkdir(parents=True, exist_ok=True)
    started = dt.datetime.now()
    try:
        summary = run_sweep(exp, out, retry_failed=args.retry_failed, quiet=args.quiet, console=console)
    except SpecError as err:
        console.print(str(err), highlight=False, markup=False)
        return 2
    except LockHeld as err:
        console.print(f"error: {err}", highlight=False, markup=False)
        return 2
    if draw_report and (summary.done or summary.skipped):
        from testbed.cli.results.report import draw
        started_report = time.monotonic()
        try:
            report = draw(out)
            console.print(f"phases: report {time.monotonic() - started_report:.1f} s", highlight=False)
        except KeyboardInterrupt:
            console.print(f"interrupted while drawing the report; the tables in {out}/ are complete, and "
                          f"`run_experiment.py report {out}` draws it")
            summary.interrupted = True
            report = None
        if report is not None:
            console.print(f"report: {report}")
    if summary.done or summary.skipped:
        show_answer(out)
    from testbed.run.sweep import expect_run
    expect_run.show(summary.expectations, out, console)
    console.print(f"{len(summary.done)} ok, {len(summary.failed)} failed, {len(summary.skipped)} already done; "
                  f"tables in {out}/ (runs.csv, checks.csv, steps.csv, usage.csv)")
    if args.junit:
        expect_run.write_junit(args.junit, exp, summary.run_ids, out, summary.expectations, started)
        console.print(f"JUnit: {args.junit}", highlight=False)
    return exit_code(len(summary.failed), summary.interrupted, summary.expectations)


def show_answer(out: Path) -> list[str]:
    """The answer at a glance in a few lines: analysis.tables.glance's table of the results, the one the report's
    first section shows (tables/glance.csv), so both give the same factors. Returns the lines printed."""
    from analysis.tables import glance
    from analysis.tables.tables import ResultsError
    try:
        lines = glance.answer_lines(out)
    except (ResultsError, OSError, ValueError, KeyError) as err:
        lines = [f"answer: not drawn ({err})"]
    for line in lines:
        console.print(line, highlight=False, markup=False, soft_wrap=True)
    return lines


COMMAND = Command("run", "run every point of an experiment file (root)", add_arguments, run)
