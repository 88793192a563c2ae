"""Command line of the testbed.

Verbs: run, up, exec, validate, report, compare, predict, profile, caption, cleanup, schema, image, cluster.

One parser; each verb is a `Command` (name, help, arguments, handler) of its own module here, the
verbs that read results under results/, those that look after this machine under machine/.
Modules import what a verb runs only when it runs, so `--help` and `validate` stay quick."""
from __future__ import annotations

import argparse
import logging
import sys

from testbed.cli import profile, run, schema, up, validate
from testbed.cli.machine import cleanup, cluster, image
from testbed.cli.results import caption, compare, predict, report

COMMANDS = [run.COMMAND, up.UP, up.EXEC, validate.COMMAND, report.COMMAND, compare.COMMAND, predict.COMMAND,
            profile.COMMAND, caption.COMMAND, cleanup.COMMAND, schema.COMMAND, image.COMMAND, cluster.COMMAND]


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="run_experiment.py", description=__doc__.splitlines()[0])
    sub = top.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.add_arguments(sub.add_parser(command.name, help=command.help, description=command.help))
    return top


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["profile"] and not {"-h", "--help"} & set(argv[1:2]):
        return profile.run_raw(argv[1:])
    args = parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    return next(c for c in COMMANDS if c.name == args.command).run(args)
