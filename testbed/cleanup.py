"""Know what a run created, so it can be removed after success, failure, Ctrl-C or a crash.

Before the testbed creates a bridge, interface, cgroup, container or process, it records it in a
state file under /run/dltestbed/. `teardown` of a live run and `cleanup` after a killed one both
remove exactly what was recorded, plus OVS rows tagged and containers labelled as the testbed's own."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

from testbed.nodes import cgroups

STATE_DIR = Path(os.environ.get("DLTB_STATE_DIR", "/run/dltestbed"))
OVS_TAG = ("external_ids", "dltestbed", "1")
# Command-line markers that identify processes the testbed starts (guards against pid reuse).
PROCESS_MARKERS = ("mininet:", "workloads/train.py", "iperf3", "ping", "mnexec")


def kind_records() -> dict[str, list]:
    """The registry's list name -> the node kinds that record in it, in registry order (the cluster's
    servers record in the remote kind's list too)."""
    from testbed.nodes import kind_classes
    lists: dict[str, list] = {}
    for cls in kind_classes():
        if cls.records:
            lists.setdefault(cls.records, []).append(cls)
    return lists


class State:
    """What one live run made: the lists this module removes itself, one list per node kind that
    records (docker: containers, remote: {machine, token|pgid|tc}) and sysctl name -> value to restore."""

    LISTS = ("bridges", "linux_bridges", "interfaces", "pids",
             "cgroups",        # cgroup-tools names (state files of older versions)
             "cgroup_dirs")

    def __init__(self, owner_pid: int, sysctls: dict[str, str] | None = None, **lists):
        names = (*self.LISTS, *kind_records())
        unknown = set(lists) - set(names)
        if unknown:
            raise TypeError(f"unknown state lists: {', '.join(sorted(unknown))}")
        self.owner_pid, self.sysctls = owner_pid, dict(sysctls or {})
        for name in names:
            setattr(self, name, list(lists.get(name, [])))

    def as_dict(self) -> dict:
        return dict(vars(self))


class Registry:
    """The state file of one live run; every `add` is written to disk before the resource exists."""

    def __init__(self):
        STATE_DIR.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()     # nodes start processes from several threads (checks, benches)
        self.state = State(owner_pid=os.getpid())
        self.path = STATE_DIR / f"run-{os.getpid()}-{time.monotonic_ns()}.json"
        self._save()

    def add(self, kind: str, *items) -> None:
        with self._lock:
            getattr(self.state, kind).extend(i for i in items if i not in getattr(self.state, kind))
            self._save()

    def remember_sysctl(self, name: str, old_value: str) -> None:
        with self._lock:
            self.state.sysctls.setdefault(name, old_value)
            self._save()

    def discard(self, kind: str, *items) -> None:
        """Forget recorded items their owner has removed already."""
        with self._lock:
            setattr(self.state, kind, [i for i in getattr(self.state, kind) if i not in items])
            self._save()

    def _save(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.state.as_dict()))
        os.replace(tmp, self.path)

    def release(self) -> list[str]:
        """Remove everything recorded, then the state file itself."""
        actions = remove_state(self.state) + destroy_tagged_ovs_rows()
        settle(self.path, self.state)
        return actions


def _kept(state: State) -> dict[str, list]:
    """The kinds' records that could not be removed yet (a machine that did not answer)."""
    return {name: getattr(state, name) for name in kind_records() if getattr(state, name)}


def settle(path: Path, state: State) -> None:
    """After removal: drop the state file, or keep what unreachable machines still hold (for `cleanup`);
    a file another cleanup has dropped meanwhile stays dropped."""
    kept = _kept(state)
    if kept and path.exists():
        path.write_text(json.dumps(State(state.owner_pid, **kept).as_dict()))
    else:
        path.unlink(missing_ok=True)


def _run(*cmd: str) -> subprocess.CompletedProcess:
    return subprocess.run(list(cmd), capture_output=True, text=True)


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def kill_processes(pids) -> list[str]:
    """SIGKILL recorded processes that still carry one of the testbed's markers."""
    actions = []
    for pid in pids:
        cmd = _cmdline(pid)
        if cmd and any(m in cmd for m in PROCESS_MARKERS):
            try:
                os.kill(pid, signal.SIGKILL)
                actions.append(f"killed process {pid} ({cmd[:60].strip()})")
            except ProcessLookupError:
                pass
    return actions


def _link_exists(name: str) -> bool:
    return Path(f"/sys/class/net/{name}").exists()


def remove_state(state: State) -> list[str]:
    actions = kill_processes(state.pids)
    for name, kinds in kind_records().items():
        if getattr(state, name):   # what could not be removed (e.g. a machine did not answer) stays recorded
            done, left = kinds[0].remove_records(getattr(state, name))
            setattr(state, name, left)
            actions += done
    for br in state.bridges:
        # With Open vSwitch down (or restarted) del-br cannot reach the bridge, but the userspace
        # datapath's tap device stays in the kernel: remove the device either way.
        deleted = _run("ovs-vsctl", "--timeout=5", "--if-exists", "del-br", br).returncode == 0
        if _link_exists(br):
            deleted = _run("ip", "link", "del", br).returncode == 0
        if deleted:
            actions.append(f"deleted OVS bridge {br}")
    for br in state.linux_bridges:
        if _link_exists(br):
            _run("ip", "link", "set", br, "down")
            _run("ip", "link", "del", br)
            actions.append(f"deleted Linux bridge {br}")
    for intf in state.interfaces:
        if _link_exists(intf):
            _run("ip", "link", "del", intf)
            actions.append(f"deleted interface {intf}")
    for cg in state.cgroups:
        if _run("cgdelete", "-r", cg).returncode == 0:
            actions.append(f"deleted cgroup {cg}")
    for d in state.cgroup_dirs:
        if Path(d).exists() and cgroups.remove(Path(d)):
            actions.append(f"deleted cgroup {d}")
    for name, value in state.sysctls.items():
        _run("sysctl", "-qw", f"{name}={value}")
        actions.append(f"restored sysctl {name}={value}")
    return actions


def destroy_leftovers(force: bool = False) -> list[str]:
    """What the node kinds' runs that are over left unrecorded (e.g. labelled containers); every
    run's with force=True."""
    from testbed.nodes import kind_classes
    run_alive = (lambda pid: False) if force else _owner_alive
    return [action for cls in kind_classes() for action in cls.destroy_leftovers(run_alive)]


def ovs_running() -> bool:
    return _run("ovs-vsctl", "--timeout=2", "show").returncode == 0


def destroy_tagged_ovs_rows() -> list[str]:
    """QoS and Queue rows (and bridges) that carry the testbed's tag and are no longer used."""
    if not ovs_running():
        return []
    actions = []
    col, key, val = OVS_TAG
    for br in _run("ovs-vsctl", "--bare", "--columns=name", "find", "Bridge", f"{col}:{key}={val}").stdout.split():
        _run("ovs-vsctl", "--if-exists", "del-br", br)
        actions.append(f"deleted tagged OVS bridge {br}")
    for table in ("QoS", "Queue"):
        out = _run("ovs-vsctl", "--bare", "--columns=_uuid", "find", table, f"{col}:{key}={val}").stdout
        for uuid in out.split():
            if _run("ovs-vsctl", "--if-exists", "destroy", table, uuid).returncode == 0:
                actions.append(f"destroyed OVS {table} row {uuid[:8]}")
    return actions


def _owner_alive(pid: int) -> bool:
    """The run's process still exists and is still a testbed process (not a reused pid)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return "run_experiment" in _cmdline(pid) or "pytest" in _cmdline(pid)


def cleanup(force: bool = False) -> list[str]:
    """Remove what dead runs left (all recorded runs with force=True), and stray training processes."""
    actions: list[str] = []
    live_runs = False
    if STATE_DIR.exists():
        for path in sorted(STATE_DIR.glob("run-*.json")):
            try:
                state = State(**json.loads(path.read_text()))
            except (OSError, ValueError, TypeError):
                path.unlink(missing_ok=True)
                continue
            if _owner_alive(state.owner_pid) and not force:
                actions.append(f"skipped {path.name}: its run (pid {state.owner_pid}) is still alive")
                live_runs = True
                continue
            actions += remove_state(state)
            settle(path, state)
            if _kept(state):
                actions.append(f"kept {path} for machines that did not answer (delete it to forget them)")
    actions += _forget_dead_live_network()
    if (live_runs or _live_network_alive()) and not force:   # a live run's tasks are its own
        actions.append("left training processes alone: a run is still alive (`cleanup --force` ends them too)")
    else:
        actions += kill_processes(_pids_matching("workloads/train.py"))
    actions += destroy_leftovers(force)
    actions += destroy_tagged_ovs_rows()
    return actions


def _live_owner() -> int | None:
    """The pid of the `up` that wrote live.json, if there is one."""
    try:
        return json.loads((STATE_DIR / "live.json").read_text())["owner_pid"]
    except (OSError, ValueError, KeyError):
        return None


def _live_network_alive() -> bool:
    owner = _live_owner()
    return owner is not None and _owner_alive(owner)


def _forget_dead_live_network() -> list[str]:
    """The live.json of an `up` that was killed (its network is removed with its state file)."""
    owner = _live_owner()
    if owner is None or _owner_alive(owner):
        return []
    (STATE_DIR / "live.json").unlink(missing_ok=True)
    return [f"forgot the live network of `up` (pid {owner})"]


def _pids_matching(marker: str) -> list[int]:
    return [int(p.name) for p in Path("/proc").iterdir()
            if p.name.isdigit() and int(p.name) != os.getpid() and marker in _cmdline(int(p.name))]
