"""A run point resolved once (testbed/run/point/point.py), without a network: the spec's cores and emulation
keys, budgets in the graph, one auto factor per sweep, the wall spec and graph, pinning, and results back
in emulated time."""
import math
from types import SimpleNamespace

import pytest

from testbed.nodes import cgroups
from testbed.run.point import point as rp
from testbed.run.point.record import Observed
from spec_helpers import load
from testbed.spec import SpecError, build_graph, expand_points


FAITHFUL = """
name: f
topology: {hosts: 4, link: {bw: 100mbit}, host: {cores: 1}}
emulation: {dilation: auto}
workload: {timeout: 2m}
checks: {duration: 2s}
monitor: {interval: 0.5s}
faults:
  - {at: 3s, action: set_bw, link: [h1, s1], bw: 10mbit, duration: 1s}
sweep: {topology.hosts: [1, 2, 4]}
"""


def test_cores_become_real_budgets_of_cores_over_k(tmp_path):
    exp = load(tmp_path, FAITHFUL.replace("dilation: auto", "dilation: 2.5"))
    graph = build_graph(exp.topology, dilation=2.5, machine_cores=2)
    h = graph.hosts[0]
    assert (h.cores, h.budget) == (1.0, pytest.approx(0.4)) and h.cpu == pytest.approx(0.2)   # 0.4 of 2 cores
    assert build_graph(exp.topology).hosts[0].cpu is None          # without this machine's cores: unresolved


def test_older_cpu_fraction_is_real_cores_of_this_machine(tmp_path):
    exp = load(tmp_path, "name: f\ntopology: {hosts: 2, host: {cpu: 0.25}}\n")
    h = build_graph(exp.topology, machine_cores=4).hosts[0]
    assert (h.cpu, h.budget, h.cores) == (0.25, 1.0, 1.0)


def test_nodes_are_pinned_to_cpus_of_their_own_where_the_machine_allows(tmp_path, monkeypatch):
    exp = load(tmp_path, "name: f\ntopology: {hosts: 3, host: {cores: 1}}\n")
    graph = build_graph(exp.topology, machine_cores=4)
    said = []
    monkeypatch.setattr(rp.os, "sched_getaffinity", lambda pid: {4, 5, 6, 7})
    pinned = rp.pinned(graph, 0.5, said.append)
    assert [h.cpus for h in pinned.hosts] == [(4,), (5,), (6,)]          # CPU 7 kept for the reserve
    assert said == ["pinned: h1 to CPU 4, h2 to CPU 5, h3 to CPU 6"]
    monkeypatch.setattr(rp.os, "sched_getaffinity", lambda pid: {0, 1, 2})
    assert rp.pinned(graph, 0.5, said.append) is graph                  # 3 cores + the reserve: shared
    halves = build_graph(exp.topology, dilation=2, machine_cores=3)     # 0.5 core each: two share a CPU
    assert [h.cpus for h in rp.pinned(halves, 0.5).hosts] == [(0,), (0,), (1,)]


def test_auto_is_each_points_smallest_factor(tmp_path):
    said = []
    points = rp.resolve_all(expand_points(load(tmp_path, FAITHFUL)), machine=2, progress=said.append)
    # with the 0.5 reserve on 2 cores: 1 one-core node runs in real time, 2 need x1.5 (x1.25 leaves 0.4), 4 x2.75
    assert [p.spec.emulation.dilation for p in points] == [p.k for p in points] == [1.0, 1.5, 2.75]
    assert said == ["dilation auto: x1 for 1 node(s) of 1 cores; x1.5 for 2 node(s) of 2 cores; x2.75 for 4 "
                    "node(s) of 4 cores (each point the smallest factor at which its nodes plus a 0.5-core "
                    "reserve fit this machine's 2 cores)"]
    again = rp.resolve_all(expand_points(points[-1].spec), machine=2)  # already numeric: unchanged
    assert again[0].k == 2.75


def test_auto_without_budgets_is_real_time(tmp_path):
    exp = load(tmp_path, "name: f\ntopology: {hosts: 4}\nemulation: {dilation: auto}\n")
    said = []
    assert rp.resolve_all(expand_points(exp), 2, said.append)[0].k == 1.0
    assert "no node has a cores budget" in said[0]


def test_wall_spec_scales_rates_and_every_written_time(tmp_path):
    point = rp.resolve_all(expand_points(load(tmp_path, FAITHFUL)), machine=2)[-1]
    wall = point.wall_spec
    assert wall.topology.link.bw == int(100_000_000 / 2.75)
    assert (wall.workload.timeout, wall.checks.duration, wall.monitor.interval) == (330.0, 2.0, 1.375)
    fault = wall.faults[0]
    assert (fault.at, fault.duration, fault.bw) == ("8.25s", 2.75, round(10_000_000 / 2.75))
    assert wall.location("topology.link.bw") == point.spec.location("topology.link.bw")   # same file and line
    assert point.spec.topology.link.bw == 100_000_000                  # the emulated world as written
    assert [e.params.bw for e in point.wall_graph.links] == [int(100_000_000 / 2.75)] * 4
    assert [e.params.bw for e in point.graph.links] == [100_000_000] * 4
    assert rp.resolve_all(expand_points(rp.with_dilation(point.spec, 1)), 2)[-1].wall_spec.topology.link.bw == 100_000_000


def test_columns_say_what_was_emulated(tmp_path):
    exp = load(tmp_path, FAITHFUL.replace("dilation: auto", "dilation: 2"))
    cols = columns(expand_points(exp)[-1], machine=2)
    assert cols == dict(dilation=2.0, byte_scale=1, compute="budgets", cores=1.0, node_cores="h1=1;h2=1;h3=1;h4=1", machine_cores=2, profile="")
    shared = columns(load(tmp_path, "name: f\ntopology: {hosts: 2}\n"), machine=2)
    assert shared["compute"] == "shared" and math.isnan(shared["cores"]) and shared["node_cores"] == ""
    mixed = load(tmp_path, "name: f\ntopology: {hosts: 2, host: {cores: 1}, host_overrides: {h2: {cores: 2}}}\n")
    cols = columns(mixed, machine=4)
    assert math.isnan(cols["cores"]) and cols["node_cores"] == "h1=1;h2=2"


def columns(spec_or_point, machine):
    """runs.csv's emulation columns of a spec (one point) or a point, resolved on a `machine`-core machine."""
    point = getattr(spec_or_point, "spec", spec_or_point)
    return rp.resolve_all(expand_points(point), machine)[0].columns()


def resolved(at: str, k: float):
    """A resolved point with one fault triggered `at`, at dilation k (only what to_emulated reads)."""
    spec = SimpleNamespace(faults=[SimpleNamespace(at=at)])
    return rp.ResolvedPoint("r", 0, {}, spec, spec, k, None, None, 2)


def test_results_come_back_in_emulated_time():
    row = {"training_time_s": 10.0, "time_per_step_s": 0.5, "samples_per_s": 64.0, "cpu_mean_pct": 40.0,
           "compute_per_step_s": 0.2, "wall_time_s": 30.0}
    observed = Observed(steps=[{"time_s": 0.5, "samples_per_s": 64.0}], usage=[{"t": 2.0, "cpu_pct": 40.0}],
                        checks=[{"configured_bps": 4e6, "measured_bps": 3.8e6, "ratio": 0.95, "rtt_ms": 1.0}],
                        faults=[{"fault": 1, "at": "6s", "duration_s": 4.0, "extra_s": 1.0}])
    out = resolved(at="3s", k=2.0).to_emulated(row, observed)
    assert (out["training_time_s"], out["training_time_wall_s"], out["time_per_step_s"]) == (5.0, 10.0, 0.25)
    assert (out["samples_per_s"], out["cpu_mean_pct"], out["compute_per_step_s"]) == (128.0, 80.0, 0.1)
    assert out["wall_time_s"] == 30.0                                 # the run's own wall time stays wall
    assert observed.steps[0] == {"time_s": 0.25, "samples_per_s": 128.0}
    assert observed.usage[0] == {"t": 1.0, "cpu_pct": 80.0}
    assert observed.checks[0] == {"configured_bps": 8e6, "measured_bps": 7.6e6, "ratio": 0.95, "rtt_ms": 0.5}
    assert observed.faults[0] == {"fault": 1, "at": "3s", "duration_s": 2.0, "extra_s": 0.5}   # as written
    # at K = 1 nothing is scaled; the wall columns hold the same figures (a sweep's points may differ in K)
    same = resolved(at="3s", k=1.0).to_emulated(dict(row), Observed())
    assert {c: v for c, v in same.items() if "_wall" not in c} == row
    assert same["training_time_wall_s"] == row["training_time_s"] and same["samples_per_wall_s"] == row["samples_per_s"]


@pytest.mark.parametrize("text, key, words", [
    ("topology: {hosts: 2, host: {cores: 1, cpu: 0.5}}", "topology.host.cpu", "not both"),
    ("topology: {hosts: 2, host: {cores: 0}}", "topology.host.cores", "greater than or equal to 0.001"),
    ("emulation: {dilation: 0.5}", "emulation.dilation", "at least 1"),
    ("emulation: {dilation: fast}", "emulation.dilation", "or auto"),
    ("emulation: {reserve: -1}", "emulation.reserve", "greater than or equal to 0"),
])
def test_bad_emulation_settings_name_their_key(tmp_path, text, key, words):
    with pytest.raises(SpecError) as err:
        load(tmp_path, f"name: f\n{text}\n")
    issue = err.value.errors[0]
    assert issue.key == key and words in issue.message and issue.line == 2


def test_dilation_is_refused_with_real_machines(tmp_path):
    text = ("name: f\ntopology:\n  hosts: 2\n  host: {kind: remote, remote: {python: /usr/bin/python3, "
            "interface: eth0}}\n  host_overrides:\n    h1: {remote: {address: pc1.lan}}\n"
            "    h2: {remote: {address: pc2.lan}}\nemulation: {dilation: 2}\n")
    with pytest.raises(SpecError) as err:
        load(tmp_path, text)
    found = [i for i in err.value.errors if i.key == "emulation.dilation"]
    assert found and "real time" in found[0].message and found[0].line == 8
    assert load(tmp_path, text.replace("dilation: 2", "dilation: 1")).emulation.dilation == 1


class _GoneNode:
    """A node whose processes have ended (their CPU times are gone) but whose cgroups remain."""
    machine = "local"

    def __init__(self, dirs):
        self.cgroup_dirs = dirs

    def cpu_counters(self):
        return cgroups.cpu_counters(self.cgroup_dirs)

    @classmethod
    def usage(cls, nodes):
        return {}


def test_the_probe_reads_cpu_from_the_cgroup_which_outlives_the_processes(tmp_path, monkeypatch):
    from testbed.run.training import fidelity_probe
    cpu, acct = tmp_path / "cpu/dltestbed/h1", tmp_path / "cpuacct/dltestbed/h1"
    for d in (cpu, acct):
        d.mkdir(parents=True)
    (cpu / "cpu.cfs_quota_us").write_text("5000")

    def counters(usage_ns, periods, throttled):
        (acct / "cpuacct.usage").write_text(str(usage_ns))
        (cpu / "cpu.stat").write_text(f"nr_periods {periods}\nnr_throttled {throttled}\nthrottled_time 0\n")
    monkeypatch.setattr(fidelity_probe, "_datapath_lost", lambda: None)
    host = SimpleNamespace(name="h1", kind="netns", real_machine=False, cores=1.0, budget=0.5, cpus=None)
    net = SimpleNamespace(nodes={"h1": _GoneNode([cpu, acct])})
    counters(1_000_000_000, 10, 1)
    with fidelity_probe.Probe(net, SimpleNamespace(hosts=[host])) as probe:
        counters(3_500_000_000, 510, 300)
    node = probe.measures(2, 2.0, 0.5, None, [], 0.1).nodes[0]
    assert (node.used_s, node.nr_periods, node.nr_throttled, node.budget) == (2.5, 500, 299, 0.5)


def test_a_point_builds_its_graph_once_from_resolution_to_its_runs_row(tmp_path, monkeypatch):
    """Resolution builds each point's graph; preflight, bring-up and the runs.csv row take it from there."""
    from testbed.run.bringup import network_up
    from testbed.run.point import record
    from testbed.roles import assign_tasks
    from testbed.spec import graph as spec_graph
    built = []

    def counted(*args, **kw):
        built.append(args[0])
        return real(*args, **kw)
    real = spec_graph.build_graph
    exp = load(tmp_path, FAITHFUL)
    expanded = expand_points(exp)          # (validating the file builds its own graphs, once per topology)
    for module in (rp, spec_graph):
        monkeypatch.setattr(module, "build_graph", counted)
    points = rp.resolve_all(expanded, machine=2)
    assert len(built) == len(points) == 3
    network_up.preflight(exp, points, contact_nodes=False)
    for point in points:
        up = network_up.BringUp(point)
        tasks = assign_tasks(point.spec.workload, [h.name for h in point.graph.hosts])
        record.runs_row(point, point.graph, tasks) | point.columns()
        assert up.graph is point.wall_graph and up.spec is point.wall_spec
    assert len(built) == 3
