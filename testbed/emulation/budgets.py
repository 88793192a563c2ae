"""A node's `cores` (the cores of the machine it emulates) as real CPU: cgroup quota and period
(v1, v2, Docker), cpusets, the reserve, whether a point fits, and TensorFlow's thread counts.

Pure: numbers in, numbers out. Under dilation K a node of `cores` cores gets cores/K real cores.
"""
from __future__ import annotations

import math
from typing import Iterable, NamedTuple

from testbed.limits import MAX_PERIOD_US, MIN_CORES, MIN_QUOTA_US   # the spec checks them before a run

# The CPU kept for what runs outside the nodes' budgets: ovs-vswitchd (user-space datapath here,
# as this machine has no OVS kernel module), the orchestrator and the monitor. Half a core: the
# monitor samples every 0.5 s and the orchestrator mostly waits, while ovs-vswitchd forwarding at
# the rates of a dilated run (bw/K) stays well under a core; a whole core would halve what a
# 2-core machine can give its nodes.
DEFAULT_RESERVE = 0.5

# The shortest period (the kernel's 1 ms minimum) whose quota is at least its 1 ms minimum: a node of
# 0.8 core gets 1 ms every 1.25 ms, not 8 ms every 10 ms, so it never runs a burst at a whole core,
# and its speed is its budget's at every dilation (bench/dilation_steps.py: with 10 ms periods the 1-node
# reference ran its compute bursts unthrottled and every dilated point read 8-36 % slow).
PERIOD_US = 1_000
_EPS = 1e-9


class Quota(NamedTuple):
    """A CPU quota: `quota_us` of CPU time per `period_us` of wall time (quota > period: > 1 core)."""

    quota_us: int
    period_us: int

    @property
    def cores(self) -> float:
        return self.quota_us / self.period_us

    def v1(self) -> dict[str, str]:
        """File -> text for cgroup v1's cpu controller."""
        return {"cpu.cfs_period_us": str(self.period_us), "cpu.cfs_quota_us": str(max(self.quota_us, -1))}

    def v2(self) -> str:
        """The text of cgroup v2's cpu.max."""
        return f"{self.quota_us if self.quota_us >= 0 else 'max'} {self.period_us}"

    def docker(self) -> dict[str, int]:
        """Docker's container options (docker SDK's cpu_period and cpu_quota)."""
        return {"cpu_period": self.period_us, "cpu_quota": self.quota_us}


UNLIMITED = Quota(-1, PERIOD_US)     # a quota lifted: the group may use every CPU it runs on


def real_cores(cores: float, dilation: float = 1.0) -> float:
    """The real cores a node of `cores` emulated cores gets at dilation K: cores / K."""
    if cores <= 0 or dilation < 1:
        raise ValueError(f"cores must be > 0 and dilation >= 1 (got cores={cores}, dilation={dilation})")
    return cores / dilation


def quota(real: float) -> Quota:
    """The quota of `real` cores over the shortest period that holds it: 1 ms for a core or more
    (quota `real` ms), else the period at which the quota is the kernel's 1 ms minimum (1.25 ms for
    0.8 core, 10 ms for 0.1 core)."""
    if real < MIN_CORES - _EPS:
        raise ValueError(f"a budget of {real:g} core is under the {MIN_CORES:g} core a CPU quota can hold "
                         f"({MIN_QUOTA_US} us per {MAX_PERIOD_US} us)")
    period = PERIOD_US
    if real * period < MIN_QUOTA_US:
        period = min(MAX_PERIOD_US, math.ceil(MIN_QUOTA_US / real - _EPS))
    return Quota(max(MIN_QUOTA_US, round(real * period)), period)


def held_by(real: float, cpus: list[int] | None = None) -> Quota:
    """The quota that holds a budget of `real` cores: none (UNLIMITED) when the node is pinned to exactly
    that many CPUs of its own, which hold it alone (a quota of a whole core still throttles the node:
    CFS's bandwidth accounting made a training step's compute 12-19 % slower than with the quota
    lifted, measured here); else the quota over the shortest period (quota)."""
    if cpus and abs(real - len(cpus)) < _EPS:
        return UNLIMITED
    return quota(real)


def demand(cores: Iterable[float], dilation: float = 1.0, reserve: float = DEFAULT_RESERVE) -> float:
    """Real cores a point needs: its nodes' cores / K, plus the reserve."""
    return sum(real_cores(c, dilation) for c in cores) + reserve


def fits(cores: Iterable[float], machine_cores: float, dilation: float = 1.0,
         reserve: float = DEFAULT_RESERVE) -> bool:
    """Whether nodes of these `cores` get their budgets at dilation K: sum(cores/K) + reserve <= machine."""
    return demand(cores, dilation, reserve) <= machine_cores + _EPS


def cpusets(budgets: dict[str, float], cpus: list[int], reserve: float = DEFAULT_RESERVE) -> dict[str, list[int]] | None:
    """CPUs per node for real-core `budgets`, or None when the nodes should share every CPU.

    A node of a core or more gets ceil(budget) CPUs of its own. Smaller nodes are packed, largest
    first, onto shared CPUs whose budgets add up to at most one core, so no CPU is promised twice.
    The last ceil(reserve) CPUs are left to the switch, orchestrator and monitor. When that does
    not fit in `cpus`, None: the quotas alone hold the budgets and the scheduler spreads the nodes
    (pinning them to too few CPUs would starve them)."""
    whole = {name: math.ceil(b - _EPS) for name, b in budgets.items() if b >= 1 - _EPS}
    shared: list[list] = []         # per shared CPU: [budget placed, node names]
    for name, budget in sorted(budgets.items(), key=lambda item: (-item[1], item[0])):
        if name in whole:
            continue
        cpu = next((c for c in shared if c[0] + budget <= 1 + _EPS), None)
        if cpu is None:
            shared.append([budget, [name]])
        else:
            cpu[0] += budget
            cpu[1].append(name)
    keep = math.ceil(reserve - _EPS) if reserve > 0 else 0
    if sum(whole.values()) + len(shared) + keep > len(cpus):
        return None
    free = iter(cpus)
    out = {name: [next(free) for _ in range(count)] for name, count in whole.items()}
    for _, names in shared:
        cpu = next(free)
        out.update({name: [cpu] for name in names})
    return out


def cpuset_text(cpus: list[int]) -> str:
    """cpuset.cpus text: [0, 1, 2, 5] -> '0-2,5' (also Docker's cpuset_cpus)."""
    runs: list[list[int]] = []
    for cpu in sorted(cpus):
        if runs and cpu == runs[-1][-1] + 1:
            runs[-1].append(cpu)
        else:
            runs.append([cpu])
    return ",".join(f"{r[0]}-{r[-1]}" if len(r) > 1 else str(r[0]) for r in runs)


class Threads(NamedTuple):
    intra: int
    inter: int


def tf_threads(cores: float, machine_cpus: int) -> Threads:
    """TensorFlow's intra- and inter-op thread counts for a node of `cores` EMULATED cores.

    They follow the emulated machine, not the real share cores/K, so the program is the same at
    every K and dilation changes only its speed: intra = ceil(cores) (at least 1), capped at the CPUs
    here (more busy threads than CPUs only adds switching). The quota throttles the node's threads
    together, so two threads on a 0.5-core budget still advance like two cores slowed K times.
    inter = max(2, intra): TensorFlow's default is every CPU of the machine, which would vary with
    the machine, and a one-thread inter-op pool deadlocks blocking ops (seen with ps closures)."""
    intra = max(1, min(math.ceil(cores - _EPS), max(1, int(machine_cpus))))
    return Threads(intra, max(2, intra))
