"""A network you can step into: `up` keeps a topology running until Ctrl-C; `exec` runs a command
in one of its hosts from another shell (like containerlab's deploy/exec or Mininet's CLI).

`up` writes /run/dltestbed/live.json: per host its kind, address, the command prefix that enters
it and its environment. `exec` reads it; nothing of the network is rebuilt."""
from __future__ import annotations

import json
import os
import signal
import subprocess

from testbed.cleanup import STATE_DIR
from testbed.run import emulate
from testbed.run.bringup import BringUp

LIVE = STATE_DIR / "live.json"


class LiveError(RuntimeError):
    pass


def up(spec, progress=print, ready=lambda nodes: None) -> None:
    """Bring the topology up, run its checks, and keep it until SIGINT/SIGTERM; teardown always.
    Under dilation the network is the wall spec's (rates / K, nodes held to cores / K)."""
    machine = emulate.machine_cores()
    if spec.emulation.dilation == "auto":
        spec = emulate.with_dilation(spec, emulate.auto_factor([spec], machine, progress))
    with BringUp(emulate.wall_spec(spec), progress, machine_cores=machine) as brought:
        reason = brought.check("up").reason
        if reason:
            progress(f"WARNING {reason}")
        try:
            _write(brought.net.nodes)
            ready(brought.net.nodes)
            while True:
                signal.pause()
        finally:
            LIVE.unlink(missing_ok=True)


def _write(nodes) -> None:
    doc = {"owner_pid": os.getpid(),
           "hosts": {name: {"kind": type(n).kind, "address": n.address, "prefix": n.exec_prefix(),
                            "env": n.env({})} for name, n in nodes.items()}}
    tmp = LIVE.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc))
    os.replace(tmp, LIVE)


def live_hosts() -> dict:
    """Hosts of the live network; LiveError with advice when there is none."""
    try:
        doc = json.loads(LIVE.read_text())
    except (OSError, ValueError):
        raise LiveError("no live network: start one with `run_experiment.py up FILE` (as root)") from None
    if not os.path.exists(f"/proc/{doc['owner_pid']}"):
        raise LiveError(f"the `up` process (pid {doc['owner_pid']}) is gone; run `run_experiment.py cleanup`")
    return doc["hosts"]


def exec_in(host: str, argv: list[str]) -> int:
    """Run argv in a host of the live network with this terminal; its exit code."""
    hosts = live_hosts()
    if host not in hosts:
        raise LiveError(f"no host {host!r} in the live network (hosts: {', '.join(hosts)})")
    if not argv:
        raise LiveError("no command given: run_experiment.py exec HOST -- COMMAND [ARGS...]")
    entry = hosts[host]
    return subprocess.run(entry["prefix"] + argv, env=entry["env"]).returncode
