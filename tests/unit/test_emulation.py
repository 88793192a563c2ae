"""Faithful compute's pure core: budgets to cgroup values, the dilation factor and the scaling of
every time and rate, the fidelity verdict's rules, the counter readers and PSS/USS."""

import math
import os
import re
import subprocess
import sys
import typing

import psutil
import pytest
from pydantic import BaseModel

from testbed.emulation import budgets, dilation, fidelity, memory, readers
from testbed.emulation.budgets import Quota, cpusets, cpuset_text, fits, quota, real_cores, tf_threads
from testbed.emulation.dilation import _models_in, choose, scaled_paths, to_emulated, wall_graph, wall_spec
from testbed.emulation.fidelity import ComputeProbe, NodeCpu, RunMeasures, cpu_slices, reasons, verdict
from testbed.run.training.fidelity_probe import others_on_cpus
from testbed.shaping import TCP_GOODPUT_CEILING
from testbed.spec import build_graph
from testbed.spec.models import Experiment


# ---- budgets ------------------------------------------------------------------------------------

def test_real_cores_divides_by_the_factor_and_refuses_nonsense():
    assert real_cores(1, 2.5) == 0.4
    assert real_cores(0.5) == 0.5
    for cores, k in ((0, 1), (-1, 1), (1, 0.5)):
        with pytest.raises(ValueError):
            real_cores(cores, k)


@pytest.mark.parametrize("real", [4, 2, 1, 0.8, 0.5, 1 / 3, 0.2, 0.1, 0.0625, 0.03, 0.01, 0.001])
def test_quota_holds_the_budget_within_the_kernel_limits(real):
    q = quota(real)
    assert budgets.MIN_QUOTA_US <= q.quota_us
    assert budgets.MIN_QUOTA_US <= q.period_us <= budgets.MAX_PERIOD_US
    assert q.cores == pytest.approx(real, rel=1e-3)
    # the short period unless the quota would fall under the minimum
    assert q.period_us == budgets.PERIOD_US or q.quota_us == budgets.MIN_QUOTA_US


def test_quota_values_for_each_interface():
    assert quota(1) == Quota(1_000, 1_000)                 # the shortest period the kernel takes
    assert quota(2.5) == Quota(2_500, 1_000)
    assert quota(0.8) == Quota(1_000, 1_250)               # 1 ms slices: never a burst at a whole core
    small = quota(1 / 16)
    assert small == Quota(1_000, 16_000)
    assert small.v1() == {"cpu.cfs_period_us": "16000", "cpu.cfs_quota_us": "1000"}
    assert small.v2() == "1000 16000"
    assert small.docker() == {"cpu_period": 16000, "cpu_quota": 1000}
    with pytest.raises(ValueError, match="under"):
        quota(0.0005)


def test_fits_counts_the_budgets_and_the_reserve():
    assert not fits([1, 1, 1, 1], 2, dilation=1)
    assert fits([1, 1, 1, 1], 2, dilation=3)                 # 4/3 + 0.5 = 1.83
    assert fits([0.75, 0.75], 2, reserve=0.5)                # exactly 2
    assert not fits([0.75, 0.75], 2, reserve=0.6)
    assert budgets.demand([1, 1], 2, 0.25) == 1.25


def _budget_per_cpu(sets, given):
    placed = {}
    for name, cpus in sets.items():
        for cpu in cpus:
            placed[cpu] = placed.get(cpu, 0) + given[name] / len(cpus)
    return placed


def test_cpusets_exclusive_for_whole_cores_packed_for_fractions():
    given = {"h1": 1, "h2": 0.5, "h3": 0.5, "h4": 0.25, "h5": 2}
    sets = cpusets(given, list(range(6)), reserve=0.5)
    assert len(sets["h5"]) == 2 and len(sets["h1"]) == 1
    others = [cpu for name, cpus in sets.items() if name not in ("h5", "h1") for cpu in cpus]
    assert not set(sets["h5"]) & set(others) and not set(sets["h1"]) & set(others)
    assert all(share <= 1 + 1e-9 for share in _budget_per_cpu(sets, given).values())
    used = {cpu for cpus in sets.values() for cpu in cpus}
    assert len(used) <= 6 - 1            # one CPU left for the reserve


def test_cpusets_none_when_the_cpus_do_not_hold_them():
    assert cpusets({f"h{i}": 0.375 for i in range(4)}, [0, 1], reserve=0.5) is None
    assert cpusets({"h1": 1, "h2": 1}, [0, 1], reserve=0.5) is None
    assert cpusets({"h1": 1}, [0, 1], reserve=0.5) == {"h1": [0]}
    assert cpusets({"h1": 1, "h2": 1}, [0, 1], reserve=0) == {"h1": [0], "h2": [1]}


def test_cpuset_text():
    assert cpuset_text([5, 0, 1, 2, 7, 8]) == "0-2,5,7-8"
    assert cpuset_text([3]) == "3"


def test_tf_threads_follow_the_emulated_machine():
    assert tf_threads(0.0625, 2) == (1, 2)
    assert tf_threads(1, 2) == (1, 2)
    assert tf_threads(2.5, 8) == (3, 3)
    assert tf_threads(8, 2) == (2, 2)                         # never more busy threads than CPUs
    assert tf_threads(4, 16) == (4, 4)


# ---- dilation -------------------------------------------------------------------------------------

def test_choose_the_smallest_fitting_factor_on_a_step():
    points = [[1], [1, 1], [1, 1, 1, 1]]
    k = choose(points, machine_cores=2, reserve=0.5)
    assert k == 2.75                                          # 4 / 1.5 = 2.67, up to the next 0.25
    assert fits(points[-1], 2, k, 0.5) and not fits(points[-1], 2, k - dilation.AUTO_STEP, 0.5)
    assert choose([[1, 1, 1]], 2, 0.5) == 2.0                 # an exact fit is not bumped
    assert choose([[0.5, 0.5]], 2, 0.5) == 1.0
    assert choose([], 2) == 1.0
    assert choose([[1] * 32], 2, 0.5, step=1) == 22
    with pytest.raises(ValueError, match="reserve"):
        choose([[1]], 1, reserve=1)


def test_scaling_rules():
    assert dilation.wall_time(0.5, 2.5) == 1.25
    assert dilation.emulated_time(1.25, 2.5) == 0.5
    assert dilation.link_rate(100_000_000, 3) == 33_333_333
    assert dilation.wall_time(0.1, 3) == 0.3                  # no float noise in written files


def _quantity_kind(annotation, metadata=()) -> str | None:
    """'time', 'rate' or None for a field's annotation: the spec's Time/PositiveTime (format_time),
    Bandwidth (format_bandwidth), or a text type whose schema accepts time units (fault triggers)."""
    text = repr(list(metadata)) + repr(annotation)
    if "format_bandwidth" in text:
        return "rate"
    if "format_time" in text or "(us|ms|s|m)" in text:
        return "time"
    return None


def _quantity_paths(model, prefix="") -> dict[str, str]:
    found = {}
    for name, info in model.model_fields.items():
        path = f"{prefix}{name}"
        kind = _quantity_kind(info.annotation, info.metadata)
        named = re.search(r"time|interval|duration|delay|jitter|period|_s$|^at$", name)
        if kind or (named and typing.get_origin(info.annotation) is not typing.Literal):   # graph_delay: a choice
            found[path] = kind or "untyped"
        for sub, suffix in _models_in(info.annotation):
            if sub is not model:
                found.update(_quantity_paths(sub, f"{path}{suffix}."))
    return found


# What dilation scaled when it kept the keys as a list of paths, but the checks' duration, which is sized by
# round trips where the check runs (checks.wall_duration); the marks on the models must say the same
SCALED_BEFORE = {
    "topology.link.bw": "rate", "topology.link.delay": "time", "topology.link.jitter": "time",
    "topology.bottleneck.bw": "rate", "topology.bottleneck.delay": "time", "topology.bottleneck.jitter": "time",
    "topology.links[].bw": "rate", "topology.links[].delay": "time", "topology.links[].jitter": "time",
    "topology.link.trace_start": "time", "topology.link.trace_granularity": "time",
    "topology.bottleneck.trace_start": "time", "topology.bottleneck.trace_granularity": "time",
    "topology.links[].trace_start": "time", "topology.links[].trace_granularity": "time",
    "workload.timeout": "time", "checks.duration": "wall", "monitor.interval": "time",
    "faults[].at": "time", "faults[].duration": "time", "faults[].delay": "time", "faults[].bw": "rate",
    "ssh.connect_timeout": "wall", "cluster.connect_timeout": "wall",
}


def test_the_keys_marked_scaled_are_the_keys_scaled_before():
    assert scaled_paths(Experiment) == SCALED_BEFORE


def test_every_time_and_rate_key_of_the_spec_is_marked():
    found = _quantity_paths(Experiment)
    # hosts items and overrides hold no times; the walk must still see the well-known keys
    assert {"workload.timeout", "faults[].at", "topology.links[].delay", "ssh.connect_timeout"} <= set(found)
    marked = scaled_paths(Experiment)
    assert sorted(found) == sorted(marked), "mark the new time or rate key Scaled('time'|'rate'|'wall') (spec.values)"
    for path, rule in marked.items():
        assert found[path] == ("time" if rule == "wall" else rule), path


def _spec():
    return Experiment.model_validate({
        "name": "x",
        "topology": {"template": "custom", "hosts": [{"name": "h1"}, {"name": "h2"}], "switches": [{"name": "s1"}],
                     "link": {"bw": "100mbit", "delay": "10ms", "jitter": "1ms"},
                     "links": [{"a": "h1", "b": "s1", "bw": "50mbit"}, {"a": "h2", "b": "s1", "delay": "2ms"}]},
        "workload": {"timeout": "2m"},
        "checks": {"duration": "3s"},
        "monitor": {"interval": "0.5s"},
        "ssh": {"connect_timeout": "10s"},
        "faults": [{"at": "step 3", "action": "set_bw", "link": ["h1", "s1"], "bw": "10mbit", "duration": "5s"},
                   {"at": "2s", "action": "set_delay", "link": ["h1", "s1"], "delay": "20ms"}],
    })


def test_wall_spec_scales_typed_times_up_and_rates_down():
    k = 2.5
    plain = _spec()
    exp = wall_spec(plain, k)
    assert plain == _spec()                                    # the argument is left as it was
    assert exp.topology.link.bw == round(plain.topology.link.bw / k)
    assert exp.topology.link.delay == plain.topology.link.delay * k
    assert exp.topology.link.jitter == plain.topology.link.jitter * k
    assert exp.topology.links[0].bw == 20_000_000 and exp.topology.links[0].delay is None
    assert exp.topology.links[1].delay == 0.005
    assert exp.workload.timeout == 300 and exp.monitor.interval == 1.25
    assert exp.checks.duration == plain.checks.duration         # a check is sized by round trips (checks.wall_duration)
    assert exp.ssh.connect_timeout == 10                       # real machines: wall clock
    assert exp.faults[0].at == "step 3" and exp.faults[0].duration == 12.5 and exp.faults[0].bw == 4_000_000
    assert exp.faults[1].at == "5s" and exp.faults[1].delay == 0.05
    assert wall_spec(plain, 1) is plain
    with pytest.raises(ValueError):
        wall_spec(plain, 0.5)


def test_wall_graph_scales_every_link_and_leaves_the_hosts():
    spec = _spec()
    graph = build_graph(spec.topology, dilation=2, machine_cores=4)
    wall = wall_graph(graph, 2)
    assert [e.params.bw for e in wall.links] == [25_000_000, 50_000_000]
    assert [e.params.delay for e in wall.links] == [0.02, 0.004] and wall.hosts == graph.hosts
    assert wall_graph(graph, 1) is graph


def test_to_emulated_keeps_the_wall_figures():
    row = {"run_id": "r1", "training_time_s": 10.0, "time_per_step_s": 0.5, "samples_per_s": 64.0,
           "time_lost_s": None}
    out = to_emulated(row, 2.0)
    assert out["training_time_s"] == 5.0 and out["training_time_wall_s"] == 10.0
    assert out["time_per_step_s"] == 0.25 and out["samples_per_s"] == 128.0 and out["samples_per_wall_s"] == 64.0
    assert out["time_lost_s"] is None and "time_lost_wall_s" not in out and out["run_id"] == "r1"
    assert row["training_time_s"] == 10.0


# ---- fidelity -------------------------------------------------------------------------------------

def _cpu(reason_list):
    return [r for r in reason_list if r.startswith("cpu:")]


def _oversubscribed(budget, **node):
    """4 one-core nodes on a 2-core machine at dilation 1, each running flat out for 10 s."""
    nodes = tuple(NodeCpu(f"h{i}", cores=1, budget=budget, **node) for i in range(1, 5))
    return RunMeasures(wall_s=10, machine_cpus=2, nodes=nodes, machine_busy_s=19.9)


def test_oversubscribed_without_budgets_is_degraded_naming_the_cpu():
    m = _oversubscribed(None, used_s=5.0)
    assert verdict(m).startswith("degraded: cpu: 4 nodes asked 4.0 cores of a 2-core machine (no budgets)")


def test_oversubscribed_with_budgets_is_degraded_naming_the_cpu():
    m = _oversubscribed(1.0, used_s=5.0, wait_s=5.0)           # cgroup v2: each ran half the time
    found = _cpu(reasons(m))
    assert found[0].startswith("cpu: 4 nodes' budgets need 4 cores plus the 0.5 reserve of a 2-core machine")
    assert "cpu: h3 got 0.50 of its 1-core budget while runnable" in found
    # cgroup v1: no per-node wait; the plan and the saturated machine still say it
    v1 = _oversubscribed(1.0, used_s=5.0)
    assert len(_cpu(reasons(v1))) == 2 and verdict(v1).startswith("degraded: cpu:")


def test_slices_with_long_pauses_are_degraded_with_advice_that_fits():
    """0.1 real core is 1 ms every 10 ms: 9 ms pauses. One reason per budget, and the advice names
    the largest dilation whose pauses stay under the bound."""
    two = tuple(NodeCpu(f"h{i}", cores=0.8, budget=0.1) for i in (1, 2))
    found = reasons(RunMeasures(wall_s=10, machine_cpus=2, dilation=8, nodes=two))
    assert found == ["cpu: 2 nodes (h1, h2) ran 0.1 core as 1 ms slices every 10 ms; pauses over 2 ms make "
                     "its work slower than the budget (dilation x2.4 or less keeps them shorter)"]
    # x2.4 as advised: 1 ms slices every 3 ms, 2 ms pauses, which pass
    at_advice = tuple(NodeCpu(f"h{i}", cores=0.8, budget=0.8 / 2.4) for i in (1, 2))
    assert reasons(RunMeasures(wall_s=10, machine_cpus=2, dilation=2.4, nodes=at_advice)) == []
    # 0.4 core (1.5 ms pauses) and whole cores (no pauses) pass
    for budget in (0.4, 1.0, 2.0):
        assert cpu_slices(RunMeasures(wall_s=10, machine_cpus=8, dilation=1, nodes=(NodeCpu("h1", 2, budget),))) == []
    # where the advised factor does not fit the machine, the advice says so
    many = tuple(NodeCpu(f"h{i}", cores=1, budget=1 / 21) for i in range(32))
    [slow] = cpu_slices(RunMeasures(wall_s=10, machine_cpus=2, dilation=21, nodes=many))
    assert slow.startswith("cpu: 32 nodes (h0, h1, h2, ...) ran 0.05 core as 1 ms slices every 21 ms")
    assert slow.endswith("(dilation x3 or less keeps them shorter, with fewer nodes on this machine)")
    # a node so small that even real time slices it too finely (0.25 core at x2: 0.125 core): no factor helps
    small = (NodeCpu("h1", cores=1, budget=0.5), NodeCpu("h4", cores=0.25, budget=0.125))
    [tiny] = cpu_slices(RunMeasures(wall_s=10, machine_cpus=2, dilation=2, nodes=small))
    assert tiny.startswith("cpu: h4 ran 0.12 core as 1 ms slices every 8 ms")
    assert tiny.endswith("(a budget of 0.33 core or more keeps them shorter)")


def test_slicing_measured_by_the_probe_counts_against_the_step():
    """Where the probe measured the slices' cost, the step time it added counts: compute x
    (1 - 1/slicing) over the step, against 5 %."""
    two = tuple(NodeCpu(f"h{i}", cores=0.8, budget=0.4) for i in (1, 2))     # 1.5 ms pauses: within
    at = lambda slicing, compute=0.010: RunMeasures(  # noqa: E731
        wall_s=10, machine_cpus=2, dilation=8, nodes=two, compute=ComputeProbe("h1", compute, 0.100, slicing))
    # 10 ms of a 100 ms step at 2x: 5 ms added, 5 %: within; 12 ms at 2x: 6 %: degraded
    assert cpu_slices(at(2.0)) == []
    [slow] = cpu_slices(at(2.0, compute=0.012))
    assert slow == ("cpu: the quota's slices (1 ms every 2.5 ms) and the nodes computing at once on this machine's "
                    "CPUs made h1's compute take 2.00 times its machine's time alone, 6% of each step (the compute probe); "
                    "a budget of a whole real core has no slices (nodes of 1 core or more at a dilation of at most "
                    "their cores), and replayed compute (emulation.compute: replay) neither")
    # no slicing cost measured: nothing to say; long pauses still count on their own
    assert cpu_slices(at(1.0, compute=0.090)) == []
    paused = tuple(NodeCpu(f"h{i}", cores=0.8, budget=0.1) for i in (1, 2))
    [long] = cpu_slices(RunMeasures(wall_s=10, machine_cpus=2, dilation=8, nodes=paused,
                                    compute=ComputeProbe("h1", 0.005, 0.16, 1.8)))
    assert long.startswith("cpu: 2 nodes (h1, h2) ran 0.1 core as 1 ms slices every 10 ms")
    # two one-core nodes on two CPUs: a whole core each (x1) fits only without the reserve, and the advice says so
    pair = tuple(NodeCpu(f"h{i}", cores=1, budget=1 / 1.5) for i in (1, 2))
    [sliced] = cpu_slices(RunMeasures(wall_s=10, machine_cpus=2, dilation=1.5, nodes=pair,
                                      compute=ComputeProbe("h1", 0.020, 0.050, 1.6)))
    assert "(dilation x1 or less, with emulation.reserve: 0), and replayed compute" in sliced
    followed = tuple(NodeCpu(f"h{i}", cores=1, budget=1.0) for i in (1, 2))
    assert fidelity.cpu_plan(RunMeasures(wall_s=10, machine_cpus=2, dilation=1, reserve=0, nodes=followed)) == []
    assert fidelity.cpu_plan(RunMeasures(wall_s=10, machine_cpus=2, dilation=1, nodes=followed))
    # where a smaller reserve leaves room for the advised factor, the advice names that reserve
    three = tuple(NodeCpu(f"h{i}", cores=1, budget=0.1) for i in (1, 2, 3))
    [paused] = cpu_slices(RunMeasures(wall_s=10, machine_cpus=2, dilation=10, reserve=1.5, nodes=three))
    assert paused.endswith("(dilation x3 or less keeps them shorter, with emulation.reserve: 1)")
    one_core = (NodeCpu("h1", cores=2, budget=0.5),)
    [slow] = cpu_slices(RunMeasures(wall_s=10, machine_cpus=2, dilation=4, nodes=one_core,
                                    compute=ComputeProbe("h1", 0.05, 0.1, 1.5)))
    assert "(1 ms every 2 ms)" in slow and "17% of each step" in slow and "(dilation x2 or less)" in slow


def test_the_probes_take_turns_alone_and_share_their_budgeted_part(tmp_path):
    from workloads import cpuquota
    job = tmp_path / "job.json"
    job.write_text("{}")
    with cpuquota.turn(exclusive=False, path=str(job)) as one, cpuquota.turn(exclusive=False, path=str(job)) as two:
        assert one and two                                  # under their budgets the nodes probe together
        with cpuquota.turn(exclusive=True, path=str(job), wait_s=0.2) as alone:
            assert not alone                                # not alone while another still probes: it waited
    with cpuquota.turn(exclusive=True, path=str(job)) as alone:
        assert alone
        with cpuquota.turn(exclusive=False, path=str(job), wait_s=0.2) as other:
            assert not other                                # the next waits for this one's turn
    with cpuquota.turn(exclusive=True, path=str(tmp_path / "absent")) as alone:
        assert not alone                                    # no file to share: nobody waits


def test_only_the_lead_task_probes_again_alone_with_its_quota_lifted(tmp_path, monkeypatch):
    """The lifted pass judges the quota's slices on the lead task's node; the others' figures under the
    budget are all a run reads of them, so they end after it."""
    import contextlib

    from workloads import cpuquota
    job = tmp_path / "job.json"
    job.write_text("{}")
    monkeypatch.setattr(cpuquota, "shared_file", str(job))
    monkeypatch.setattr(cpuquota, "lifted", lambda: contextlib.nullcontext(True))   # as if a quota were lifted
    for lead, passes in ((True, 2), (False, 1)):
        calls, events = [], []
        cpuquota.compute_probe(lambda: lambda: calls.append(1) or (0.2, 0.1), 10,
                               lambda event, **fields: events.append((event, fields)), lead=lead)
        [(event, fields)] = events
        assert event == "compute" and len(calls) == passes and fields["time_per_step_s"] == 0.2
        assert fields["alone"] is lead and (fields["time_per_step_free_s"] == 0.2) is lead


def test_the_probe_builds_and_warms_up_with_the_quota_lifted_and_times_its_steps_under_it(tmp_path, monkeypatch):
    """Nothing times the probe's model, batches and traced first step; under a budget of a fraction of a core
    they took seconds of a run's wall time. Its timed steps run under the budget, then lifted on the lead."""
    import contextlib

    from workloads import cpuquota
    job = tmp_path / "job.json"
    job.write_text("{}")
    monkeypatch.setattr(cpuquota, "shared_file", str(job))
    state, seen = {"lifted": False}, []

    @contextlib.contextmanager
    def lifted():
        state["lifted"] = True
        try:
            yield True
        finally:
            state["lifted"] = False
    monkeypatch.setattr(cpuquota, "lifted", lifted)

    def setup():
        seen.append(("setup", state["lifted"]))
        return lambda: seen.append(("steps", state["lifted"])) or (0.2, 0.1)
    cpuquota.compute_probe(setup, 10, lambda event, **fields: None, lead=True)
    assert seen == [("setup", True), ("steps", False), ("steps", True)]


def test_the_probe_lifts_only_the_testbeds_own_quota_and_puts_it_back(tmp_path):
    from workloads import cpuquota
    v1 = tmp_path / "cpu" / "dltestbed" / "h1"
    v1.mkdir(parents=True)
    (v1 / "cpu.cfs_quota_us").write_text("1000\n")
    proc = tmp_path / "cgroup"
    proc.write_text("12:cpuset:/dltestbed/h1\n4:cpu,cpuacct:/dltestbed/h1\n1:name=systemd:/\n")
    with cpuquota.lifted(tmp_path, proc, record_dir=str(tmp_path)) as free:
        assert free and (v1 / "cpu.cfs_quota_us").read_text() == "-1"
    assert (v1 / "cpu.cfs_quota_us").read_text() == "1000"
    v2 = tmp_path / "dltestbed" / "h2"
    v2.mkdir(parents=True)
    (v2 / "cpu.max").write_text("1000 10000\n")
    proc.write_text("0::/dltestbed/h2\n")
    with pytest.raises(RuntimeError):          # put back on every path
        with cpuquota.lifted(tmp_path, proc, record_dir=str(tmp_path)) as free:
            assert free and (v2 / "cpu.max").read_text() == "max 10000"
            raise RuntimeError
    assert (v2 / "cpu.max").read_text() == "1000 10000"
    # not the testbed's group, or no quota in it: nothing lifted
    proc.write_text("4:cpu,cpuacct:/user.slice\n")
    with cpuquota.lifted(tmp_path, proc, record_dir=str(tmp_path)) as free:
        assert not free
    (v1 / "cpu.cfs_quota_us").write_text("-1")
    proc.write_text("4:cpu,cpuacct:/dltestbed/h1\n")
    with cpuquota.lifted(tmp_path, proc, record_dir=str(tmp_path)) as free:
        assert not free


def test_slicing_is_the_cpu_under_the_budget_over_the_cpu_without_it():
    from testbed.run.point.record import slicing
    assert slicing({"cpu_per_step_s": 0.004, "cpu_per_step_free_s": 0.002}) == 2.0
    assert slicing({"cpu_per_step_s": 0.004, "cpu_per_step_free_s": None}) is None
    assert slicing({}) is None


def test_slicing_is_the_step_under_the_budget_over_the_nodes_machine_alone():
    from testbed.run.point.record import slicing
    probe = {"time_per_step_s": 0.030, "time_per_step_free_s": 0.006, "cpu_per_step_s": 0.007,
             "cpu_per_step_free_s": 0.006}
    # a one-core node at x4: 30 ms of wall a step under its budget, 6 ms alone on a whole CPU: 7.5 ms emulated,
    # 1.25 times its machine's 6 ms, though its CPU time grew only 1.17 times (it also waited for a CPU)
    assert slicing(probe, 4, 1) == 1.25
    # a half-core node's machine takes twice the whole CPU's step (60 ms wall at x1: 1.00)
    assert slicing({**probe, "time_per_step_s": 0.012}, 1, 0.5) == 1.0
    # no budgeted cores known (a node with none): the CPU times' ratio
    assert slicing(probe, 4, None) == round(0.007 / 0.006, 3)


def test_budgets_on_cluster_servers_are_held_against_each_server():
    """Two 2-core servers hold 2 x 0.75 core each (plus the reserve); three on one server do not fit."""
    spread = tuple(NodeCpu(f"h{i}", cores=1.5, budget=0.75, used_s=7.5, machine=f"srv{1 + i % 2}", machine_cpus=2)
                   for i in range(4))
    assert _cpu(reasons(RunMeasures(wall_s=10, machine_cpus=2, dilation=2, nodes=spread))) == []
    crowded = spread + (NodeCpu("h5", cores=1.5, budget=0.75, used_s=7.5, machine="srv1", machine_cpus=2),)
    assert _cpu(reasons(RunMeasures(wall_s=10, machine_cpus=2, dilation=2, nodes=crowded))) == [
        "cpu: 3 nodes' budgets need 2.25 cores plus the 0.5 reserve of a 2-core machine on srv1 (dilation x2)"]


def test_dilated_point_that_fits_is_ok():
    k = choose([[1] * 4], 2)
    nodes = tuple(NodeCpu(f"h{i}", cores=1, budget=1 / k, used_s=10 / k, wait_s=10 - 10 / k,
                          nr_periods=1000, nr_throttled=900, throttled_s=10 - 10 / k) for i in range(1, 5))
    m = RunMeasures(wall_s=10, machine_cpus=2, dilation=k, nodes=nodes, machine_busy_s=16,
                    system_wait_s=9.0, switch_cpu_s=1.0, timers={"timer_p99_ms": 0.2, "timer_max_ms": 3},
                    checks=({"tool": "iperf3", "src": "h2", "dst": "h1", "configured_bps": 10**7, "ratio": 0.955},))
    assert verdict(m) == "ok"


def test_node_share_rules():
    held = NodeCpu("h1", budget=0.5, used_s=5, wait_s=5, throttled_s=5)      # held to its quota only
    starved = NodeCpu("h2", budget=0.5, used_s=3, wait_s=5, throttled_s=1)   # lost 4 s: 2 s of CPU at 0.5
    unbudgeted = NodeCpu("h3", used_s=4, wait_s=6)
    assert fidelity.node_share(held) == 1.0
    assert fidelity.node_share(NodeCpu("h1", budget=0.5, used_s=5, wait_s=0)) == 1.0   # PSI without throttling
    assert fidelity.node_share(starved) == pytest.approx(0.6)
    # two threads on a 1-core budget: they wait while throttled on both CPUs, and lose nothing
    assert fidelity.node_share(NodeCpu("h4", budget=1, used_s=10, wait_s=5, throttled_s=10)) == 1.0
    assert fidelity.node_share(NodeCpu("h4", budget=2, used_s=20, wait_s=0)) == 1.0
    assert fidelity.node_share(NodeCpu("h5", used_s=1)) is None
    m = RunMeasures(wall_s=10, machine_cpus=8, nodes=(held, starved, unbudgeted))
    assert reasons(m) == ["cpu: h2 got 0.60 of its 0.5-core budget while runnable",
                          "cpu: h3 got 0.40 of the CPU (no budget) while runnable"]
    idle = NodeCpu("h6", budget=1, used_s=0.1, wait_s=0.2)     # too little activity to judge
    assert reasons(RunMeasures(wall_s=10, machine_cpus=8, nodes=(idle,))) == []


def test_machine_and_system_pressure_rules():
    held = (NodeCpu("h1", budget=1, used_s=0),)
    busy = RunMeasures(wall_s=10, machine_cpus=2, machine_busy_s=19.5, nodes=held)
    assert reasons(busy) == ["cpu: the machine was saturated (1.95 of 2 cores busy, 0.00 by the nodes)"]
    # nodes that share the machine without budgets (compute 'shared') saturate it by design
    assert reasons(RunMeasures(wall_s=10, machine_cpus=2, machine_busy_s=19.5, nodes=(NodeCpu("h1", used_s=9),))) == []
    others = RunMeasures(wall_s=10, machine_cpus=2, machine_busy_s=20, nodes=(NodeCpu("h1", budget=1, used_s=6),))
    assert reasons(others) == ["cpu: the machine was saturated (2.00 of 2 cores busy, 0.60 by the nodes)"]
    assert reasons(RunMeasures(wall_s=10, machine_cpus=2, machine_busy_s=18.9, nodes=held)) == []
    waited = RunMeasures(wall_s=10, machine_cpus=2, system_wait_s=3.4, nodes=(NodeCpu("h1", budget=1, used_s=1),))
    assert reasons(waited) == ["cpu: runnable tasks waited for a CPU 34% of the time (/proc/pressure/cpu)"]
    # a throttled node counts as waiting in the system's figure: then it proves nothing
    throttled = RunMeasures(wall_s=10, machine_cpus=2, system_wait_s=3.4,
                            nodes=(NodeCpu("h1", budget=0.5, used_s=5, nr_periods=100, nr_throttled=90),))
    assert reasons(throttled) == []
    assert reasons(RunMeasures(wall_s=10, machine_cpus=2, system_wait_s=0.5, nodes=held)) == []
    assert reasons(RunMeasures(wall_s=10, machine_cpus=2, system_wait_s=3.4, nodes=(NodeCpu("h1", used_s=1),))) == []


def test_switch_timer_and_shaping_rules():
    m = RunMeasures(wall_s=10, machine_cpus=2, switch_cpu_s=9.7, switch_lost=12)
    assert reasons(m) == ["switch: ovs-vswitchd used 0.97 of a core", "switch: ovs-vswitchd lost 12 packets"]
    assert reasons(RunMeasures(wall_s=10, machine_cpus=2, switch_cpu_s=5, switch_lost=0)) == []
    late = RunMeasures(wall_s=10, machine_cpus=2, timers={"timer_p50_ms": 0.1, "timer_p99_ms": 12.0, "timer_max_ms": 40.0})
    assert reasons(late) == ["timers: p99 sleep overshoot 12 ms (max 40 ms)"]
    rows = ({"tool": "ping", "src": "h2", "dst": "h1", "configured_bps": 10**7, "ratio": math.nan},
            {"tool": "iperf3", "src": "h2", "dst": "h1", "configured_bps": 10**7, "ratio": TCP_GOODPUT_CEILING},
            {"tool": "iperf3", "src": "h3", "dst": "h1", "configured_bps": 10**7, "ratio": 0.71},
            {"tool": "iperf3", "src": "h4", "dst": "h1", "configured_bps": 10**7, "ratio": math.nan},
            {"tool": "iperf3", "src": "h5", "dst": "h1", "configured_bps": None, "ratio": math.nan})
    found = reasons(RunMeasures(wall_s=10, machine_cpus=2, checks=rows, tolerance=0.1))
    assert len(found) == 2
    assert found[0].startswith("shaping: iperf3 h3-h1 read 0.71 of the rate")
    assert found[1] == "shaping: iperf3 h4-h1 gave no reading"
    edge = ({"tool": "iperf3", "src": "h2", "dst": "h1", "configured_bps": 10**7, "ratio": 0.87},)
    assert reasons(RunMeasures(wall_s=10, machine_cpus=2, checks=edge, tolerance=0.1)) == []
    assert reasons(RunMeasures(wall_s=10, machine_cpus=2, checks=edge, tolerance=0.05))


def test_verdict_joins_every_reason():
    m = RunMeasures(wall_s=10, machine_cpus=2, switch_cpu_s=9.7, machine_busy_s=19.9,
                    nodes=(NodeCpu("h1", budget=0.5, used_s=5),))
    assert verdict(m) == ("degraded: cpu: the machine was saturated (1.99 of 2 cores busy, 0.50 by the nodes); "
                          "switch: ovs-vswitchd used 0.97 of a core")
    assert verdict(RunMeasures(wall_s=10, machine_cpus=2)) == "ok"


def test_a_degraded_run_names_the_hosts_steal_and_a_faithful_one_ignores_it():
    late = dict(timer_p50_ms=0.1, timer_p99_ms=9.0, timer_max_ms=12.0)
    stolen = RunMeasures(wall_s=10, machine_cpus=2, timers=late, steal_s=4.2)
    assert verdict(stolen) == ("degraded: timers: p99 sleep overshoot 9 ms (max 12 ms); "
                               "host: this machine's host took 21% of its CPU time (steal) during training")
    assert verdict(RunMeasures(wall_s=10, machine_cpus=2, timers=late, steal_s=0.6)).count("host:") == 0   # 3 %
    assert verdict(RunMeasures(wall_s=10, machine_cpus=2, steal_s=4.2)) == "ok"      # not a reason on its own


# ---- readers --------------------------------------------------------------------------------------

def test_read_cpu_stat_v2(tmp_path):
    (tmp_path / "cpu.stat").write_text("usage_usec 2500000\nuser_usec 2000000\nsystem_usec 500000\n"
                                       "nr_periods 300\nnr_throttled 120\nthrottled_usec 1500000\n")
    assert readers.read_cpu_stat(tmp_path) == {"nr_periods": 300, "nr_throttled": 120, "usage_s": 2.5,
                                               "throttled_s": 1.5}


def test_read_cpu_stat_v1(tmp_path):
    cpu, acct = tmp_path / "cpu", tmp_path / "cpuacct"
    cpu.mkdir(), acct.mkdir()
    (cpu / "cpu.stat").write_text("nr_periods 10\nnr_throttled 4\nthrottled_time 2000000000\nnr_bursts 0\n")
    (acct / "cpuacct.usage").write_text("3500000000\n")
    assert readers.read_cpu_stat(cpu, acct) == {"nr_periods": 10, "nr_throttled": 4, "throttled_s": 2.0,
                                                "usage_s": 3.5}
    assert readers.read_cpu_stat(cpu)["usage_s"] is None
    (cpu / "cpuacct.usage").write_text("1000000000\n")          # cpu,cpuacct co-mounted
    assert readers.read_cpu_stat(cpu)["usage_s"] == 1.0
    assert readers.read_cpu_stat(tmp_path / "none") == {"nr_periods": 0, "nr_throttled": 0, "throttled_s": 0.0,
                                                        "usage_s": None}


def test_read_pressure_files(tmp_path):
    text = ("some avg10=1.50 avg60=0.41 avg300=0.48 total=7205057\n"
            "full avg10=0.00 avg60=0.00 avg300=0.00 total=1000000\n")
    (tmp_path / "cpu.pressure").write_text(text)
    p = readers.read_pressure(tmp_path / "cpu.pressure")
    assert p["some"] == {"avg10": 1.5, "avg60": 0.41, "avg300": 0.48, "total_s": 7.205057}
    assert p["full"]["total_s"] == 1.0
    assert readers.cgroup_wait_s(tmp_path) == 7.205057
    assert readers.system_wait_s(tmp_path / "cpu.pressure") == 7.205057
    assert readers.cgroup_wait_s(tmp_path / "v1") is None
    assert readers.system_wait_s(tmp_path / "absent") is None


def test_delta():
    before = {"usage_s": 1.0, "nr_periods": 10, "wait": None}
    after = {"usage_s": 3.5, "nr_periods": 25, "wait": 2.0, "new": 1}
    assert readers.delta(before, after) == {"usage_s": 2.5, "nr_periods": 15, "wait": None}


def test_datapath_lost():
    show = ("netdev@ovs-netdev:\n  lookups: hit:12508 missed:9 lost:3\n  flows: 9\n  port 0: ovs-netdev (tap)\n"
            "system@ovs-system:\n  lookups: hit:1 missed:2 lost:4\n  flows: 0\n")
    assert readers.datapath_lost(show) == 7
    assert readers.datapath_lost("") == 0


def test_node_cpu_from_two_readings(tmp_path):
    (tmp_path / "cpu.stat").write_text("usage_usec 1000000\nnr_periods 10\nnr_throttled 2\nthrottled_usec 50000\n")
    before = readers.read_cpu_stat(tmp_path)
    (tmp_path / "cpu.stat").write_text("usage_usec 4000000\nnr_periods 110\nnr_throttled 52\nthrottled_usec 650000\n")
    node = NodeCpu.from_readings("h1", 1, 0.5, before, readers.read_cpu_stat(tmp_path), 1.0, 2.5)
    assert node == NodeCpu("h1", 1, 0.5, used_s=3.0, wait_s=1.5, nr_periods=100, nr_throttled=50,
                           throttled_s=pytest.approx(0.6))
    assert NodeCpu.from_readings("h1", 1, None, before, before).wait_s is None


def test_machine_busy_and_process_cpu():
    first = sum(readers.cpus_busy_s())
    sum(i * i for i in range(300_000))
    later = sum(readers.cpus_busy_s())
    assert 0 < first <= later + 1e-6 and later <= sum(psutil.cpu_times()) + 1e-6   # sums of floats in two orders
    own = psutil.Process().name()
    assert readers.process_cpu_s(own) > 0
    assert readers.process_cpu_s("no-such-process-here") is None


# ---- memory ---------------------------------------------------------------------------------------

def test_tree_memory_sums_a_process_and_its_children():
    child = subprocess.Popen([sys.executable, "-c", "import subprocess, sys, time; "
                              "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)']); "
                              "print(p.pid, flush=True); time.sleep(30)"], stdout=subprocess.PIPE, text=True)
    try:
        grandchild = int(child.stdout.readline())
        tree = memory.tree_memory(child.pid)
        alone = memory.tree_memory(grandchild)
        assert tree["processes"] == 2 and alone["processes"] == 1
        assert 0 < tree["uss"] <= tree["pss"] <= tree["rss"]
        assert tree["pss"] > alone["pss"]
    finally:
        for pid in (grandchild, child.pid):
            os.kill(pid, 9)
        child.wait()
    assert memory.tree_memory(child.pid) == {"rss": 0, "pss": 0, "uss": 0, "processes": 0}


def test_tree_memory_skips_processes_that_end_while_read(monkeypatch):
    class Info(typing.NamedTuple):
        rss: int
        pss: int
        uss: int

    class Fake:
        def __init__(self, pid, gone=False):
            self.pid, self.gone = pid, gone

        def children(self, recursive):
            return [Fake(2), Fake(3, gone=True)]

        def memory_full_info(self):
            if self.gone:
                raise psutil.NoSuchProcess(self.pid)
            return Info(100, 60, 40)

    monkeypatch.setattr(memory.psutil, "Process", Fake)
    assert memory.tree_memory(1) == {"rss": 200, "pss": 120, "uss": 80, "processes": 2}


def test_a_budget_of_whole_cpus_of_its_own_needs_no_quota():
    assert budgets.held_by(1.0, [0]) == budgets.UNLIMITED and budgets.held_by(2.0, [2, 3]) == budgets.UNLIMITED
    assert budgets.held_by(1.0) == quota(1.0) and budgets.held_by(0.5, [0]) == quota(0.5)   # shared CPU: a quota
    assert budgets.UNLIMITED.v2() == "max 1000" and budgets.UNLIMITED.v1()["cpu.cfs_quota_us"] == "-1"


def test_nodes_pinned_to_whole_cores_of_their_own_are_judged_by_what_else_ran_there():
    # a one-core node pinned to CPU 0: its threads waited for each other (the machine's pressure 16 %), but
    # others ran on its CPU 4 % of the time: its emulated machine's own wait, not contention
    own = NodeCpu("h1", cores=1, budget=1, used_s=7.0, pinned_cpus=1, others_on_cpus_s=0.43)
    assert reasons(RunMeasures(wall_s=12, machine_cpus=2, system_wait_s=1.9, nodes=(own,))) == []
    crowded = NodeCpu("h1", cores=1, budget=1, used_s=6.0, pinned_cpus=1, others_on_cpus_s=3.6)
    assert reasons(RunMeasures(wall_s=12, machine_cpus=2, system_wait_s=1.9, nodes=(crowded,))) == [
        "cpu: other tasks ran on h1's CPUs 30% of the time"]
    two = NodeCpu("h2", cores=2, budget=2, used_s=10, pinned_cpus=2, others_on_cpus_s=2.0)
    assert reasons(RunMeasures(wall_s=12, machine_cpus=4, system_wait_s=0.1, nodes=(own, two))) == []
    # a budget under its pinned CPUs shares them by design: the machine's pressure speaks, as unpinned
    shared = NodeCpu("h1", cores=1, budget=0.5, used_s=3, pinned_cpus=1, others_on_cpus_s=5)
    assert reasons(RunMeasures(wall_s=12, machine_cpus=2, system_wait_s=1.9, nodes=(shared,))) == [
        "cpu: runnable tasks waited for a CPU 16% of the time (/proc/pressure/cpu)"]
    unknown = NodeCpu("h1", cores=1, budget=1, used_s=7.0, pinned_cpus=1, others_on_cpus_s=None)
    assert reasons(RunMeasures(wall_s=12, machine_cpus=2, system_wait_s=1.9, nodes=(unknown,))) == [
        "cpu: runnable tasks waited for a CPU 16% of the time (/proc/pressure/cpu)"]


def test_each_cpus_busy_time_adds_up_to_the_machines():
    per_cpu, total = readers.cpus_busy_s(), psutil.cpu_times()
    whole = sum(total) - total.idle - getattr(total, "iowait", 0.0) - getattr(total, "guest", 0.0) \
        - getattr(total, "guest_nice", 0.0)
    assert len(per_cpu) == psutil.cpu_count() and all(b >= 0 for b in per_cpu)
    assert sum(per_cpu) == pytest.approx(whole, rel=0.01, abs=2.0)


def test_the_hosts_steal_is_read_from_the_machines_cpu_times():
    first = readers.steal_s()
    assert 0 <= first <= readers.steal_s() <= sum(psutil.cpu_times())


def test_what_else_ran_on_a_nodes_cpus():
    before, after = [100.0, 50.0, 10.0], [108.0, 60.0, 20.0]
    assert others_on_cpus((0,), before, after, used=7.5) == pytest.approx(0.5)
    assert others_on_cpus((0, 1), before, after, used=12.0) == pytest.approx(6.0)
    assert others_on_cpus((0,), before, after, used=9.0) == 0.0          # counters read a little apart
    assert others_on_cpus((3,), before, after, used=1.0) is None         # a CPU this machine did not report
