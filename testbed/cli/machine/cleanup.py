"""`cleanup`: remove what a killed run left behind."""
from __future__ import annotations

from testbed.cli.common import Command, need_root


def add_arguments(p) -> None:
    p.add_argument("--force", action="store_true", help="also remove the resources of runs that look alive")


def run(args) -> int:
    need_root("cleanup")
    from testbed.cleanup import cleanup
    actions = cleanup(force=args.force)
    for a in actions:
        print(a)
    print("nothing to clean up" if not actions else f"{len(actions)} action(s)")
    return 0


COMMAND = Command("cleanup", "remove what a killed run left behind (root)", add_arguments, run)
