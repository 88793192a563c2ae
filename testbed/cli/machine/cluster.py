"""`cluster up N | status | down`: local servers for the cluster edition."""
from __future__ import annotations

from testbed.cli.common import Command, console, need_root


def add_arguments(p) -> None:
    p.add_argument("action", choices=["up", "status", "down"])
    p.add_argument("n", nargs="?", type=int, default=2, help="how many servers `up` starts (default 2)")


def run(args) -> int:
    need_root("cluster")
    from testbed.cluster import servers
    say = lambda msg: console.print(f"[cluster] {msg}", highlight=False, markup=False, soft_wrap=True)  # noqa: E731
    try:
        if args.action == "up":
            print(servers.cluster_yaml(servers.up(args.n, progress=say)), end="")
        elif args.action == "status":
            found = servers.status()
            for s in found:
                print(f"{s.name:<6} {s.address:<15} {s.state:<8} {s.container:<18} {s.image}")
            running = [s for s in found if s.state == "running"]
            print(servers.cluster_yaml(running) if running else "no servers running", end="")
        else:
            actions = servers.down(progress=say)
            say(f"{len(actions)} removed" if actions else "no servers")
    except servers.ClusterError as err:
        console.print(f"[red]error[/red]: {err}", highlight=False)
        return 1
    except KeyboardInterrupt:
        say("interrupted: run_experiment.py cluster down removes what was started")
        return 130
    return 0


COMMAND = Command("cluster", "local servers for the cluster edition: cluster up N | status | down (root)",
                  add_arguments, run)
