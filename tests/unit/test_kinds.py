"""A new node kind is one module and its row in the one registry (the spec's table): a toy kind
(tests/unit/toy_kind.py), registered before the spec's models are built, gets its YAML key, its rules and
its cleanup."""
import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
PRELUDE = f"""
import json, sys
sys.path[:0] = [{str(REPO)!r}, {str(HERE)!r}]
import importlib
from testbed import nodes
from testbed.spec import kinds
import toy_kind
kinds.KINDS.clear()                  # this machine's docker and remote kinds stay out of it
kinds.KINDS.update(netns=kinds.Kind("netns", "testbed.nodes.netns:NetnsNode"),
                   toy=kinds.Kind("toy", "toy_kind:ToyNode", toy_kind.SETTINGS))   # the registry's row
for module in ("values", "workload", "models", "graph", "rules", "validate", "sweep", "load", ""):   # as if in the file
    importlib.reload(sys.modules["testbed.spec" + (module and "." + module)])
"""


def run(tmp_path, body: str, setup: str = ""):
    """Run body in a fresh interpreter whose registry holds netns and the toy kind; its JSON output."""
    script = PRELUDE + setup + textwrap.dedent(body)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path,
                         env={"DLTB_STATE_DIR": str(tmp_path / "state"), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


SPEC = """
from testbed.spec import SpecError, build_graph, load_spec
def errors(text):
    open("exp.yaml", "w").write(text)
    try:
        return build_graph(load_spec("exp.yaml").topology)
    except SpecError as err:
        return [str(e) for e in err.errors]
"""


def test_the_spec_takes_a_toy_kinds_settings_merged_field_by_field(tmp_path):
    hosts = run(tmp_path, """
    graph = errors("name: k\\ntopology:\\n  hosts: 2\\n  host: {kind: toy, toy: {colour: red, size: 3}}\\n"
                   "  host_overrides: {h2: {toy: {colour: blue}}}\\n")
    print(json.dumps([[h.name, h.kind, h.ip, h.setting("toy").colour, h.setting("toy").size] for h in graph.hosts]))
    """, SPEC)
    assert hosts == [["h1", "toy", "10.0.0.1", "red", 3], ["h2", "toy", "10.0.0.2", "blue", 3]]


def test_the_spec_refuses_a_toys_bad_settings_with_their_lines(tmp_path):
    found = run(tmp_path, """
    print(json.dumps([errors("name: k\\ntopology:\\n  hosts: 1\\n  host: {toy: {colour: red}}\\n"),
                      errors("name: k\\ntopology:\\n  hosts: 1\\n  host: {kind: toy}\\n"),
                      errors("name: k\\ntopology:\\n  hosts: 1\\n  host:\\n    kind: toy\\n    toy: {colour: green}\\n"),
                      errors("name: k\\ntopology:\\n  hosts: 1\\n  host: {kind: toyy}\\n")]))
    """, SPEC)
    assert found[0] == ["exp.yaml:4: topology.host.toy: toy is for toy nodes, and no host is kind toy (set kind: toy)"]
    assert found[1] == ["exp.yaml:4: topology.host.toy.colour: h1 is kind toy and needs toy.colour"]
    assert found[2] == ["exp.yaml:6: topology.host.toy.colour: 'green' is not one of red, blue; did you mean 'red'?"]
    assert found[3] == ["exp.yaml:4: topology.host.kind: unknown node kind 'toyy' (known kinds: netns, toy); "
                        "did you mean 'toy'?"]


def test_cleanup_removes_what_a_toy_recorded_and_keeps_what_it_could_not(tmp_path):
    result = run(tmp_path, """
    from testbed import cleanup
    registry = cleanup.Registry()
    registry.add("toys", "t1", "stuck")
    state = cleanup.State(**json.loads(registry.path.read_text()))
    actions = cleanup.remove_state(state)
    cleanup.settle(registry.path, state)
    print(json.dumps([actions, json.loads(registry.path.read_text()), cleanup.destroy_leftovers(set())]))
    """)
    actions, kept, leftovers = result
    assert actions == ["removed toy t1"]
    assert kept["toys"] == ["stuck"] and kept["owner_pid"] > 0
    assert leftovers == ["destroyed stray toys of runs over: False"]


def test_the_spec_loads_a_file_with_every_kind_without_run_time_code(tmp_path):
    """Validating a file that names every kind imports no kind module, no Mininet, Docker SDK, paramiko
    or psutil, and none of the run-time packages."""
    path = tmp_path / "k.yaml"
    path.write_text("name: k\ntopology:\n  hosts: 2\n  host: {kind: docker, image: debian:bookworm}\n")
    script = (f"import sys; sys.path.insert(0, {str(REPO)!r}); from testbed.spec import load_spec, kinds; "
              f"load_spec({str(path)!r}); assert kinds.kind_names() == ['netns', 'docker', 'remote']; "
              "print(' '.join(sorted(sys.modules)))")
    modules = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout.split()
    heavy = [m for m in modules if m.split(".")[0] in ("mininet", "docker", "paramiko", "psutil")
             or m.startswith(("testbed.nodes", "testbed.run", "testbed.net", "testbed.cluster", "testbed.emulation"))]
    assert heavy == []


def test_every_table_of_kinds_reads_the_one_registry():
    """The schema, the docs' table, bring-up and cleanup name exactly the registry's kinds."""
    from testbed import cleanup, nodes
    from testbed.net import switches
    from testbed.spec import json_schema, kinds

    text = json.dumps(json_schema())
    enums = [json.loads(m) for m in re.findall(r'"enum": (\[[^\]]*\])', text)]
    assert kinds.kind_names() in enums, "the schema's host kind lists the registry's kinds"
    assert list(kinds.SWITCH_KINDS) in enums, "the schema's switch kind lists the registry's switch kinds"
    table = (REPO / "docs" / "node-kinds.md").read_text()
    documented = re.findall(r"^\| `([a-z]+)`(?: \(default\))? \|", table, flags=re.M)
    assert documented[:len(kinds.KINDS)] == kinds.kind_names()
    assert [cls.kind for cls in nodes.kind_classes()] == kinds.kind_names()
    lists = set(cleanup.State(0).as_dict())
    for name in kinds.SWITCH_KINDS:
        assert switches.switch_kind(type("Conf", (), {"kind": name})()).records in lists
    assert set(cleanup.kind_records()) <= lists
