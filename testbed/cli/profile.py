"""`profile`: measure a model's or a script's training step where the hardware is, and write a compute profile
that `emulation.compute: replay` replays (docs/profiles.md). The same as `python -m workloads.profiling`, which
needs only the engine: no root, no Mininet, none of the testbed's other dependencies."""
from __future__ import annotations

from testbed.cli.common import Command


def add_arguments(p) -> None:
    from workloads.profiling.__main__ import add_arguments as profiler_arguments

    profiler_arguments(p)
    p.epilog = "after --: the script's own arguments"


def run_raw(argv: list[str]) -> int:
    """The profiler with the verb's own arguments, `--` and the script's arguments included (argparse's
    subcommands would take the script's options for the testbed's)."""
    from workloads.profiling.__main__ import main

    return main(argv)


COMMAND = Command("profile", "measure a model's or script's training step where the hardware is, and write a "
                  "compute profile to replay (no root)", add_arguments, lambda args: 2)
