"""Topology spec -> Graph of hosts, switches and links: pure data, no root, no Mininet.

Every LinkEdge carries fully resolved LinkParams (topology.link + per-link override; template graph:
the file's speed and distance delay, testbed/readers/graphfile.py).
Hosts get the subnet's addresses in host order (10.0.0.1, 10.0.0.2, ...: `subnet`); switch dpids are
1, 2, ... in switch order.
"""

from __future__ import annotations

import dataclasses
import ipaddress
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from testbed.readers.graphfile import read_graph
from testbed.spec import kinds
from testbed.spec.models import LinkParams

if TYPE_CHECKING:
    from testbed.spec.models import SshConf, Topology

DEFAULT_NETWORK = "10.0.0.0"
DEFAULT_PREFIX = 24      # the default subnet is a /24 unless more hosts need a larger one


@dataclass(frozen=True)
class HostNode:
    """A host; the node kinds' own settings by their key (host.setting("image"), host.setting("remote"))."""

    name: str
    ip: str  # "10.0.0.1"; a real machine's own address (remote)
    cpu: float | None = None  # fraction of the whole machine
    memory: int | None = None  # bytes
    kind: str = "netns"       # a node kind (testbed/spec/kinds.py)
    key: str = "topology.host"  # key path of the host's own settings, for error messages
    settings: tuple[tuple[str, Any], ...] = ()   # (key, value) of every kind's setting, resolved (None: unset)
    ssh: SshConf | None = None        # the experiment's ssh: section, for kinds that log in (None: the defaults)
    prefix: int = DEFAULT_PREFIX      # the subnet's prefix length
    cores: float | None = None        # the cores of the machine it emulates (None: no budget)
    budget: float | None = None       # the real cores its processes get: cores / dilation (None: no budget)
    cpus: tuple[int, ...] | None = None   # the CPUs it is pinned to at run time (None: every CPU)

    def setting(self, key: str):
        """A kind's own setting by its key (image, remote), None when unset."""
        return dict(self.settings).get(key)

    @property
    def real_machine(self) -> bool:
        """A machine of its own (spec.kinds): real time, no budget, its link not the testbed's."""
        return kinds.real_machine(self.kind)

    @property
    def cidr(self) -> str:
        """'10.0.0.1/24'."""
        return f"{self.ip}/{self.prefix}"


@dataclass(frozen=True)
class SwitchNode:
    name: str
    dpid: int
    label: str = ""           # template graph: the node's label in the graph file (for topology.json, figures)


@dataclass(frozen=True)
class LinkEdge:
    a: str
    b: str
    params: LinkParams


@dataclass(frozen=True)
class Graph:
    hosts: list[HostNode]
    switches: list[SwitchNode]
    links: list[LinkEdge]
    dropped: tuple[LinkEdge, ...] = ()    # template graph: the file's links left out to keep a spanning tree
    engine: str = "tensorflow"            # what every task imports (a real machine's preflight asks for it)

    def host(self, name: str) -> HostNode:
        return next(h for h in self.hosts if h.name == name)

    def neighbours(self, name: str) -> list[str]:
        return [l.b if l.a == name else l.a for l in self.links if name in (l.a, l.b)]


def build_graph(topology: Topology, ssh: SshConf | None = None, dilation: float = 1.0,
                machine_cores: int | None = None, engine: str = "tensorflow") -> Graph:
    """The nodes and links a validated topology describes (`ssh`: the experiment's, for remote hosts;
    `engine`: the workload's).

    With `machine_cores` (this machine's, known at run time) each host's CPU budget is resolved:
    `cores` at `dilation` K is cores/K real cores, i.e. `cpu` = cores/K/machine_cores of the whole
    machine (at most all of it); an older `cpu` fraction is real cores already."""
    names = topology.host_names()
    net = subnet(topology)
    hosts = [_host(topology, name, net, i, ssh, dilation, machine_cores) for i, name in enumerate(names, 1)]
    if topology.template == "graph":
        return dataclasses.replace(_graph(topology, hosts), engine=engine)
    switch_names, links = _LAYOUTS[topology.template](topology, names)
    switches = [SwitchNode(name, dpid) for dpid, name in enumerate(switch_names, 1)]
    return Graph(hosts, switches, links, (), engine)


def graph_of(topology: Topology, built: dict | None = None) -> Graph:
    """build_graph(topology), built once per topology of equal value while `built` lives (a dict a caller
    keeps for one file: its validation, its points and the summary share each graph); built each call
    without it."""
    if built is None:
        return build_graph(topology)
    key = topology.model_dump_json()
    if key not in built:
        built[key] = build_graph(topology)
    return built[key]


def host_count(topology: Topology) -> int:
    """Without building the names (a count may be absurd before validation refuses it)."""
    return len(topology.hosts) if isinstance(topology.hosts, list) else topology.hosts


def switch_total(topology: Topology) -> int:
    """Switches the topology builds, counted without building them (a count may be absurd)."""
    if topology.template == "tree":
        depth = tree_depth(host_count(topology), topology.fanout)
        return sum(topology.fanout ** level for level in range(depth))
    if topology.template == "graph":
        return len(read_graph(topology.graph).pops) if topology.graph else 0
    return topology.switch_count()


def usable(net: ipaddress.IPv4Network) -> int:
    """Host addresses in net (not the network and broadcast addresses)."""
    return max(net.num_addresses - 2, 0)


def default_subnet(count: int) -> ipaddress.IPv4Network:
    """10.0.0.0/24, or the smallest 10.0.0.0/N (N >= 8) that holds `count` hosts."""
    prefix = DEFAULT_PREFIX
    while prefix > 8 and usable(ipaddress.IPv4Network(f"{DEFAULT_NETWORK}/{prefix}")) < count:
        prefix -= 1
    return ipaddress.IPv4Network(f"{DEFAULT_NETWORK}/{prefix}")


def subnet(topology: Topology) -> ipaddress.IPv4Network:
    """The network the hosts' addresses come from: topology.subnet, else the default for the host count."""
    if topology.subnet:
        return ipaddress.IPv4Network(topology.subnet)
    return default_subnet(host_count(topology))


def budget_of(conf, dilation: float, machine_cores: int | None) -> tuple[float | None, float | None, float | None]:
    """(emulated cores, real cores, fraction of the machine) of a host's budget; Nones: no budget."""
    if conf.cores is not None:
        real = conf.cores / dilation
        return conf.cores, real, min(1.0, real / machine_cores) if machine_cores else None
    if conf.cpu is not None and machine_cores:
        return conf.cpu * machine_cores * dilation, conf.cpu * machine_cores, conf.cpu
    return None, None, conf.cpu


def _host(topology: Topology, name: str, net: ipaddress.IPv4Network, index: int, ssh: SshConf | None,
          dilation: float = 1.0, machine_cores: int | None = None) -> HostNode:
    conf = topology.host_conf(name)
    kind = conf.kind or kinds.DEFAULT_KIND
    settings = kinds.kind_settings()
    own = settings.get(kind)
    value = getattr(conf, own.key) if own else None
    address = own.address(value) if value is not None else None   # a real machine: its own, not 10.0.0.x
    cores, budget, cpu = budget_of(conf, dilation, machine_cores)
    return HostNode(name, address or str(net.network_address + index), cpu, conf.memory, kind,
                    topology.host_own(name)[0], tuple((s.key, getattr(conf, s.key)) for s in settings.values()),
                    ssh, net.prefixlen, cores, budget)


def _switches(count: int) -> list[str]:
    return [f"s{i}" for i in range(1, count + 1)]


def _attach(hosts: list[str], switch: str, params: LinkParams) -> list[LinkEdge]:
    return [LinkEdge(h, switch, params) for h in hosts]


def _star(topo: Topology, hosts: list[str]):
    return ["s1"], _attach(hosts, "s1", topo.link)


def _linear(topo: Topology, hosts: list[str]):
    switches = _switches(topo.switch_count())
    links = []
    for switch, group in zip(switches, split_evenly(hosts, len(switches))):
        links += _attach(group, switch, topo.link)
    links += [LinkEdge(a, b, topo.link) for a, b in zip(switches, switches[1:])]
    return switches, links


def _tree(topo: Topology, hosts: list[str]):
    depth = tree_depth(len(hosts), topo.fanout)
    switches = _switches(sum(topo.fanout ** level for level in range(depth)))
    first_leaf = len(switches) - topo.fanout ** (depth - 1)
    links = []
    for i, leaf in enumerate(switches[first_leaf:]):
        links += _attach(hosts[i * topo.fanout:(i + 1) * topo.fanout], leaf, topo.link)
    for child in range(1, len(switches)):
        parent = (child - 1) // topo.fanout
        links.append(LinkEdge(switches[parent], switches[child], topo.link))
    return switches, links


def _dumbbell(topo: Topology, hosts: list[str]):
    half = (len(hosts) + 1) // 2
    links = _attach(hosts[:half], "s1", topo.link) + _attach(hosts[half:], "s2", topo.link)
    links.append(LinkEdge("s1", "s2", topo.link.merged(topo.bottleneck)))
    return ["s1", "s2"], links


def _custom(topo: Topology, hosts: list[str]):
    links = [LinkEdge(item.a, item.b, topo.link.merged(item)) for item in topo.links]
    return [s.name for s in topo.switches], links


def _graph(topo: Topology, hosts: list[HostNode]) -> Graph:
    """template graph: one switch per node of the file, hosts spread round-robin over the sites (every
    node, or graph_hosts), their links topology.link; the file's links (its spanning tree) with the
    file's bandwidth and, with graph_delay distance, the distance's delay over topology.link (a link with
    a bandwidth from the file does not follow topology.link's trace, as LinkParams.merged has it)."""
    wan = read_graph(topo.graph)
    sites = wan.sites(topo.graph_hosts)
    switches = [SwitchNode(p.name, dpid, p.label) for dpid, p in enumerate(wan.pops, 1)]
    links = [LinkEdge(h.name, sites[i % len(sites)], topo.link) for i, h in enumerate(hosts)]

    def edge(wire) -> LinkEdge:
        own = LinkParams.model_construct(bw=wire.bw, delay=wire.delay if topo.graph_delay == "distance" else None)
        return LinkEdge(wire.a, wire.b, topo.link.merged(own))
    return Graph(hosts, switches, links + [edge(w) for w in wan.wires], tuple(edge(w) for w in wan.dropped))


_LAYOUTS = {"star": _star, "linear": _linear, "tree": _tree, "dumbbell": _dumbbell, "custom": _custom}


def split_evenly(items: list, parts: int) -> list[list]:
    """Contiguous groups whose sizes differ by at most one, larger groups first."""
    size, extra = divmod(len(items), parts)
    groups, start = [], 0
    for i in range(parts):
        end = start + size + (1 if i < extra else 0)
        groups.append(items[start:end])
        start = end
    return groups


def tree_depth(hosts: int, fanout: int) -> int:
    """Smallest depth >= 1 with fanout**depth >= hosts."""
    depth = 1
    while fanout ** depth < hosts:
        depth += 1
    return depth
