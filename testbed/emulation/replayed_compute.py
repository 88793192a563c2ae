"""Replayed compute (`emulation.compute: replay`), pure rules: the wait each node replays, the dilation
`auto` picks, and the figures of the verdict.

- The wait. A calibration (testbed/run/point/calibration.py) times the model's local step on this machine,
  on as many CPUs as the node has cores, and the stand-in's own step (workloads/replay.py) with no wait.
  The node's compute is the real step (a node of fractional cores: the step on whole CPUs x their
  ratio). On the wall clock it is x K, of which the stand-in does its own part at full speed, and its
  waits overshoot what they ask by a wake-up latency the calibration measured: the wait is the rest.
- Dilation auto. Replayed nodes need no CPU budget, only the CPU of their communication and of the
  framework's own step. `auto_factor` slows the world until that, at the estimated step rate, fills
  at most UTILISATION of the CPUs outside the reserve (an estimate: the verdict says whether it held).
- Contention. Where the machine a node stands for computes on the cores its communication uses (a
  calibration here, a CPU profile), PyTorch's buckets all-reduced during the backward pass took CPU
  from the compute there: the stand-in waits for it (`charge`, workloads/replay.py's Contention).
- The switch. A switch on this machine forwards only so much (testbed/run/point/switch_capacity.py measures
  it): the links that send at once (a ring all-reduce's every worker; a parameter server's link, in and
  out) at their wall rates, bw/K, must ask at most SWITCH_UTILISATION of it. `auto` raises K until they
  do; a run whose links asked more than the switch carried reads degraded (`switch_reasons`).
- The verdict. A node runs unbudgeted, so the CPU work of its communication (gradients through gRPC
  or gloo) that no contention wait covered ran on a whole CPU where the machine it stands for has 1/K
  of one per core: it could have gained (1 - 1/K) of it, in emulated core-seconds per steady step,
  less the stand-in's own CPU (already inside the replayed step). Its tasks' wait for a CPU (run
  delay, in its upper-quartile step) is a delay the real machine would not have had. Each must stay under
  SHARE_MAX of the step.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from workloads.replay import spread_wait

SHARE_MAX = 0.05
UTILISATION = 0.1              # of the CPUs outside the reserve, at the estimated step rate
# CPU seconds per gradient byte a node sends or receives, its switch's share included: measured 15-45 ns for
# TensorFlow's gRPC ring (2 and 16 nodes) and 8-13 ns for gloo's (docs/benchmarks.md, replayed compute)
COMM_CPU_PER_BYTE_S = {"tensorflow": 30e-9, "pytorch": 12e-9}
SWITCH_UTILISATION = 0.8       # of the switch's measured capacity, by the links that send at once (wall rates)
AUTO_STEP = 0.25
AUTO_MAX = 16.0                # beyond it a node's own step dominates: the verdict says what that costs


@dataclass(frozen=True)
class HostReplay:
    """What one node replays, in emulated seconds."""
    cores: float
    step_s: float                  # the model's local step on a machine of `cores` cores
    stand_in_s: float              # the stand-in's own step with no wait
    stand_in_cpu_s: float          # its CPU per step
    layers: tuple[tuple[float, float], ...]     # the real step's (forward, backward) per parameter layer
    overshoot_s: float = 0.0       # what the stand-in's waits take beyond what they ask (wake-up latency)
    profile: str | None = None     # the compute profile it replays, as the file named it (None: calibrated here)
    shapes: tuple = ()             # a profile's parameters per layer, (shape, dtype) in replay order
    shares_cpu: bool = True        # its compute ran on the CPU cores its communication uses (not a GPU)
    idle: tuple[tuple[float, float], ...] = ()  # a profile's (pause, extra compute) points: the step after a pause

    @property
    def threads(self) -> int:
        """The intra-op threads its stand-in was calibrated with, and runs with: one for a profile's (calibrated
        on one CPU), else one per CPU of its calibration."""
        return 1 if self.profile is not None else max(1, math.ceil(self.cores - 1e-9))

    def wall_wait(self, k: float) -> float:
        """The wait per step on the wall clock: the step x K, less the stand-in's own step and its waits'
        overshoot, which take their time at any K."""
        return max(0.0, k * self.step_s - self.stand_in_s - self.overshoot_s)

    def charge(self, k: float) -> float:
        """Wall seconds of compute each CPU second of its communication takes during the backward pass:
        K / cores where they share the cores, else 0."""
        return k / self.cores if self.shares_cpu and self.cores > 0 else 0.0

    def after_charge(self, k: float) -> float:
        """Wall seconds each CPU second of its communication after the backward pass lasts beyond the one it
        took here, unbudgeted: K / cores - 1."""
        return max(0.0, k / self.cores - 1.0) if self.cores > 0 else 0.0

    def job(self, k: float, unsent_cpu_s: float = 0.0) -> dict:
        """The node's entry of the job document: its wait per step on the wall clock, with layers that wait
        split over them, and the contention's charge. Under byte scaling, `unsent_cpu_s`: the CPU per step of
        the bytes it does not send (scaled_cpu_s), which never ran here: each step waits it at K / cores. A GPU
        machine's node also gets its stand-in's own step (`own_s`): what its compute took beyond that and its
        waits counts in the verdict's bound (workloads/replay.py Contention)."""
        wait = self.wall_wait(k)
        return {"wait_s": wait, "layers": [list(x) for x in spread_wait(wait, self.layers)],
                "charge": self.charge(k), "after_charge": self.after_charge(k), "own_cpu_s": self.stand_in_cpu_s,
                "unsent_wait_s": unsent_cpu_s * k / self.cores if self.cores > 0 else 0.0,
                "idle": [[k * gap, k * extra] for gap, extra in self.idle], "threads": self.threads,
                "overshoot_s": self.overshoot_s, "own_s": None if self.shares_cpu else self.stand_in_s}


def from_calibration(cal: dict, cores: float) -> HostReplay:
    """A node's replay from a calibration made on ceil(cores) CPUs."""
    whole = max(1, math.ceil(cores - 1e-9))
    return HostReplay(cores, cal["real_step_s"] * whole / cores, cal["stand_in_step_s"], cal["stand_in_cpu_s"],
                      tuple(tuple(x) for x in cal["layers"]), cal.get("overshoot_s", 0.0))


def from_profile(cal: dict, cores: float, name: str, shapes=(), device: str = "cpu", idle=()) -> HostReplay:
    """A node's replay from a profile's calibration: the machine profiled (`cores`, computing on `device`), its
    step as measured there, the parameters' `shapes` it all-reduces, its compute after a pause (`idle`)."""
    return HostReplay(cores, cal["real_step_s"], cal["stand_in_step_s"], cal["stand_in_cpu_s"],
                      tuple(tuple(x) for x in cal["layers"]), cal.get("overshoot_s", 0.0), name,
                      tuple(tuple(layer) for layer in shapes), device == "cpu", tuple(idle))


def comm_bytes(strategy: str, workers: int, gradient_bytes: int) -> float:
    """Bytes one worker sends and receives per step: a ring all-reduce moves 2(n-1)/n of the gradient
    each way; a ps worker pushes the gradient and pulls the variables."""
    if strategy == "allreduce":
        return 2 * 2 * (workers - 1) / workers * gradient_bytes if workers > 1 else 0.0
    if strategy == "ps":
        return 2 * gradient_bytes
    return 0.0


def unsent_cpu_s(engine: str, strategy: str, workers: int, gradient_bytes: int, sent_bytes: int) -> float:
    """Under byte scaling, the CPU per step a node's exchange would have spent on the bytes it does not send
    (the gradient's less the scaled one's, at COMM_CPU_PER_BYTE_S): per-byte work only, the messages' fixed
    costs already ran here."""
    return comm_bytes(strategy, workers, max(0, gradient_bytes - sent_bytes)) * COMM_CPU_PER_BYTE_S[engine]


def auto_factor(hosts: list[HostReplay], engine: str, strategy: str, gradient_bytes: int, bw_bps: int | None,
                machine_cores: float, reserve: float, byte_scale: float = 1.0, most: float = AUTO_MAX) -> float:
    """The smallest K (a multiple of AUTO_STEP, 1 to `most`) at which the nodes' CPU per step (the stand-in's,
    plus the engine's COMM_CPU_PER_BYTE_S per byte moved) fills at most UTILISATION of the CPUs outside
    the reserve when steps take the estimated time: the slowest node's compute plus the bytes over the
    link's rate. The nodes' tasks wake together at every exchange, so their wait for a CPU falls with K
    well below full use: hence the low UTILISATION. Under byte scaling the bytes sent are 1/`byte_scale` of the
    gradient's (math.inf: none), over links as much slower: the step stays, the CPU per byte moved falls."""
    if not hosts:
        return 1.0
    moved = comm_bytes(strategy, len(hosts), gradient_bytes)
    step = max(h.step_s for h in hosts) + (moved / 2 * 8 / bw_bps if bw_bps else 0.0)
    cpu = sum(h.stand_in_cpu_s + moved / byte_scale * COMM_CPU_PER_BYTE_S[engine] for h in hosts)
    room = max(machine_cores - reserve, 0.1) * UTILISATION
    k = cpu / (step * room) if step > 0 else 1.0
    return min(most, max(1.0, math.ceil(k / AUTO_STEP - 1e-9) * AUTO_STEP))


def switch_demand_bps(strategy: str, workers: int, servers: int, bw_bps: int | None) -> float:
    """The most the nodes' links ask of the switch at once (emulated bits/s): every worker of a ring
    all-reduce sends at its link's rate together; a parameter server's link carries pushes in and
    variables out."""
    if not bw_bps:
        return 0.0
    if strategy == "allreduce":
        return float(workers * bw_bps) if workers > 1 else 0.0
    if strategy == "ps":
        return 2.0 * max(servers, 1) * bw_bps
    return 0.0


def switch_factor(demand_bps: float, switch_bps: float | None, most: float = AUTO_MAX) -> float:
    """The smallest K (a multiple of AUTO_STEP, 1 to `most`) at which the links' demand on the wall clock
    (demand / K) fills at most SWITCH_UTILISATION of the switch's capacity (1 where it is not known)."""
    if not switch_bps or demand_bps <= 0:
        return 1.0
    k = demand_bps / (switch_bps * SWITCH_UTILISATION)
    return min(most, max(1.0, math.ceil(k / AUTO_STEP - 1e-9) * AUTO_STEP))


def switch_reasons(demand_bps: float, switch_bps: float | None, k: float) -> list[str]:
    """The verdict's switch reason: the links that send at once asked more of the switch, on the wall clock,
    than it carried when measured."""
    if not switch_bps or demand_bps / k <= switch_bps:
        return []
    return [f"switch: the links that send at once ask {demand_bps / k / 1e6:.0f} Mbit/s of the switch at x{k:g}, "
            f"more than the {switch_bps / 1e6:.0f} Mbit/s it carried on this machine (measured): their transfers "
            f"took longer than on the network emulated (a larger emulation.dilation, fewer nodes or slower links)"]


@dataclass(frozen=True)
class NodeReplay:
    """One node's figures over the steady steps of a replayed run."""
    name: str
    cpu_share: float       # what its unbudgeted CPU (communication, framework) could have put the steady step off by
    wait_share: float      # its tasks' run delay within its upper-quartile steady step, over that step (wall)


def _along(samples: list[tuple[float, ...]], times: list[float]) -> list[tuple[float, float, float]]:
    """A task's figures (cpu, delay, unsure) at each of the sorted `times`, linear between its samples
    (t, cpu, delay[, unsure]: older runs' samples lack unsure, read as 0), clamped at the ends; one pass."""
    out, i = [], 0
    for t in times:
        while i + 1 < len(samples) and samples[i + 1][0] < t:
            i += 1
        a, b = samples[i], samples[min(i + 1, len(samples) - 1)]
        f = min(1.0, max(0.0, (t - a[0]) / (b[0] - a[0]))) if b[0] > a[0] else float(t > a[0])
        out.append(tuple((x + f * (y - x)) for x, y in zip((*a[1:], 0.0)[:3], (*b[1:], 0.0)[:3])))
    return out


def node_figures(samples: dict[str, list[list[tuple[float, ...]]]], ends: list[float], k: float,
                 hosts: dict[str, HostReplay] | None = None) -> list[NodeReplay]:
    """Each node's figures over the steady steps, whose wall-clock bounds are `ends` (the warm-up's end, then
    each steady step's): `samples` maps a node to its tasks' usage samples (t, CPU seconds no contention wait
    accounted for, run delay seconds[, wall seconds the waits may be off by]). Its CPU bound is that CPU over
    the window less the stand-in's own CPU per step (`hosts`), per emulated second, per core of the machine
    it stands for (a GPU server's profile had that many cores for its communication), x (1 - 1/K): what it
    would have taken on 1/K of a core; plus what the waits may be off by, over the window. Its wait is that
    of its upper-quartile step (its tasks' run delay within the step, over the step), as the steady step is
    a median: a stall that held up one step in many moves neither."""
    wall = ends[-1] - ends[0] if len(ends) >= 2 else 0.0
    if wall <= 0:
        return []
    gain = 1.0 - 1.0 / k
    out = []
    for name, tasks in samples.items():
        per_task = [_along(s, ends) for s in tasks if len(s) >= 2]
        at = [[sum(v) for v in zip(*figures)] for figures in zip(*per_task)] or [[0.0] * 3] * len(ends)
        cpu, unsure = at[-1][0] - at[0][0], at[-1][2] - at[0][2]
        waits = [(b[1] - a[1]) / (tb - ta) for a, b, ta, tb in zip(at, at[1:], ends, ends[1:]) if tb > ta]
        host = (hosts or {}).get(name)
        own = host.stand_in_cpu_s * (len(ends) - 1) if host is not None else 0.0
        cores = max(1.0, host.cores) if host is not None else 1.0
        out.append(NodeReplay(name, max(0.0, cpu - own) * k / wall / cores * gain + unsure / wall,
                              _upper_quartile(waits)))
    return out


def _upper_quartile(values: list[float]) -> float:
    """The upper quartile of values, linear between them as the steady step's quartiles are (numpy's
    percentile); 0 for none."""
    if len(values) < 2:
        return values[0] if values else 0.0
    return statistics.quantiles(values, n=4, method="inclusive")[2]


def reasons(nodes: list[NodeReplay], k: float = 1.0, machine_cpus: float = 0.0) -> list[str]:
    """The verdict's replay reasons: the node with the largest CPU bound, and the one with the largest
    wait for a CPU, when over SHARE_MAX of the steady step; each with what lowers it at dilation `k` on a
    machine of `machine_cpus` CPUs."""
    out = []
    if not nodes:
        return ["replay: no CPU figures over the steady steps (too few samples)"]
    crowded = machine_cpus > 0 and len(nodes) > machine_cpus
    worst = max(nodes, key=lambda n: n.cpu_share)
    if worst.cpu_share > SHARE_MAX:
        smaller = "a smaller emulation.dilation lowers it, or " if k > 1 else ""
        out.append(f"replay: {worst.name}'s unbudgeted CPU (communication, framework) could have put each steady "
                   f"step up to {worst.cpu_share:.1%} off the machine it stands for (bound "
                   f"{SHARE_MAX:.0%}; {smaller}compute: real)")
    waited = max(nodes, key=lambda n: n.wait_share)
    if waited.wait_share > SHARE_MAX:
        out.append(f"replay: {waited.name}'s tasks waited for a CPU {waited.wait_share:.1%} of a steady step (its "
                   f"upper quartile; bound {SHARE_MAX:.0%}; a larger emulation.dilation gives them more"
                   f"{', and fewer nodes per CPU' if crowded else ''})")
    return out
