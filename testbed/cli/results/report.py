"""`report DIR`: tables, figures and report.html from stored results."""
from __future__ import annotations

import sys
from pathlib import Path

from testbed.cli.common import EXPECTATION_FAILED, Command, main_of


def add_arguments(p) -> None:
    p.add_argument("dir", type=Path, help="experiment folder with runs.csv")
    p.add_argument("--include-degraded", action="store_true",
                   help="count runs whose fidelity is 'degraded' in the trends, tables and fits (they are "
                        "marked in the figures either way)")
    p.add_argument("--compare", type=Path, default=None, metavar="REFERENCE",
                   help="stored results of the same set-up (e.g. results/reference/thesis-fig15): draw these "
                        "over them and say where they differ beyond the spread of the repeats")
    p.add_argument("--fail-on-regression", action="store_true",
                   help=f"with --compare: exit {EXPECTATION_FAILED} when a configuration's steady samples/s is lower "
                        "than the reference's beyond the spread of the repeats, naming it")
    p.add_argument("--fail-on-change", action="store_true",
                   help=f"with --compare: exit {EXPECTATION_FAILED} when one is lower or higher beyond the spread "
                        "(the reference no longer describes the set-up either way)")


def draw(folder: Path, include_degraded: bool = False, reference: Path | None = None) -> Path | None:
    """build_report of `folder` (against `reference`); None after saying, in one sentence, why there is none."""
    from analysis.outputs import OutputError
    from analysis.report import build_report
    from analysis.tables.tables import ResultsError
    try:
        return build_report(folder, include_degraded=include_degraded, reference_dir=reference)
    except OutputError as err:
        print(f"error: {err}", file=sys.stderr)
        return None
    except (FileNotFoundError, ResultsError) as err:
        print(f"error: {err}; move it away, or run the experiment again into a new folder (`run FILE --out "
              "NEW`)" if isinstance(err, ResultsError) else f"error: {err}", file=sys.stderr)
    return None


def run(args) -> int:
    gate = args.fail_on_regression or args.fail_on_change
    if gate and args.compare is None:
        print("error: --fail-on-regression and --fail-on-change judge against stored results: add --compare "
              "REFERENCE", file=sys.stderr)
        return 2
    out = draw(args.dir, include_degraded=args.include_degraded, reference=args.compare)
    if out is None:
        return 2
    print(out)
    return regression_gate(args.dir, args.compare, args.include_degraded, args.fail_on_change) if gate else 0


def regression_gate(folder: Path, reference_dir: Path, include_degraded: bool = False, faster_too: bool = False) -> int:
    """EXPECTATION_FAILED, after naming each, when a configuration's steady samples/s differs from the reference's
    beyond the spread (lower; faster_too: or higher), else 0. Ranges apart with too few repeats are said, not
    failed."""
    from analysis.comparisons import reference
    from analysis.tables import tables
    ref, mine = tables.load_experiment(reference_dir), tables.load_experiment(folder)
    ref.include_degraded = mine.include_degraded = include_degraded
    judged, too_few = reference.slower(reference.against(ref, mine), faster_too)
    for r in judged.itertuples():
        word = "slower" if r.verdict.startswith("lower") else "faster"
        print(f"{word} than the reference beyond the spread: {reference.point_text(r)}: {r.yours_mean:.4g} against "
              f"{r.reference_mean:.4g} steady samples/s (yours / reference {r.ratio:.2f}; {r.yours_runs} runs against "
              f"{r.reference_runs})")
    for r in too_few.itertuples():
        print(f"not judged: {reference.point_text(r)}: the ranges lie apart ({r.yours_mean:.4g} against "
              f"{r.reference_mean:.4g} steady samples/s) but {r.yours_runs} runs against {r.reference_runs} are "
              "too few to judge (run more repeats)")
    if judged.empty:
        print("no configuration " + ("differs from" if faster_too else "is slower than") + " the reference beyond "
              "the spread of the repeats")
        return 0
    return EXPECTATION_FAILED


COMMAND = Command("report", "tables, figures and report.html from stored results (no root)", add_arguments, run)


def main(argv=None) -> int:
    return main_of(COMMAND, argv)
