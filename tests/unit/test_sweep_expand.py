"""Sweep expansion: counts, order, stable unique run ids, per-point checks blamed on sweep lines."""

from spec_helpers import issues, load, one, write
from testbed.spec import build_graph, expand_points, load_spec
from testbed.spec.sweep import run_id

SWEEP_A = """
name: demo
topology:
  hosts: 2
  link: {bw: 10mbit}
workload:
  strategy: allreduce
sweep:
  topology.hosts: [1, 2, 4]
  bw: [1mbit, 10mbit]
  strategy: [single, allreduce]
  repeats: 3
"""

SWEEP_B = """
sweep:
  repeats: 3
  strategy: [single, allreduce]
  topology.link.bw: [1000kbit, 10mbit]
  hosts: [1, 2, 4]
workload:
  strategy: allreduce
topology:
  link: {bw: 10mbit}
  hosts: 2
name: demo
"""


def test_count_is_product_times_repeats(tmp_path):
    points = expand_points(load(tmp_path, SWEEP_A))
    assert len(points) == 3 * 2 * 2 * 3
    assert len({p.run_id for p in points}) == len(points)


def test_order_follows_axes_with_repeats_innermost(tmp_path):
    points = expand_points(load(tmp_path, SWEEP_A))
    first = [(p.params["topology.hosts"], p.params["topology.link.bw"], p.params["workload.strategy"],
              p.repeat) for p in points[:7]]
    assert first == [(1, "1mbit", "single", 0), (1, "1mbit", "single", 1), (1, "1mbit", "single", 2),
                     (1, "1mbit", "allreduce", 0), (1, "1mbit", "allreduce", 1),
                     (1, "1mbit", "allreduce", 2), (1, "10mbit", "single", 0)]


def test_point_specs_have_values_and_no_sweep(tmp_path):
    points = expand_points(load(tmp_path, SWEEP_A))
    point = next(p for p in points if p.params == {"topology.hosts": 4, "topology.link.bw": "1mbit",
                                                     "workload.strategy": "allreduce"})
    spec = point.spec
    assert spec.sweep is None
    assert (spec.topology.hosts, spec.topology.link.bw, spec.workload.strategy) == (4, 10**6, "allreduce")
    assert len(build_graph(spec.topology).hosts) == 4
    assert spec.location("topology.link.bw")[1] == 9
    assert point.run_id.startswith("h4-bw1mbit-allreduce-r")


def test_ids_independent_of_key_order_and_spelling(tmp_path):
    a = expand_points(load_spec(write(tmp_path, SWEEP_A, "a.yaml")))
    b = expand_points(load_spec(write(tmp_path, SWEEP_B, "b.yaml")))
    assert sorted(p.run_id for p in a) == sorted(p.run_id for p in b)
    by_id = {p.run_id: p.params for p in a}
    assert all(by_id[p.run_id] == p.params for p in b)


def test_ids_stable_across_processes():
    """A golden value: sha256 of sorted JSON, not Python's per-process salted hash()."""
    params = {"workload.strategy": "allreduce", "topology.link.bw": "10mbit", "topology.hosts": 4}
    assert run_id(params, 0, {"name": "demo", "topology": {"hosts": 4}}) == "h4-bw10mbit-allreduce-r0-5cae6b"
    assert run_id({}, 0, {}) == "r0-ab450a"


def test_a_changed_value_outside_the_sweep_makes_new_ids(tmp_path):
    """Resume must not take a run of another file for this one: the id hashes the whole point."""
    before = expand_points(load(tmp_path, SWEEP_A))
    after = expand_points(load_spec(write(tmp_path, SWEEP_A, "a.yaml"),
                                    ["workload.model_params.width=512"]))
    assert [p.params for p in before] == [p.params for p in after]
    assert not {p.run_id for p in before} & {p.run_id for p in after}
    assert [p.run_id.rsplit("-", 1)[0] for p in before] == [p.run_id.rsplit("-", 1)[0] for p in after]


def test_run_id_format(tmp_path):
    point = expand_points(load(tmp_path, SWEEP_A))[-1]
    prefix, digest = point.run_id.rsplit("-", 1)
    assert prefix == "h4-bw10mbit-allreduce-r2" and len(digest) == 6
    assert all(c.isalnum() or c in "-_." for c in point.run_id)


def test_no_sweep_is_one_point(tmp_path):
    points = expand_points(load(tmp_path, "name: demo\n"))
    assert len(points) == 1 and points[0].params == {} and points[0].run_id.startswith("r0-")


def test_repeats_only(tmp_path):
    points = expand_points(load(tmp_path, "name: demo\nsweep: {repeats: 4}\n"))
    assert [p.repeat for p in points] == [0, 1, 2, 3] and len({p.run_id for p in points}) == 4


def test_unknown_sweep_path(tmp_path):
    issue = one(tmp_path, "name: demo\nsweep:\n  topology.link.bww: [1mbit]\n")
    assert (issue.line, issue.key) == (3, "sweep.topology.link.bww")
    assert "unknown sweep key path 'topology.link.bww'" in issue.message
    assert "did you mean 'bw'?" in issue.message


def test_sweep_axis_needs_non_empty_list(tmp_path):
    found = issues(tmp_path, "name: demo\nsweep:\n  hosts: []\n  bw: 1mbit\n  repeats: 0\n")
    assert [(i.line, i.key) for i in found] == [(3, "sweep.hosts"), (4, "sweep.bw"),
                                                 (5, "sweep.repeats")]


def test_bad_sweep_value_blamed_on_its_line(tmp_path):
    issue = one(tmp_path, "name: demo\nsweep:\n  bw:\n    - 1mbit\n    - 10mbps\n")
    assert (issue.line, issue.key) == (5, "sweep.bw[1]") and "BYTES per second" in issue.message


def test_duplicate_values_after_units(tmp_path):
    issue = one(tmp_path, "name: demo\nsweep:\n  bw: [10mbit, 10000kbit]\n")
    assert issue.key == "sweep.bw[1]" and "same as value #1" in issue.message


def test_overlapping_and_aliased_axes(tmp_path):
    issue = one(tmp_path, "name: demo\nsweep:\n  hosts: [1]\n  topology.hosts: [2]\n")
    assert issue.line == 4 and "overlaps" in issue.message


def test_point_semantic_check_names_sweep_line(tmp_path):
    issue = one(tmp_path, """
        name: demo
        topology: {hosts: 2}
        workload: {strategy: allreduce}
        sweep:
          hosts: [2, 3, 4]
          strategy: [allreduce, ps]
        """)
    assert (issue.line, issue.key) == (5, "sweep.hosts")
    assert "with topology.hosts=2, workload.strategy='ps'" in issue.message
    assert "at least 3 hosts" in issue.message


def test_point_check_for_host_overrides(tmp_path):
    issue = one(tmp_path, "name: demo\ntopology:\n  host_overrides: {h3: {cpu: 0.5}}\n"
                          "sweep:\n  hosts: [3, 2]\n")
    assert (issue.line, issue.key) == (5, "sweep.hosts") and "no host 'h3'" in issue.message


def test_unswept_problem_keeps_its_own_line(tmp_path):
    issue = one(tmp_path, "name: demo\ntopology:\n  link: {jitter: 1ms}\nsweep:\n  hosts: [1, 2]\n")
    assert (issue.line, issue.key) == (3, "topology.link.jitter")


def test_model_params_checked_per_swept_model(tmp_path):
    issue = one(tmp_path, "name: demo\nworkload:\n  model_params: {width: 8}\n"
                          "sweep:\n  model: [mlp, cnn]\n")
    assert issue.key == "sweep.model" and "workload.model='cnn'" in issue.message
    assert "(line 3)" in issue.message


def test_sweep_of_nested_and_indexed_keys(tmp_path):
    exp = load(tmp_path, """
        name: demo
        topology:
          template: custom
          hosts: [{name: h1}, {name: h2}]
          switches: [{name: s1}]
          links: [{a: h1, b: s1}, {a: h2, b: s1}]
        sweep:
          topology.links[1].bw: [1mbit, 2mbit]
          workload.model_params.width: [16, 32]
        """)
    points = expand_points(exp)
    assert len(points) == 4
    assert [build_graph(p.spec.topology).links[1].params.bw for p in points] == [10**6] * 2 + [2 * 10**6] * 2
    assert points[1].spec.workload.model_params == {"width": 32}
