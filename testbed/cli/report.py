"""`report DIR`: tables, figures and report.html from stored results."""
from __future__ import annotations

import sys
from pathlib import Path

from testbed.cli.common import Command, main_of


def add_arguments(p) -> None:
    p.add_argument("dir", type=Path, help="experiment folder with runs.csv")
    p.add_argument("--include-degraded", action="store_true",
                   help="count runs whose fidelity is 'degraded' in the trends, tables and fits (they are "
                        "marked in the figures either way)")
    p.add_argument("--compare", type=Path, default=None, metavar="REFERENCE",
                   help="stored results of the same set-up (e.g. results/reference/thesis-fig15): draw these "
                        "over them and say where they differ beyond the spread of the repeats")


def draw(folder: Path, include_degraded: bool = False, reference: Path | None = None) -> Path | None:
    """build_report of `folder` (against `reference`); None after saying, in one sentence, why there is none."""
    from analysis.report import build_report
    from analysis.tables import ResultsError
    try:
        return build_report(folder, include_degraded=include_degraded, reference_dir=reference)
    except (FileNotFoundError, ResultsError) as err:
        print(f"error: {err}; move it away, or run the experiment again into a new folder (`run FILE --out "
              "NEW`)" if isinstance(err, ResultsError) else f"error: {err}", file=sys.stderr)
    return None


def run(args) -> int:
    out = draw(args.dir, include_degraded=args.include_degraded, reference=args.compare)
    if out is None:
        return 2
    print(out)
    return 0


COMMAND = Command("report", "tables, figures and report.html from stored results (no root)", add_arguments, run)


def main(argv=None) -> int:
    return main_of(COMMAND, argv)
