"""The node seam without root: the kind registry, dispatch by kind, command lines, cgroup writes."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from spec_helpers import issues, write

from testbed import nodes
from testbed.spec.graph import HostNode, build_graph
from testbed.net.network import node_problems
from testbed.nodes import cgroups
from testbed.nodes.base import GroupPopen, Node, Usage, in_namespaces
from testbed.spec import load_spec
from testbed.spec.kinds import KINDS, Kind, kind_names

pytestmark = pytest.mark.timing       # times itself: run with the CPUs to itself (testbed.sh test)


class FakeNode(Node):
    """A kind registered only for these tests."""

    kind = "fake"
    seen: list = []

    @classmethod
    def problems(cls, hosts, progress=lambda msg: None, engine="tensorflow"):
        cls.seen.append([h.name for h in hosts])
        return [(f"{hosts[0].key}.kind", "fake kinds never start")]

    def mininet_host(self):
        return object, {}

    @property
    def python(self):
        return "python3"

    def _command(self, argv, cwd):
        return argv

    @classmethod
    def usage(cls, members):
        return {n.name: Usage(0.0, 0, 0, 0) for n in members}


def test_registry_names_kinds_and_loads_classes_lazily():
    assert kind_names()[:2] == ["netns", "docker"]
    for name, row in KINDS.items():         # the one registry: each row names its class
        assert nodes.node_class(name).kind == name and issubclass(nodes.node_class(name), Node), row.runtime
    assert nodes.node_class("netns").kind == "netns"
    assert nodes.node_class("docker").kind == "docker"
    with pytest.raises(ValueError, match="unknown node kind 'vm'; known kinds: netns, docker"):
        nodes.node_class("vm")


def test_network_asks_each_kind_about_its_own_hosts(monkeypatch):
    monkeypatch.setitem(KINDS, "fake", Kind("fake", f"{__name__}:FakeNode"))
    FakeNode.seen = []
    graph_hosts = [HostNode("h1", "10.0.0.1"), HostNode("h2", "10.0.0.2", kind="fake", key="topology.host_overrides.h2"),
                   HostNode("h3", "10.0.0.3", kind="fake")]
    problems = node_problems(type("G", (), {"hosts": graph_hosts, "engine": "tensorflow"})())
    assert FakeNode.seen == [["h2", "h3"]]
    assert problems == [("topology.host_overrides.h2.kind", "fake kinds never start")]


def test_kind_and_image_are_host_settings_with_overrides(tmp_path):
    path = write(tmp_path, "name: k\ntopology:\n  hosts: 3\n  host: {kind: docker, image: 'reg:5000/team/w:1.0'}\n"
                           "  host_overrides: {h1: {kind: netns}}\n")
    hosts = build_graph(load_spec(path).topology).hosts
    assert [(h.kind, h.setting("image"), h.key) for h in hosts] == [   # (a netns node ignores the image it inherits)
        ("netns", "reg:5000/team/w:1.0", "topology.host_overrides.h1"), ("docker", "reg:5000/team/w:1.0", "topology.host"),
        ("docker", "reg:5000/team/w:1.0", "topology.host")]


def test_set_override_makes_one_host_a_container(tmp_path):
    path = write(tmp_path, "name: k\ntopology: {hosts: 2}\n")
    hosts = build_graph(load_spec(path, ["topology.host_overrides.h2.kind=docker"]).topology).hosts
    assert [h.kind for h in hosts] == ["netns", "docker"]


def test_sweep_over_kind(tmp_path):
    from testbed.spec import expand_points
    path = write(tmp_path, "name: k\ntopology: {hosts: 2}\nsweep:\n  topology.host.kind: [netns, docker]\n")
    points = expand_points(load_spec(path))
    assert [{h.kind for h in build_graph(p.spec.topology).hosts} for p in points] == [{"netns"}, {"docker"}]


@pytest.mark.parametrize("body,expected", [
    ("  host: {kind: dockr}\n", "4: topology.host.kind: unknown node kind 'dockr' (known kinds: netns, docker, remote); "
                                "did you mean 'docker'?"),
    ("  host: {kind: docker, image: 'Worker:Latest'}\n", "4: topology.host.image: image 'Worker:Latest' is not a valid docker image reference"),
    ("  host: {kind: docker, image: 'a b'}\n", "4: topology.host.image: image 'a b' is not a valid docker image reference ([registry/]repository[:tag][@digest]): it contains white space"),
    ("  host: {image: 'debian:bookworm'}\n", "4: topology.host.image: image is for docker nodes, and no host is kind docker"),
    ("  host_overrides: {h1: {image: 'debian:bookworm'}}\n",
     "4: topology.host_overrides.h1.image: image is for docker nodes, and h1 is kind netns"),
])
def test_bad_kind_or_image_is_refused_with_its_line(tmp_path, body, expected):
    errors = [str(e) for e in issues(tmp_path, "name: k\ntopology:\n  hosts: 2\n" + body)]
    assert any(expected in e for e in errors), errors


@pytest.mark.parametrize("ref", ["debian", "debian:bookworm", "dltestbed-worker:49ff8c5d057f", "registry:5000/a/b:1.0",
                                 "localhost/x", "a/b@sha256:" + "0" * 64, "my_image__x"])
def test_valid_image_references_are_accepted(tmp_path, ref):
    path = write(tmp_path, f"name: k\ntopology:\n  hosts: 1\n  host: {{kind: docker, image: '{ref}'}}\n")
    assert build_graph(load_spec(path).topology).hosts[0].setting("image") == ref


def test_commands_pass_argv_through_no_shell():
    cmd = in_namespaces(["nsenter", "--target", "42", "--net", "--"], ["echo", "$(reboot)", "a b"], "/w d")
    assert cmd == ["nsenter", "--target", "42", "--net", "--", "env", "-C", "/w d", "echo", "$(reboot)", "a b"]
    joined = in_namespaces(["nsenter", "--"], ["true"], "/", [Path("/cg/x y")])
    assert joined[:2] == ["sh", "-c"] and joined[3:6] == ["sh", "/cg/x y", "--"] and joined[-1] == "true"


def test_cgroup_join_script_writes_its_pid_then_runs_the_command(tmp_path):
    d = tmp_path / "cg one"
    d.mkdir()
    out = subprocess.run(in_namespaces([], ["sh", "-c", "echo ran $$"], str(tmp_path), [d]),
                         capture_output=True, text=True, check=True).stdout
    assert out.split() == ["ran", (d / "cgroup.procs").read_text().strip()]


def test_cgroup_v2_writes_under_a_made_up_root(tmp_path):
    (tmp_path / "cgroup.controllers").write_text("cpu memory pids\n")
    dirs = cgroups.apply_limits("h1", 0.25, 64 * 2**20, root=tmp_path, cores=2)
    assert dirs == [tmp_path / "dltestbed" / "h1"]
    assert (tmp_path / "cgroup.subtree_control").read_text() == "+cpu +memory"
    assert (tmp_path / "dltestbed" / "cgroup.subtree_control").read_text() == "+cpu +memory"
    assert (dirs[0] / "cpu.max").read_text() == "1000 2000"       # a quarter of 2 cores: 1 ms per 2 ms
    assert (dirs[0] / "memory.max").read_text() == str(64 * 2**20)
    assert cgroups.limit_dirs("h1", 0.25, None, root=tmp_path) == dirs


def test_cgroup_v2_memory_only_enables_only_memory(tmp_path):
    (tmp_path / "cgroup.controllers").write_text("cpu memory\n")
    d = cgroups.apply_limits("h2", None, 10**9, root=tmp_path, cores=4)[0]
    assert (tmp_path / "cgroup.subtree_control").read_text() == "+memory"
    assert not (d / "cpu.max").exists() and (d / "memory.max").read_text() == "1000000000"


def test_cgroup_v1_writes_under_a_made_up_root(tmp_path):
    dirs = cgroups.apply_limits("h1", 0.1, 96 * 2**20, root=tmp_path, cores=2)
    assert dirs == [tmp_path / "cpu/dltestbed/h1", tmp_path / "cpuacct/dltestbed/h1", tmp_path / "memory/dltestbed/h1"]
    assert (dirs[0] / "cpu.cfs_quota_us").read_text() == "1000"
    assert (dirs[0] / "cpu.cfs_period_us").read_text() == "5000"
    assert (dirs[2] / "memory.limit_in_bytes").read_text() == str(96 * 2**20)


def test_cgroup_v1_cpuset_takes_the_parents_memory_nodes_then_its_cpus(tmp_path):
    (tmp_path / "cpuset").mkdir()
    (tmp_path / "cpuset" / "cpuset.cpus").write_text("0-7\n")
    (tmp_path / "cpuset" / "cpuset.mems").write_text("0\n")
    dirs = cgroups.apply_limits("h1", 0.1, None, root=tmp_path, cores=8, cpus=[2, 3, 5])
    assert dirs[-1] == tmp_path / "cpuset/dltestbed/h1"
    assert (tmp_path / "cpuset/dltestbed/cpuset.cpus").read_text() == "0-7"      # the parent: every CPU
    assert (dirs[-1] / "cpuset.mems").read_text() == "0"
    assert (dirs[-1] / "cpuset.cpus").read_text() == "2-3,5"
    assert cgroups.limit_dirs("h1", 0.1, None, root=tmp_path, cpus=[2]) == dirs


def test_cgroup_v2_cpuset_is_enabled_and_written_in_the_hosts_directory(tmp_path):
    (tmp_path / "cgroup.controllers").write_text("cpuset cpu memory\n")
    d = cgroups.apply_limits("h1", None, None, root=tmp_path, cpus=[1])[0]
    assert (tmp_path / "dltestbed" / "cgroup.subtree_control").read_text() == "+cpuset"
    assert (d / "cpuset.cpus").read_text() == "1"


def test_cgroup_counters_v1_and_v2(tmp_path):
    v1cpu, v1mem, v2 = tmp_path / "cpu", tmp_path / "mem", tmp_path / "v2"
    for d in (v1cpu, v1mem, v2):
        d.mkdir()
    (v1cpu / "cpuacct.usage").write_text("2500000000\n")
    (v1mem / "memory.stat").write_text("rss 5\ntotal_rss 100\ntotal_mapped_file 20\n")
    assert cgroups.counters([v1cpu, v1mem]) == (2.5, 120)
    (v2 / "cgroup.controllers").write_text("cpu memory\n")
    (v2 / "cpu.stat").write_text("usage_usec 1500000\nuser_usec 1\n")
    (v2 / "memory.stat").write_text("anon 300\nfile_mapped 7\nfile 9999\n")
    assert cgroups.counters([v2]) == (1.5, 307)


def test_group_popen_ends_what_the_process_forked():
    child_pid_file = Path(f"/tmp/dltb-test-{os.getpid()}")
    proc = GroupPopen([sys.executable, "-c", f"import os, time\npid = os.fork()\nif pid: open('{child_pid_file}', 'w')"
                       ".write(str(pid))\ntime.sleep(60)"], start_new_session=True)
    try:
        deadline = time.monotonic() + 10
        while not child_pid_file.exists() or not child_pid_file.read_text():
            assert time.monotonic() < deadline
            time.sleep(0.05)
        child = int(child_pid_file.read_text())
        proc.terminate()
        assert proc.wait(10) == -signal.SIGTERM
        deadline = time.monotonic() + 10
        while Path(f"/proc/{child}").exists() and "Z" not in Path(f"/proc/{child}/stat").read_text().split()[2]:
            assert time.monotonic() < deadline, "the forked child must end with its group"
            time.sleep(0.05)
    finally:
        child_pid_file.unlink(missing_ok=True)
