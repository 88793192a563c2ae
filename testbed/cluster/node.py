"""A netns host placed on another server of a cluster (testbed.cluster): Mininet's cluster edition
makes its namespace there (a ClusterHost shell reached by ssh); its processes are started as the remote
kind's are (nodes/ssh_node.py: exec channels, process groups, the run token, code synced by SFTP, a
/proc sampler) and enter the host's namespace with `nsenter --target <shell pid> --net`.

Not a kind of the spec: the network makes this node for a netns host that `cluster.placement` puts
on a server other than this machine."""
from __future__ import annotations

import json

from testbed.emulation import readers
from testbed.emulation.budgets import held_by
from testbed.nodes import cgroups
from testbed.nodes.base import NodeError, join_cgroups
from testbed.nodes.ssh_node import AGENT, SshNode
from testbed.nodes.ssh_connection import sync_code

NETNS = "-netns"     # remote_agent: count every interface of the namespace


class ClusterNode(SshNode):
    kind = "netns"   # what the spec asked for; `machine` says where it runs

    def __init__(self, host, registry, server):
        super().__init__(host, registry, server.target)
        self.server = server                 # testbed.cluster.cluster_site.ConnectedServer
        self.anchor_pid = None
        self.cgroup_dirs: list = []          # its cgroups on the server (paths there), once attached

    def prepare(self, progress=lambda msg: None) -> None:
        """Its own connection (channels per connection are few), the run's token recorded there, and
        the workload code synced once per server."""
        self._connect()
        with self.server.lock:
            if self.server.workdir is None:
                with self.conn.sftp() as sftp:
                    self.server.workdir, copied = sync_code(sftp, self.server.conf_workdir)
                progress(f"{self.server.name}: code in {self.server.workdir} ({copied} file(s) copied)")
        self.workdir = self.server.workdir

    def mininet_host(self):
        from testbed.cluster.edition import ClusterHost
        c = self.server.conf
        return ClusterHost, {"server": self.server.name, "serverIP": self.server.ip, "user": c.user,
                             "ssh": self.server.ssh()}

    def attach(self, mn_host) -> None:
        """The shell's pid on the server anchors the namespace; the sampler runs in it, outside the
        host's budget (started before the cgroups exist), and every later process inside it."""
        self.mn_host = mn_host
        self.anchor_pid = mn_host.pid
        self._start_sampler(NETNS)
        self._limit()

    def _limit(self) -> None:
        """The host's budget (cores / K real cores) and memory limit as cgroups on the server, named
        by the node's token (a later run's host of the same name gets its own), recorded first."""
        h = self.host
        if h.budget is None and h.memory is None:
            return
        v = 2 if self.conn.exec(["test", "-e", f"{cgroups.ROOT}/cgroup.controllers"])[0] == 0 else 1
        limit = held_by(h.budget, h.cpus) if h.budget is not None else None
        plan = cgroups.limit_plan(self.token, limit, h.memory, v)
        dirs = cgroups.limit_dirs(self.token, limit, h.memory, v=v)
        self._record(cgroup=[str(d) for d in dirs], python=self.python)
        status, out = self.conn.exec([self.python, "-c", AGENT, "cgroup", json.dumps(plan)])
        if status != 0:
            raise NodeError(f"{self.name}: cannot make its cgroups on {self.server.name}: {out.strip()[-300:]}")
        self.cgroup_dirs = dirs

    def cpu_counters(self) -> tuple[dict, float | None]:
        """The budget's counters, read on the server ({} and None without a budget)."""
        if not self.cgroup_dirs or self.host.budget is None:
            return {}, None
        status, out = self.conn.exec([self.python, "-c", AGENT, "cgread", *map(str, self.cgroup_dirs)])
        texts = json.loads(out) if status == 0 else {}
        return readers.cpu_stat_of(texts), readers.wait_of(texts)

    def _enter(self, argv: list[str]) -> list[str]:
        return join_cgroups(self.cgroup_dirs, ["nsenter", "--target", str(self.anchor_pid), "--net", "--", *argv])

    def popen(self, argv, cwd: str = "/", stdin=None, env=None, **kwargs):
        return super().popen(self._enter([str(a) for a in argv]), cwd=cwd, stdin=stdin, env=env, **kwargs)

    def exec_prefix(self) -> list[str]:
        """ssh to the server, then into the host's namespace (`exec`, and every command line)."""
        return [*super().exec_prefix(), *self._enter([])]

    def shape(self, params, qdisc: str, peers: list[str]) -> None:
        """The network shapes this node's interfaces through its Mininet host, as for any netns host."""

    @property
    def python(self) -> str:
        return self.server.python

    @property
    def facts(self) -> dict:
        return {"server": self.server.name, "machine": self.target.label, **(self.conn.key_facts if self.conn else {})}

    @property
    def machine(self) -> str:
        return self.server.name
