"""`up FILE` keeps a network running until Ctrl-C; `exec HOST -- CMD` runs a command in one of its hosts."""
from __future__ import annotations

import argparse

from testbed.cli.common import Command, add_set_argument, console, interrupt_on_signals, load, need_root


def add_up_arguments(p) -> None:
    p.add_argument("file")
    add_set_argument(p)


def up(args) -> int:
    from testbed.nodes.base import NodeError
    from testbed.net.errors import NetworkError
    from testbed.owner import LockHeld
    from testbed.spec import SpecError
    loaded = load(args)
    if loaded is None:
        return 2
    exp, points = loaded
    need_root("up")
    from testbed.run.live.live import up as keep_up
    from testbed.run.bringup.network_up import preflight
    from testbed.run.point import switch_capacity
    from testbed.run.point.point import machine_cores, resolve_all
    if len(points) > 1:
        console.print(f"the file sweeps {len(points)} points; bringing up the first ({points[0].run_id})")
    interrupt_on_signals()

    def ready(nodes):
        for name, node in nodes.items():
            console.print(f"  {name:<8} {node.address:<15} {type(node).kind}", highlight=False)
        console.print(f"up: {len(nodes)} hosts. From another shell: run_experiment.py exec "
                      f"{next(iter(nodes))} -- ping -c1 {list(nodes.values())[-1].address}; Ctrl-C tears it down",
                      highlight=False)
    try:
        first = resolve_all(points[:1], machine_cores(), progress=console.print,
                            switch=lambda kind: switch_capacity.capacity(kind, console.print))
        preflight(exp, first, progress=console.print)
        keep_up(first[0], progress=lambda msg: console.print(f"  {msg}", highlight=False), ready=ready)
    except SpecError as err:
        console.print(str(err), highlight=False, markup=False)
        return 2
    except (LockHeld, NetworkError, NodeError) as err:
        console.print(f"error: {err}", highlight=False, markup=False)
        return 1
    except KeyboardInterrupt:
        console.print("torn down")
    return 0


def add_exec_arguments(p) -> None:
    p.add_argument("host")
    p.add_argument("argv", nargs=argparse.REMAINDER, metavar="-- CMD")


def exec_(args) -> int:
    need_root("exec")
    from testbed.run.live.live import LiveError, exec_in
    argv = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
    try:
        return exec_in(args.host, argv)
    except LiveError as err:
        console.print(f"[red]error[/red]: {err}")
        return 2


UP = Command("up", "bring a topology up (checks included) and keep it until Ctrl-C (root)", add_up_arguments, up)
EXEC = Command("exec", "run a command in a host of the live network: exec HOST -- CMD... (root)",
               add_exec_arguments, exec_)
