"""The cluster site (testbed.net.site): the servers of a `cluster:` run while its network is built,
through Mininet's cluster edition: one checked SSH connection per server
(paramiko, host keys from cluster.known_hosts), the placement, the VXLAN tunnels between servers,
the fidelity guard (each tunnel's raw capacity and RTT measured before training; a link shaped
above max_link_share of the tunnel it crosses is refused), and what each server holds, recorded in
the run's registry BEFORE it is made so teardown and `cleanup` remove it there too."""
from __future__ import annotations

import ipaddress
import itertools
import json
import os
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial

from testbed.net.probes import parse_iperf3, parse_ping
from testbed.cluster.edition import ClusterBridge, ClusterLink, ssh_command, run_local, server_of, vxlan_script
from testbed.cluster.placement import crossing_links, place
from testbed.net.errors import NetworkError
from testbed.net.site import LocalSite, Site
from testbed.nodes.base import NodeError
from testbed.nodes.engines import engine_problem
from testbed.nodes.ssh_connection import Connection, Target
from testbed.spec.models import LOCAL
from testbed.units import format_bandwidth
from testbed.owner import identity

GUARD_PORT = 5299            # iperf3 between the servers' root namespaces (the underlay)
GUARD_SECONDS = 2
VNI_BASE = 4200


class BringupError(NetworkError):
    """A cluster's network could not be brought up (a login, the fidelity guard, a tunnel)."""



def site_for(cluster_conf) -> Site:
    """The site of a run: its cluster's servers (spec ClusterConf), or this machine alone (None)."""
    return LocalSite() if cluster_conf is None else ClusterSite(cluster_conf)


@dataclass
class ConnectedServer:
    """One server as a run uses it: its settings, its connection (None for this machine) and underlay address."""

    conf: object                 # spec ServerConf
    known_hosts: str
    timeout: float
    python: str                  # the interpreter with TensorFlow there (cluster.python)
    conf_workdir: str            # where the code goes there (cluster.workdir)
    conn: Connection | None = None
    ip: str | None = None        # the address the other servers send tunnel packets to
    lock: threading.Lock = field(default_factory=threading.Lock)
    workdir: str | None = None

    @property
    def name(self) -> str:
        return self.conf.name

    @property
    def local(self) -> bool:
        return self.conf.address == LOCAL

    @property
    def target(self) -> Target:
        c = self.conf
        return Target(c.address, c.port, c.user, os.path.expanduser(c.key_file) if c.key_file else None,
                      self.known_hosts, False, self.timeout)

    def run(self, argv: list[str], timeout: float = 60) -> tuple[int, str]:
        """argv in the server's root namespace: (exit status, output)."""
        return run_local(argv, timeout) if self.local else self.conn.exec(argv, timeout=timeout)

    def ssh(self) -> list[str]:
        return ssh_command(self.conf, self.known_hosts)


class ClusterSite(Site):
    """The servers of one run (spec ClusterConf), where each node of the graph goes, and how things
    are made there."""

    batch_teardown = False             # tunnels and other servers' ends: Mininet's way
    links_need_tx_offload_off = True   # the servers' bridges use the userspace datapath, as do the tunnels

    def __init__(self, conf):
        super().__init__()
        self.conf = conf
        self.progress = lambda msg: None
        known = os.path.expanduser(conf.known_hosts)
        self.servers = {s.name: ConnectedServer(s, known, conf.connect_timeout, conf.python, conf.workdir)
                        for s in conf.servers}
        self.placement: dict[str, str] = {}
        self.crossing: list = []
        self._vni = itertools.count(VNI_BASE)
        self.mtu: int | None = None

    def open(self, graph, registry, progress=lambda msg: None) -> None:
        """Place the nodes, log in to the servers, measure their tunnels and refuse what they cannot carry."""
        super().open(graph, registry, progress)
        self.progress = progress
        pinned = self.conf.placement if isinstance(self.conf.placement, dict) else {}
        self.placement = place(graph, list(self.servers), pinned)
        self.crossing = crossing_links(graph, self.placement)
        self.connect()
        self.check_names(graph)
        self.check_engines(graph)
        self.measure_tunnels()
        self.guard()
        if any(not self.server(s.name).local for s in graph.switches):
            self.notes.append("switches: Open vSwitch on the cluster's servers, user datapath (TX checksum "
                              "offload off on links)")

    # the site's answers -------------------------------------------------------------------------
    def _elsewhere(self, name: str) -> ConnectedServer | None:
        """The server that holds node `name` when that is not this machine."""
        server = self.server(name)
        return None if server.local else server

    def local(self, names):
        return [n for n in names if self._elsewhere(n) is None]

    def node(self, host):
        server = self._elsewhere(host.name)
        if server is None:
            return super().node(host)
        from testbed.cluster.node import ClusterNode
        return ClusterNode(host, self.registry, server)

    def record_shell(self, name: str) -> None:
        server = self._elsewhere(name)
        if server is not None:
            self.record(server, shell=name)

    def switch_class(self, name: str, local_class):
        server = self._elsewhere(name)
        if server is None:
            return local_class
        self.record(server, shell=name, bridge=name)
        return partial(ClusterBridge, server=server.name, serverIP=server.ip, user=server.conf.user, ssh=server.ssh())

    def link_params(self) -> dict:
        return {"cls": partial(ClusterLink, tunnels=self)}

    def record_interfaces(self, ends):
        here = []
        for switch, name in ends:
            server = self._elsewhere(switch)
            if server is not None:
                self.record(server, link=name)
            else:
                here.append(name)
        return here

    def shell_pid(self, mn_node) -> int:
        return mn_node.shell.pid            # on a server: the local end is the ssh client

    def host_mtu(self):
        return (self.mtu, f"cluster: VXLAN tunnels between servers; host interfaces' MTU {self.mtu}") if self.mtu else None

    # connections ---------------------------------------------------------------------------------
    def connect(self) -> None:
        """Log in to every server that holds a node (host key checked), then learn underlay addresses."""
        used = [s for s in self.servers.values() if s.name in set(self.placement.values())]
        remote = [s for s in used if not s.local]

        def login(server):
            server.conn = Connection(server.target)
        with ThreadPoolExecutor(8) as pool:
            for future in [pool.submit(login, s) for s in remote]:
                try:
                    future.result()
                except NodeError as err:
                    raise BringupError(f"cluster server: {err}") from None
        for s in remote:
            s.ip = _ipv4(s.conf.address)
        for s in used:
            if s.local:
                others = [o.ip for o in remote]
                s.ip = _local_ip(others[0]) if others else "127.0.0.1"
        counts = {name: sum(1 for n in self.placement.values() if n == name) for name in self.servers}
        self.progress("cluster: " + ", ".join(f"{s.name} ({s.conf.address}) {counts[s.name]} node(s)"
                                              for s in used))

    def check_names(self, graph) -> None:
        """Refuse, before anything is made, a switch whose name, or a node whose interface names
        (NAME-ethN), a server already uses: Mininet would delete or take over what is there."""
        taken = []
        for s in {self.server(n.name).name: self.server(n.name) for n in [*graph.hosts, *graph.switches]}.values():
            if s.local:
                continue
            ours = [n.name for n in [*graph.hosts, *graph.switches] if self.server(n.name) is s]
            _, out = s.conn.exec(["sh", "-c", "ls /sys/class/net; ovs-vsctl --timeout=5 list-br 2>/dev/null; true"])
            there = set(out.split())
            taken += [f"{name} on {s.name}" for name in ours
                      if name in there or any(t.startswith(f"{name}-eth") for t in there)]
        if taken:
            raise BringupError(f"cluster server(s) already have a bridge or interface of: {', '.join(taken)}. "
                               "If an earlier testbed run left them, `run_experiment.py cleanup` removes them; "
                               "otherwise name the switches or hosts differently (template custom)")

    def check_engines(self, graph) -> None:
        """Refuse, before anything is made, a server whose cluster.python lacks the modules of the
        engine its hosts run (TensorFlow and tf_keras, or torch)."""
        used = sorted({s.name for s in map(self._elsewhere, (h.name for h in graph.hosts)) if s is not None})
        lacking = [f"{name}: {problem}, or set cluster.python to a python that has it" for name in used
                   if (problem := engine_problem(self.servers[name].run, self.servers[name].python, graph.engine))]
        if lacking:
            raise BringupError(f"engine {graph.engine} on cluster "
                               "server(s): " + "; ".join(lacking))

    def server(self, node_name: str) -> ConnectedServer:
        return self.servers[self.placement[node_name]]

    def close(self) -> None:
        for s in self.servers.values():
            if s.conn is not None:
                s.conn.close()

    # records ------------------------------------------------------------------------------------
    def record(self, server: ConnectedServer, **item) -> dict | None:
        """Write what is about to be made on a remote server into the registry (local: the caller's
        own registry kinds cover it)."""
        if server.local:
            return None
        record = {"machine": server.conn.record, "owner": identity(), **item}
        self.registry.add("remote", record)
        return record

    def forget(self, *records) -> None:
        self.registry.discard("remote", *[r for r in records if r])

    # fidelity guard -----------------------------------------------------------------------------
    def measure_tunnels(self) -> list[dict]:
        """iperf3 (raw TCP capacity, one direction, GUARD_SECONDS) and ping (RTT) between each pair of
        servers a link crosses, in their root namespaces: the underlay every tunnel of the pair rides."""
        pairs: dict[tuple[str, str], list] = {}
        for e in self.crossing:
            a, b = sorted((self.placement[e.a], self.placement[e.b]))
            pairs.setdefault((a, b), []).append(e)
        rows = []
        for (a, b), edges in pairs.items():
            client, server = self.servers[a], self.servers[b]
            self.progress(f"fidelity guard: measuring the tunnel {a} -> {b} (iperf3 {GUARD_SECONDS} s, ping)")
            capacity = self._iperf(client, server)
            status, out = client.run(["ping", "-c", "5", "-i", "0.2", "-q", server.ip], timeout=30)
            rtt, loss = parse_ping(out)
            rows.append(dict(tunnel=f"{a}-{b}", server_a=a, server_b=b, address_a=client.ip, address_b=server.ip,
                             links=";".join(f"{e.a}-{e.b}" for e in edges), capacity_bps=round(capacity),
                             rtt_ms=rtt, loss_pct=loss))
        self.tunnel_rows = rows
        return rows

    def _iperf(self, client: ConnectedServer, server: ConnectedServer) -> float:
        result: dict = {}

        def serve():
            result["server"] = server.run(["iperf3", "-s", "-1", "-p", str(GUARD_PORT)], timeout=GUARD_SECONDS + 40)
        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        for _ in range(100):
            if f":{GUARD_PORT}" in server.run(["ss", "-Hltn", f"sport = :{GUARD_PORT}"], timeout=10)[1]:
                break
            time.sleep(0.1)
        status, out = client.run(["iperf3", "-c", server.ip, "-p", str(GUARD_PORT), "-t", str(GUARD_SECONDS), "-J"],
                                 timeout=GUARD_SECONDS + 30)
        thread.join(GUARD_SECONDS + 45)
        try:
            return parse_iperf3(out)
        except (ValueError, KeyError, RuntimeError) as err:
            raise BringupError(f"fidelity guard: iperf3 from {client.name} to {server.name} ({server.ip}) failed: "
                               f"{str(err) or out.strip()[-200:]}") from None

    def guard(self) -> None:
        """Refuse a link shaped above max_link_share of the measured capacity of the tunnel it crosses."""
        share, by_pair = self.conf.max_link_share, {(r["server_a"], r["server_b"]): r for r in self.tunnel_rows}
        refused = []
        for e in self.crossing:
            row = by_pair[tuple(sorted((self.placement[e.a], self.placement[e.b])))]
            limit = share * row["capacity_bps"]
            if e.params.bw is None or e.params.bw > limit:
                asked = format_bandwidth(e.params.bw) if e.params.bw else "unshaped (as fast as it goes)"
                refused.append(f"link {e.a}-{e.b} is {asked}, above {share:.0%} of the tunnel {row['tunnel']} "
                               f"it crosses, which measured {rate(row['capacity_bps'])} "
                               f"(RTT {row['rtt_ms']:.2f} ms)")
        if refused:
            raise BringupError("fidelity guard: " + "; ".join(refused) + ". Shape the link lower (bw), place both "
                               "of its ends on one server (cluster.placement), or raise cluster.max_link_share "
                               "to accept the tunnel as the limit")

    # tunnels ------------------------------------------------------------------------------------
    def make_tunnel(self, node1, name1, mac1, node2, name2, mac2) -> dict:
        """A VXLAN tunnel between two nodes on different servers (ClusterLink asks); returns what
        `forget_tunnel` needs."""
        vni = next(self._vni)
        records = []
        for node, name, mac, peer in ((node1, name1, mac1, node2), (node2, name2, mac2, node1)):
            here, there = self._server_of(node), self._server_of(peer)
            records.append(self.record(here, link=name))
            if here.local:
                self.registry.add("interfaces", name)
            status, out = here.run(vxlan_script(name, vni, there.ip, mac, node.pid if node.inNamespace else None))
            if status != 0:
                raise BringupError(f"tunnel {name1} <-> {name2}: could not make {name} on {here.name}: {out.strip()} "
                                   "(`run_experiment.py cleanup` removes what a crashed run left)")
            mtu = int(out.split()[0])
            self.mtu = mtu if self.mtu is None else min(self.mtu, mtu)
        return {"records": records, "vni": vni}

    def forget_tunnel(self, tunnel: dict) -> None:
        self.forget(*tunnel["records"])

    def _server_of(self, mn_node) -> ConnectedServer:
        name = server_of(mn_node)
        if name == "localhost":
            return next(s for s in self.servers.values() if s.local)
        return self.servers[name]


def rate(bps: float) -> str:
    """A measured rate for people: 11.6 Gbit/s, 940.2 Mbit/s."""
    return f"{bps / 1e9:.1f} Gbit/s" if bps >= 1e9 else f"{bps / 1e6:.1f} Mbit/s"


def _ipv4(address: str) -> str:
    try:
        return str(ipaddress.IPv4Address(address))
    except ValueError:
        return socket.gethostbyname(address)


def _local_ip(toward: str) -> str:
    """This machine's source address toward a server (the tunnels' local end)."""
    status, out = run_local(["ip", "-j", "route", "get", toward])
    try:
        return json.loads(out)[0]["prefsrc"]
    except (ValueError, KeyError, IndexError):
        raise BringupError(f"no route from this machine to {toward}: {out.strip()}") from None
