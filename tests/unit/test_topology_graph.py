"""build_graph: node and link counts, placement, IPs, dpids and resolved link params per template."""

import pytest

from spec_helpers import load
from testbed.spec import build_graph
from testbed.spec.graph import split_evenly, tree_depth


def graph(tmp_path, topology: str):
    return build_graph(load(tmp_path, f"name: demo\ntopology: {topology}\n").topology)


def attached(g) -> dict[str, list[str]]:
    """switch -> hosts linked to it."""
    hosts = {h.name for h in g.hosts}
    out: dict[str, list[str]] = {}
    for link in g.links:
        if link.a in hosts:
            out.setdefault(link.b, []).append(link.a)
    return out


def assert_common(g):
    names = [n.name for n in g.hosts + g.switches]
    assert len(names) == len(set(names))
    assert [h.ip for h in g.hosts] == [f"10.0.0.{i}" for i in range(1, len(g.hosts) + 1)]
    assert [s.dpid for s in g.switches] == list(range(1, len(g.switches) + 1))
    assert all(l.a in names and l.b in names for l in g.links)


def test_star(tmp_path):
    g = graph(tmp_path, "{template: star, hosts: 3, link: {bw: 10mbit, delay: 5ms}}")
    assert_common(g)
    assert [h.name for h in g.hosts] == ["h1", "h2", "h3"]
    assert [s.name for s in g.switches] == ["s1"]
    assert attached(g) == {"s1": ["h1", "h2", "h3"]} and len(g.links) == 3
    assert all(l.params.bw == 10**7 and l.params.delay == 0.005 for l in g.links)
    assert g.hosts[0].cidr == "10.0.0.1/24"


@pytest.mark.parametrize("hosts, switches, groups", [
    (6, 3, [["h1", "h2"], ["h3", "h4"], ["h5", "h6"]]),
    (5, 2, [["h1", "h2", "h3"], ["h4", "h5"]]),
    (2, 3, [["h1"], ["h2"], []]),
])
def test_linear(tmp_path, hosts, switches, groups):
    g = graph(tmp_path, f"{{template: linear, hosts: {hosts}, switches: {switches}}}")
    assert_common(g)
    assert [s.name for s in g.switches] == [f"s{i}" for i in range(1, switches + 1)]
    got = attached(g)
    assert [got.get(s.name, []) for s in g.switches] == groups
    chain = [(l.a, l.b) for l in g.links if l.a.startswith("s")]
    assert chain == [(f"s{i}", f"s{i + 1}") for i in range(1, switches)]
    assert len(g.links) == hosts + switches - 1


def test_linear_defaults_to_two_switches(tmp_path):
    assert len(graph(tmp_path, "{template: linear, hosts: 4}").switches) == 2


@pytest.mark.parametrize("hosts, fanout, n_switches, leaves", [
    (4, 2, 3, {"s2": ["h1", "h2"], "s3": ["h3", "h4"]}),
    (3, 2, 3, {"s2": ["h1", "h2"], "s3": ["h3"]}),
    (8, 2, 7, {"s4": ["h1", "h2"], "s5": ["h3", "h4"], "s6": ["h5", "h6"], "s7": ["h7", "h8"]}),
    (2, 3, 1, {"s1": ["h1", "h2"]}),
    (5, 3, 4, {"s2": ["h1", "h2", "h3"], "s3": ["h4", "h5"]}),
])
def test_tree(tmp_path, hosts, fanout, n_switches, leaves):
    g = graph(tmp_path, f"{{template: tree, hosts: {hosts}, fanout: {fanout}}}")
    assert_common(g)
    assert len(g.switches) == n_switches
    assert attached(g) == leaves
    assert len(g.links) == hosts + n_switches - 1


def test_tree_depth():
    assert [tree_depth(n, 2) for n in (1, 2, 3, 4, 5, 8, 9)] == [1, 1, 2, 2, 3, 3, 4]


def test_dumbbell(tmp_path):
    g = graph(tmp_path, "{template: dumbbell, hosts: 5, link: {bw: 100mbit, delay: 1ms}, "
                        "bottleneck: {bw: 10mbit}}")
    assert_common(g)
    assert attached(g) == {"s1": ["h1", "h2", "h3"], "s2": ["h4", "h5"]}
    middle = [l for l in g.links if {l.a, l.b} == {"s1", "s2"}]
    assert len(middle) == 1 and len(g.links) == 6
    assert (middle[0].params.bw, middle[0].params.delay) == (10**7, 0.001)
    assert all(l.params.bw == 10**8 for l in g.links if l is not middle[0])


def test_dumbbell_without_bottleneck_uses_link(tmp_path):
    g = graph(tmp_path, "{template: dumbbell, hosts: 2, link: {bw: 5mbit}}")
    assert {l.params.bw for l in g.links} == {5 * 10**6}


def test_custom_overrides_resolved(tmp_path):
    exp = load(tmp_path, """
        name: demo
        topology:
          template: custom
          link: {bw: 100mbit, delay: 1ms}
          host: {cpu: 0.2, memory: 1gib}
          hosts: [{name: web}, {name: db, cpu: 0.5}]
          switches: [{name: core}, {name: edge}]
          links:
            - {a: web, b: core}
            - {a: db, b: edge, bw: 10mbit, loss: 1%}
            - {a: core, b: edge, delay: 20ms, max_queue: 50}
        """)
    g = build_graph(exp.topology)
    assert_common(g)
    assert [(h.name, h.ip, h.cpu, h.memory) for h in g.hosts] == [
        ("web", "10.0.0.1", 0.2, 2**30), ("db", "10.0.0.2", 0.5, 2**30)]
    assert [(s.name, s.dpid) for s in g.switches] == [("core", 1), ("edge", 2)]
    params = [(l.params.bw, l.params.delay, l.params.loss, l.params.max_queue) for l in g.links]
    assert params == [(10**8, 0.001, None, None), (10**7, 0.001, 1.0, None), (10**8, 0.02, None, 50)]


def test_unshaped_by_default(tmp_path):
    g = graph(tmp_path, "{hosts: 2}")
    assert all(l.params.bw is None and l.params.delay is None for l in g.links)
    assert g.neighbours("s1") == ["h1", "h2"] and g.host("h2").ip == "10.0.0.2"


@pytest.mark.parametrize("hosts, subnet, first, last", [
    (254, None, "10.0.0.1/24", "10.0.0.254/24"),
    (255, None, "10.0.0.1/23", "10.0.0.255/23"),
    (1000, None, "10.0.0.1/22", "10.0.3.232/22"),
    (2, "'172.16.8.0/30'", "172.16.8.1/30", "172.16.8.2/30"),
    (300, "'192.168.0.0/16'", "192.168.0.1/16", "192.168.1.44/16"),
])
def test_subnet_default_fits_the_hosts_or_is_the_one_set(tmp_path, hosts, subnet, first, last):
    g = graph(tmp_path, f"{{template: tree, fanout: 32, hosts: {hosts}, subnet: {subnet or 'null'}}}")
    cidrs = [h.cidr for h in g.hosts]
    assert cidrs[0] == first and cidrs[-1] == last and len(set(cidrs)) == hosts


@pytest.mark.parametrize("topology, key, message", [
    ("{hosts: 300, subnet: 10.0.0.0/24}", "topology.subnet",
     "300 hosts do not fit 10.0.0.0/24 (254 addresses); use a larger network, e.g. 10.0.0.0/23"),
    ("{hosts: 4, subnet: 10.0.0.0/30}", "topology.subnet", "4 hosts do not fit 10.0.0.0/30 (2 addresses)"),
    ("{hosts: 5000}", "topology.hosts", "at most 4094 hosts on one machine (got 5000)"),
    ("{hosts: 2, subnet: 10.0.0.1/24}", "topology.subnet", "has host bits set: write 10.0.0.0/24"),
    ("{hosts: 2, subnet: 10.0.0.0}", "topology.subnet", "is not an IPv4 network: write NETWORK/PREFIX"),
    ("{hosts: 2, subnet: 8.8.8.0/24}", "topology.subnet", "8.8.8.0/24 is not a private network"),
    ("{hosts: 2, subnet: 127.0.0.0/24}", "topology.subnet", "127.0.0.0/24 is not a private network"),
    ("{hosts: 2, subnet: 10.0.0.0/31}", "topology.subnet", "10.0.0.0/31 holds no hosts"),
])
def test_subnet_problems_name_the_key(tmp_path, topology, key, message):
    from spec_helpers import one
    issue = one(tmp_path, f"name: demo\ntopology: {topology}\n")
    assert issue.key == key and message in issue.message


def test_split_evenly():
    assert split_evenly(list("abcdefg"), 3) == [list("abc"), list("de"), list("fg")]
