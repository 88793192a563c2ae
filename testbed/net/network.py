"""Spec graph -> running network: switches and links on Mininet, nodes of any kind on them.

The one place that touches Mininet. Nodes come from the kind registry (testbed.nodes), switches from
the switch registry (testbed.net.switches), where each node lives from the site (testbed.net.site),
shaping from one plan builder (testbed.shaping): this module never asks which kind a node or
switch is, nor which server holds a node."""
from __future__ import annotations

import logging
import resource
import shlex
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from testbed import shaping
from testbed.net.errors import NetworkError
from testbed.net.site import LocalSite
from testbed.net.switches import switch_kind
from testbed.cleanup import Registry, run_lock
from testbed.nodes import node_class
from testbed.owner import LockHeld, identity, signals_deferred

log = logging.getLogger("testbed.net.network")

def port_problems(topology, graph) -> list[tuple[str, str]]:
    """(key, message) when a switch would get more ports than its kind forwards or takes."""
    limit = switch_kind(topology.switch).port_limit()
    if limit is None:
        return []
    most, why, other = limit
    ports: dict[str, int] = {}
    for e in graph.links:
        for end in (e.a, e.b):
            ports[end] = ports.get(end, 0) + 1
    crowded = [f"{s.name} ({ports.get(s.name, 0)} ports)" for s in graph.switches
               if ports.get(s.name, 0) > most]
    if not crowded:
        return []
    return [("topology.hosts", f"{', '.join(crowded)}: {why}; use template tree with fanout at most {most - 1} "
             f"(e.g. fanout 32: 1000 hosts on 33 switches){other} for this many hosts")]


def node_problems(graph, progress=lambda msg: None) -> list[tuple[str, str]]:
    """(key, message) per problem that stops the graph's nodes from starting here, asked of each kind."""
    by_kind: dict[str, list] = {}
    for h in graph.hosts:
        by_kind.setdefault(h.kind, []).append(h)
    return [p for kind, hosts in by_kind.items() for p in node_class(kind).problems(hosts, progress, graph.engine)]


COMMAND_TIMEOUT_S = 60    # one command of bring-up or teardown (ovs-vsctl waits forever for a dead ovs-vswitchd)
MAX_LINE = 3000    # a Mininet node reads its commands through a terminal: at most 4095 bytes a line


def run_on_nodes(lines: dict, what: str) -> None:
    """Shell lines per Mininet node (a line or a list), each round sent to every node before waiting
    for any (each node has its own shell); NetworkError naming the nodes where one failed."""
    lines = {node: [line] if isinstance(line, str) else line for node, line in lines.items()}
    failed = []
    for i in range(max(map(len, lines.values()), default=0)):
        busy = [node for node, todo in lines.items() if len(todo) > i]
        for node in busy:
            node.sendCmd(f"{{ {lines[node][i]}; }} 2>&1; echo rc=$?")
        for node in busy:
            out = node.waitOutput().strip()
            if not out.endswith("rc=0"):
                failed.append(f"{node.name}: {out[-300:]}")
        if failed:
            raise NetworkError(f"{what} failed on {len(failed)} node(s): " + "; ".join(failed[:3]))


def batch_lines(command: str, items: list[str]) -> list[str]:
    """`printf ITEM... | command` lines of at most MAX_LINE bytes, feeding each item as a line."""
    out, chunk = [], []
    for item in map(shlex.quote, items):
        if chunk and sum(len(c) + 1 for c in chunk) + len(item) + len(command) + 20 > MAX_LINE:
            out.append(chunk)
            chunk = []
        chunk.append(item)
    return [f"printf '%s\\n' {' '.join(c)} | {command}" for c in out + ([chunk] if chunk else [])]


def _config_host(host) -> None:
    """What Mininet's configHosts does to each host (address, MAC, loopback up)."""
    if host.defaultIntf():
        host.configDefault()
    else:
        host.configDefault(ip=None, mac=None)


def _each(action, nodes) -> None:
    """Run action on every node, a few at a time (starting containers is mostly waiting on dockerd);
    the first error is raised once all are done."""
    with ThreadPoolExecutor(8) as pool:
        for future in [pool.submit(action, node) for node in nodes]:
            future.result()


class Network:
    """Context manager that brings a Graph up and always tears it down. `nodes[name]` is the Node.
    `site` says where nodes live (default: all on this machine; testbed.cluster.cluster_site.site_for)."""

    def __init__(self, graph, topology, progress=lambda msg: None, site=None):
        self.graph = graph
        self.topology = topology
        self.progress = progress
        self.site = site if site is not None else LocalSite()
        self.switch = switch_kind(topology.switch)   # the switch kind's registry entry (testbed.net.switches)
        self.notes: list[str] = []
        self.nodes = {}
        self.qos_rates: dict[str, int] = {}        # shaping ovs: switch port -> rate (faults re-shape them)
        self.reshaped: dict = {}                   # link (frozenset of its ends) -> faults.LinkState once changed
        self._net = None
        self._links = []
        self._link_index = None
        self._lock = run_lock()
        self._registry = None

    @property
    def datapath(self) -> str | None:
        """The OVS datapath of this machine's switches (None: not Open vSwitch, or none here)."""
        return self.switch.datapath

    @property
    def tso(self) -> bool:
        """OVS userspace TSO is on: links keep their TX offload (shaping.ensure_userspace_tso)."""
        return self.switch.tso

    @property
    def tunnel_rows(self) -> list[dict]:
        """The site's measurements of its links between machines (tunnels.csv)."""
        return self.site.tunnel_rows

    # lifecycle -----------------------------------------------------------------------------
    def __enter__(self) -> "Network":
        try:
            self._lock.__enter__()
        except LockHeld as err:
            raise NetworkError(str(err)) from None
        try:
            self._registry = Registry()
            self._start()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc) -> None:
        with signals_deferred():     # a Ctrl-C now comes once the network is gone, not half-way through
            self._teardown()

    def _teardown(self) -> None:
        try:
            if self._net is not None:
                try:
                    self._delete_links()
                    self._net.stop()
                except Exception as err:  # noqa: BLE001 - the registry below removes the rest
                    log.warning("mininet stop failed: %s", err)
            _each(lambda node: node.stop(), self.nodes.values())
            if self._registry is not None:
                for action in self._registry.release():
                    log.debug("teardown: %s", action)
        finally:
            self._net = None
            self.site.close()
            self._lock.__exit__()

    def _start(self) -> None:
        self.site.open(self.graph, self._registry, self.progress)
        self.nodes = {h.name: self.site.node(h) for h in self.graph.hosts}
        _each(lambda node: node.prepare(self.progress), self.nodes.values())
        hosts = {name: node.mininet_host() for name, node in self.nodes.items()}
        real = {name for name, mn_host in hosts.items() if mn_host is None}   # machines with their own network
        self._links = [e for e in self.graph.links if not {e.a, e.b} & real]
        for e in self.graph.links:
            for name in sorted({e.a, e.b} & real):
                peers = [self.nodes[other].address for other in sorted(real - {name})]
                self.nodes[name].shape(e.params, self.topology.qdisc, peers)
        if len(real) < len(hosts):
            self._start_mininet(hosts)
        self.notes[:0] = self.switch.notes + self.site.notes

    def _start_mininet(self, hosts: dict) -> None:
        """Switches, links and the emulated nodes (those with a Mininet host) on Mininet."""
        from mininet.log import setLogLevel
        from mininet.net import Mininet
        setLogLevel("error")
        switches = [s.name for s in self.graph.switches]
        here = self.site.local(switches)
        self._check_free_names(here)
        self._raise_limits(len(self.graph.hosts) + len(self.graph.switches))
        local_class = self.switch.start() if here or not switches else None
        self._net = Mininet(topo=None, build=False, controller=None, autoSetMacs=True,
                            autoStaticArp=False, waitConnected=False)
        for h in self.graph.hosts:
            if hosts[h.name] is not None:
                cls, params = hosts[h.name]
                self.site.record_shell(h.name)
                self._net.addHost(h.name, cls=cls, ip=h.cidr, **params)
        self._ipv6_off(self._net.hosts)
        self._registry.add(self.switch.records, *here)
        for s in self.graph.switches:
            self._net.addSwitch(s.name, cls=self.site.switch_class(s.name, local_class), dpid=f"{s.dpid:016x}")
        self._registry.add("interfaces", *self.site.record_interfaces(self._root_interfaces()))
        for e in self._links:
            self._net.addLink(e.a, e.b, **self.site.link_params())
        self._net.configHosts = lambda: _each(_config_host, self._net.hosts)  # one at a time: 13 s for 1000
        self._net.build()
        nodes = self._net.hosts + self._net.switches
        self._registry.add("pids", *(identity(self.site.shell_pid(n)) for n in nodes if n.pid))
        for name, node in self.nodes.items():
            if hosts[name] is not None:
                node.attach(self._net.get(name))
        self.switch.before_start(self._registry)
        self._net.start()
        if self.switch.tx_offload_off or self.site.links_need_tx_offload_off:
            self._disable_tx_offload()
        mtu = self.site.host_mtu()
        if mtu is not None:
            self._set_host_mtu(*mtu)
        self._apply_shaping()

    # building ------------------------------------------------------------------------------
    def _set_host_mtu(self, mtu: int, note: str) -> None:
        """Every host sends at most what the site's links carry."""
        for node in self._net.hosts:
            for intf in node.intfList():
                if intf.name != "lo":
                    node.cmd(f"ip link set dev {intf.name} mtu {mtu}")
        self.notes.append(note)

    def _root_interfaces(self) -> list[tuple[str, str]]:
        """(switch, interface) per switch-side link end: they live in a root namespace."""
        switches = {s.name for s in self.graph.switches}
        names = []
        port = {s: 0 for s in switches}
        for e in self._links:
            for end in (e.a, e.b):
                if end in switches:
                    port[end] += 1
                    names.append((end, f"{end}-eth{port[end]}"))
        return names

    def _check_free_names(self, here: list[str]) -> None:
        taken = [name for name in here if Path(f"/sys/class/net/{name}").exists()]
        if taken:
            raise NetworkError(f"interface(s) {', '.join(taken)} already exist on this machine. If a crashed "
                               "testbed run left them, `run_experiment.py cleanup` removes them; if cleanup "
                               "does not, another tool made them: remove them with "
                               + " and ".join(f"`ip link del {name}`" for name in taken)
                               + " if they are not in use, or name the switches differently (template custom)")

    def _raise_limits(self, nodes: int) -> None:
        """Room for many nodes: Mininet keeps a terminal (2 descriptors) per node, and every namespace's
        neighbour entries count against the kernel's one ARP table (a full table drops pings)."""
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft != resource.RLIM_INFINITY and soft < 4 * nodes + 1024:
            want = 4 * nodes + 1024
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, want if hard != resource.RLIM_INFINITY and
                                                        hard < want else hard))
        for level, per_node in ((1, 1), (2, 2), (3, 4)):
            path = Path(f"/proc/sys/net/ipv4/neigh/default/gc_thresh{level}")
            old = int(path.read_text()) if path.exists() else None
            if old is not None and old < per_node * nodes:
                self._registry.remember_sysctl(f"net.ipv4.neigh.default.gc_thresh{level}", str(old))
                path.write_text(str(per_node * nodes))
                self.notes.append(f"net.ipv4.neigh.default.gc_thresh{level}={per_node * nodes} for this run "
                                  f"(was {old}); restored after")

    @staticmethod
    def _ipv6_off(hosts) -> None:
        """IPv6 off in every host's namespace before its links exist (the testbed addresses IPv4 only):
        otherwise each host's interface sends IPv6 router solicitations, which a switch floods to every
        port; with 1000 hosts on OVS's userspace datapath that kept both cores busy for 20 s after
        bring-up and dropped most of the first pings."""
        conf = "/proc/sys/net/ipv6/conf"
        line = (f"if [ -e {conf}/all/disable_ipv6 ]; then echo 1 > {conf}/default/disable_ipv6 && "
                f"echo 1 > {conf}/all/disable_ipv6; fi")
        run_on_nodes({host: line for host in hosts}, "turning IPv6 off")

    def _disable_tx_offload(self) -> None:
        lines = {node: "; ".join(f"ethtool -K {intf.name} tx off >/dev/null 2>&1" for intf in node.intfList()
                                 if intf.name != "lo") + "; true" for node in self._net.hosts}
        run_on_nodes(lines, "ethtool")

    # shaping -------------------------------------------------------------------------------
    def _link_ends(self, edge):
        if self._link_index is None:   # Mininet's linksBetween scans every link
            self._link_index = {}
            for link in self._net.links:
                self._link_index.setdefault(frozenset((link.intf1.node.name, link.intf2.node.name)), link)
        link = self._link_index[frozenset((edge.a, edge.b))]
        return (link.intf1, link.intf2)

    def _delete_links(self) -> None:
        """Hosts and links before Mininet stops the switches (it deletes links one `ip link del` at a time:
        most of a 1000-host teardown). A host's namespace ends with its shell and takes its links with it,
        in one batch of the kernel's; what remains (a container's links) goes in one `ip -batch`."""
        if not self.site.batch_teardown:    # e.g. tunnels and other servers' ends: Mininet's way
            return
        ends = [intf.name for s in self._net.switches for intf in s.intfList() if intf.name != "lo"]
        for host in self._net.hosts:
            host.terminate()
        self._net.hosts, self._net.links = [], []         # done: Mininet's stop must not do them again
        left, progress = ends, time.monotonic()
        while left and time.monotonic() - progress < 2.0:   # the kernel ends namespaces in batches
            time.sleep(0.05)
            still = [n for n in left if Path(f"/sys/class/net/{n}").exists()]
            progress = progress if len(still) == len(left) else time.monotonic()
            left = still
        try:
            subprocess.run(["ip", "-force", "-batch", "-"], input="".join(f"link del dev {n}\n" for n in left),
                           capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            log.warning("ip link del of %d interface(s) gave up after %d s", len(left), COMMAND_TIMEOUT_S)

    def problem(self) -> str | None:
        """What broke the running network, when this machine can tell (Open vSwitch stopped mid-run);
        None when nothing is known to be wrong."""
        return None if self._net is None else self.switch.problem()

    def link_ends(self, a: str, b: str) -> list[tuple[str, object]]:
        """The link between a and b while it runs: (interface name, the Node holding it) per end; None
        for a switch's end, which lives in this machine's root namespace (faults act on them)."""
        built = self._net is not None and {a, b} <= set(self._net.nameToNode)
        links = self._net.linksBetween(self._net.get(a), self._net.get(b)) if built else []
        if not links:
            raise NetworkError(f"no emulated link between {a} and {b} (a real machine's link is its own)")
        return [(intf.name, self.nodes.get(intf.node.name)) for intf in (links[0].intf1, links[0].intf2)]

    def _apply_shaping(self) -> None:
        """Every link's shaping plan (shaping.link_plan) carried out: tc in one `tc -batch` per node,
        every node at once (a command at a time took most of a 1000-host bring-up), and the shaped
        interfaces' segment sizes in one `ip -batch`; then OVS QoS, and only once every port has its
        QoS, the root classes' burst."""
        switches = {s.name for s in self.graph.switches}
        plan = shaping.Plan()
        for edge in self._links:
            ends = [shaping.End(intf.name, intf.node, intf.node.name in switches) for intf in self._link_ends(edge)]
            plan.add(shaping.link_plan(ends, edge.params, self.topology.shaping, self.topology.qdisc))
        run_on_nodes({node: batch_lines("tc -batch -", [" ".join(args) for args in cmds])
                      for node, cmds in plan.tc.items()}, "tc")
        run_on_nodes({node: batch_lines("ip -batch -", [" ".join(args) for args in cmds])
                      for node, cmds in plan.link.items()}, "ip")
        for args in plan.ovs:
            self._run_checked(["ovs-vsctl", *args], f"OVS QoS on {args[3]}")
        for args in plan.root_classes:
            self._run_checked(["tc", *args], f"OVS QoS root class on {args[3]}")
        self.qos_rates = dict(plan.qos)

    def _run_checked(self, cmd: list[str], what: str) -> None:
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise NetworkError(f"{what} did not finish within {COMMAND_TIMEOUT_S} s") from None
        if proc.returncode != 0:
            raise NetworkError(f"{what} failed: {proc.stderr.strip()}")
