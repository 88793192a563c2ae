"""The netns kind: a Mininet host, a shell in its own network namespace of this machine, sharing
its file system, Python and TensorFlow. CPU and memory limits come from the testbed's cgroups."""
from __future__ import annotations

import os
import sys

import psutil

from testbed.nodes import cgroups
from testbed.nodes.base import Node, Usage, in_namespaces, local_env, netns_counters


class NetnsNode(Node):
    kind = "netns"

    def __init__(self, host, registry):
        super().__init__(host, registry)
        self.cgroup_dirs = []

    def mininet_host(self):
        from mininet.node import Host
        return Host, {}

    def attach(self, mn_host) -> None:
        super().attach(mn_host)
        self.anchor_pid = mn_host.pid
        h = self.host
        if h.cpu is not None or h.memory is not None or h.cpus is not None:
            self._registry.add("cgroup_dirs", *map(str, cgroups.limit_dirs(self.name, h.cpu, h.memory, cpus=h.cpus)))
            self.cgroup_dirs = cgroups.apply_limits(self.name, h.cpu, h.memory, cpus=h.cpus)

    def set_cpu(self, fraction):
        """Rewrite the host's CPU quota; a host started without one gets its cgroup now, with every
        process of its namespace moved in (and later ones joining it)."""
        dirs = cgroups.limit_dirs(self.name, fraction or 1.0, None)
        self._registry.add("cgroup_dirs", *map(str, dirs))
        cgroups.set_cpu(self.name, fraction)
        new = [d for d in dirs if d not in self.cgroup_dirs]
        if new:
            inode = _netns_inode(self.anchor_pid)
            pids = [p.pid for p in psutil.process_iter() if _same_netns(p.pid, inode)]
            for where in new:
                cgroups.join(where, pids)
            self.cgroup_dirs = [*self.cgroup_dirs, *new]

    def shared_dir(self, path):
        return str(path)           # this machine's file system

    @property
    def python(self) -> str:
        return sys.executable      # the venv's interpreter (not resolved: that would lose the venv)

    def env(self, extra):
        return local_env(extra)

    def _command(self, argv, cwd):
        enter = ["nsenter", "--target", str(self.anchor_pid), "--net", "--"]
        return in_namespaces(enter, argv, cwd, self.cgroup_dirs)

    @classmethod
    def usage(cls, nodes) -> dict[str, Usage]:
        """Processes are grouped by network-namespace inode, in one pass over /proc."""
        wanted = {_netns_inode(n.anchor_pid): n for n in nodes}
        totals = {n.name: [0.0, 0] for n in nodes}
        for proc in psutil.process_iter():
            try:
                node = wanted.get(_netns_inode(proc.pid))
                if node is not None:
                    times = proc.cpu_times()
                    totals[node.name][0] += times.user + times.system
                    totals[node.name][1] += proc.memory_info().rss
            except (OSError, psutil.Error):
                continue
        out = {}
        for n in nodes:
            try:
                tx, rx = netns_counters(n.anchor_pid)
            except OSError:
                continue
            out[n.name] = Usage(totals[n.name][0], int(totals[n.name][1]), tx, rx)
        return out


def _netns_inode(pid: int) -> int:
    return os.stat(f"/proc/{pid}/ns/net").st_ino


def _same_netns(pid: int, inode: int) -> bool:
    try:
        return _netns_inode(pid) == inode
    except OSError:
        return False
