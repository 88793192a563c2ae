"""Know what a run created, so it can be removed after success, failure, Ctrl-C or a crash.

Before the testbed creates a bridge, interface, cgroup, container or process, it records it in a
state file under /run/dltestbed/. `teardown` of a live run and `cleanup` after a killed one both
remove exactly what was recorded, plus OVS rows tagged and containers labelled as the testbed's own."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from testbed.spec.kinds import SWITCH_KINDS
from testbed.nodes import cgroups
from testbed.owner import OVS_OWNER_KEY, ProcessLock, alive, identity, process_owner
from workloads.events import TASK_TMP_PREFIX

STATE_DIR = Path(os.environ.get("DLTB_STATE_DIR", "/run/dltestbed"))
OVS_TAG = ("external_ids", "dltestbed", "1")
TIMEOUT_S = 30                        # any one command of teardown or cleanup
OVS_TIMEOUT = "--timeout=10"          # ovs-vsctl waits forever for a dead ovs-vswitchd without it


def run_lock() -> ProcessLock:
    """One network at a time on this machine (names like h1/s1 would clash): a sweep or an `up`
    holds it from start to end; each point takes it again (re-entrant)."""
    return ProcessLock(STATE_DIR / "lock", "the testbed's network lock (one run or `up` at a time here)")


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
    records (docker: containers, remote: {machine, token|pgid|tc}) and sysctl name -> value to restore.
    `owner` is the run's identity ("PID-START", testbed.owner); pids are processes' identities too."""

    LISTS = (*(k.records for k in SWITCH_KINDS.values()), "interfaces", "pids",
             "cgroups",        # cgroup-tools names (state files of older versions)
             "cgroup_dirs")

    def __init__(self, owner_pid: int, sysctls: dict[str, str] | None = None, owner: str = "", **lists):
        names = (*self.LISTS, *kind_records())
        unknown = set(lists) - set(names)
        if unknown:
            raise TypeError(f"unknown state lists: {', '.join(sorted(unknown))}")
        self.owner_pid, self.owner, self.sysctls = owner_pid, owner or str(owner_pid), dict(sysctls or {})
        for name in names:
            setattr(self, name, list(lists.get(name, [])))

    def as_dict(self) -> dict:
        return dict(vars(self))


class Registry:
    """The state file of one live run; every `add` is written to disk before the resource exists."""

    def __init__(self):
        STATE_DIR.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()     # nodes start processes from several threads (checks, benches)
        self.state = State(owner_pid=os.getpid(), owner=identity())
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
        write_private(self.path, json.dumps(self.state.as_dict()))

    def release(self) -> list[str]:
        """Remove everything recorded, then the state file itself."""
        mine = self.state.owner
        actions = remove_state(self.state) + destroy_tagged_ovs_rows(spare=(live_owners() - {mine}).__contains__)
        actions += remove_task_folders({mine}.__contains__)
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
        write_private(path, json.dumps(State(state.owner_pid, owner=state.owner, **kept).as_dict()))
    else:
        path.unlink(missing_ok=True)


def write_private(path: Path, text: str) -> None:
    """Write a state file atomically, readable by root only."""
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    os.replace(tmp, path)


def _run(*cmd: str) -> subprocess.CompletedProcess:
    """A command of teardown or cleanup, given up after TIMEOUT_S (then a failure, exit 124)."""
    try:
        return subprocess.run(list(cmd), capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(list(cmd), 124, "", f"gave up after {TIMEOUT_S} s")


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def kill_processes(processes) -> list[str]:
    """SIGKILL recorded processes ("PID-START") that are still those very processes."""
    actions = []
    for process in processes:
        if not isinstance(process, str) or "-" not in process or not alive(process):   # a bare pid: not trusted
            continue
        pid = int(process.split("-")[0])
        try:
            os.kill(pid, signal.SIGKILL)
            actions.append(f"killed process {pid} ({_cmdline(pid)[:60].strip()})")
        except ProcessLookupError:
            pass
    return actions


def _link_exists(name: str) -> bool:
    return Path(f"/sys/class/net/{name}").exists()


def remove_state(state: State) -> list[str]:
    """Remove what `state` records; what could not be removed stays in its kind's list."""
    actions = kill_processes(state.pids)
    for name, kinds in kind_records().items():
        if getattr(state, name):   # what could not be removed (e.g. a machine did not answer) stays recorded
            done, left = kinds[0].remove_records(getattr(state, name))
            setattr(state, name, left)
            actions += done
    for br in state.bridges:
        # With Open vSwitch down (or restarted) del-br cannot reach the bridge, but the userspace
        # datapath's tap device stays in the kernel: remove the device either way.
        deleted = _run("ovs-vsctl", OVS_TIMEOUT, "--if-exists", "del-br", br).returncode == 0
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


def _record_key(item) -> str:
    """A recorded item as comparable text, whoever recorded it (a record's owner left out)."""
    if isinstance(item, dict):
        item = {k: v for k, v in item.items() if k != "owner"}
    return json.dumps(item, sort_keys=True, default=str)


def _without(state: State, spare: State) -> State:
    """`state` less every item `spare` records in the same list (sysctls: those spare restores too)."""
    lists = {}
    for name in (*State.LISTS, *kind_records()):
        taken = {_record_key(i) for i in getattr(spare, name)}
        lists[name] = [i for i in getattr(state, name) if _record_key(i) not in taken]
    sysctls = {k: v for k, v in state.sysctls.items() if k not in spare.sysctls}
    return State(state.owner_pid, sysctls, owner=state.owner, **lists)


def _merged(states: list[State]) -> State:
    """One State recording everything the given states record."""
    lists: dict[str, list] = {}
    for state in states:
        for name in (*State.LISTS, *kind_records()):
            lists.setdefault(name, []).extend(getattr(state, name))
    return State(0, {k: v for st in states for k, v in st.sysctls.items()}, **lists)


def destroy_leftovers(live_owners: set[str]) -> list[str]:
    """What the node kinds' runs that are over left unrecorded (e.g. labelled containers), sparing
    the runs of `live_owners`."""
    from testbed.nodes import kind_classes
    return [action for cls in kind_classes() for action in cls.destroy_leftovers(live_owners.__contains__)]


def ovs_running() -> bool:
    return _run("ovs-vsctl", "--timeout=2", "show").returncode == 0


def destroy_tagged_ovs_rows(spare) -> list[str]:
    """Bridges that carry the testbed's tag, except those whose owning run `spare(owner)` says to
    keep, then tagged QoS and Queue rows no bridge uses any more."""
    if not ovs_running():
        return []
    actions = []
    col, key, val = OVS_TAG
    found = _run("ovs-vsctl", OVS_TIMEOUT, "--bare", "--columns=name,external_ids", "find", "Bridge",
                 f"{col}:{key}={val}").stdout
    for name, ids in _bridge_rows(found):
        owner = ids.get(OVS_OWNER_KEY, "")
        if owner and spare(owner):
            continue
        _run("ovs-vsctl", OVS_TIMEOUT, "--if-exists", "del-br", name)
        actions.append(f"deleted tagged OVS bridge {name}")
    for table in ("QoS", "Queue"):
        out = _run("ovs-vsctl", OVS_TIMEOUT, "--bare", "--columns=_uuid", "find", table, f"{col}:{key}={val}").stdout
        for uuid in out.split():
            if _run("ovs-vsctl", OVS_TIMEOUT, "--if-exists", "destroy", table, uuid).returncode == 0:
                actions.append(f"destroyed OVS {table} row {uuid[:8]}")
    return actions


def _bridge_rows(text: str) -> list[tuple[str, dict[str, str]]]:
    """`ovs-vsctl --bare --columns=name,external_ids find Bridge` output: (name, {key: value}) per row
    (rows are separated by a blank line; external_ids reads `k1=v1 k2=v2`, values possibly quoted)."""
    rows = []
    for block in text.strip().split("\n\n"):
        lines = block.strip().splitlines()
        if lines:
            ids = dict(item.split("=", 1) for item in (lines[1].split() if len(lines) > 1 else []) if "=" in item)
            rows.append((lines[0].strip(), {k: v.strip('"') for k, v in ids.items()}))
    return rows


def _read_states() -> dict[Path, State]:
    """Every run's state file (one that cannot be read is dropped: it names nothing usable)."""
    states = {}
    for path in sorted(STATE_DIR.glob("run-*.json")) if STATE_DIR.exists() else []:
        try:
            states[path] = State(**json.loads(path.read_text()))
        except (OSError, ValueError, TypeError):
            path.unlink(missing_ok=True)
    return states


def _state_alive(state: State) -> bool:
    return alive(state.owner)


def live_owners() -> set[str]:
    """The identities of the runs alive now: a state file, and its process still running."""
    return {state.owner for state in _read_states().values() if _state_alive(state)}


def cleanup(force: bool = False) -> list[str]:
    """Remove what dead runs left (all recorded runs with force=True): their recorded resources,
    processes carrying their identity, unrecorded leftovers and tagged OVS rows. A run is live while
    its state file exists and its process (pid and start time, never a command line) runs; what it
    owns is left alone."""
    actions: list[str] = []
    states = _read_states()
    live = {path: state for path, state in states.items() if not force and _state_alive(state)}
    spare = _merged(list(live.values()))
    owners = {state.owner for state in live.values()}
    for path, state in states.items():
        if path in live:
            actions.append(f"skipped {path.name}: its run (pid {state.owner_pid}) is still alive "
                           "(`cleanup --force` removes it too)")
            continue
        left = _without(state, spare)     # a dead run's record of s1 must not remove a live run's s1
        actions += remove_state(left)
        state = State(state.owner_pid, owner=state.owner, **{n: getattr(left, n) for n in kind_records()})
        settle(path, state)
        if _kept(state):
            actions.append(f"kept {path} for machines that did not answer (delete it to forget them)")
    actions += _forget_dead_live_network()
    actions += kill_processes(stray_processes(owners))
    actions += destroy_leftovers(owners)
    actions += destroy_tagged_ovs_rows(spare=owners.__contains__)
    actions += remove_task_folders(lambda owner: owner not in owners and not alive(owner))
    return actions


def remove_task_folders(run_over) -> list[str]:
    """The temporary folders on this machine of training tasks (workloads/events.py, private_tmp:
    dltb-task-<run identity>-<random>) of the runs `run_over` names: a task killed before it could
    remove its own leaves one; a folder of no run's is left alone."""
    removed = []
    for folder in Path(tempfile.gettempdir()).glob(f"{TASK_TMP_PREFIX}*"):
        pid, _, rest = folder.name[len(TASK_TMP_PREFIX):].partition("-")
        start = rest.partition("-")[0]
        if pid.isdigit() and start.isdigit() and run_over(f"{pid}-{start}"):
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder.name)
    return [f"removed {len(removed)} training task temporary folder(s) in {tempfile.gettempdir()}"] if removed else []


def stray_processes(live_owners: set[str]) -> list[str]:
    """Processes that carry a run's identity (DLTESTBED_OWNER, set by the nodes) but none of
    `live_owners`, as "PID-START"; never this process nor its own."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        owner = process_owner(int(entry.name))
        if owner and owner != identity() and owner not in live_owners:
            found.append(identity(int(entry.name)))
    return found


def _live_owner() -> str | None:
    """The identity of the `up` (or testbed.api.network) that wrote live.json, if there is one (malformed: none)."""
    try:
        doc = json.loads((STATE_DIR / "live.json").read_text())
        return str(doc.get("owner") or doc["owner_pid"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def _forget_dead_live_network() -> list[str]:
    """The live.json of an `up` or a testbed.api.network that was killed (its network is removed with its
    state file)."""
    owner = _live_owner()
    if (owner is not None and alive(owner)) or not (STATE_DIR / "live.json").exists():
        return []
    (STATE_DIR / "live.json").unlink(missing_ok=True)
    return [f"forgot the live network of pid {(owner or '?').split('-')[0]} (`up` or testbed.api.network)"]
