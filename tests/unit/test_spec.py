"""Loading, validation messages with their lines, overrides, with_values, schema, shipped files."""

import json
from pathlib import Path

import pytest
import yaml

from spec_helpers import issues, load, one, write
from testbed.spec import (Experiment, SpecError, build_graph, expand_points, json_schema, load_spec,
                          parse_set, validate_file, with_values)

REPO = Path(__file__).resolve().parents[2]
SHIPPED = sorted((REPO / "topologies").rglob("*.yaml"))
# Example files that name real machines ship with documentation addresses (RFC 5737), refused until
# the user puts theirs: they are validated with made-up private addresses here.
REAL_ADDRESSES = {"thesis_physical_remote.yaml": ["topology.host.remote.address=10.1.1.11",
                                                  "topology.host_overrides.h1.remote.address=10.1.1.10"]}

MINIMAL = """
name: demo
topology:
  hosts: 2
  link: {bw: 10mbit}
"""


def test_defaults(tmp_path):
    exp = load(tmp_path, MINIMAL)
    assert exp.topology.template == "star"
    assert exp.topology.link.bw == 10_000_000
    assert exp.topology.switch.kind == "ovs" and exp.topology.shaping == "tc"
    assert exp.workload.strategy == "allreduce" and exp.workload.model == "mlp"
    assert exp.workload.timeout == 600.0 and exp.workload.port == 50501
    assert exp.checks.tolerance == 0.10 and exp.checks.duration == 3.0 and exp.checks.pairs == "first"
    assert exp.monitor.interval == 0.5 and exp.sweep is None


def test_unknown_key_suggests_and_names_line(tmp_path):
    issue = one(tmp_path, """
        name: demo
        topology:
          template: star
          hots: 4
        """)
    assert (issue.line, issue.key) == (4, "topology.hots")
    assert "did you mean 'hosts'?" in issue.message
    assert str(issue) == f"{tmp_path / 'exp.yaml'}:4: topology.hots: {issue.message}"


def test_unknown_top_level_key(tmp_path):
    issue = one(tmp_path, "name: demo\nworkloads: {}\n")
    assert (issue.line, issue.key) == (2, "workloads") and "did you mean 'workload'?" in issue.message


def test_all_errors_collected_and_sorted(tmp_path):
    found = issues(tmp_path, """
        name: demo
        topology:
          hots: 4
          link: {bw: 10}
        workload:
          strategy: allreduse
          epochs: 0
        checks: {tolerance: 1.5}
        """)
    assert [(i.line, i.key) for i in found] == [
        (3, "topology.hots"), (4, "topology.link.bw"), (6, "workload.strategy"),
        (7, "workload.epochs"), (8, "checks.tolerance")]
    assert "did you mean 'allreduce'?" in found[2].message
    assert len(str(SpecError(found)).splitlines()) == 5


def test_missing_unit(tmp_path):
    issue = one(tmp_path, "name: demo\ntopology:\n  link:\n    bw: 10\n")
    assert (issue.line, issue.key, issue.message) == (4, "topology.link.bw",
                                                       "bandwidth needs a unit, e.g. 10mbit")


def test_bps_refused(tmp_path):
    issue = one(tmp_path, "name: demo\ntopology:\n  link: {bw: 10mbps}\n")
    assert issue.line == 3 and "BYTES per second" in issue.message and "10mbit" in issue.message


@pytest.mark.parametrize("bw", ["0mbit", "-10mbit"])
def test_zero_or_negative_bandwidth(tmp_path, bw):
    issue = one(tmp_path, f"name: demo\ntopology:\n  link: {{bw: {bw}}}\n")
    assert issue.key == "topology.link.bw" and "greater than 0" in issue.message


def test_missing_name(tmp_path):
    issue = one(tmp_path, "topology: {hosts: 2}\n")
    assert (issue.key, issue.line) == ("name", 1) and "required key 'name' is missing" in issue.message


def test_bad_experiment_name(tmp_path):
    issue = one(tmp_path, "name: my experiment\n")
    assert issue.key == "name" and "folder name" in issue.message


CUSTOM = """
name: demo
topology:
  template: custom
  hosts:
    - {{name: {h1}}}
    - {{name: h2, cpu: 0.5}}
  switches:
    - {{name: s1}}
  links:
    - {{a: {h1}, b: s1}}
    - {{a: h2, b: {end}}}
"""


def test_custom_ok(tmp_path):
    exp = load(tmp_path, CUSTOM.format(h1="h1", end="s1"))
    assert exp.topology.host_names() == ["h1", "h2"]


def test_host_name_with_space(tmp_path):
    found = issues(tmp_path, CUSTOM.format(h1="'h 1'", end="s1"))
    assert (found[0].line, found[0].key) == (5, "topology.hosts[0].name")
    assert "not a valid node name" in found[0].message
    assert "h1-eth0" in found[0].message and "15 characters" in found[0].message
    assert "shell" in found[0].message


def test_host_name_too_long(tmp_path):
    found = issues(tmp_path, CUSTOM.format(h1="hostnumber1", end="s1"))
    assert found[0].key == "topology.hosts[0].name"
    assert "too long (11 characters, at most 8)" in found[0].message
    assert "interface names" in found[0].message


def test_link_to_unknown_node(tmp_path):
    issue = one(tmp_path, CUSTOM.format(h1="h1", end="s2"))
    assert (issue.line, issue.key) == (11, "topology.links[1].b")
    assert "unknown node 's2'" in issue.message and "did you mean 's1'?" in issue.message


def test_disconnected_custom_topology(tmp_path):
    found = issues(tmp_path, """
        name: demo
        topology:
          template: custom
          hosts: [{name: h1}, {name: h2}]
          switches: [{name: s1}, {name: s2}]
          links:
            - {a: h1, b: s1}
            - {a: h2, b: s2}
        """)
    assert [(i.line, i.key) for i in found] == [(6, "topology.links")]
    assert "not connected" in found[0].message and "h2, s2 cannot reach h1" in found[0].message


THREE_HOSTS = """
name: demo
topology:
  template: custom
  hosts: [{name: h1}, {name: h2}, {name: h3}]
  switches: [{name: s1}]
  links: """


def test_host_without_switch_link(tmp_path):
    found = issues(tmp_path, THREE_HOSTS + "[{a: h1, b: s1}, {a: h1, b: h2}, {a: s1, b: s1}]\n")
    assert [i.key for i in found] == ["topology.links[2]"] and "to itself" in found[0].message
    found = issues(tmp_path, THREE_HOSTS + "[{a: h1, b: s1}, {a: h1, b: h2}]\n")
    assert [(i.key, i.message.split(";")[0]) for i in found] == [
        ("topology.hosts[0]", "host 'h1' links to h2, s1"), ("topology.hosts[1]", "host 'h2' links to h1"),
        ("topology.hosts[2]", "host 'h3' has no link")]
    assert "exactly one link, to a switch" in found[0].message


def test_duplicate_node_name(tmp_path):
    issue = one(tmp_path, """
        name: demo
        topology:
          template: custom
          hosts: [{name: h1}]
          switches: [{name: h1}]
          links: [{a: h1, b: h1}]
        """)
    assert issue.key == "topology.switches[0].name" and "duplicate node name 'h1'" in issue.message


def test_jitter_without_delay(tmp_path):
    issue = one(tmp_path, "name: demo\ntopology:\n  link:\n    bw: 1mbit\n    jitter: 2ms\n")
    assert (issue.line, issue.key) == (5, "topology.link.jitter")
    assert "jitter needs a delay" in issue.message


def test_jitter_inherits_delay_in_custom_link(tmp_path):
    text = CUSTOM.format(h1="h1", end="s1").replace("{a: h2, b: s1}", "{a: h2, b: s1, jitter: 1ms}")
    issue = one(tmp_path, text)
    assert issue.key == "topology.links[1].jitter"
    exp = load(tmp_path, text.replace("template: custom", "template: custom\n  link: {delay: 5ms}"))
    assert build_graph(exp.topology).links[1].params.jitter == 0.001


def test_shaping_ovs_needs_ovs_switch_and_tbf_needs_tc(tmp_path):
    found = issues(tmp_path, """
        name: demo
        topology:
          switch: {kind: linuxbridge}
          shaping: ovs
          qdisc: tbf
        """)
    assert [(i.line, i.key) for i in found] == [(4, "topology.shaping"), (5, "topology.qdisc")]


def test_template_keys_checked(tmp_path):
    found = issues(tmp_path, "name: demo\ntopology:\n  template: star\n  fanout: 3\n  switches: 2\n")
    assert {i.key for i in found} == {"topology.fanout", "topology.switches"}


def test_unknown_model_params_key(tmp_path):
    issue = one(tmp_path, "name: demo\nworkload:\n  model: mlp\n  model_params:\n    widht: 64\n")
    assert (issue.line, issue.key) == (5, "workload.model_params.widht")
    assert "did you mean 'width'?" in issue.message


def test_model_params_depend_on_model(tmp_path):
    issue = one(tmp_path, "name: demo\nworkload: {model: cnn, model_params: {width: 8}}\n")
    assert "for model cnn" in issue.message and "filters, dense, classes" in issue.message


def test_ps_needs_enough_hosts(tmp_path):
    issue = one(tmp_path, "name: demo\ntopology: {hosts: 2}\nworkload:\n  strategy: ps\n")
    assert (issue.line, issue.key) == (4, "workload.strategy") and "at least 3 hosts" in issue.message
    assert load(tmp_path, "name: demo\ntopology: {hosts: 1}\nworkload: {strategy: single}\n")


def test_ps_placement_checked(tmp_path):
    found = issues(tmp_path, """
        name: demo
        topology: {hosts: 3}
        workload:
          strategy: ps
          ps:
            placement: {chief: [h1], ps: [h9], worker: [h1]}
        """)
    messages = " | ".join(i.message for i in found)
    assert "no host 'h9'" in messages and len(found) == 1


def test_ps_placement_may_colocate_roles(tmp_path):
    exp = load(tmp_path, """
        name: demo
        topology: {hosts: 2}
        workload:
          strategy: ps
          ps:
            placement: {chief: [h1], ps: [h1], worker: [h1, h2]}
        """)
    assert exp.workload.ps.placement["worker"] == ["h1", "h2"]


def test_host_overrides(tmp_path):
    exp = load(tmp_path, MINIMAL + "  host: {cpu: 0.25}\n  host_overrides:\n    h2: {cpu: 0.5}\n")
    assert [h.cpu for h in build_graph(exp.topology).hosts] == [0.25, 0.5]
    issue = one(tmp_path, MINIMAL + "  host_overrides:\n    h3: {cpu: 0.5}\n")
    assert issue.key == "topology.host_overrides.h3" and "no host 'h3'" in issue.message


def test_cpu_range(tmp_path):
    issue = one(tmp_path, MINIMAL + "  host: {cpu: 1.5}\n")
    assert issue.key == "topology.host.cpu" and "less than or equal to 1" in issue.message


def test_yaml_syntax_error_line(tmp_path):
    issue = one(tmp_path, "name: demo\ntopology:\n  hosts: 2\n  link: {bw: 10mbit\nworkload: {}\n")
    assert issue.line == 5 and "YAML syntax error" in issue.message


def test_duplicate_yaml_key(tmp_path):
    issue = one(tmp_path, "name: demo\ntopology:\n  hosts: 2\n  hosts: 3\n")
    assert (issue.line, issue.key) == (4, "topology.hosts") and "first set on line 3" in issue.message


def test_empty_file(tmp_path):
    assert "empty file" in one(tmp_path, "").message


def test_parse_set():
    assert parse_set("topology.link.bw=10mbit") == ("topology.link.bw", "10mbit")
    assert parse_set("hosts=4") == ("topology.hosts", 4)
    assert parse_set("sweep.topology.hosts=[1, 2]") == ("sweep.topology.hosts", [1, 2])
    assert parse_set("topology.links[0].bw=1mbit")[0] == "topology.links[0].bw"
    with pytest.raises(SpecError):
        parse_set("novalue")


def test_set_nested_key(tmp_path):
    path = write(tmp_path, MINIMAL)
    exp = load_spec(path, ["topology.link.bw=100mbit", "workload.ps.servers=2"])
    assert exp.topology.link.bw == 100_000_000 and exp.workload.ps.servers == 2
    assert exp.location("topology.link.bw") == ("<--set>", 1)
    assert exp.location("topology.hosts") == (str(path), 3)


def test_set_unknown_key_and_bad_value(tmp_path):
    found = issues(tmp_path, MINIMAL, ["topology.link.bww=1mbit", "topology.link.bw=10"])
    assert [(i.file, i.line, i.key) for i in found] == [
        ("<--set>", 1, "topology.link.bww"), ("<--set>", 2, "topology.link.bw")]
    assert "did you mean 'bw'?" in found[0].message
    assert found[1].message == "bandwidth needs a unit, e.g. 10mbit"


def test_set_pins_sweep_axis(tmp_path):
    text = MINIMAL + "sweep:\n  topology.hosts: [1, 2, 3]\n  bw: [1mbit, 2mbit]\n"
    exp = load(tmp_path, text, ["topology.hosts=4"])
    assert exp.topology.hosts == 4 and list(exp.sweep.axes) == ["topology.link.bw"]
    assert len(expand_points(exp)) == 2


def test_set_sweep_axis_values(tmp_path):
    text = MINIMAL + "sweep:\n  hosts: [1, 2, 3]\n"
    exp = load(tmp_path, text, ["sweep.topology.hosts=[2, 4]", "sweep.repeats=2"])
    assert exp.sweep.axes == {"topology.hosts": [2, 4]} and exp.sweep.repeats == 2
    assert len(expand_points(exp)) == 4
    issue = one(tmp_path, text, ["sweep.topology.hots=[2]"])
    assert issue.file == "<--set>" and "did you mean 'hosts'?" in issue.message


def test_with_values_validates_and_keeps_locations(tmp_path):
    exp = load(tmp_path, MINIMAL)
    other = with_values(exp, {"topology.link.bw": "1mbit", "workload.epochs": 3})
    assert other.topology.link.bw == 10**6 and other.workload.epochs == 3
    assert exp.topology.link.bw == 10**7
    assert other.location("topology.link.bw")[1] == 4
    with pytest.raises(SpecError, match="bandwidth needs a unit"):
        with_values(exp, {"topology.link.bw": 5})
    with pytest.raises(SpecError, match="did you mean 'hosts'"):
        with_values(exp, {"topology.hots": 5})


def test_location_falls_back_to_parent_then_line_1(tmp_path):
    exp = load(tmp_path, MINIMAL)
    file = str(tmp_path / "exp.yaml")
    assert exp.location("topology.link.bw") == (file, 4)
    assert exp.location("topology.link.delay") == (file, 4)
    assert exp.location("workload.strategy") == (file, 1)


def test_dump_round_trips(tmp_path):
    (tmp_path / "traces").symlink_to(REPO / "topologies" / "traces")     # what ../traces/ names (trace_lte.yaml)
    (tmp_path / "examples").mkdir()
    for source in SHIPPED:
        for point in expand_points(load_spec(source, REAL_ADDRESSES.get(source.name, ()))):
            again = write(tmp_path / "examples", yaml.dump(point.spec.model_dump(mode="json"), Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper)), "again.yaml")
            reloaded = load_spec(again)
            assert reloaded.model_dump() == point.spec.model_dump()
            assert build_graph(reloaded.topology) == build_graph(point.spec.topology)


def test_schema_is_current():
    schema = json_schema()
    assert schema["required"] == ["name"] and schema["additionalProperties"] is False
    stored = json.loads((REPO / "testbed/spec/schema/topology.schema.json").read_text())
    assert stored == schema, "regenerate: run_experiment.py schema > testbed/spec/schema/topology.schema.json"


def test_validate_file_summary(tmp_path):
    ok, text = validate_file(REPO / "topologies/smoke.yaml")
    assert ok and "ok, 1 run point(s), 2 hosts, 1 switch, 2 links" in text
    ok, text = validate_file(write(tmp_path, "name: demo\ntopology: {hots: 2}\n"))
    assert not ok and ":2: topology.hots:" in text


def test_validate_file_builds_each_graph_of_the_file_once(tmp_path, monkeypatch):
    """Its validation, its points and the summary share each graph: one build per topology of the file."""
    from testbed.spec import graph as spec_graph
    built, real = [], spec_graph.build_graph

    def counted(topology, *args, **kw):
        built.append(topology.model_dump_json())
        return real(topology, *args, **kw)
    monkeypatch.setattr(spec_graph, "build_graph", counted)
    ok, text = validate_file(REPO / "topologies/smoke.yaml")
    assert ok and len(built) == 1
    built.clear()
    path = write(tmp_path, "name: demo\nfaults: [{at: step 2, action: link_down, link: [h1, s1], duration: 1s}]\n"
                 "sweep: {hosts: [2, 3], bw: [10mbit, 20mbit], workload.strategy: [single, allreduce]}\n")
    ok, text = validate_file(path)
    assert ok and "8 run point(s)" in text, text
    assert len(built) == len(set(built)) == 4          # two host counts x two rates; the strategy shares them


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: str(p.relative_to(REPO)))
def test_shipped_topologies_validate(path):
    exp = load_spec(path, REAL_ADDRESSES.get(path.name, ()))
    assert isinstance(exp, Experiment)
    for point in expand_points(exp):
        graph = build_graph(point.spec.topology)
        assert graph.hosts and graph.switches


def test_shipped_smoke_and_star():
    smoke = load_spec(REPO / "topologies/smoke.yaml")
    assert smoke.topology.hosts == 2 and smoke.topology.link.bw == 10**7
    assert smoke.workload.model_params == {"width": 64, "depth": 1}
    assert (smoke.workload.epochs, smoke.workload.steps_per_epoch) == (1, 10)
    assert smoke.checks.iperf and smoke.checks.ping and smoke.checks.tolerance == 0.10
    star = load_spec(REPO / "topologies/star.yaml")
    assert star.topology.hosts == 4 and star.workload.strategy == "allreduce"
    assert {p.relative_to(REPO).as_posix() for p in SHIPPED} >= {
        "topologies/smoke.yaml", "topologies/star.yaml", "topologies/examples/custom.yaml",
        "topologies/examples/dumbbell.yaml", "topologies/examples/tree.yaml",
        "topologies/examples/linear.yaml"}


def test_workload_script_is_relative_to_the_file_and_must_exist(tmp_path):
    (tmp_path / "train.py").write_text("print('hi')\n")
    path = tmp_path / "s.yaml"
    path.write_text("name: s\nworkload: {script: train.py, args: [--epochs, '3']}\n")
    assert load_spec(path).script_path() == str(tmp_path / "train.py")
    path.write_text("name: s\nworkload:\n  script: nothere.py\n")
    with pytest.raises(SpecError) as err:
        load_spec(path)
    assert f"{path}:3: workload.script: no such file: {tmp_path / 'nothere.py'}" in str(err.value)
    path.write_text("name: s\nworkload:\n  args: [--x]\n")
    with pytest.raises(SpecError, match="workload.args: args is for workload.script, which is not set"):
        load_spec(path)


def test_a_script_stages_itself_and_the_files_it_lists_and_nothing_else(tmp_path):
    job = tmp_path / "job"
    (job / "data" / "__pycache__").mkdir(parents=True)
    for name in ("train.py", "model.py", "secret.txt", "data/a.csv", "data/b.csv", "data/__pycache__/x.pyc"):
        (job / name).write_text("x")
    path = job / "s.yaml"
    path.write_text("name: s\nworkload: {script: train.py, files: [model.py, data]}\n")
    assert load_spec(path).script_files() == [str(job / f) for f in ("train.py", "model.py", "data/a.csv",
                                                                     "data/b.csv")]
    path.write_text("name: s\nworkload: {script: train.py}\n")
    assert load_spec(path).script_files() == [str(job / "train.py")]


@pytest.mark.parametrize("files,message", [
    ("[../secret.txt]", r"workload.files\[0\]: '../secret.txt' is not inside the script's folder"),
    ("[/etc/passwd]", r"workload.files\[0\]: '/etc/passwd' is not inside the script's folder"),
    ("[model.py, gone.csv]", r"workload.files\[1\]: no such file or folder"),
])
def test_staged_files_stay_inside_the_scripts_folder_and_exist(tmp_path, files, message):
    job = tmp_path / "job"
    job.mkdir()
    (job / "train.py").write_text("x")
    (job / "model.py").write_text("x")
    (tmp_path / "secret.txt").write_text("x")
    path = job / "s.yaml"
    path.write_text(f"name: s\nworkload: {{script: train.py, files: {files}}}\n")
    with pytest.raises(SpecError, match=message):
        load_spec(path)


def test_staged_files_are_capped_in_size(tmp_path, monkeypatch):
    from testbed.spec.rules import experiment as rules
    (tmp_path / "train.py").write_text("x" * 2000)
    monkeypatch.setattr(rules, "STAGE_MAX_BYTES", 1000)
    path = tmp_path / "s.yaml"
    path.write_text("name: s\nworkload: {script: train.py}\n")
    with pytest.raises(SpecError, match="workload.files: the script and its files come to 0 MiB, more than the 0 MiB"):
        load_spec(path)


@pytest.mark.parametrize("text,message", [
    ("name: big\ntopology:\n  hosts: 1000000000\n", "3: topology.hosts: at most 4094 hosts on one machine"),
    ("name: lol\na0: &a0 [x, x, x, x, x, x, x, x, x, x]\n"
     + "".join(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]\n" for i in range(1, 9))
     + "topology: {hosts: 2}\n", "6: a4: aliases expand the file to more than 100,000 YAML nodes"),
    ("name: many\nsweep:\n  workload.seed: [" + ",".join(map(str, range(1000))) + "]\n  workload.epochs: ["
     + ",".join(map(str, range(1, 201))) + "]\n", "2: sweep: the sweep has 200,000 run points (axes' values multiplied, times repeats); at most 1,000"),
    ("name: huge\ndescription: '" + "x" * 1_000_001 + "'\n", "1: the file is over 1,000,000 bytes, the limit for an experiment file"),
])
def test_absurd_files_are_refused_fast_with_a_clear_error(tmp_path, text, message):
    import time
    path = tmp_path / "absurd.yaml"
    path.write_text(text)
    started = time.monotonic()
    with pytest.raises(SpecError) as err:
        load_spec(path)
    print(f"answered in {time.monotonic() - started:.3f} s")
    assert message in str(err.value)


def test_example_machine_addresses_are_refused_before_anyone_is_contacted():
    with pytest.raises(SpecError) as err:
        load_spec(REPO / "topologies/thesis_physical_remote.yaml")
    assert "192.0.2.11 is an example address (RFC 5737" in str(err.value)
    assert "192.0.2.10 is an example address" in str(err.value)
