"""The remote kind: a real machine reached over SSH (testbed.nodes.ssh_connection), on a network of its own.

One connection per machine carries everything (nodes/ssh_node.py): the workload code, copied by SFTP
into the workdir (only what changed), every process as an exec channel whose output streams back
into local files, and a sampler of the machine's /proc for the monitor. The machine, the token, the
process groups and any shaping are recorded in the registry before they exist, so teardown ends them
all and `cleanup` can reconnect after a crash (`remove_records`). Nothing from the YAML reaches a
remote shell unquoted: command lines are built from argv lists with shlex.

Its host setting is `remote:` (RemoteConf); the experiment's `ssh:` section says how to log in."""
from __future__ import annotations

import json
import socket
import subprocess
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from testbed.nodes.base import NodeError
from testbed.nodes.engines import engine_problem
from testbed.nodes.ssh_node import AGENT, RECORDS, SshNode, log, undo
from testbed.nodes.ssh_connection import Connection, Lines, Target, sync_code
from testbed.owner import OVS_OWNER_KEY, OWNER_VAR

TOOLS = {"iperf3": "iperf3", "ping": "iputils-ping", "ss": "iproute2", "setsid": "util-linux"}


# ---- what a machine lacks -----------------------------------------------------------------------



def machine_problems(run, remote, engine: str = "tensorflow") -> list[tuple[str, str]]:
    """(remote.<field>, what is missing) on one machine, asked through run(argv) -> (status, output)."""
    found = []
    status, out = run([remote.python, "-c", "import sys; print(sys.version_info >= (3, 9))"])
    if status != 0 or out.strip() != "True":
        found.append(("python", f"python {remote.python} does not run there (Python 3.9+ needed): {_last(out)}"))
    elif problem := engine_problem(run, remote.python, engine):
        found.append(("python", problem))
    tools = [*TOOLS, *(["tc"] if remote.shape else [])]
    _, out = run(["sh", "-c", 'for t in "$@"; do command -v "$t" >/dev/null || echo "$t"; done', "sh", *tools])
    missing = out.split()
    if missing:
        found.append(("address", f"missing there: {', '.join(missing)} (Debian/Ubuntu packages: "
                      f"{', '.join(sorted({TOOLS.get(t, 'iproute2') for t in missing}))})"))
    if run(["test", "-d", f"/sys/class/net/{remote.interface}"])[0] != 0:
        found.append(("interface", f"no interface {remote.interface} there (`ip link` lists them)"))
    if remote.shape:
        status, out = run(["id", "-u"])
        if status != 0 or out.strip() != "0":
            found.append(("shape", "shape: true needs user root there (tc changes the interface's queueing); "
                          f"`id -u` said: {_last(out)}"))
    return found


def _last(out: str) -> str:
    lines = [ln.strip() for ln in out.splitlines() if ln.strip()]
    return lines[-1][:200] if lines else "no output"


@lru_cache(maxsize=None)
def _probe(host, engine: str) -> tuple[tuple[str, str], ...]:
    """(key path, message) per problem of one remote host running `engine`; asked once per host and process."""
    target = Target.of(host)
    try:
        conn = Connection(target)
    except NodeError as err:
        return ((f"{host.key}.remote.address", f"{host.name}: {err}"),)
    try:
        found = machine_problems(lambda argv: conn.exec(argv, timeout=300), host.setting("remote"), engine)   # (imports are slow)
    except NodeError as err:
        found = [("address", str(err))]
    finally:
        conn.close()
    return tuple((f"{host.key}.remote.{field}", f"{host.name} ({target.label}): {message}") for field, message in found)


# ---- the node -----------------------------------------------------------------------------------

class RemoteNode(SshNode):
    kind = "remote"
    records = RECORDS        # what runs on other machines; the cluster's servers record theirs here too

    def __init__(self, host, registry):
        super().__init__(host, registry, Target.of(host))
        self.remote = host.setting("remote")

    @classmethod
    def problems(cls, hosts, progress=lambda msg: None, engine: str = "tensorflow"):
        """Log in to every machine at once (host key checked) and ask what it lacks."""
        progress(f"checking {len(hosts)} remote machine(s): host keys, python, TensorFlow, iperf3")
        with ThreadPoolExecutor(max_workers=8) as pool:
            return [p for found in pool.map(_probe, hosts, [engine] * len(hosts)) for p in found]

    def prepare(self, progress=lambda msg: None) -> None:
        """Connect, record the run on the machine, copy the workload code, start the sampler."""
        self._connect()
        if not self.conn.key_facts["host_key_in_known_hosts"]:
            log.warning("%s (%s): accepted the unknown host key %s (ssh.accept_unknown_host_keys); recorded "
                        "in topology.json", self.name, self.target.label, self.conn.key_facts["host_key_sha256"])
        with self.conn.sftp() as sftp:
            self.workdir, copied = sync_code(sftp, self.remote.workdir or "dltestbed")
        progress(f"{self.name}: {self.target.label}, code in {self.workdir} ({copied} file(s) copied)")
        self._start_sampler(self.remote.interface)

    def mininet_host(self):
        return None                 # a real machine: its network exists already

    def shape(self, params, qdisc: str, peers: list[str]) -> None:
        """With remote.shape: the link's limits on the machine's interface, for its traffic to the run's
        other machines only (never SSH), by tc's HTB. A guard there removes the shaping if this side
        dies (its SSH session ends); teardown and `cleanup` remove it otherwise."""
        from testbed.shaping import selective_tc_commands, tc_commands
        intf = self.remote.interface
        if not self.remote.shape or not tc_commands(intf, params):
            return
        commands = selective_tc_commands(intf, params, [_ip_of(p, self.name) for p in peers], self.target.port)
        self._record(tc=intf)
        for args in commands:
            status, out = self.conn.exec(["tc", *args])
            if status != 0:
                raise NodeError(f"{self.name} ({self.target.label}): tc {' '.join(args)} failed: {_last(out)}")
        self.popen([self.python, "-c", AGENT, "guard", intf], stdout=Lines(lambda line: None),
                   stderr=subprocess.DEVNULL)

    @property
    def facts(self) -> dict:
        return {"machine": self.target.label, **self.conn.key_facts} if self.conn else {}

    @property
    def machine(self) -> str:
        return self.target.address          # a machine of its own: its cores are not shared with this one's

    @property
    def python(self) -> str:
        return self.remote.python

    @property
    def interface(self) -> str:
        return self.remote.interface

    @classmethod
    def remove_records(cls, records: list[dict]) -> tuple[list[str], list[dict]]:
        return remove_records(records)


def _ip_of(address: str, name: str) -> str:
    """An IPv4 address for tc's filters (a host name resolved here)."""
    try:
        return socket.gethostbyname(address)
    except OSError as err:
        raise NodeError(f"{name}: cannot resolve the peer {address} for shaping its traffic: {err}") from None


# ---- cleanup after a crash ----------------------------------------------------------------------

def remove_records(records: list[dict]) -> tuple[list[str], list[dict]]:
    """Reconnect to each recorded machine, end the run's processes there and remove its shaping;
    (what was done, the records of machines that did not answer)."""
    actions, left = [], []
    by_machine: dict[str, list[dict]] = {}
    for r in records:
        by_machine.setdefault(json.dumps(r["machine"], sort_keys=True), []).append(r)
    for group in by_machine.values():
        target = Target(**group[0]["machine"])
        try:
            conn = Connection(target)
        except NodeError as err:
            actions.append(f"{err}: kept for the next cleanup")
            left += group
            continue
        try:
            for r in group:
                actions += undo(conn, r) + _remove_cluster_record(conn, r, target.label)
        except NodeError as err:
            actions.append(f"{err}: kept for the next cleanup")
            left += group
        finally:
            conn.close()
    return actions, left


# The processes on a server whose environment holds DLTESTBED_OWNER=$1 (a run's Mininet shells there).
_KILL_OWNED = ('{ for e in /proc/[0-9]*/environ; do '
               f'if tr "\\0" "\\n" < "$e" | grep -qxF "{OWNER_VAR}=$1"; then '
               'p=${e#/proc/}; kill -9 "${p%/environ}" && found=1; fi; done; } 2>/dev/null; [ -n "$found" ]')


def _remove_cluster_record(conn, r: dict, where: str) -> list[str]:
    """What a cluster run made on a server (testbed.cluster): a Mininet shell (its namespace goes with
    it), a bridge, a link end in the root namespace. Shells and bridges are found by the run's
    identity (`owner`), never by name alone: a later run may have made its own of the same name."""
    done = []
    if "shell" in r and r.get("owner"):
        status, _ = conn.exec(["sh", "-c", _KILL_OWNED, "sh", r["owner"]])
        if status == 0:
            done.append(f"ended the Mininet shells of run {r['owner'].split('-')[0]} on {where}")
    if "bridge" in r:       # only a bridge that carries this run's tag, never a stranger's of that name
        owner = f"external_ids:{OVS_OWNER_KEY}={r['owner']}" if r.get("owner") else ""
        status, _ = conn.exec(["sh", "-c", 'ovs-vsctl --timeout=5 br-exists "$1" || exit 3; '
                               '[ -n "$(ovs-vsctl --timeout=5 --bare --columns=_uuid find Bridge name="$1" '
                               'external_ids:dltestbed=1 ${2:+"$2"})" ] || exit 4; '
                               'ovs-vsctl --timeout=5 --if-exists del-br "$1"; ip link del "$1" 2>/dev/null; true',
                               "sh", r["bridge"], owner])
        if status == 0:
            done.append(f"deleted OVS bridge {r['bridge']} on {where}")
        elif status == 4:
            done.append(f"left bridge {r['bridge']} on {where} alone: it is not this run's (no tag of it)")
    if "link" in r:
        status, _ = conn.exec(["sh", "-c", '[ -e "/sys/class/net/$1" ] && ip link del "$1"', "sh", r["link"]])
        if status == 0:
            done.append(f"deleted interface {r['link']} on {where}")
    return done
