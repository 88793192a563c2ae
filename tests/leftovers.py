"""What a run may leave on the machine, read from the real system (for the no-leftovers asserts)."""
from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

import psutil

MARKERS = ("mininet:", "workloads/train.py", "iperf3", "dltestbed remote agent", "dltb-netem-vm")  # the last: QEMU (tests/vmguest.py)
TEMP_FILES = ("dltb-task-*", "__autograph_generated_file*")   # a task's temporary folder; TensorFlow's generated code
CGROUP_SUBTREES = [Path("/sys/fs/cgroup") / c / "dltestbed" for c in ("cpu", "cpuacct", "cpuset", "memory")] + [Path("/sys/fs/cgroup/dltestbed")]


BESIDE = os.environ.get("DLTB_TESTS_BESIDE")     # testbed.sh test: the session of the unit tests run meanwhile


def beside(pid: int) -> bool:
    """Whether the process is the unit tests' that testbed.sh runs beside the integration tests: in their
    session, or below a process that is (a test's own new session)."""
    try:
        while BESIDE and pid > 1:
            if str(os.getsid(pid)) == BESIDE:
                return True
            pid = psutil.Process(pid).ppid()
    except (OSError, psutil.Error):         # gone meanwhile
        pass
    return False


def left_behind(pid: int) -> bool:
    """Whether a process whose command line names a marker counts as left behind: not one of the unit tests'
    beside, and still there once that was asked (a short-lived one, a shell's `$(...)`, may end meanwhile)."""
    return not beside(pid) and psutil.pid_exists(pid)


def _out(*cmd: str) -> str:
    proc = subprocess.run(list(cmd), capture_output=True, text=True)
    return proc.stdout if proc.returncode == 0 else ""


def containers() -> set[str]:
    """Node containers of the testbed (none when the Docker engine is not running)."""
    from testbed.nodes import docker_engine
    if not docker_engine.docker_installed() or not docker_engine.dockerd_running():
        return set()
    return {c.name for c in docker_engine.client().containers.list(all=True, filters={"label": ["dltestbed=1", "dltestbed.host"]})}


def snapshot() -> dict[str, set[str]]:
    procs = set()
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                cmd = (p / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if any(m in cmd for m in MARKERS) and "pytest" not in cmd and left_behind(int(p.name)):
                procs.add(f"{p.name} {cmd[:80]}")
    return {
        "netns": set(_out("ip", "netns", "list").split()),
        "veth": {ln.split(":")[1].strip().split("@")[0] for ln in _out("ip", "-o", "link", "show", "type", "veth").splitlines()},
        "bridges": set(_out("ovs-vsctl", "--timeout=3", "list-br").split()),
        "linux_bridges": {ln.split(":")[1].strip() for ln in _out("ip", "-o", "link", "show", "type", "bridge").splitlines()
                          if "docker" not in ln},
        "qos": set(_out("ovs-vsctl", "--timeout=3", "--bare", "--columns=_uuid", "list", "qos").split()),
        "queues": set(_out("ovs-vsctl", "--timeout=3", "--bare", "--columns=_uuid", "list", "queue").split()),
        "processes": procs,
        "cgroups": {str(d) for sub in CGROUP_SUBTREES if sub.exists() for d in sub.iterdir() if d.is_dir()},
        "containers": containers(),
        "temporary files": {p.name for pattern in TEMP_FILES for p in Path(tempfile.gettempdir()).glob(pattern)},
    }


def new_since(before: dict[str, set[str]]) -> dict[str, set[str]]:
    after = snapshot()
    return {k: after[k] - before.get(k, set()) for k in after if after[k] - before.get(k, set())}
