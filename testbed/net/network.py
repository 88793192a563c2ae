"""Spec graph -> running network: switches and links on Mininet, nodes of any kind on them.

The one place that touches Mininet. Nodes come from the kind registry (testbed.nodes); this module
never asks which kind a node is."""
from __future__ import annotations

import fcntl
import logging
import os
import resource
import shlex
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from testbed.net import shaping
from testbed.run.cleanup import STATE_DIR, Registry, ovs_running
from testbed.nodes import node_class

log = logging.getLogger("testbed.net.network")

OVS_CTL = "/usr/share/openvswitch/scripts/ovs-ctl"
BRIDGE_NF = "net.bridge.bridge-nf-call-iptables"


class NetworkError(RuntimeError):
    pass


def ensure_ovs() -> None:
    """Start ovsdb-server and ovs-vswitchd if they are not running (no systemd needed)."""
    if ovs_running():
        return
    log.info("starting Open vSwitch (ovs-ctl start)")
    proc = subprocess.run([OVS_CTL, "start", "--system-id=random"], capture_output=True, text=True)
    if not ovs_running():
        raise NetworkError(f"could not start Open vSwitch: {proc.stderr.strip() or proc.stdout.strip()}")


def vswitchd_running() -> bool:
    """ovs-vswitchd, which forwards for every bridge, answers (ovsdb-server alone forwards nothing)."""
    return subprocess.run(["ovs-appctl", "--timeout=2", "-t", "ovs-vswitchd", "version"],
                          capture_output=True).returncode == 0


def ovs_datapath(requested: str = "auto") -> str:
    """'kernel' when the openvswitch module is (or can be) loaded, else the userspace datapath."""
    if requested != "auto":
        if requested == "kernel" and not _kernel_datapath_available():
            raise NetworkError("switch.datapath: kernel asked for, but this kernel has no openvswitch module")
        return requested
    return "kernel" if _kernel_datapath_available() else "user"


def _kernel_datapath_available(try_load: bool = True) -> bool:
    if Path("/sys/module/openvswitch").exists() or not try_load:
        return Path("/sys/module/openvswitch").exists()
    subprocess.run(["modprobe", "-q", "openvswitch"], capture_output=True)
    return Path("/sys/module/openvswitch").exists()


USERSPACE_MAX_PORTS = 57   # measured: one userspace-datapath bridge forwarded only its first 57 ports
LINUX_BRIDGE_MAX_PORTS = 1023   # the kernel's BR_MAX_PORTS (1024), port 0 being reserved


def port_problems(topology, graph) -> list[tuple[str, str]]:
    """(key, message) when a switch would get more ports than it forwards (userspace OVS) or takes (Linux bridge)."""
    if topology.switch.kind == "linuxbridge":
        limit, why = LINUX_BRIDGE_MAX_PORTS, f"a Linux bridge takes at most {LINUX_BRIDGE_MAX_PORTS} ports"
    elif topology.switch.kind == "ovs" and ovs_datapath_guess(topology.switch.datapath) == "user":
        limit, why = USERSPACE_MAX_PORTS, (f"an OVS userspace-datapath bridge forwarded only its first "
                                           f"{USERSPACE_MAX_PORTS} ports on this kind of machine")
    else:
        return []
    ports: dict[str, int] = {}
    for e in graph.links:
        for end in (e.a, e.b):
            ports[end] = ports.get(end, 0) + 1
    crowded = [f"{s.name} ({ports.get(s.name, 0)} ports)" for s in graph.switches
               if ports.get(s.name, 0) > limit]
    if not crowded:
        return []
    other = " or switch kind linuxbridge" if limit == USERSPACE_MAX_PORTS else ""
    return [("topology.hosts", f"{', '.join(crowded)}: {why}; use template tree with fanout at most {limit - 1} "
             f"(e.g. fanout 32: 1000 hosts on 33 switches){other} for this many hosts")]


def ovs_datapath_guess(requested: str) -> str:
    """The datapath `ovs_datapath` would pick, without loading modules (for preflight)."""
    if requested != "auto":
        return requested
    return "kernel" if _kernel_datapath_available(try_load=False) else "user"


class RunLock:
    """One live network at a time: names like h1/s1 would clash between runs."""

    def __init__(self):
        STATE_DIR.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(STATE_DIR / "lock", os.O_RDWR | os.O_CREAT)

    def __enter__(self):
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise NetworkError("another testbed run holds /run/dltestbed/lock; wait for it to end") from None
        return self

    def __exit__(self, *exc):
        fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)


def node_problems(graph, progress=lambda msg: None) -> list[tuple[str, str]]:
    """(key, message) per problem that stops the graph's nodes from starting here, asked of each kind."""
    by_kind: dict[str, list] = {}
    for h in graph.hosts:
        by_kind.setdefault(h.kind, []).append(h)
    return [p for kind, hosts in by_kind.items() for p in node_class(kind).problems(hosts, progress)]


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
    """Context manager that brings a Graph up and always tears it down. `nodes[name]` is the Node."""

    def __init__(self, graph, topology, progress=lambda msg: None, cluster=None):
        self.graph = graph
        self.topology = topology
        self.progress = progress
        self.cluster_conf = cluster     # spec ClusterConf: the nodes spread over servers (testbed.cluster)
        self.cluster = None
        self.datapath = None
        self.tso = False                # OVS userspace TSO: links keep TX offload (shaping.ensure_userspace_tso)
        self.notes: list[str] = []
        self.nodes = {}
        self._net = None
        self._lock = RunLock()
        self._registry = None

    # lifecycle -----------------------------------------------------------------------------
    def __enter__(self) -> "Network":
        self._lock.__enter__()
        try:
            self._registry = Registry()
            self._start()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc) -> None:
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
            if self.cluster is not None:
                self.cluster.close()
            self._lock.__exit__()

    @property
    def tunnel_rows(self) -> list[dict]:
        """The fidelity guard's measurements of the cluster's tunnels (tunnels.csv)."""
        return self.cluster.tunnel_rows if self.cluster is not None else []

    def _start(self) -> None:
        if self.cluster_conf is not None:
            from testbed.cluster.bringup import Cluster
            self.cluster = Cluster(self.cluster_conf, self.graph, self._registry, self.progress)
            self.cluster.connect()
            self.cluster.measure_tunnels()
            self.cluster.guard()
        self.nodes = {h.name: self._node(h) for h in self.graph.hosts}
        _each(lambda node: node.prepare(self.progress), self.nodes.values())
        hosts = {name: node.mininet_host() for name, node in self.nodes.items()}
        real = {name for name, mn_host in hosts.items() if mn_host is None}   # machines with their own network
        self._links = [e for e in self.graph.links if not {e.a, e.b} & real]
        for e in self.graph.links:
            for name in sorted({e.a, e.b} & real):
                self.nodes[name].shape(e.params, self.topology.qdisc)
        if len(real) < len(hosts):
            self._start_mininet(hosts)

    def _node(self, host):
        """The host's Node: of its kind, or on the cluster server that holds it."""
        server = self._elsewhere(host.name)
        if server is not None:
            from testbed.nodes.cluster import ClusterNode
            return ClusterNode(host, self._registry, server)
        return node_class(host.kind)(host, self._registry)

    def _start_mininet(self, hosts: dict) -> None:
        """Switches, links and the emulated nodes (those with a Mininet host) on Mininet."""
        from mininet.log import setLogLevel
        from mininet.net import Mininet
        setLogLevel("error")
        kind = self.topology.switch.kind
        self._check_free_names()
        self._raise_limits(len(self.graph.hosts) + len(self.graph.switches))
        here = [s for s in self.graph.switches if self._elsewhere(s.name) is None]
        switch_cls = self._switch_class(kind) if here or self.cluster is None else None
        if switch_cls is None:
            self.datapath = "user"
            self.notes.append("switches: Open vSwitch on the cluster's servers, user datapath (TX checksum "
                              "offload off on links)")
        self._net = Mininet(topo=None, build=False, controller=None, autoSetMacs=True,
                            autoStaticArp=False, waitConnected=False)
        for h in self.graph.hosts:
            if hosts[h.name] is not None:
                cls, params = hosts[h.name]
                self._record_shell(h.name)
                self._net.addHost(h.name, cls=cls, ip=h.cidr, **params)
        for s in self.graph.switches:
            if self._elsewhere(s.name) is not None:
                self._record_shell(s.name, bridge=s.name)
                self._net.addSwitch(s.name, cls=self._remote_switch(s.name), dpid=f"{s.dpid:016x}")
                continue
            self._registry.add("bridges" if kind == "ovs" else "linux_bridges", s.name)
            self._net.addSwitch(s.name, cls=switch_cls, dpid=f"{s.dpid:016x}")
        self._record_root_interfaces()
        for e in self._links:
            self._net.addLink(e.a, e.b, **self._link_class())
        self._net.configHosts = lambda: _each(_config_host, self._net.hosts)  # one at a time: 13 s for 1000
        self._net.build()
        nodes = self._net.hosts + self._net.switches   # on a server: the local end is the ssh client (shell.pid)
        self._registry.add("pids", *(n.pid if self.cluster is None else n.shell.pid for n in nodes if n.pid))
        for name, node in self.nodes.items():
            if hosts[name] is not None:
                node.attach(self._net.get(name))
        if kind == "linuxbridge":
            self._allow_bridged_traffic()
        self._net.start()
        if kind == "ovs":
            self._tag_bridges()
            if self.datapath == "user" and not (self.tso and self.cluster is None):
                self._disable_tx_offload()
        if self.cluster is not None and self.cluster.mtu:
            self._set_host_mtu(self.cluster.mtu)
        self._apply_shaping()

    # building ------------------------------------------------------------------------------
    def _elsewhere(self, name: str):
        """The cluster server that holds node `name` when that is not this machine, else None."""
        if self.cluster is None:
            return None
        server = self.cluster.server(name)
        return None if server.local else server

    def _record_shell(self, name: str, **more) -> None:
        """A node about to be made on another server: its shell (and bridge) recorded there first."""
        server = self._elsewhere(name)
        if server is not None:
            self.cluster.record(server, shell=name, **more)

    def _remote_switch(self, name: str):
        from functools import partial
        from testbed.cluster.edition import ClusterBridge
        server = self.cluster.server(name)
        return partial(ClusterBridge, server=server.name, serverIP=server.ip, user=server.conf.user, ssh=server.ssh())

    def _link_class(self) -> dict:
        if self.cluster is None:
            return {}
        from functools import partial
        from testbed.cluster.edition import ClusterLink
        return {"cls": partial(ClusterLink, tunnels=self.cluster)}

    def _record_root_interfaces(self) -> None:
        """Switch-side link ends live in a root namespace: this machine's, or their server's."""
        here = []
        for switch, name in self._root_interfaces():
            server = self._elsewhere(switch)
            if server is not None:
                self.cluster.record(server, link=name)
            else:
                here.append(name)
        self._registry.add("interfaces", *here)

    def _set_host_mtu(self, mtu: int) -> None:
        """Tunnels carry smaller frames than veths: every host sends at most what a tunnel takes."""
        for node in self._net.hosts:
            for intf in node.intfList():
                if intf.name != "lo":
                    node.cmd(f"ip link set dev {intf.name} mtu {mtu}")
        self.notes.append(f"cluster: VXLAN tunnels between servers; host interfaces' MTU {mtu}")

    def _switch_class(self, kind: str):
        from functools import partial
        if kind == "linuxbridge":
            from mininet.nodelib import LinuxBridge
            self.notes.append("switches: Linux bridge")
            return LinuxBridge
        from mininet.node import OVSBridge
        ensure_ovs()
        self.datapath = ovs_datapath(self.topology.switch.datapath)
        self.tso = self.datapath == "user" and shaping.ensure_userspace_tso(OVS_CTL)
        self.notes.append(f"switches: Open vSwitch, {self.datapath} datapath" + (
            " (no kernel module; userspace TSO on: links keep their TX offload)" if self.tso else
            " (no kernel module: TX checksum offload off on links; OVS's other_config:userspace-tso-enable is"
            " off and its bridges kept it from being restarted: at most about 0.9 Gbit/s per flow)"
            if self.datapath == "user" else ""))
        # batch: every bridge in one ovs-vsctl (Mininet only batches a switch class, not a partial of one)
        return partial(OVSBridge, datapath=self.datapath, batch=True)

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

    def _check_free_names(self) -> None:
        here = [s for s in self.graph.switches if self._elsewhere(s.name) is None]
        taken = [s.name for s in here if Path(f"/sys/class/net/{s.name}").exists()]
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

    def _allow_bridged_traffic(self) -> None:
        """With dockerd running, bridged frames pass iptables' FORWARD chain (policy DROP)."""
        path = Path("/proc/sys/net/bridge/bridge-nf-call-iptables")
        if path.exists() and path.read_text().strip() == "1":
            self._registry.remember_sysctl(BRIDGE_NF, "1")
            path.write_text("0")
            self.notes.append(f"set {BRIDGE_NF}=0 for this run (iptables would drop bridged traffic); restored after")

    def _tag_bridges(self) -> None:
        here = []
        for s in self.graph.switches:
            if self._elsewhere(s.name) is not None:
                self._net.get(s.name).cmd(f"ovs-vsctl set Bridge {s.name} external_ids:dltestbed=1")
                continue
            here.append(s.name)
        tags = [arg for name in here for arg in ("--", "set", "Bridge", name, "external_ids:dltestbed=1")]
        if tags:
            subprocess.run(["ovs-vsctl", *tags], check=True)    # one call: 33 took a second

    def _disable_tx_offload(self) -> None:
        lines = {node: "; ".join(f"ethtool -K {intf.name} tx off >/dev/null 2>&1" for intf in node.intfList()
                                 if intf.name != "lo") + "; true" for node in self._net.hosts}
        run_on_nodes(lines, "ethtool")

    # shaping -------------------------------------------------------------------------------
    def _link_ends(self, edge):
        if getattr(self, "_link_index", None) is None:   # Mininet's linksBetween scans every link
            self._link_index = {}
            for link in self._net.links:
                self._link_index.setdefault(frozenset((link.intf1.node.name, link.intf2.node.name)), link)
        link = self._link_index[frozenset((edge.a, edge.b))]
        return (link.intf1, link.intf2)

    def _delete_links(self) -> None:
        """Hosts and links before Mininet stops the switches (it deletes links one `ip link del` at a time:
        most of a 1000-host teardown). A host's namespace ends with its shell and takes its links with it,
        in one batch of the kernel's; what remains (a container's links) goes in one `ip -batch`."""
        if getattr(self, "cluster", None) is not None:    # tunnels and other servers' ends: Mininet's way
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
        subprocess.run(["ip", "-force", "-batch", "-"], input="".join(f"link del dev {n}\n" for n in left),
                       capture_output=True, text=True)

    def problem(self) -> str | None:
        """What broke the running network, when this machine can tell (Open vSwitch stopped mid-run);
        None when nothing is known to be wrong."""
        if (self._net is None or self.topology.switch.kind != "ovs" or getattr(self, "cluster", None) is not None
                or vswitchd_running()):
            return None
        return ("Open vSwitch stopped during the run (ovs-vswitchd does not answer), so the switches "
                "forwarded nothing; the next run starts it again")

    def link_ends(self, a: str, b: str) -> list[tuple[str, object]]:
        """The link between a and b while it runs: (interface name, the Node holding it) per end; None
        for a switch's end, which lives in this machine's root namespace (faults act on them)."""
        built = self._net is not None and {a, b} <= set(self._net.nameToNode)
        links = self._net.linksBetween(self._net.get(a), self._net.get(b)) if built else []
        if not links:
            raise NetworkError(f"no emulated link between {a} and {b} (a real machine's link is its own)")
        return [(intf.name, self.nodes.get(intf.node.name)) for intf in (links[0].intf1, links[0].intf2)]

    def _apply_shaping(self) -> None:
        switches = {s.name for s in self.graph.switches}
        qos, tc = [], {}
        for edge in self._links:
            for intf in self._link_ends(edge):
                if self.topology.shaping == "ovs":
                    if intf.node.name in switches and edge.params.bw is not None:
                        qos.append((intf.name, edge.params.bw))
                else:
                    tc.setdefault(intf.node, []).extend(
                        shaping.tc_commands(intf.name, edge.params, self.topology.qdisc))
        # One `tc -batch` per node, every node at once (a command at a time took most of a 1000-host bring-up).
        run_on_nodes({node: batch_lines("tc -batch -", [" ".join(args) for args in cmds])
                      for node, cmds in tc.items() if cmds}, "tc")
        for port, rate in qos:
            self._run_checked(["ovs-vsctl", *shaping.ovs_qos_command(port, rate)], f"OVS QoS on {port}")
        # Only once every port has its QoS: OVS rewrites a port's classes when it reconfigures the bridge.
        for port, rate in qos:
            self._run_checked(["tc", *shaping.ovs_root_class_command(port, rate)], f"OVS QoS root class on {port}")

    def _run_checked(self, cmd: list[str], what: str) -> None:
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise NetworkError(f"{what} failed: {proc.stderr.strip()}")
