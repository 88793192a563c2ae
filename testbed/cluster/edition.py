"""Mininet's cluster edition (mininet.examples.cluster) made to run here: its RemoteHost and
RemoteOVSSwitch with our own ssh command line (our key, our known_hosts, host keys checked, no sudo),
and a link class whose cross-server links are VXLAN tunnels instead of its GRE (no ip_gre in this
kernel) or SSH tunnels (TCP over TCP through one ssh process per link; measured in docs/benchmarks.md,
"Between two local cluster servers").

A node knows its server by `server` (a name) and `serverIP`; a node without them is on this machine."""
from __future__ import annotations

import os
import signal
import subprocess

from mininet.examples.cluster import RemoteHost, RemoteLink, RemoteOVSSwitch
from mininet.link import Link
from mininet.node import Node

from testbed.net.switches import bridge_tags
from testbed.owner import OWNER_VAR, identity

VXLAN_PORT = 4789


def ssh_command(server, known_hosts: str, tty: bool = True) -> list[str]:
    """ssh(1) to a server: key login only, host key checked against known_hosts (never accepted)."""
    return ["ssh", "-q", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes",
            "-o", f"UserKnownHostsFile={known_hosts}", "-o", "ServerAliveInterval=15",
            "-p", str(server.port), *(["-i", server.key_file] if server.key_file else []),
            *(["-tt"] if tty else []), f"{server.user}@{server.address}"]


class _Ours:
    """RemoteMixin's ssh without `sudo -E -u user` here and `sudo -E` there (root logs in as root)."""

    def __init__(self, name, ssh=None, **kwargs):
        self._ssh = ssh
        super().__init__(name, **kwargs)

    def startShell(self, *args, **kwargs):
        if self.isRemote:
            self.sshcmd = list(self._ssh)
        super().startShell(*args, **kwargs)

    def _popen(self, cmd, sudo=True, tt=True, **params):
        if isinstance(cmd, str):
            cmd = cmd.split()
        if self.isRemote:       # the run's identity in the environment: cleanup there finds the shell by it
            ssh = list(self.sshcmd)
            if not tt and "-tt" in ssh:
                ssh.remove("-tt")
            cmd = ssh + ["env", f"{OWNER_VAR}={identity()}"] + list(cmd)
        params.update(preexec_fn=_own_group_hup_default)
        return Node._popen(self, cmd, **params)


def _own_group_hup_default() -> None:
    """A process group of its own (Ctrl-C here is not for it), and SIGHUP back to its default:
    Mininet ends a node by SIGHUP to its shell, and a run started under nohup would hand ssh an
    ignored SIGHUP (its teardown then waited forever on a shell that never ended)."""
    os.setpgrp()
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


class ClusterHost(_Ours, RemoteHost):
    """A Mininet host in a network namespace of its server: a shell there, reached by ssh -tt."""


class ClusterBridge(_Ours, RemoteOVSSwitch):
    """An Open vSwitch bridge on its server, standalone (no controller), userspace datapath, tagged."""

    def __init__(self, name, **kwargs):
        kwargs.update(failMode="standalone", datapath="user")
        super().__init__(name, **kwargs)

    @classmethod
    def setup(cls):
        """Nothing here: Mininet's own check asks this machine's Open vSwitch, which a bridge on a server
        does not use (each server's was checked by `cluster up`, and answers for its bridges)."""

    def start(self, controllers):
        super().start([])

    def bridgeOpts(self):
        return f"{super().bridgeOpts()} {bridge_tags()}"    # tagged where it is made: `cleanup` finds it


def server_of(node) -> str:
    return getattr(node, "server", None) or "localhost"


class ClusterLink(RemoteLink):
    """A veth pair when both ends are on one server, else a VXLAN tunnel: a vxlan device in each
    server's root namespace (where its UDP socket stays), moved into the node's namespace when the
    node is a host. `tunnels` (testbed.cluster.cluster_site.ClusterSite) runs the commands and records them."""

    def __init__(self, node1, node2, tunnels=None, **kwargs):
        self._tunnels = tunnels
        super().__init__(node1, node2, **kwargs)

    def makeIntfPair(self, intfname1, intfname2, addr1=None, addr2=None, node1=None, node2=None,
                     deleteIntfs=True):
        node1 = self.node1 if node1 is None else node1
        node2 = self.node2 if node2 is None else node2
        if server_of(node1) == server_of(node2):
            return Link.makeIntfPair(intfname1, intfname2, addr1, addr2, node1, node2, deleteIntfs=deleteIntfs)
        self.tunnel = self._tunnels.make_tunnel(node1, intfname1, addr1, node2, intfname2, addr2)
        return self.tunnel

    def stop(self):
        """The vxlan devices go with `ip link del` on each side (a host's with its namespace)."""
        if self.tunnel:
            for intf in (self.intf1, self.intf2):
                intf.delete()
            self._tunnels.forget_tunnel(self.tunnel)
            self.tunnel = None
        else:
            Link.stop(self)


def vxlan_script(name: str, vni: int, remote_ip: str, mac: str | None, netns_pid: int | None) -> list[str]:
    """argv (sh -c) that creates vxlan device `name` toward remote_ip in the root namespace, on the
    interface that routes there (so its MTU is that interface's less the VXLAN overhead), with GRO off
    (the userspace switch reads one frame at a time: a GRO-merged 64 KB packet is lost) and TX
    checksum offload off (as on every userspace-datapath link), sets its MAC, moves it into the namespace of netns_pid (a host) and prints its MTU."""
    script = ('set -e; dev=$(ip -o route get "$3" | sed -n "s/.* dev \\([^ ]*\\).*/\\1/p"); '
              'ip link add "$1" type vxlan id "$2" remote "$3" dstport "$4" dev "$dev"; '
              'ethtool -K "$1" gro off tx off >/dev/null 2>&1 || true; '
              'if [ -n "$5" ]; then ip link set "$1" address "$5"; fi; '
              'cat "/sys/class/net/$1/mtu"; '
              'if [ -n "$6" ]; then ip link set "$1" netns "$6"; fi')
    return ["sh", "-c", script, "sh", name, str(vni), remote_ip, str(VXLAN_PORT), mac or "",
            str(netns_pid) if netns_pid else ""]


def run_local(argv: list[str], timeout: float = 30) -> tuple[int, str]:
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    return proc.returncode, proc.stdout + proc.stderr

