"""Where each node of a run lives, and how things are made there: the network's Site.

LocalSite puts every node on this machine. The cluster site (testbed.cluster.cluster_site.ClusterSite)
spreads them over servers with Mininet's cluster edition; the network's caller picks it
(`site_for` there). The network asks its site for a node, a switch's class, a link's class and what
to record before making something; it never asks which server holds a node."""
from __future__ import annotations

from testbed.nodes import node_class


class Site:
    """The interface; its defaults are this machine's answers (every node here)."""

    batch_teardown = True               # hosts and links may end in one batch of the kernel's
    links_need_tx_offload_off = False   # the site's own links or bridges lose TCP with TX offload on

    def __init__(self):
        self.registry = None
        self.notes: list[str] = []
        self.tunnel_rows: list[dict] = []   # measurements of the links between machines (tunnels.csv)

    def open(self, graph, registry, progress=lambda msg: None) -> None:
        """Before anything is made: what the site needs (logins, measurements) for this graph."""
        self.registry = registry

    def close(self) -> None:
        """After teardown."""

    def local(self, names: list[str]) -> list[str]:
        """Those of the named nodes that are made on this machine."""
        return list(names)

    def node(self, host):
        """The Node for a host of the graph."""
        return node_class(host.kind)(host, self.registry)

    def record_shell(self, name: str) -> None:
        """A host's shell is about to be made (recorded first where it goes, when that is elsewhere)."""

    def switch_class(self, name: str, local_class):
        """The Mininet class of switch `name`, recorded first where it goes; local_class (the switch
        kind's) when it is made on this machine."""
        return local_class

    def link_params(self) -> dict:
        """Mininet addLink parameters (the link class)."""
        return {}

    def record_interfaces(self, ends: list[tuple[str, str]]) -> list[str]:
        """(switch, interface) per switch-side link end about to be made: those elsewhere are recorded
        there; the names of those in this machine's root namespace are returned."""
        return [intf for _switch, intf in ends]

    def shell_pid(self, mn_node) -> int:
        """The pid on this machine that ends a Mininet node's shell."""
        return mn_node.pid

    def host_mtu(self) -> tuple[int, str] | None:
        """(MTU, note) when hosts must send smaller frames than a veth carries; None otherwise."""
        return None


class LocalSite(Site):
    """Every node on this machine."""
