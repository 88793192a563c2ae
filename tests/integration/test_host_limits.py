"""Per-host CPU and memory limits enforced by the testbed's cgroups (v1 here) on real Mininet hosts."""
import subprocess
import sys
from pathlib import Path

import pytest

from testbed.net.network import Network
from testbed.run.bringup.network_up import BringUp
from testbed.run.point.point import resolve_all
from testbed.spec import build_graph, expand_points, load_spec

pytestmark = pytest.mark.integration

SPEC = """
name: limits
topology:
  template: star
  hosts: 2
  host: {cpu: 0.1, memory: 96mib}
  host_overrides: {h2: {cpu: 1.0}}
checks: {iperf: false, ping: false}
"""

BUSY = ("import time\nend = time.monotonic() + 2\nn = 0\n"
        "while time.monotonic() < end: n += 1\nprint(n)\n")


def busy_loop_iterations(net, host: str) -> int:
    """Work a 2-second busy loop gets done inside `host` (work, not CPU accounting: on a VM whose
    host steals time the kernel charges stolen time to the running task)."""
    proc = net.nodes[host].popen([sys.executable, "-c", BUSY], stdout=subprocess.PIPE, text=True)
    out, _ = proc.communicate(timeout=30)
    return int(out)


def test_cpu_fraction_of_whole_machine_and_memory_limit(tmp_path, root, no_leftovers):
    path = tmp_path / "l.yaml"
    path.write_text(SPEC)
    spec = load_spec(path)
    with Network(build_graph(spec.topology), spec.topology) as net:
        quota = int(Path("/sys/fs/cgroup/cpu/dltestbed/h1/cpu.cfs_quota_us").read_text())
        period = int(Path("/sys/fs/cgroup/cpu/dltestbed/h1/cpu.cfs_period_us").read_text())
        limited, unlimited = (busy_loop_iterations(net, h) for h in ("h1", "h2"))
        limit = int(Path("/sys/fs/cgroup/memory/dltestbed/h1/memory.limit_in_bytes").read_text())
        h1 = net.nodes["h1"]
        small = h1.popen([sys.executable, "-c", "b = bytearray(16 * 2**20)"]).wait(timeout=60)
        big = h1.popen([sys.executable, "-c", "b = bytearray(400 * 2**20); b[::4096] = b'x' * len(b[::4096])"],
                       stderr=subprocess.DEVNULL).wait(timeout=60)
    cores = len(__import__("os").sched_getaffinity(0))
    assert quota == round(0.1 * cores * period), "a tenth of the WHOLE machine, as Mininet counts it"
    # The loop held to a tenth of the machine (a fifth of one core here) gets far less done than the
    # same loop on the host allowed the whole machine.
    assert unlimited >= 2.5 * limited, (unlimited, limited)
    assert limit == 96 * 2**20
    assert small == 0
    assert big != 0, "a process above the memory limit must be killed"


PINNED = """
name: pinned
topology: {template: star, hosts: 2, host: {cores: 1}}
emulation: {dilation: 4, reserve: 0.5}
checks: {iperf: false, ping: false}
"""


def test_small_budgets_share_a_cpu_of_their_own_and_the_reserve_keeps_the_rest(tmp_path, root, no_leftovers):
    """Two 1-core nodes at x4 are 0.25 core each: both pinned to the first CPU of this process's
    affinity (their cpuset holds them there), the last CPU left to the switch and the orchestrator."""
    path = tmp_path / "p.yaml"
    path.write_text(PINNED)
    spec = load_spec(path)
    cpus = sorted(__import__("os").sched_getaffinity(0))
    said = []
    with BringUp(resolve_all(expand_points(spec), len(cpus))[0], said.append) as up:
        allowed = {h: _allowed_cpus(up.net, h) for h in ("h1", "h2")}
        cpuset = Path("/sys/fs/cgroup/cpuset/dltestbed/h1/cpuset.cpus").read_text().strip()
    assert f"pinned: h1 to CPU {cpus[0]}, h2 to CPU {cpus[0]}" in said
    assert allowed == {"h1": str(cpus[0]), "h2": str(cpus[0])}
    assert cpuset == str(cpus[0])


def _allowed_cpus(net, host: str) -> str:
    """The Cpus_allowed_list of a process started in the host."""
    proc = net.nodes[host].popen(["grep", "Cpus_allowed_list", "/proc/self/status"], stdout=subprocess.PIPE, text=True)
    out, _ = proc.communicate(timeout=30)
    return out.split()[-1]
