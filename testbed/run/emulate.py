"""Faithful compute at run time (the rules are testbed.emulation's): this machine's cores, one
dilation factor for a sweep, each point's wall-clock spec, and its results back in emulated time.

A point's spec is what the user wrote: the emulated world. What runs on this machine is its wall
spec: every link rate / K, every time the user wrote x K (testbed.emulation.dilation), every node
held to cores / K (the graph resolves the budgets). What was measured on the wall clock is divided
by K before it reaches a table; the raw figure stays in its `*_wall_s` column."""
from __future__ import annotations

import dataclasses
import math
import os

from testbed.emulation import dilation as dil
from testbed.emulation.budgets import cpuset_text, cpusets
from testbed.spec import build_graph
from testbed.spec.graph import written_out
from testbed.spec.models import Experiment

RUN_TIMES = ("training_time_s", "time_per_step_s", "time_lost_s", "tf_import_s", "torch_import_s",
             "compute_per_step_s", "warmup_s", "steady_step_s", "steady_step_q1_s", "steady_step_q3_s")
RUN_RATES = ("samples_per_s", "net_throughput_mean_bps", "steady_samples_per_s")


def machine_cores() -> int:
    """The cores this process may run on (its affinity, not the whole host's count)."""
    return len(os.sched_getaffinity(0))


def budgeted_hosts(spec, machine: int) -> list:
    """The graph's emulated hosts that have a CPU budget (remote machines are real: none)."""
    graph = build_graph(spec.topology, dilation=dilation_of(spec), machine_cores=machine)
    return [h for h in graph.hosts if h.budget is not None and h.kind != "remote"]


def pinned(graph, reserve: float, progress=lambda msg: None):
    """The graph with each budgeted emulated host pinned to CPUs of its own where this machine's
    CPUs allow (budgets.cpusets); unchanged when they do not, and the quotas alone hold the budgets."""
    budgets = {h.name: h.budget for h in graph.hosts if h.budget is not None and h.kind != "remote"}
    sets = cpusets(budgets, sorted(os.sched_getaffinity(0)), reserve) if budgets else None
    if not sets:
        return graph
    progress("pinned: " + ", ".join(f"{name} to CPU {cpuset_text(cpus)}" for name, cpus in sets.items()))
    hosts = [dataclasses.replace(h, cpus=tuple(sets[h.name])) if h.name in sets else h for h in graph.hosts]
    return dataclasses.replace(graph, hosts=hosts)


def dilation_of(spec) -> float:
    """The point's dilation as a number (auto, before a sweep resolves it, counts as 1)."""
    return spec.emulation.factor


def auto_factor(specs: list, machine: int, progress=lambda msg: None) -> float:
    """`dilation: auto` over these specs (a sweep's): the smallest factor at which the largest
    point's budgets and the reserve fit this machine, one factor for all of them."""
    cores = [[h.cores for h in budgeted_hosts(s, machine)] for s in specs]
    reserve = max(s.emulation.reserve for s in specs)
    k = dil.choose(cores, machine, reserve)
    largest = max(cores, key=sum)
    progress(f"dilation auto: x{k:g} (the largest point: {len(largest)} node(s) of {sum(largest):g} cores in all, "
             f"plus a {reserve:g}-core reserve, on this machine's {machine} cores)" if largest else
             "dilation auto: x1 (no node has a cores budget)")
    return k


def resolve(points: list, machine: int, progress=lambda msg: None) -> list:
    """The points with a numeric dilation: every `auto` becomes the sweep's one auto_factor."""
    auto = [p.spec for p in points if p.spec.emulation.dilation == "auto"]
    if not auto:
        return points
    k = auto_factor(auto, machine, progress)
    return [dataclasses.replace(p, spec=with_dilation(p.spec, k)) if p.spec.emulation.dilation == "auto" else p
            for p in points]


def with_dilation(spec, k: float):
    """The spec with emulation.dilation set to the factor k (it keeps its file's lines)."""
    return spec.model_copy(update={"emulation": spec.emulation.model_copy(update={"dilation": float(k)})})


def wall_spec(spec):
    """What runs on this machine for a point whose dilation is resolved: rates / K, times x K."""
    k = dilation_of(spec)
    if k == 1:
        return spec
    data = spec.model_dump(mode="json")
    if spec.topology.template == "graph":     # the graph file's speeds and delays, written out to be dilated too
        data["topology"] = written_out(spec.topology)
    wall = Experiment.model_validate(dil.dilate(data, k))
    wall._source = spec._source          # errors still name the user's file and line
    return wall


def columns(spec, machine: int) -> dict:
    """runs.csv's description of the emulated machines: dilation, compute (budgets when every
    emulated node has one, shared when they share this machine), cores, node_cores, machine_cores."""
    graph = build_graph(spec.topology, dilation=dilation_of(spec), machine_cores=machine)
    emulated = [h for h in graph.hosts if h.kind != "remote"]
    held = [h for h in emulated if h.budget is not None]
    sizes = {h.cores for h in held}
    compute = "real" if not emulated else "budgets" if len(held) == len(emulated) else "shared"
    return dict(dilation=dilation_of(spec), compute=compute,
                cores=sizes.pop() if len(sizes) == 1 and compute == "budgets" else math.nan,
                node_cores=";".join(f"{h.name}={h.cores:g}" for h in held), machine_cores=machine)


def to_emulated(row: dict, observed, k: float, faults=()) -> dict:
    """The row and the observed tables in emulated time: durations / K, rates x K, CPU % of an
    emulated core x K, each fault's trigger as the file wrote it (`faults`: the point's); the row
    keeps each raw figure in its wall column."""
    if k == 1:
        return row
    for r in observed.faults:
        r["at"] = faults[r["fault"] - 1].at
    row = dil.to_emulated(row, k, RUN_TIMES, RUN_RATES)
    if isinstance(row.get("cpu_mean_pct"), (int, float)):
        row["cpu_mean_pct"] *= k
    _scale(observed.steps, k, times=("time_s",), rates=("samples_per_s",))
    _scale(observed.usage, k, times=("t",), rates=("cpu_pct",))
    _scale(observed.checks, k, times=("rtt_ms",), rates=("configured_bps", "measured_bps"))
    _scale(observed.faults, k, times=("duration_s", "extra_s"), rates=())
    return row


def _scale(rows: list[dict], k: float, times, rates) -> None:
    for r in rows:
        for key, factor in [(t, 1 / k) for t in times] + [(q, k) for q in rates]:
            value = r.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool) and not math.isnan(value):
                r[key] = value * factor
