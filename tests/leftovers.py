"""What a run may leave on the machine, read from the real system (for the no-leftovers asserts)."""
from __future__ import annotations

import os
import re
import subprocess
import tempfile
from pathlib import Path

import psutil

MARKERS = ("mininet:", "workloads/train.py", "iperf3", "dltestbed remote agent", "dltb-netem-vm")  # the last: QEMU (tests/vmguest.py)
TEMP_FILES = ("dltb-task-*", "__autograph_generated_file*")   # a task's temporary folder; TensorFlow's generated code
CGROUP_SUBTREES = [Path("/sys/fs/cgroup") / c / "dltestbed" for c in ("cpu", "cpuacct", "cpuset", "memory")] + [Path("/sys/fs/cgroup/dltestbed")]


# testbed.sh test: the sessions of what runs beside the integration tests (the unit tests, the image builds)
BESIDE = set(os.environ.get("DLTB_TESTS_BESIDE", "").split())
BUILD_ROLES = ("build", "server-build")     # the image builds' containers (testbed/nodes/image, cluster/servers)
CONTAINER_ID = re.compile(r"docker[-/]([0-9a-f]{64})")


def beside(pid: int) -> bool:
    """Whether the process is one that testbed.sh runs beside the integration tests: in one of their
    sessions, or below a process that is (a test's own new session)."""
    try:
        while BESIDE and pid > 1:
            if str(os.getsid(pid)) in BESIDE:
                return True
            pid = psutil.Process(pid).ppid()
    except (OSError, psutil.Error):         # gone meanwhile
        pass
    return False


def in_image_build(pid: int) -> bool:
    """Whether the process runs in an image build's container (`apt-get install ... iperf3` there is no
    leftover of a test: the build removes its container)."""
    try:
        found = CONTAINER_ID.search(Path(f"/proc/{pid}/cgroup").read_text())
    except OSError:
        return False
    if not found:
        return False
    import docker.errors

    from testbed.nodes import docker_engine, image
    try:
        labels = docker_engine.client().containers.get(found.group(1)).labels
    except docker.errors.DockerException:           # gone meanwhile
        return False
    return labels.get(f"{image.LABEL}.role") in BUILD_ROLES


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
            if any(m in cmd for m in MARKERS) and "pytest" not in cmd and not beside(int(p.name)) \
                    and not in_image_build(int(p.name)):
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
