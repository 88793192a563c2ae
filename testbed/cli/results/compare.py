"""`compare SHARED_DIR FAITHFUL_DIR`: the pair report of a thesis experiment and its faithful twin."""
from __future__ import annotations

import sys
from pathlib import Path

from testbed.cli.common import Command, main_of


def add_arguments(p) -> None:
    p.add_argument("shared", type=Path, help="results of the thesis's condition (nodes sharing the machine)")
    p.add_argument("faithful", type=Path, help="results of its faithful twin (every node held to its cores); "
                                               "the two may come in either order")
    p.add_argument("--out", type=Path, default=None,
                   help="where compare.html and compare.csv go (default: the faithful twin's folder/compare)")
    p.add_argument("--include-degraded", action="store_true",
                   help="count runs whose fidelity is 'degraded' (left out by default)")


def run(args) -> int:
    from analysis.comparisons.compare import ordered, write_pair_report
    try:
        shared, twin = ordered(args.shared, args.faithful, args.include_degraded)
        out = args.out if args.out is not None else twin.path / "compare"
        path = write_pair_report(shared, twin, out, include_degraded=args.include_degraded)
    except (FileNotFoundError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(path)
    return 0


COMMAND = Command("compare", "where the slowdown with more nodes came from: a thesis experiment against its "
                  "faithful twin (compare.html, compare.csv; no root)", add_arguments, run)


def main(argv=None) -> int:
    return main_of(COMMAND, argv)
