"""Bringing a point's network up, the one path of `run` (sweep/runner.py) and `up` (live/live.py): what is
refused before anything starts (preflight), the graph with the file's `ssh:` section, the Network
with its notes, and the checks with this machine's timer health."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from analysis.model import advisor
from testbed import shaping
from testbed.net.network import Network, node_problems, port_problems
from testbed.roles import PlacementError, assign_tasks
from testbed.run.faults import faults, traces
from testbed.run import phases
from testbed.run.bringup.checks import failure_reason, run_checks
from testbed.run.bringup.hosthealth import describe, healthy, timer_overshoot
from testbed.nodes.engines import local_engine_problem
from testbed.limits import MIN_CORES
from testbed.spec.settings import missing_key_file
from testbed.spec import SpecError, SpecIssue


def key_file_problems(spec, graph, servers: bool = True) -> list[tuple[str, str]]:
    """(key, message) per private key file named in the file (remote hosts; with `servers`, cluster servers)
    that is not there. validate asks for remote hosts' only: a cluster's key may not exist before `cluster up`."""
    remotes = [(h, h.setting("remote")) for h in graph.hosts]
    out = [(f"{h.key}.remote.key_file", f"{h.name}: {missing_key_file(r.key_file)}")
           for h, r in remotes if r is not None and missing_key_file(r.key_file)]
    for i, server in enumerate(spec.cluster.servers if spec.cluster and servers else []):
        if missing_key_file(server.key_file):
            out.append((f"cluster.servers[{i}].key_file", f"{server.name}: {missing_key_file(server.key_file)}"))
    return out


def engine_problems(spec, graph) -> list[tuple[str, str]]:
    """The engine on hosts of this machine: its modules in this venv (their python)."""
    local = [h for h in graph.hosts if not h.real_machine]
    problem = local_engine_problem(graph.engine) if local else None
    return [("workload.engine", f"engine {graph.engine}: {problem} (scripts/bootstrap.sh installs the pinned "
             "requirements)")] if problem else []


def budget_problems(point) -> list[tuple[str, str]]:
    """A host whose cores at the point's dilation (dilation auto: this machine's factor) is under what a CPU
    quota holds."""
    return [(f"{h.key}.cores", f"{h.name}: {h.cores:g} core at dilation {point.k:g} is {h.budget:g} real core, under "
             f"the {MIN_CORES:g} a CPU quota can hold: give it more cores or a smaller emulation.dilation")
            for h in point.graph.hosts if h.budget is not None and h.budget < MIN_CORES]


def replay_problems(point) -> list[tuple[str, str]]:
    """compute: replay calibrates each node on as many of this machine's CPUs as it has cores."""
    if point.replay is None:
        return []
    return [(f"{h.key}.cores", f"{h.name}: replay calibrates a machine of {h.cores:g} cores on {math.ceil(h.cores)} "
             f"CPUs; this machine gives {point.machine_cores}: set cores to at most {point.machine_cores}, or "
             "compute: real with dilation")
            for h in point.graph.hosts if not h.real_machine and h.name not in point.replay and h.cores is not None]


def preflight(exp, points, progress=lambda msg: None, contact_nodes: bool = True) -> None:
    """Everything that can be refused before a network exists, for every resolved point at once
    (point.ResolvedPoint: the rates and times this machine will run). `contact_nodes=False` (validate)
    asks this machine's kernel only: no login to real machines, no Docker engine start or image build."""
    found: dict[tuple[str, str], list[str]] = {}
    for point in points:
        spec, graph = point.wall_spec, point.wall_graph
        problems = (budget_problems(point) + replay_problems(point) + shaping.capability_problems(spec.topology, graph)
                    + faults.capability_problems(spec)
                    + traces.capability_problems(spec, point.wall_traces())
                    + port_problems(spec.topology, graph) + engine_problems(spec, graph)
                    + key_file_problems(spec, graph, servers=contact_nodes)
                    + (node_problems(graph, progress) if contact_nodes else []))
        try:
            assign_tasks(advisor.provisional(spec.workload), [h.name for h in graph.hosts])
        except PlacementError as err:
            problems.append(("workload.strategy", str(err)))
        for key, message in problems:
            found.setdefault((key, message), []).append(point.run_id)
    issues = []
    for (key, message), run_ids in found.items():
        if len(run_ids) < len(points):
            message += f" (run points {', '.join(run_ids)})"
        issues.append(SpecIssue(*exp.location(key), key, message))
    if issues:
        raise SpecError(issues)


@dataclass
class Checked:
    """The checks' rows, the machine's timer overshoot while they ran, and why they failed (None: passed)."""
    rows: list[dict] = field(default_factory=list)
    timers: dict = field(default_factory=dict)
    reason: str | None = None


class BringUp:
    """`with BringUp(point, progress) as up:` the resolved point's network on this machine's clock is
    up (its notes said) as `up.net`, and down again when the block ends, whatever happened;
    `up.check(run_id)` runs the file's checks. `up.spec` and `up.graph` are the wall spec and graph."""

    def __init__(self, point, progress=lambda msg: None):
        self.spec, self.graph, self.progress = point.wall_spec, point.wall_graph, progress
        self.k = point.k
        self.pinned = point.pinned
        self.net = None

    def __enter__(self) -> BringUp:
        if self.pinned:
            self.progress(self.pinned)
        from testbed.cluster.cluster_site import site_for     # loads Mininet's cluster edition: only when a network is made
        self.net = Network(self.graph, self.spec.topology, self.progress, site=site_for(self.spec.cluster))
        with phases.timed("bring-up"):
            self.net.__enter__()        # kept even when it fails: a cluster's tunnel rows say why
        for note in self.net.notes:
            self.progress(note)
        return self

    def __exit__(self, *exc):
        with phases.timed("teardown"):
            return self.net.__exit__(*exc)

    @property
    def tunnel_rows(self) -> list[dict]:
        """The cluster edition's tunnels (tunnels.csv rows), also after the network is down."""
        return self.net.tunnel_rows if self.net is not None else []

    def check(self, run_id: str) -> Checked:
        """iperf3 and ping as checks: says; the failure reason names late timers when they were."""
        checks = self.spec.checks
        if not (checks.iperf or checks.ping):
            return Checked()
        with phases.timed("checks"):
            timers = timer_overshoot()
            rows = run_checks(self.net, self.graph, checks, self.spec.name, run_id, self.progress, self.k)
        reason = failure_reason(rows)
        if reason and not healthy(timers):
            reason += f" [{describe(timers)}]"
        return Checked(rows, timers, reason)
