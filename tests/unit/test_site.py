"""The Site seam: what the network asks of where nodes live, on one machine and on a cluster
(placement set, connections faked: no servers)."""
from types import SimpleNamespace

from spec_helpers import load

from testbed.cluster.cluster_site import ClusterSite, site_for
from testbed.spec.graph import build_graph
from testbed.net.site import LocalSite
from testbed.owner import identity
from testbed.nodes import node_class

SPREAD = """
name: spread
topology: {template: star, hosts: 2}
cluster:
  servers:
    - {name: here, address: local}
    - {name: srv2, address: 172.31.250.3, key_file: /tmp/k}
  placement: {h1: here, s1: here, h2: srv2}
  known_hosts: /tmp/known_hosts
"""


class Recorded:
    def __init__(self):
        self.items = {}

    def add(self, kind, *items):
        self.items.setdefault(kind, []).extend(items)


def test_one_machine_makes_everything_here_and_records_nothing_elsewhere():
    site = site_for(None)
    assert isinstance(site, LocalSite)
    registry = Recorded()
    site.open(None, registry)
    assert site.local(["s1", "s2"]) == ["s1", "s2"]
    assert site.switch_class("s1", "the kind's class") == "the kind's class"
    assert site.record_interfaces([("s1", "s1-eth1")]) == ["s1-eth1"]
    assert site.link_params() == {} and site.host_mtu() is None and site.tunnel_rows == []
    assert registry.items == {}


def test_a_cluster_site_answers_for_each_node_where_it_lives(tmp_path):
    exp = load(tmp_path, SPREAD)
    graph = build_graph(exp.topology)
    site = site_for(exp.cluster)
    assert isinstance(site, ClusterSite)
    registry = Recorded()
    site.registry = registry
    site.placement = dict(exp.cluster.placement)
    site.servers["srv2"].conn = SimpleNamespace(record={"address": "172.31.250.3"})
    site.servers["srv2"].ip = "172.31.250.3"
    h1, h2 = graph.hosts
    assert type(site.node(h1)) is node_class("netns")
    assert type(site.node(h2)).__name__ == "ClusterNode"
    assert site.local(["h1", "s1", "h2"]) == ["h1", "s1"]
    assert site.switch_class("s1", "the kind's class") == "the kind's class"
    site.record_shell("h1")
    site.record_shell("h2")
    assert site.record_interfaces([("s1", "s1-eth1"), ("s1", "s1-eth2")]) == ["s1-eth1", "s1-eth2"]
    assert registry.items == {"remote": [{"machine": {"address": "172.31.250.3"}, "owner": identity(), "shell": "h2"}]}
    assert site.host_mtu() is None
    site.mtu = 1450
    assert site.host_mtu()[0] == 1450
    assert not site.batch_teardown and site.links_need_tx_offload_off
    site.placement["s1"] = "srv2"                  # a switch on another server: the cluster edition's bridge
    cls = site.switch_class("s1", "the kind's class")
    assert cls.func.__name__ == "ClusterBridge" and cls.keywords["server"] == "srv2"
    assert registry.items["remote"][-1] == {"machine": {"address": "172.31.250.3"}, "owner": identity(),
                                             "shell": "s1", "bridge": "s1"}
    assert site.record_interfaces([("s1", "s1-eth1")]) == []
    assert registry.items["remote"][-1]["link"] == "s1-eth1"
