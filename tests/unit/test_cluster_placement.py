"""The cluster: section (spec rules with FILE:LINE: KEY), placement of hosts and switches on servers,
the fidelity guard's verdict and the VXLAN command lines; pure logic, no servers."""
from types import SimpleNamespace

import pytest
from spec_helpers import issues, load

from testbed.cluster import cluster_site
from testbed.cluster.edition import ssh_command, vxlan_script
from testbed.cluster.placement import crossing_links, place
from testbed.spec.graph import build_graph
from testbed.spec.models import LinkParams

pytestmark = pytest.mark.timing       # times itself: run with the CPUs to itself (testbed.sh test)

CLUSTER = """
name: spread
topology: {template: star, hosts: 4, link: {bw: 10mbit}}
cluster:
  servers:
    - {name: srv1, address: 172.31.250.2, key_file: /tmp/k}
    - {name: srv2, address: 172.31.250.3, key_file: /tmp/k}
  known_hosts: /tmp/known_hosts
"""


def graph_of(tmp_path, topology: str):
    return build_graph(load(tmp_path, f"name: t\ntopology: {topology}\n").topology)


def test_a_star_is_placed_two_and_two_with_its_switch_beside_the_first_two(tmp_path):
    g = graph_of(tmp_path, "{template: star, hosts: 4}")
    got = place(g, ["srv1", "srv2"])
    assert got == {"h1": "srv1", "h2": "srv1", "h3": "srv2", "h4": "srv2", "s1": "srv1"}
    assert [(e.a, e.b) for e in crossing_links(g, got)] == [("h3", "s1"), ("h4", "s1")]


def test_auto_keeps_each_switch_with_its_hosts_and_balances_the_hosts(tmp_path):
    g = graph_of(tmp_path, "{template: linear, hosts: 6, switches: 3}")
    got = place(g, ["a", "b", "c"])
    assert [got[h] for h in ("h1", "h2", "h3", "h4", "h5", "h6")] == ["a", "a", "b", "b", "c", "c"]
    assert (got["s1"], got["s2"], got["s3"]) == ("a", "b", "c")
    assert len(crossing_links(g, got)) == 2          # only the switch-to-switch links cross


def test_a_tree_core_goes_where_most_of_its_neighbours_are(tmp_path):
    g = graph_of(tmp_path, "{template: tree, hosts: 8, fanout: 2}")
    got = place(g, ["a", "b"])
    for h in g.hosts:
        leaf = g.neighbours(h.name)[0]
        assert got[leaf] == got[h.name]
    assert sum(v == "a" for k, v in got.items() if k.startswith("h")) == 4
    assert len(crossing_links(g, got)) == 1          # the tree is cut once, near its root


def test_explicit_placement_is_kept_and_the_rest_placed_around_it(tmp_path):
    g = graph_of(tmp_path, "{template: star, hosts: 4}")
    got = place(g, ["srv1", "srv2"], {"h1": "srv2", "s1": "srv2"})
    assert got["h1"] == "srv2" and got["s1"] == "srv2"
    assert sorted(got[h] for h in ("h1", "h2", "h3", "h4")) == ["srv1", "srv1", "srv2", "srv2"]


def test_the_cluster_section_loads_and_everything_else_is_unchanged(tmp_path):
    exp = load(tmp_path, CLUSTER)
    assert [s.name for s in exp.cluster.servers] == ["srv1", "srv2"]
    assert exp.cluster.placement == "auto" and exp.cluster.max_link_share == 0.9
    assert exp.cluster.servers[0].user == "root" and exp.cluster.servers[0].port == 22
    alone = load(tmp_path, CLUSTER.split("cluster:")[0])
    assert alone.cluster is None and alone.topology == exp.topology


@pytest.mark.parametrize("extra, key, words", [
    ("    - {name: srv1, address: 172.31.250.4}\n", "cluster.servers[2].name", "duplicate server name 'srv1'"),
    ("    - {name: srv3, address: 172.31.250.3}\n", "cluster.servers[2].address", "also servers[1]"),
    ("    - {name: srv3, address: local}\n", "cluster.servers[2].address", "only the first server"),
    ("    - {name: srv3, address: 192.0.2.7}\n", "cluster.servers[2].address", "example address"),
    ("  placement: {h9: srv1}\n", "cluster.placement.h9", "no host or switch 'h9'"),
    ("  placement: {h1: srv9}\n", "cluster.placement.h1", "unknown server 'srv9'"),
    ("  placement: {h1: srv1}\n  tunnel: gre\n", "cluster.tunnel", "unknown key"),
])
def test_bad_cluster_sections_are_refused_at_their_line_and_key(tmp_path, extra, key, words):
    text = CLUSTER.replace("  known_hosts:", extra + "  known_hosts:") if extra.startswith("    -") else CLUSTER + extra
    found = issues(tmp_path, text)
    assert len(found) == 1, found
    assert found[0].key == key and words in found[0].message
    line = next(i for i, ln in enumerate(text.lstrip("\n").splitlines(), 1)
                if key.split(".")[-1].split("[")[0] in ln and (("[" not in key) or ln.strip().startswith("- {name: srv3")
                                                               or (ln.strip().startswith("- {name: srv1") and i > 5)))
    assert found[0].line == line


@pytest.mark.parametrize("topology_extra, key", [
    ("  host: {kind: docker}\n", "topology.host.kind"),
    ("  host: {cpu: 0.5}\n", "topology.host.cpu"),
    ("  switch: {kind: linuxbridge}\n", "topology.switch"),
    ("  shaping: ovs\n", "topology.shaping"),
])
def test_what_a_cluster_does_not_build_is_refused(tmp_path, topology_extra, key):
    text = CLUSTER.replace("topology: {template: star, hosts: 4, link: {bw: 10mbit}}",
                           "topology:\n  template: star\n  hosts: 4\n" + topology_extra)
    found = issues(tmp_path, text)
    assert [f.key for f in found] == [key], found


def test_a_cluster_takes_budgets_in_cores_memory_and_a_numeric_dilation(tmp_path):
    text = CLUSTER.replace("link: {bw: 10mbit}}", "link: {bw: 10mbit}, host: {cores: 1, memory: 512mib}}")
    assert load(tmp_path, text + "emulation: {dilation: 2}\n").topology.host.cores == 1
    found = issues(tmp_path, text + "emulation: {dilation: auto}\n")
    assert [f.key for f in found] == ["emulation.dilation"] and "set a number" in found[0].message
    cpu = issues(tmp_path, CLUSTER.replace("link: {bw: 10mbit}}", "link: {bw: 10mbit}, host: {cpu: 0.5}}"))
    assert "give the host's budget as cores" in cpu[0].message


def guard_cluster(bw, capacity, share=0.9):
    edge = SimpleNamespace(a="h3", b="s1", params=LinkParams.model_construct(bw=bw))
    c = cluster_site.ClusterSite.__new__(cluster_site.ClusterSite)
    c.conf = SimpleNamespace(max_link_share=share)
    c.placement = {"h3": "srv2", "s1": "srv1"}
    c.crossing = [edge]
    c.tunnel_rows = [dict(tunnel="srv1-srv2", server_a="srv1", server_b="srv2", capacity_bps=capacity, rtt_ms=0.25)]
    return c


def test_the_guard_refuses_a_link_above_its_share_of_the_tunnel_naming_both_figures():
    guard_cluster(bw=90_000_000, capacity=100_000_000).guard()       # exactly 90%: allowed
    with pytest.raises(cluster_site.BringupError) as err:
        guard_cluster(bw=95_000_000, capacity=100_000_000).guard()
    text = str(err.value)
    assert "h3-s1" in text and "srv1-srv2" in text and "95mbit" in text and "100.0 Mbit/s" in text
    with pytest.raises(cluster_site.BringupError, match="unshaped"):
        guard_cluster(bw=None, capacity=100_000_000).guard()


def test_ssh_checks_host_keys_and_vxlan_words_stay_words():
    server = SimpleNamespace(port=2222, key_file="/k", user="root", address="172.31.250.2")
    ssh = ssh_command(server, "/kh")
    assert "StrictHostKeyChecking=yes" in ssh and "UserKnownHostsFile=/kh" in ssh and ssh[-1] == "root@172.31.250.2"
    assert "sudo" not in ssh and ssh_command(server, "/kh", tty=False).count("-tt") == 0
    argv = vxlan_script("s1-eth3", 4200, "172.31.250.3", "00:00:00:00:00:03", 123)
    assert argv[:2] == ["sh", "-c"] and argv[3:] == ["sh", "s1-eth3", "4200", "172.31.250.3", "4789",
                                                     "00:00:00:00:00:03", "123"]


def test_a_node_shell_ends_on_sighup_even_when_this_run_ignores_it():
    """Mininet ends a node by SIGHUP to its (ssh) shell; under nohup ssh would inherit SIG_IGN."""
    import signal
    import subprocess
    from testbed.cluster.edition import _own_group_hup_default
    old = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        proc = subprocess.Popen(["sleep", "30"], preexec_fn=_own_group_hup_default)
    finally:
        signal.signal(signal.SIGHUP, old)
    import os
    os.killpg(proc.pid, signal.SIGHUP)
    assert proc.wait(timeout=10) == -signal.SIGHUP
