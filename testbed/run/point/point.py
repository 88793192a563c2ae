"""A run point resolved once, before anything starts: the emulated world the user wrote, the dilation K,
what this machine runs of it, both graphs, and the way back to emulated time. Preflight, bring-up,
the runner, the records and the tracer all take it (testbed.emulation has the rules).

- The point's spec is the emulated world. Its wall spec is what runs here: every link rate / K, every
  time the user wrote x K (dilation.wall_spec).
- Its graph is built once: hosts with their cores and the real cores they get (cores / K), link rates,
  the first values of links that follow a trace, the engine. The wall graph is the same graph on this
  machine's clock (dilation.wall_graph), its budgeted hosts pinned to CPUs of their own where the
  CPUs allow.
- What was measured on the wall clock goes back to emulated time (to_emulated): durations / K, rates
  x K, each raw figure kept in its wall column."""
from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass
from typing import Any, Callable

from testbed.emulation import dilation as dil
from testbed.emulation.byte_scale import choose as choose_scale, shapes_cap, to_emulated_bytes
from testbed.emulation.replayed_compute import HostReplay, from_calibration, from_profile
from testbed.emulation.replayed_compute import auto_factor as replay_factor
from testbed.emulation.replayed_compute import AUTO_MAX, SWITCH_UTILISATION, switch_demand_bps, switch_factor
from testbed.emulation.replayed_compute import unsent_cpu_s
from testbed.emulation.budgets import cpuset_text, cpusets
from testbed.run.point import calibration, switch_capacity
from testbed.run.point.record import link_bandwidth
from testbed.spec import build_graph
from testbed.spec.kinds import real_machine
from testbed.spec.graph import Graph, budget_of
from testbed.spec.models import Experiment
from testbed.spec.sweep import RunPoint
from testbed.spec.faults.traces import LinkTrace, first_params, link_traces
from workloads.models import gradient_bytes
from workloads.profiling import fileformat


def machine_cores() -> int:
    """The cores this process may run on (its affinity, not the whole host's count)."""
    return len(os.sched_getaffinity(0))


def _budgeted_cores(spec, machine: int) -> list[float]:
    """The cores of the spec's emulated hosts that have a budget (real machines have none)."""
    topo = spec.topology
    confs = (topo.host_conf(name) for name in topo.host_names())
    cores = (budget_of(c, 1.0, machine)[0] for c in confs if not real_machine(c.kind))
    return [c for c in cores if c is not None]


def auto_factor(spec, machine: int) -> float:
    """`dilation: auto` of one point: the smallest factor at which its budgets and the reserve fit this
    machine (each point its own: a point of one node runs in real time on a core of its own, not slowed,
    and sliced, to the largest point's factor)."""
    return dil.choose([_budgeted_cores(spec, machine)], machine, spec.emulation.reserve)


def _auto_note(specs: list, factors: list[float], machine: int) -> str:
    """What `dilation: auto` chose, by factor: the nodes and cores of the points it was chosen for."""
    by_k: dict[float, set] = {}
    for spec, k in zip(specs, factors):
        cores = _budgeted_cores(spec, machine)
        by_k.setdefault(k, set()).add((len(cores), sum(cores)))
    if not any(n for sizes in by_k.values() for n, _ in sizes):
        return "dilation auto: x1 (no node has a cores budget)"
    parts = [f"x{k:g} for {' and '.join(f'{n} node(s) of {c:g} cores' for n, c in sorted(sizes))}"
             for k, sizes in sorted(by_k.items())]
    reserve = max(s.emulation.reserve for s in specs)
    return (f"dilation auto: {'; '.join(parts)} (each point the smallest factor at which its nodes plus a "
            f"{reserve:g}-core reserve fit this machine's {machine} cores)")


def exchange(strategy: str) -> str:
    """How a replayed point's nodes exchange gradients: through a parameter server, else an all-reduce."""
    return "ps" if strategy == "ps" else "allreduce"


def with_byte_scale(spec, f: int):
    """The spec with emulation.byte_scale set to the factor f."""
    return spec.model_copy(update={"emulation": spec.emulation.model_copy(update={"byte_scale": int(f)})})


def with_dilation(spec, k: float):
    """The spec with emulation.dilation set to the factor k (it keeps its file's lines)."""
    return spec.model_copy(update={"emulation": spec.emulation.model_copy(update={"dilation": float(k)})})


@dataclass(frozen=True)
class ResolvedPoint:
    """Everything one run point needs, resolved once (module docstring)."""
    run_id: str
    repeat: int
    params: dict[str, Any]
    spec: Experiment          # the emulated world: what the user wrote, its dilation a number
    wall_spec: Experiment     # what this machine runs: rates / K, times x K
    k: float
    graph: Graph              # the emulated world's nodes and links (records, topology.json)
    wall_graph: Graph         # the same on this machine's clock, budgeted hosts pinned (bring-up)
    machine_cores: int
    traces: tuple[LinkTrace, ...] = ()    # the links that follow a trace, in emulated units
    pinned: str = ""          # where the budgeted hosts are pinned, said at bring-up ("" : not pinned)
    replay: dict[str, HostReplay] | None = None    # compute: replay, what each node replays
    switch: tuple[float, float | None] | None = None   # compute: replay, (links' demand, bits/s emulated, of the
    #                                       bytes sent; the switch's measured capacity, wall; None: unknown)
    byte_scale: int = 1       # compute: replay, F: gradients of 1/F the elements over links of bw / (K x F)

    def replay_job(self) -> dict | None:
        """The job document's `replay` section: each node's waits on the wall clock (None: real compute)."""
        if self.replay is None:
            return None
        f, unsent = self.byte_scale, 0.0
        shapes = next((host.shapes for host in self.replay.values() if host.profile is not None), None)
        if shapes is not None and f > 1:
            w = self.spec.workload
            unsent = unsent_cpu_s(w.engine, exchange(w.strategy), len(self.replay),
                                  fileformat.shapes_bytes(shapes),
                                  fileformat.shapes_bytes(fileformat.scaled_shapes(shapes, f)))
        job = {"hosts": {name: host.job(self.k, unsent) for name, host in self.replay.items()}}
        if shapes is not None:          # every node replays a profile of one shape (validate)
            job["shapes"] = [[list(param) for param in layer] for layer in fileformat.scaled_shapes(shapes, f)]
            if f > 1:                   # what the start event records: the emulated gradient's
                params = sum(math.prod(shape) for layer in shapes for shape, _ in layer)
                job["emulated"] = {"params": params, "gradient_bytes": 4 * params, "byte_scale": f}
        return job

    @property
    def replays_profiles(self) -> bool:
        """Whether its nodes replay compute profiles (no model or script code runs on them)."""
        return any(host.profile is not None for host in (self.replay or {}).values())

    def wall_traces(self) -> list[LinkTrace]:
        """The traced links on this machine's clock (times x K, rates / K)."""
        return [lt._replace(trace=lt.trace.scaled(self.k)) for lt in self.traces]

    @property
    def name(self) -> str:
        return self.spec.name

    def columns(self) -> dict:
        """runs.csv's description of the emulated machines: dilation, compute (budgets when every
        emulated node has one, shared when they share this machine, real without emulated nodes), cores,
        node_cores, machine_cores."""
        emulated = [h for h in self.graph.hosts if not h.real_machine]
        replay = self.replay or {}
        held = [h for h in emulated if h.budget is not None or h.name in replay]
        size = {h.name: replay[h.name].cores if h.name in replay else h.cores for h in held}
        sizes = set(size.values())
        compute = "real" if not emulated else "replay" if self.replay is not None else \
            "budgets" if len(held) == len(emulated) else "shared"
        profiles = {name: host.profile for name, host in replay.items() if host.profile is not None}
        return dict(dilation=self.k, byte_scale=self.byte_scale, compute=compute,
                    cores=sizes.pop() if len(sizes) == 1 and compute in ("budgets", "replay") else math.nan,
                    node_cores=";".join(f"{h.name}={size[h.name]:g}" for h in held), machine_cores=self.machine_cores,
                    profile=";".join(f"{name}={p}" for name, p in profiles.items()) if profiles else "")

    def to_emulated(self, row: dict, observed) -> dict:
        """The row and the observed tables in emulated time: durations / K, rates x K, CPU % of an
        emulated core x K, each fault's trigger as the file wrote it; the row keeps each raw figure in
        its wall column."""
        k = self.k
        if self.byte_scale > 1:     # each byte sent stood for F of the emulated gradient's
            row = to_emulated_bytes(row, self.byte_scale)
            _scale(observed.checks, self.byte_scale, times=(), rates=("configured_bps", "measured_bps"))
        if k == 1:      # the wall columns hold the same figures (a sweep's points may differ in K)
            return dil.to_emulated(row, 1.0)
        for r in observed.faults:
            r["at"] = self.spec.faults[r["fault"] - 1].at
        row = dil.to_emulated(row, k)
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


def resolve(point: RunPoint, machine: int, calibrate=calibration.calibrate,
            progress=lambda msg: None, calibrate_profile=calibration.calibrate_profile,
            switch=switch_capacity.cached) -> ResolvedPoint:
    """A point resolved: its wall spec and its graph, built once, on both clocks, budgeted hosts pinned
    to CPUs of their own where this machine's CPUs allow. Its dilation is a number, or `auto` under
    compute: replay, which resolves it from the nodes' calibrations (`calibrate`, testbed/run/point/calibration.py)
    and from what the switch carries (`switch`: kind -> bits/s or None, testbed/run/point/switch_capacity.py)."""
    spec = point.spec
    k = spec.emulation.factor
    graph = build_graph(spec.topology, spec.ssh, k, machine, engine=spec.workload.engine)
    hosts = carried = None
    f = spec.emulation.scale
    if spec.emulation.compute == "replay":
        graph = _unbudgeted(graph)
        scaled: dict[int, dict[str, HostReplay]] = {}

        def at_scale(f: int) -> dict[str, HostReplay]:     # the stand-ins of the tensors sent at F, calibrated
            if f not in scaled:
                scaled[f] = replay_hosts(spec, graph, machine, calibrate, progress,
                                         lambda engine, path, said, ddp=False: calibrate_profile(engine, path,
                                                                                                said, f, ddp))
            return scaled[f]
        k, f, carried = replay_factors(spec, at_scale, link_bandwidth(graph), machine, switch)
        hosts = at_scale(f)
        spec = with_dilation(spec, k) if spec.emulation.dilation == "auto" else spec
        spec = with_byte_scale(spec, f) if spec.emulation.byte_scale == "auto" else spec
    wall = dil.wall_spec(spec, k, f)
    traces = tuple(link_traces(spec, graph=graph))
    graph = _first_values(graph, {frozenset((lt.a, lt.b)): lt for lt in traces})
    wall_graph, said = dil.wall_graph(graph, k, f), []
    if spec.cluster is None:      # (a cluster's hosts are mostly on other machines)
        wall_graph = pinned(wall_graph, spec.emulation.reserve, said.append)
    return ResolvedPoint(point.run_id, point.repeat, point.params, spec, wall, k, graph, wall_graph, machine,
                         traces, "".join(said), hosts, carried, f)


def replay_factors(spec, at_scale: Callable[[int], dict[str, HostReplay]], bw: int | None, machine: int, switch):
    """(K, F, (the switch's demand, its capacity)) of a replayed point, chosen together: K the dilation
    (auto: replay_factor's CPU term and the switch's, both of the bytes sent and of the stand-ins that send
    them, `at_scale(F)`: their own CPU falls with their tensors), F the byte scale (auto: byte_scale.choose).
    The demand is of the bytes sent: the links' rates / F."""
    w = spec.workload
    hosts = at_scale(1 if spec.emulation.byte_scale == "auto" else spec.emulation.scale)   # (a fixed F: only its own)
    strategy = exchange(w.strategy)
    demand = switch_demand_bps(strategy, len(hosts), w.ps.servers, bw)
    capacity = switch(spec.topology.switch.kind) if demand and spec.cluster is None else None
    gradient = replayed_gradient_bytes(spec, hosts)
    shapes = next((h.shapes for h in hosts.values() if h.profile is not None), None)

    def sent(f: float) -> float:        # the gradient's bytes over the bytes a node sends at F
        if f == 1 or shapes is None:
            return f
        return gradient / fileformat.shapes_bytes(fileformat.scaled_shapes(shapes, f))

    def need(f: int, most: float = AUTO_MAX) -> float:     # auto's K for the bytes sent at F, by their stand-ins
        cpu = replay_factor(list(at_scale(f).values()), w.engine, strategy, gradient, bw, machine,
                            spec.emulation.reserve, sent(f), most)
        return max(cpu, switch_factor(demand / sent(f), capacity, most))
    fixed = None if spec.emulation.dilation == "auto" else spec.emulation.factor
    if spec.emulation.byte_scale == "auto":     # the smallest F that needs no more K than the largest allowed
        cap = shapes_cap(shapes, fileformat.shapes_bytes) if shapes is not None else 1
        k, f = choose_scale(lambda f: need(f, math.inf), bw, fixed, cap, most=AUTO_MAX)
    else:
        f = spec.emulation.scale
        k = need(f) if fixed is None else fixed
    return k, f, (demand / sent(f), capacity)


def _unbudgeted(graph: Graph) -> Graph:
    """The graph with no CPU budget on any host (replayed compute): each keeps the cores it stands for."""
    return dataclasses.replace(graph, hosts=[dataclasses.replace(h, budget=None, cpu=None) if not h.real_machine
                                             else h for h in graph.hosts])


def replay_hosts(spec, graph: Graph, machine: int, calibrate, progress,
                 calibrate_profile=calibration.calibrate_profile) -> dict[str, HostReplay]:
    """What each emulated node replays, from one calibration per size; a node larger than this machine
    has none (preflight says so)."""
    w, by_cores, out = spec.workload, {}, {}
    for h in graph.hosts:
        found = spec.profile_path(h.name)
        if found is not None and not h.real_machine:
            if found[1] not in by_cores:        # each profile read and calibrated once
                doc = fileformat.load(found[1])
                by_cores[found[1]] = (calibrate_profile(w.engine, found[1], progress, ddp=in_ddp(w, doc)), doc["cores"],
                                      fileformat.param_shapes(doc), doc["device"], fileformat.idle_points(doc))
            cal, cores, shapes, device, idle = by_cores[found[1]]
            out[h.name] = from_profile(cal, cores, spec.topology.host_conf(h.name).profile, shapes, device, idle)
            continue
        if h.real_machine or h.cores is None or math.ceil(h.cores - 1e-9) > machine:
            continue
        if h.cores not in by_cores:
            by_cores[h.cores] = calibrate(w.engine, w.model, dict(w.model_params), w.batch_per_worker, h.cores,
                                          progress)
        out[h.name] = from_calibration(by_cores[h.cores], h.cores)
    return out


def in_ddp(workload, doc: dict) -> bool:
    """Whether a profile's stand-in is calibrated in DistributedDataParallel: a GPU machine's, under PyTorch's
    all-reduce. There DDP's own work (hooks, bucket copies) runs on the GPU, while the stand-in does it on this
    machine's CPU in the step's path: the calibration counts it as the stand-in's, so the waits leave it room.
    A CPU machine's profile leaves it to the step, as DDP's work is the CPU's there too."""
    return workload.engine == "pytorch" and workload.strategy == "allreduce" and doc["device"] != "cpu"


def replayed_gradient_bytes(spec, hosts: dict[str, HostReplay]) -> int:
    """Gradient bytes per step of a replayed run: its profiles' (all of one shape), else the model's."""
    shapes = next((h.shapes for h in hosts.values() if h.profile is not None), None)
    if shapes is not None:
        return fileformat.shapes_bytes(shapes)
    return gradient_bytes(spec.workload.model, spec.workload.model_params)


def resolve_all(points: list[RunPoint], machine: int, progress=lambda msg: None,
                calibrate=calibration.calibrate, switch=switch_capacity.cached) -> list[ResolvedPoint]:
    """A sweep's points resolved, each `auto` dilation its point's own (auto_factor; under compute: replay,
    replay.auto_factor and the switch's capacity), said once, by factor."""
    auto = [p for p in points if p.spec.emulation.dilation == "auto" and p.spec.emulation.compute == "real"]
    factors = {id(p): auto_factor(p.spec, machine) for p in auto}
    if auto:
        progress(_auto_note([p.spec for p in auto], [factors[id(p)] for p in auto], machine))
    out = [resolve(dataclasses.replace(p, spec=with_dilation(p.spec, factors[id(p)])) if id(p) in factors
                   else p, machine, calibrate, progress, switch=switch) for p in points]
    replayed = [r for p, r in zip(points, out) if id(p) not in factors and r.replay is not None
                and (p.spec.emulation.dilation == "auto" or p.spec.emulation.byte_scale != 1)]
    if replayed:
        progress(_replay_note(replayed, machine, any(p.spec.emulation.dilation == "auto" for p in points)))
    return out


def _replay_note(points: list[ResolvedPoint], machine: int, auto: bool = True) -> str:
    """What `dilation: auto` and `byte_scale` chose for replayed points, by factor."""
    by_k: dict[tuple[float, int], set] = {}
    for r in points:
        by_k.setdefault((r.k, r.byte_scale), set()).add(len(r.replay or {}))
    scaled = any(f > 1 for _, f in by_k)
    parts = [f"x{k:g}{f', byte scale {f}' if scaled else ''} for {' and '.join(f'{n} node(s)' for n in sorted(sizes))}"
             for (k, f), sizes in sorted(by_k.items())]
    how = (" (byte scale F: gradients of 1/F the elements over links of bw / (K x F); auto: the smallest power of 2 "
           "at which the gradient bytes no longer raise K)") if scaled else ""
    if not auto:
        return f"replayed compute: {'; '.join(parts)}{how}"
    return (f"dilation auto (replayed compute): {'; '.join(parts)} (each point the smallest factor at which its "
            f"nodes' communication and framework fill at most a tenth of this machine's {machine} cores outside the "
            f"reserve, and the links that send at once at most {SWITCH_UTILISATION:.0%} of what its switch carries)"
            + how)


def _first_values(graph: Graph, traced: dict) -> Graph:
    """The graph with each traced link's parameters as its trace's first row sets them."""
    if not traced:
        return graph
    links = [dataclasses.replace(e, params=first_params(e.params, traced[frozenset((e.a, e.b))].trace))
             if frozenset((e.a, e.b)) in traced else e for e in graph.links]
    return dataclasses.replace(graph, links=links)


def pinned(graph: Graph, reserve: float, progress=lambda msg: None) -> Graph:
    """The graph with each budgeted emulated host pinned to CPUs of its own where this machine's
    CPUs allow (budgets.cpusets); unchanged when they do not, and the quotas alone hold the budgets."""
    budgets = {h.name: h.budget for h in graph.hosts if h.budget is not None and not h.real_machine}
    sets = cpusets(budgets, sorted(os.sched_getaffinity(0)), reserve) if budgets else None
    if not sets:
        return graph
    progress("pinned: " + ", ".join(f"{name} to CPU {cpuset_text(cpus)}" for name, cpus in sets.items()))
    hosts = [dataclasses.replace(h, cpus=tuple(sets[h.name])) if h.name in sets else h for h in graph.hosts]
    return dataclasses.replace(graph, hosts=hosts)
