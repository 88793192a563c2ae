"""A network you can step into: `up` keeps a topology running until Ctrl-C; `exec` runs a command
in one of its hosts from another shell (like containerlab's deploy/exec or Mininet's CLI). A network
held from Python (testbed.api.network, testbed/run/live/live_network.py) is kept the same way.

`up` writes /run/dltestbed/live.json (root only): its identity, and per host its kind, address, the
command prefix that enters it and the environment the testbed sets there (what the node inherits
from this machine is named, not copied). `exec` reads it; nothing of the network is rebuilt."""
from __future__ import annotations

import json
import os
import signal
import subprocess
from contextlib import contextmanager
from typing import Iterator

from testbed.cleanup import STATE_DIR, run_lock, write_private
from testbed.owner import alive, identity
from testbed.run.bringup.network_up import BringUp, Checked

LIVE = STATE_DIR / "live.json"


class LiveError(RuntimeError):
    pass


def up(resolved, progress=print, ready=lambda nodes: None) -> None:
    """Bring a resolved point's network up (point.ResolvedPoint: under dilation the wall spec's, rates /
    K and nodes held to cores / K), run its checks, and keep it until SIGINT/SIGTERM; teardown always."""
    with kept(resolved, progress) as (brought, checked):
        if checked.reason:
            progress(f"WARNING {checked.reason}")
        ready(brought.net.nodes)
        while True:
            signal.pause()


@contextmanager
def kept(resolved, progress=print, checks: bool = True) -> Iterator[tuple[BringUp, Checked]]:
    """`with kept(point) as (brought, checked):` the resolved point's network up under the network lock,
    its checks run (checks=False: not run), live.json written for `exec`; live.json removed and the
    network torn down when the block ends, whatever ended it (`up` and testbed.api.network)."""
    with run_lock(), BringUp(resolved, progress) as brought:
        checked = brought.check("up") if checks else Checked()
        try:
            _write(brought.net.nodes)
            yield brought, checked
        finally:
            LIVE.unlink(missing_ok=True)


def _write(nodes) -> None:
    doc = {"owner": identity(), "hosts": {name: {"kind": type(n).kind, "address": n.address,
                                                 "prefix": n.exec_prefix(), **_env_entry(n.env({}))}
                                          for name, n in nodes.items()}}
    write_private(LIVE, json.dumps(doc))


def _env_entry(env: dict[str, str]) -> dict:
    """A node's environment as live.json keeps it: what the testbed set, and only the names of what
    it inherits from this machine's environment (exec takes their values from its own)."""
    inherited = sorted(k for k, v in env.items() if os.environ.get(k) == v)
    return {"env": {k: v for k, v in env.items() if k not in inherited}, "inherit": inherited}


def live_hosts() -> dict:
    """Hosts of the live network; LiveError with advice when there is none."""
    try:
        doc = json.loads(LIVE.read_text())
        owner, hosts = str(doc["owner"]), doc["hosts"]
        if not all({"prefix", "env"} <= set(h) for h in hosts.values()):
            raise ValueError("a host without its command prefix or environment")
    except OSError:
        raise LiveError("no live network: start one with `run_experiment.py up FILE` (as root)") from None
    except (ValueError, KeyError, TypeError, AttributeError):
        raise LiveError(f"{LIVE} is not a live network's file (written by another version, or damaged): "
                        "run `run_experiment.py cleanup`, then `up` again") from None
    if not alive(owner):
        raise LiveError(f"the process that held the live network (pid {owner.split('-')[0]}: `up` or "
                        "testbed.api.network) is gone; run `run_experiment.py cleanup`")
    return hosts


def exec_in(host: str, argv: list[str]) -> int:
    """Run argv in a host of the live network with this terminal; its exit code."""
    hosts = live_hosts()
    if host not in hosts:
        raise LiveError(f"no host {host!r} in the live network (hosts: {', '.join(hosts)})")
    if not argv:
        raise LiveError("no command given: run_experiment.py exec HOST -- COMMAND [ARGS...]")
    entry = hosts[host]
    env = {k: os.environ[k] for k in entry.get("inherit", []) if k in os.environ} | entry["env"]
    return subprocess.run(entry["prefix"] + argv, env=env).returncode
