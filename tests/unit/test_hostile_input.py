"""Hostile experiment files: each is refused quickly, with FILE:LINE: KEY and what is allowed, never
a traceback (the caps are in testbed/limits.py)."""
import time

import pytest

from testbed.spec import SpecError, load_spec, validate_file

pytestmark = pytest.mark.timing       # times itself: run with the CPUs to itself (testbed.sh test)

BOUND = 5.0     # seconds any refusal may take


def refused(tmp_path, text, key, words="", overrides=()):
    """Load `text`; assert it is refused in time, naming `key` (and `words`); the issue."""
    path = tmp_path / "hostile.yaml"
    path.write_text(text)
    started = time.monotonic()
    with pytest.raises(SpecError) as err:
        load_spec(path, overrides)
    took = time.monotonic() - started
    assert took < BOUND, f"took {took:.1f} s"
    found = [i for i in err.value.errors if i.key == key]
    assert found, str(err.value)
    assert words in found[0].message, str(err.value)
    ok, text = validate_file(path, overrides)          # the command's path too: no traceback
    assert not ok and f": {key}:" in text or f": {key} " in text or key == ""
    return found[0]


@pytest.mark.parametrize("value, key, words", [
    ("bw: 1e308gbit", "topology.link.bw", "at most 1tbit"),
    ("bw: 9999999999999999999999tbit", "topology.link.bw", "at most 1tbit"),
    ("bw: " + "9" * 100_000 + "mbit", "topology.link.bw", "at most 1tbit"),
    ("bw: 2tbit", "topology.link.bw", "at most 1tbit"),
    ("bw: 1kbit", "topology.link.bw", "at least 8kbit"),
    ("delay: 1e999999s", "topology.link.delay", "at most"),
    ("delay: 1e-999999s", "topology.link.delay", "too small"),
])
def test_huge_magnitudes_in_link_units(tmp_path, value, key, words):
    refused(tmp_path, f"name: x\ntopology:\n  link: {{{value}}}\n", key, words)


@pytest.mark.parametrize("text, key, words", [
    ("topology: {host: {memory: 1e999999gib}}", "topology.host.memory", "at most 1024gib"),
    ("workload: {timeout: 1e999999m}", "workload.timeout", "at most"),
    ("workload: {steps_per_epoch: " + "9" * 5000 + "}", "workload.steps_per_epoch", "valid integer"),
    ("workload: {epochs: 10000000000}", "workload.epochs", "less than or equal"),
    ("faults: [{at: 1e99999s, action: kill, task: worker 1}]", "faults[0].at", "at most"),
    ("faults: [{at: step " + "9" * 100_000 + ", action: kill, task: worker 1}]", "faults[0].at", "at most"),
    ("faults: [{at: step 2, action: kill, task: worker " + "9" * 5000 + "}]", "faults[0].task", "not a task"),
    ("topology: {host: {cores: .inf}}", "topology.host.cores", "finite"),
    ("emulation: {dilation: .nan}", "emulation.dilation", "at least 1"),
])
def test_huge_magnitudes_everywhere(tmp_path, text, key, words):
    refused(tmp_path, f"name: x\n{text}\n", key, words)


def test_huge_magnitudes_through_overrides(tmp_path):
    issue = refused(tmp_path, "name: x\n", "topology.link.bw", "at most 1tbit",
                    overrides=["topology.link.bw=" + "9" * 100_000 + "tbit"])
    assert issue.file == "<--set>"
    refused(tmp_path, "name: x\n", "workload.timeout", "at most", overrides=["workload.timeout=1e999999s"])
    refused(tmp_path, "name: x\n", "topology.hosts", "nested more than 50",
            overrides=["topology.hosts=" + "[" * 10_000 + "]" * 10_000])


@pytest.mark.parametrize("text, key, words", [
    ("x: " + "[" * 10_000 + "]" * 10_000, "x[0][0][0]...", "nested more than 50"),
    ("x: " + "{a: " * 10_000 + "1" + "}" * 10_000, "x.a.a.a...", "nested more than 50"),
    ("x: " + "[" * 100_000, "x[0][0][0]...", "nested more than 50"),
    ("a: &a [*a]", "a", "recursive alias"),
    ("".join(f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 9 if i else ["lol"] * 9) + "]\n" for i in range(12)),
     "l5", "more than 100,000 YAML nodes"),
    ("".join(f"d{i}: &d{i} [[[[[*d{i - 1}]]]]]\n" if i else "d0: &d0 [x]\n" for i in range(40)),
     "d10", "more than 50 levels deep"),
])
def test_yaml_bombs(tmp_path, text, key, words):
    refused(tmp_path, f"name: x\n{text}\n", key, words)


def test_files_over_a_megabyte_are_refused_unread(tmp_path):
    refused(tmp_path, "name: x\ndescription: '" + "x" * 2_000_000 + "'\n", "", "over 1,000,000 bytes")
    path = tmp_path / "binary.yaml"
    path.write_bytes(b"name: x\ndescription: '\xff\xfe'\n")
    with pytest.raises(SpecError, match="binary.yaml:1: the file is not UTF-8 text"):
        load_spec(path)


@pytest.mark.parametrize("topology, key, words", [
    ("{template: linear, hosts: 4, switches: 100000000}", "topology.switches", "at most 4096"),
    ("{template: star, hosts: 100000000}", "topology.hosts", "at most 4094"),
    ("{template: tree, hosts: 4000, fanout: 1000000}", "topology.fanout", "less than or equal to 4094"),
    ("{template: custom, hosts: [" + ", ".join(f"{{name: h{i}}}" for i in range(5000)) + "], switches: [], links: []}",
     "topology.hosts", "at most 4094"),
])
def test_topology_size(tmp_path, topology, key, words):
    refused(tmp_path, f"name: x\ntopology: {topology}\n", key, words)


@pytest.mark.parametrize("text, key, words", [
    ("checks: {duration: 100000m}", "checks.duration", "at most"),
    ("checks: {duration: 1000m}", "checks.duration", "less than or equal to 600"),
    ("checks: {attempts: 1000000}", "checks.attempts", "less than or equal to 10"),
    ("monitor: {interval: 1us}", "monitor.interval", "greater than or equal to 0.01"),
    ("monitor: {interval: 1000m}", "monitor.interval", "less than or equal to 600"),
    ("ssh: {connect_timeout: 1000m}", "ssh.connect_timeout", "less than or equal to 600"),
])
def test_durations_are_bounded(tmp_path, text, key, words):
    refused(tmp_path, f"name: x\n{text}\n", key, words)


@pytest.mark.parametrize("sweep, words", [
    ("  topology.link.bw: [" + ",".join(f"{i}mbit" for i in range(1, 10_001)) + "]\n", "at most 1,000"),
    ("".join(f"  workload.env.K{i}: ['a', 'b']\n" for i in range(3000)), "at most 32"),
    ("  workload.seed: [" + ",".join(map(str, range(100))) + "]\n  repeats: 1000000000\n", "at most 1,000"),
    ("  topology.hosts: [4000, 4001, 4002, 4003, 4004, 4005]\n", "more than 20,000 nodes"),
])
def test_sweeps_are_counted_not_built(tmp_path, sweep, words):
    refused(tmp_path, f"name: x\ntopology: {{switch: {{kind: linuxbridge}}}}\nsweep:\n{sweep}", "sweep", words)


@pytest.mark.parametrize("text, key, words", [
    ("topology: {hosts: 1, host: {kind: remote, remote: {address: 10.1.1.1, python: python3, interface: eth0}}}\n"
     "workload: {strategy: single}\n"
     "faults: [{at: step 2, action: link_down, link: [h1, s1], duration: 1s}]", "faults[0].link", "real machine"),
    ("topology: {hosts: 1, host: {kind: remote, remote: {address: 10.1.1.1, python: python3, interface: eth0}}}\n"
     "workload: {strategy: single}\n"
     "faults: [{at: step 2, action: set_cpu, host: h1, cpu: 0.5}]", "faults[0].host", "real machine"),
    ("cluster: {servers: [{name: a, address: local}]}\n"
     "faults: [{at: step 2, action: set_cpu, host: h1, cpu: 0.5}]", "faults[0].action", "cluster"),
    ("faults: [{at: step 2, action: kill, task: ps 0}]", "faults[0].task", "no task 'ps 0'"),
    ("topology: {hosts: 3}\nworkload: {strategy: single}\n"
     "faults: [{at: step 2, action: pause, host: h3, duration: 1s}]", "faults[0].host", "no task runs on h3"),
    ("cluster: {servers: [{name: a, address: local, port: 70000}]}", "cluster.servers[0].port", "65535"),
    ("workload: {port: 99999}", "workload.port", "65535"),
    ("topology: {host: {kind: remote, remote: {address: 999.1.1.1}}}", "topology.host.remote.address",
     "neither an IP address nor a valid host name"),
    ("topology: {host: {kind: remote, remote: {address: -bad-.lan}}}", "topology.host.remote.address", "not a valid"),
    ("cluster: {servers: [{name: a, address: pc-.lan}]}", "cluster.servers[0].address", "valid host name"),
    ("workload: {env: {A: \"x\\0y\"}}", "workload.env.A", "NUL"),
    ("workload: {env: {TF_CONFIG: '{}'}}", "workload.env.TF_CONFIG", "set by the testbed"),
    ("workload: {env: {PYTHONPATH: /x}}", "workload.env.PYTHONPATH", "set by the testbed"),
    ("workload: {env: {DLTESTBED_HOST: h9}}", "workload.env.DLTESTBED_HOST", "set by the testbed"),
    ("workload: {script: /etc/passwd}", "workload.script", "folder of its own"),
    ("workload: {script: /bin/sh}", "workload.script", "folder of its own"),
    ("topology: {shaping: ovs, link: {bw: 10mbit, delay: 10ms}}", "topology.shaping", "needs shaping: tc"),
    ("topology: {shaping: ovs}\nfaults: [{at: step 2, action: set_delay, link: [h1, s1], delay: 5ms}]",
     "faults[0].action", "topology.shaping: tc"),
])
def test_combinations_that_would_fail_halfway(tmp_path, text, key, words):
    refused(tmp_path, f"name: x\n{text}\n", key, words)


def test_script_in_the_home_folder_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "train.py").write_text("print(1)\n")
    refused(tmp_path, "name: x\nworkload: {script: train.py}\n", "workload.script", "folder of its own")


CUSTOM = """name: x
topology:
  template: custom
  hosts: [{name: h1}, {name: h2}]
  switches: [{name: s1}, {name: s2}, {name: s3}]
  links:
    - {a: h1, b: s1}
    - {a: h2, b: s2}
    - {a: s1, b: s2}
"""


def test_switch_loops_are_refused(tmp_path):
    refused(tmp_path, CUSTOM + "    - {a: s2, b: s3}\n    - {a: s3, b: s1}\n", "topology.links[4]", "loop")


def test_parallel_links_are_refused(tmp_path):
    refused(tmp_path, CUSTOM + "    - {a: s2, b: s1, bw: 5mbit}\n", "topology.links[3]", "links[2]")
