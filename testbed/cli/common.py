"""What the commands share: the console, the root check, --set, loading a file, one command's table row."""
from __future__ import annotations

import argparse
import os
import sys
from typing import Callable, NamedTuple

from rich.console import Console

console = Console(stderr=True)

# `run`: every point ran, an expectation failed; `report --fail-on-regression`: a configuration is slower than
# the reference beyond the spread. No other exit code of the commands is 101 (run's failed points are 1-100).
EXPECTATION_FAILED = 101


class Command(NamedTuple):
    """One verb of `run_experiment.py`: its name, its one-line help, its arguments and what it does."""
    name: str
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


def main_of(command: Command, argv=None) -> int:
    """`command` alone, as `run_experiment.py NAME ARGS` runs it."""
    parser = argparse.ArgumentParser(prog=f"run_experiment.py {command.name}", description=command.help)
    command.add_arguments(parser)
    return command.run(parser.parse_args(argv))


def add_set_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY.PATH=VALUE",
                   help="override a value of the file (also a sweep axis), e.g. topology.link.bw=100mbit")


def need_root(what: str) -> None:
    if os.geteuid() != 0:
        console.print(f"[red]error[/red]: {what} needs root (Mininet, Open vSwitch and tc): run it with sudo")
        sys.exit(2)


def interrupt_on_signals() -> None:
    """SIGTERM and SIGINT raise KeyboardInterrupt, even when started with SIGINT ignored or with either
    blocked (both are inherited across exec)."""
    import signal
    signal.signal(signal.SIGTERM, _raise_interrupt)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT})


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt


def load(args):
    """(experiment, run points) of the file and --set overrides; None after printing what is wrong."""
    from testbed.spec import SpecError, expand_points, load_spec
    try:
        exp = load_spec(args.file, args.overrides)
        return exp, expand_points(exp)
    except SpecError as err:
        console.print(str(err), highlight=False, markup=False)
        return None
