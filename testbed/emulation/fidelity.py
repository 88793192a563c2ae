"""The fidelity verdict of a run, as Mininet-HiFi gives (Handigol et al., CoNEXT 2012): pure rules
over what was measured, "ok" or "degraded: <reasons>", each reason naming its cause and figures.

Rules and thresholds:
- cpu, planned: the nodes' budgets (cores/K) plus the reserve must fit the machine; with no
  budgets (the thesis's mode), the cores the nodes stand for must. Otherwise the emulation cannot
  hold whatever is measured: 4 one-core nodes on 2 cores at dilation 1 is degraded in both modes.
- cpu, per node: while runnable, a node must have run at least CPU_SHARE_MIN of its budget.
  Estimate: lost = wait - throttled, the time its tasks were runnable but not running (a v2
  cgroup's cpu.pressure 'some') beyond what its own quota explains; share = used / (used +
  min(budget, 1) x lost), the lost time counted at the rate its budget would have let it run. A
  node held to its quota scores 1 (also when PSI does not count throttling), one that lost the CPU
  to others less. cgroup v1 has no per-cgroup pressure: there the machine rules speak. 0.9: the
  dilation aim is +-5 % on time per step; a node short of 10 % of its CPU is beyond it even when
  compute is half the step, while wake-up latency on a healthy machine costs a few percent.
- cpu, machine: busy over MACHINE_BUSY_MAX of its CPUs means someone outside the budgets (another
  user, the switch) took what the nodes were promised. Without budgets nothing was promised: nodes
  sharing the machine (the thesis's condition) saturate it by design, and runs.csv's compute column
  says 'shared', so this rule and the next apply to budgeted nodes only.
- cpu, system pressure (only where no per-node wait is known, e.g. cgroup v1): runnable tasks
  waiting over SYSTEM_WAIT_MAX of the time. Ignored once a node was throttled: a throttled task
  counts as waiting too, so the figure then says nothing about contention. Where every budgeted
  node is pinned to whole CPUs of its own (a budget of whole cores: no quota), the machine's
  pressure also counts a node's threads waiting for each other on its cores, which a real machine
  of those cores would too (a TensorFlow node on one core: 16 % of the time, all but 0.2 s of it
  the node's own threads); there the rule is instead that anything else ran on a node's CPUs at
  most SYSTEM_WAIT_MAX of the time, the most it could have taken from the node.
- cpu, slices: a budget under a core is a quota of the kernel's 1 ms minimum per period
  (budgets.quota), so the node runs 1 ms and then pauses for the rest of the period. Caches and
  branch predictors go cold in each pause, and code run in such slices costs more CPU than the
  same code run at once: on a 2-core VM a TensorFlow training step took 1.6-2.1 times its CPU time
  at 0.4-0.1 core (bench/slices.py). Nodes computing at once on this machine's CPUs also slow each
  other, which separate machines would not (the cnn's step: 5.6-6.2 ms on both CPUs at once, 4.95 ms
  alone). Two checks. Where the built-in workload's probe measured that cost (ComputeProbe.slicing:
  CPU per step under the budget with the nodes together, against the quota lifted and the node
  alone), the step time it added to compute, compute x (1 - 1/slicing), must
  stay within SLICING_STEP_MAX of the step: the dilation aim. The probe sees compute only, while
  the collective's own CPU work (gRPC, TCP, serialisation: most of a node's CPU in a step of the
  269k-parameter MLP at 100 Mbit/s) runs in the same slices, so pauses over SLICE_PAUSE_MAX_MS
  count too. 2 nodes of 0.8 core, steady step against dilation 1 in three runs each
  (docs/benchmarks.md): dilation 2 (0.4 real core, 1.5 ms pauses) 0.99-1.04, within the aim;
  dilation 4 (0.2 core, 4 ms pauses) 1.07-1.12 and dilation 8 (0.1 core, 9 ms) 1.11-1.17, beyond
  it, though the probe put compute's share of that at 1-2 %.
- switch: ovs-vswitchd over SWITCH_CORES_MAX of a core is a forwarder close to saturation (its
  user-space datapath forwards in a single thread per port); any lost upcall is a dropped packet. Under
  replayed compute, the links that send at once must not ask more of the switch, at their wall rates,
  than it carried when measured (testbed.emulation.replayed_compute.switch_reasons).
- timers: analysis.tables.health's bounds (p99 5 ms, max 20 ms of sleep overshoot).
- shaping: iperf3's ratio measured/configured, against the TCP goodput ceiling (0.956), must lie
  within checks.tolerance of it.
- host: a degraded run also names the share of the machine's CPU time its host took (a virtual
  machine's steal) when over STEAL_NAMED: a likely cause, never a reason on its own.
- replay: under replayed compute the nodes have no budget, so the four CPU rules above do not apply;
  each node's CPU per steady step and its tasks' wait for a CPU must each stay under 5 % of the
  step (testbed.emulation.replayed_compute).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from testbed.emulation import replayed_compute as replay
from testbed.emulation.budgets import DEFAULT_RESERVE, demand, fits, quota
from testbed.emulation.readers import delta
from testbed.shaping import TCP_GOODPUT_CEILING, goodput_within
from analysis.tables.health import HEALTHY_MAX_MS, HEALTHY_P99_MS

CPU_SHARE_MIN = 0.9
MIN_ACTIVE = 0.05        # a node runnable under 5 % of the run gives too few samples to judge
MACHINE_BUSY_MAX = 0.95
SYSTEM_WAIT_MAX = 0.10
SWITCH_CORES_MAX = 0.9
SLICE_PAUSE_MAX_MS = 2.0
SLICING_STEP_MAX = 0.05
STEAL_NAMED = 0.05       # a degraded run names the host's steal from this share of the machine's CPU time
OK = "ok"


@dataclass(frozen=True)
class NodeCpu:
    """One emulated node's CPU over the run (deltas of readers.read_cpu_stat and
    readers.cgroup_wait_s). Remote nodes are real machines: leave them out."""

    name: str
    cores: float | None = None       # the cores of the machine it emulates (None: not set)
    budget: float | None = None      # real cores it was held to (cores/K); None: no budget
    used_s: float = 0.0
    wait_s: float | None = None      # runnable but not running; None: not measured (cgroup v1)
    nr_periods: int = 0
    nr_throttled: int = 0
    throttled_s: float = 0.0
    machine: str = "local"           # where it runs: this machine, or a cluster server's name
    machine_cpus: float | None = None    # that server's CPUs (None: this machine's)
    pinned_cpus: int = 0             # the CPUs its cpuset holds it to (0: not pinned)
    others_on_cpus_s: float | None = None   # CPU seconds those CPUs ran anything but the node

    @classmethod
    def from_readings(cls, name: str, cores: float | None, budget: float | None, before: dict, after: dict,
                      wait_before: float | None = None, wait_after: float | None = None) -> "NodeCpu":
        """From two readers.read_cpu_stat readings (and two readers.cgroup_wait_s, where v2 has them)."""
        d = delta(before, after)
        wait = None if wait_before is None or wait_after is None else wait_after - wait_before
        return cls(name, cores, budget, d.get("usage_s") or 0.0, wait, d.get("nr_periods") or 0,
                   d.get("nr_throttled") or 0, d.get("throttled_s") or 0.0)


@dataclass(frozen=True)
class RunMeasures:
    """What the verdict looks at; None (or empty) where a figure was not measured."""

    wall_s: float
    machine_cpus: float
    dilation: float = 1.0
    reserve: float = DEFAULT_RESERVE
    nodes: tuple[NodeCpu, ...] = ()
    machine_busy_s: float | None = None     # delta of the sum of readers.cpus_busy_s()
    system_wait_s: float | None = None      # readers.system_wait_s() delta
    switch_cpu_s: float | None = None       # readers.process_cpu_s() delta
    switch_lost: int | None = None          # readers.datapath_lost() delta
    timers: dict | None = None              # hosthealth.timer_overshoot()
    checks: tuple[dict, ...] = field(default_factory=tuple)   # checks.csv rows
    tolerance: float = 0.10                 # checks.tolerance
    compute: "ComputeProbe | None" = None   # the workload's probe on the lead task, where it ran
    replay: tuple[replay.NodeReplay, ...] | None = None   # compute: replay, each node's figures (else None)
    switch_demand: tuple | None = None      # compute: replay, (links' demand, emulated bits/s; switch capacity)
    steal_s: float | None = None            # readers.steal_s() delta


@dataclass(frozen=True)
class ComputeProbe:
    """The compute probe's figures (runs.csv's compute_per_step_s, compute_slicing) on `node`."""

    node: str
    compute_s: float            # compute per step under the budget (emulated)
    step_s: float               # the run's steady step (emulated; its mean step when too few to judge)
    slicing: float              # its time per step under the budget / its machine's, alone (record.slicing)


def _n(x: float) -> str:
    return f"{x:.2f}".rstrip("0").rstrip(".")


def cpu_plan(m: RunMeasures) -> list[str]:
    """The budgets (or, with none, the cores asked) against each machine that holds them (this one,
    or a cluster's servers), before anything ran."""
    by_machine: dict[tuple, list[NodeCpu]] = {}
    for n in m.nodes:
        by_machine.setdefault((n.machine, n.machine_cpus or m.machine_cpus), []).append(n)
    return [r for (machine, cpus), nodes in by_machine.items() for r in _plan(m, nodes, cpus, machine)]


def _plan(m: RunMeasures, nodes: list[NodeCpu], cpus: float, machine: str) -> list[str]:
    where = "" if machine == "local" else f" on {machine}"
    budgets = [n.budget for n in nodes if n.budget is not None]
    if budgets:
        if fits(budgets, cpus, 1.0, m.reserve):
            return []
        return [f"cpu: {len(budgets)} nodes' budgets need {_n(sum(budgets))} cores plus the {_n(m.reserve)} "
                f"reserve of a {_n(cpus)}-core machine{where} (dilation x{_n(m.dilation)})"]
    asked = [n.cores for n in nodes if n.cores is not None]
    if asked and not fits(asked, cpus, m.dilation, m.reserve):
        return [f"cpu: {len(asked)} nodes asked {sum(asked):.1f} cores of a {_n(cpus)}-core machine{where} "
                f"(no budgets)"]
    return []


def node_share(node: NodeCpu) -> float | None:
    """The share of its budget (or, without one, of one core) a node ran while runnable, or None."""
    lost = None if node.wait_s is None else max(0.0, node.wait_s - node.throttled_s)
    if lost is None or node.used_s + lost <= 0:
        return None
    rate = min(node.budget, 1.0) if node.budget is not None else 1.0
    return node.used_s / (node.used_s + rate * lost)


def cpu_nodes(m: RunMeasures) -> list[str]:
    out = []
    for node in m.nodes:
        share = node_share(node)
        if share is None or node.used_s + node.wait_s < MIN_ACTIVE * m.wall_s or share >= CPU_SHARE_MIN:
            continue
        what = f"of its {_n(node.budget)}-core budget" if node.budget is not None else "of the CPU (no budget)"
        out.append(f"cpu: {node.name} got {share:.2f} {what} while runnable")
    return out


def cpu_machine(m: RunMeasures) -> list[str]:
    """Only where budgets were promised: nodes that share the machine without one (the thesis's
    condition, runs.csv compute 'shared') saturate it by design, and say so in their compute column."""
    out = []
    budgeted = [n for n in m.nodes if n.machine == "local" and n.budget is not None]
    if not budgeted:
        return out
    if m.machine_busy_s is not None and m.wall_s > 0:
        busy = m.machine_busy_s / m.wall_s
        if busy >= MACHINE_BUSY_MAX * m.machine_cpus:
            nodes = f", {sum(n.used_s for n in m.nodes) / m.wall_s:.2f} by the nodes" if m.nodes else ""
            out.append(f"cpu: the machine was saturated ({busy:.2f} of {_n(m.machine_cpus)} cores busy{nodes})")
    per_node = any(n.wait_s is not None for n in m.nodes)
    throttled = any(n.nr_throttled > 0 for n in m.nodes)
    if m.system_wait_s is not None and m.wall_s > 0 and not per_node and not throttled:
        if all(n.pinned_cpus and n.budget >= n.pinned_cpus - 1e-9 and n.others_on_cpus_s is not None
               for n in budgeted):
            return out + cpu_others(m, budgeted)
        waited = m.system_wait_s / m.wall_s
        if waited > SYSTEM_WAIT_MAX:
            out.append(f"cpu: runnable tasks waited for a CPU {waited:.0%} of the time (/proc/pressure/cpu)")
    return out


def cpu_others(m: RunMeasures, nodes: list[NodeCpu]) -> list[str]:
    """Nodes pinned to their own CPUs: only what else ran there could have taken their CPU (their threads'
    wait for each other is the emulated machine's own), so that, not the machine's pressure, is judged."""
    out = []
    for n in nodes:
        share = n.others_on_cpus_s / (m.wall_s * n.pinned_cpus)
        if share > SYSTEM_WAIT_MAX:
            out.append(f"cpu: other tasks ran on {n.name}'s CPUs {share:.0%} of the time")
    return out


def cpu_slices(m: RunMeasures) -> list[str]:
    """What the quota's slices cost the nodes: the compute probe's measure where it ran, and
    nodes whose quota pauses them longer than SLICE_PAUSE_MAX_MS (one reason per budget)."""
    out = _measured_slicing(m, m.compute) if m.compute is not None else []
    floor = 1 / (1 + SLICE_PAUSE_MAX_MS)      # real cores whose 1 ms slices pause exactly that long
    by_budget: dict[tuple, list[str]] = {}
    for node in m.nodes:
        if node.budget is not None and node.budget < 1:
            q = quota(node.budget)
            if (q.period_us - q.quota_us) / 1000 > SLICE_PAUSE_MAX_MS:
                by_budget.setdefault((node.budget, node.cores, q), []).append(node.name)
    for (budget, cores, q), names in by_budget.items():
        k = math.floor(cores / floor * 100) / 100 if cores else 0.0     # under 1: no factor keeps them shorter
        if m.dilation > 1 and k >= 1:
            advice = f"dilation x{_n(k)} or less keeps them shorter{_room(m, k)}"
        else:
            advice = f"a budget of {floor:.2f} core or more keeps them shorter"
        who = names[0] if len(names) == 1 else f"{len(names)} nodes ({', '.join(names[:3])}{', ...' if len(names) > 3 else ''})"
        out.append(f"cpu: {who} ran {_n(budget)} core as {q.quota_us / 1000:g} ms slices every "
                   f"{q.period_us / 1000:g} ms; pauses over {SLICE_PAUSE_MAX_MS:g} ms make its work slower "
                   f"than the budget ({advice})")
    return out


def _room(m: RunMeasures, k: float) -> str:
    """What a dilation of x`k` also needs here: nothing where the budgeted nodes and the reserve fit this machine
    at k, else the smaller emulation.reserve that leaves them room, else fewer nodes."""
    cores = [n.cores for n in m.nodes if n.budget is not None and n.cores]
    if fits(cores, m.machine_cpus, k, m.reserve):
        return ""
    room = math.floor((m.machine_cpus - demand(cores, k, reserve=0.0)) * 100 + 1e-6) / 100
    return f", with emulation.reserve: {_n(room)}" if room >= 0 else ", with fewer nodes on this machine"


def _measured_slicing(m: RunMeasures, probe: ComputeProbe) -> list[str]:
    added = probe.compute_s * (1 - 1 / probe.slicing) / probe.step_s if probe.step_s > 0 else 0.0
    if added <= SLICING_STEP_MAX:
        return []
    node = next((n for n in m.nodes if n.name == probe.node), None)
    slices = ""
    if node is not None and node.budget is not None and node.budget < 1:
        q = quota(node.budget)
        slices = f" ({q.quota_us / 1000:g} ms every {q.period_us / 1000:g} ms)"
    whole = f"dilation x{_n(node.cores)} or less{_room(m, node.cores)}" if node is not None and node.cores \
        and node.cores >= 1 else "nodes of 1 core or more at a dilation of at most their cores"
    return [f"cpu: the quota's slices{slices} and the nodes computing at once on this machine's CPUs made "
            f"{probe.node}'s compute take {probe.slicing:.2f} times its machine's time alone, {added:.0%} of each step "
            f"(the compute probe); a budget of a whole real core has no slices ({whole}), and replayed compute "
            f"(emulation.compute: replay) neither"]


def switch(m: RunMeasures) -> list[str]:
    out = []
    if m.switch_cpu_s is not None and m.wall_s > 0 and m.switch_cpu_s / m.wall_s >= SWITCH_CORES_MAX:
        out.append(f"switch: ovs-vswitchd used {m.switch_cpu_s / m.wall_s:.2f} of a core")
    if m.switch_lost:
        out.append(f"switch: ovs-vswitchd lost {m.switch_lost} packets")
    if m.switch_demand is not None:
        out.extend(replay.switch_reasons(m.switch_demand[0], m.switch_demand[1], m.dilation))
    return out


def timers(m: RunMeasures) -> list[str]:
    t = m.timers
    if not t or (t["timer_p99_ms"] <= HEALTHY_P99_MS and t["timer_max_ms"] <= HEALTHY_MAX_MS):
        return []
    return [f"timers: p99 sleep overshoot {t['timer_p99_ms']:.0f} ms (max {t['timer_max_ms']:.0f} ms)"]


def shaping(m: RunMeasures) -> list[str]:
    out = []
    for row in m.checks:
        ratio = row.get("ratio")
        if row.get("tool") != "iperf3" or not row.get("configured_bps"):
            continue
        pair = f"{row['src']}-{row['dst']}"
        if ratio is None or math.isnan(ratio):
            out.append(f"shaping: iperf3 {pair} gave no reading")
        elif not goodput_within(ratio, m.tolerance):
            out.append(f"shaping: iperf3 {pair} read {ratio:.2f} of the rate "
                       f"(TCP's ceiling {TCP_GOODPUT_CEILING:.3f}, tolerance {m.tolerance:g})")
    return out


def budgeted(rule):
    """A CPU rule of budgeted nodes: under replayed compute the nodes have no budget, and cpu_replay speaks."""
    def checked(m: RunMeasures) -> list[str]:
        return [] if m.replay is not None else rule(m)
    checked.__name__ = rule.__name__
    return checked


def cpu_replay(m: RunMeasures) -> list[str]:
    """Replayed compute: each node's CPU and CPU wait over the steady steps (testbed.emulation.replayed_compute)."""
    return [] if m.replay is None else replay.reasons(list(m.replay), m.dilation, m.machine_cpus)


RULES = tuple(budgeted(r) for r in (cpu_plan, cpu_nodes, cpu_slices, cpu_machine)) + (cpu_replay, switch, timers,
                                                                                      shaping)


def reasons(m: RunMeasures) -> list[str]:
    """Every reason the run is not faithful, in rule order (empty: it is)."""
    return [reason for rule in RULES for reason in rule(m)]


def host_steal(m: RunMeasures) -> list[str]:
    """The share of the machine's CPU time its host took (a virtual machine's steal), where it is a likely
    cause: named beside the reasons of a degraded run, never a reason on its own."""
    if not m.steal_s or m.wall_s <= 0 or m.machine_cpus <= 0:
        return []
    share = m.steal_s / (m.wall_s * m.machine_cpus)
    return [f"host: this machine's host took {share:.0%} of its CPU time (steal) during training"] \
        if share > STEAL_NAMED else []


def verdict(m: RunMeasures) -> str:
    """runs.csv's `fidelity`: 'ok' or 'degraded: <reason>; <reason>'."""
    found = reasons(m)
    return OK if not found else "degraded: " + "; ".join(found + host_steal(m))
