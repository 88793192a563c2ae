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


def run(args) -> int:
    from analysis.report import build_report
    try:
        out = build_report(args.dir, include_degraded=args.include_degraded)
    except FileNotFoundError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(out)
    return 0


COMMAND = Command("report", "tables, figures and report.html from stored results (no root)", add_arguments, run)


def main(argv=None) -> int:
    return main_of(COMMAND, argv)
