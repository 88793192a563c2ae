"""What a run's fidelity verdict reads (testbed.emulation.fidelity has the rules), measured around
its training: each emulated node's CPU and its cgroup's throttling, the machine's busy time and CPU
pressure, ovs-vswitchd's CPU and lost packets."""
from __future__ import annotations

import subprocess
import time

from testbed.emulation import fidelity, readers


def _datapath_lost() -> int | None:
    try:
        out = subprocess.run(["ovs-appctl", "--timeout=2", "dpctl/show"], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return readers.datapath_lost(out.stdout) if out.returncode == 0 else None


def _used(nodes) -> dict[str, float]:
    """CPU seconds each node's processes used so far, asked once per kind (as the monitor does)."""
    by_kind: dict[type, list] = {}
    for node in nodes:
        by_kind.setdefault(type(node), []).append(node)
    return {name: u.cpu_s for kind, members in by_kind.items() for name, u in kind.usage(members).items()}


def others_on_cpus(cpus: tuple[int, ...], before: list[float], after: list[float], used: float) -> float | None:
    """CPU seconds the node's own CPUs spent busy with anything but the node (None: a CPU not read)."""
    if any(c >= min(len(before), len(after)) for c in cpus):
        return None
    return max(0.0, sum(after[c] - before[c] for c in cpus) - used)


class Probe:
    """`with Probe(net, graph) as probe:` around training; then `probe.verdict(...)`."""

    def __init__(self, net, graph):
        hosts = {h.name: h for h in graph.hosts}
        self.nodes = {name: (node, hosts[name]) for name, node in net.nodes.items() if not hosts[name].real_machine}
        self.wall_s = 0.0
        self._before: dict = {}
        self._after: dict = {}

    def _read(self) -> dict:
        used = _used([node for node, _ in self.nodes.values()])
        stats = {name: node.cpu_counters() for name, (node, _) in self.nodes.items()}
        cpus = readers.cpus_busy_s()
        return dict(t=time.monotonic(), used=used, stats=stats, busy=sum(cpus), cpus=cpus,
                    wait=readers.system_wait_s(), switch=readers.process_cpu_s(), lost=_datapath_lost(),
                    steal=readers.steal_s())

    def __enter__(self) -> "Probe":
        self._before = self._read()
        return self

    def __exit__(self, *exc) -> None:
        self._after = self._read()
        self.wall_s = self._after["t"] - self._before["t"]

    def measures(self, machine: int, dilation: float, reserve: float, timers: dict | None,
                 checks: list[dict], tolerance: float,
                 compute: fidelity.ComputeProbe | None = None, replay: tuple | None = None,
                 switch: tuple | None = None) -> fidelity.RunMeasures:
        b, a = self._before, self._after
        nodes = []
        for name, (node, host) in self.nodes.items():
            (stat0, wait0), (stat1, wait1) = b["stats"][name], a["stats"][name]
            d = readers.delta(stat0, stat1)
            used = d.get("usage_s")
            if used is None:     # no cgroup counter: its processes' times (those alive at both ends)
                used = max(0.0, a["used"].get(name, 0.0) - b["used"].get(name, 0.0))
            wait = None if wait0 is None or wait1 is None else wait1 - wait0
            elsewhere = node.machine != "local"
            pinned = tuple(host.cpus) if host.cpus is not None and not elsewhere else ()
            others = others_on_cpus(pinned, b["cpus"], a["cpus"], used) if pinned else None
            nodes.append(fidelity.NodeCpu(name, host.cores, host.budget, used, wait, d.get("nr_periods") or 0,
                                          d.get("nr_throttled") or 0, d.get("throttled_s") or 0.0, node.machine,
                                          node.machine_cores if elsewhere else None, len(pinned), others))
        diff = lambda key: None if b[key] is None or a[key] is None else a[key] - b[key]  # noqa: E731
        return fidelity.RunMeasures(self.wall_s, machine, dilation, reserve, tuple(nodes), diff("busy"),
                                    diff("wait"), diff("switch"), diff("lost"), timers or None,
                                    tuple(checks), tolerance, compute, replay, switch, steal_s=diff("steal"))
