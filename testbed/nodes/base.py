"""The node interface: everything the stages (checks, training, monitor, runner) may ask of a node.

No stage asks which kind a node is. The network calls the bring-up half (`problems`, `prepare`,
`mininet_host`, `attach`, `stop`); the stages call the use half (`popen`, `run`, `stage`,
`python`, `repo`, `env`, `usage`, `limits`)."""
from __future__ import annotations

import os
import subprocess
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, ClassVar

from testbed.nodes import cgroups
from testbed.owner import OWNER_VAR, identity

REPO = Path(__file__).resolve().parents[2]
# The directories every node's PATH holds, for kinds that do not share this machine's environment.
STANDARD_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class NodeError(RuntimeError):
    """A node could not be started, or did not answer in time."""


@dataclass(frozen=True)
class Usage:
    """Cumulative counters of one node at one moment."""

    cpu_s: float       # CPU seconds its processes used
    rss_bytes: int     # resident memory now
    tx_bytes: int      # bytes sent on its emulated interfaces (not loopback)
    rx_bytes: int
    clock_s: float | None = None   # when read, on the node's own clock, for counters read there and
                                   # passed on later (a remote sampler's line): their CPU % is over its time


class Node(ABC):
    """One host of the graph, of some kind. `name` and `address` are the graph's."""

    kind: ClassVar[str]
    records: ClassVar[str | None] = None   # the registry's list this kind records in (cleanup.State field)

    def __init__(self, host, registry):
        self.host = host               # graph.HostNode: name, ip, cpu, memory, kind, the kinds' settings
        self.name = host.name
        self.address = host.ip
        self._registry = registry      # cleanup.Registry: record before creating

    # bring-up ---------------------------------------------------------------------------------
    @classmethod
    def problems(cls, hosts, progress=lambda msg: None, engine: str = "tensorflow") -> list[tuple[str, str]]:
        """(key path, message) for what stops these hosts from starting here, their tasks running
        `engine`; before anything starts."""
        return []

    def prepare(self, progress=lambda msg: None) -> None:
        """Before the emulated network is built (e.g. start a container)."""

    @abstractmethod
    def mininet_host(self) -> tuple[type, dict] | None:
        """Mininet host class and its parameters for `addHost`; None for a node with a network of its
        own (a real machine), whose links the network then neither builds nor shapes."""

    def attach(self, mn_host) -> None:
        """After the network is built: the Mininet host that carries this node's interfaces."""
        self.mn_host = mn_host

    def stop(self) -> None:
        """After the network stopped: remove what `prepare` made."""

    def shape(self, params, qdisc: str, peers: list[str]) -> None:
        """Shape this node's end of a link the emulated network does not build (a real machine's own
        NIC: `mininet_host` is None), for its traffic to `peers` (the other such machines' addresses);
        the network shapes the links it builds itself."""

    @property
    def facts(self) -> dict:
        """What the node learned while starting that belongs with the results (e.g. a host key)."""
        return {}

    # use --------------------------------------------------------------------------------------
    @property
    def machine(self) -> str:
        """Which machine the node runs on: nodes of one machine share its cores."""
        return "local"

    @property
    def machine_cores(self) -> int:
        return os.cpu_count() or 1

    @property
    def interface(self) -> str | None:
        """The interface that holds the node's emulated address (its Mininet host's first one)."""
        mn_host = getattr(self, "mn_host", None)
        return mn_host.defaultIntf().name if mn_host is not None else None

    def cpu_counters(self) -> tuple[dict, float | None]:
        """Its cgroup's CPU counters and CPU wait, for the fidelity verdict ({} and None: none)."""
        return cgroups.cpu_counters(getattr(self, "cgroup_dirs", ()) or ())

    @property
    def limits(self) -> dict:
        """CPU (fraction of the whole machine) and memory (bytes) limits, None = unlimited; cores: the
        cores of the machine the node emulates (None: no budget)."""
        return {"cpu": self.host.cpu, "memory": self.host.memory, "cores": self.host.cores}

    @property
    @abstractmethod
    def python(self) -> str:
        """The interpreter in the node that imports TensorFlow."""

    @property
    def repo(self) -> str:
        """Where the project's code (workloads/, testbed/) is in the node: here, the same path."""
        return str(REPO)

    def env(self, extra: dict[str, str]) -> dict[str, str]:
        """Environment for a process in the node."""
        return {"PATH": STANDARD_PATH, "HOME": "/root", "LANG": "C.UTF-8", **extra}

    def stage(self, path: Path) -> str:
        """Make a local file readable in the node; its path there."""
        return str(path)

    def stage_files(self, folder: Path, files: list[Path]) -> str:
        """Make `files` (under local `folder`) readable in the node, at the same places under one folder
        there, and nothing else of `folder`; that folder's path there."""
        return str(folder)

    @abstractmethod
    def _command(self, argv: list[str], cwd: str) -> list[str]:
        """The local command line that runs argv inside the node, in directory cwd."""

    def popen(self, argv: list[str], cwd: str = "/", **kwargs) -> subprocess.Popen:
        """Start argv in the node (a list: nothing passes through a shell), in a process group of its
        own that terminate()/kill() signal as a whole; recorded for cleanup, and carrying the run's
        identity in its environment (OWNER_VAR), so `cleanup` finds it without a command line."""
        kwargs["env"] = {**(kwargs.get("env") or os.environ), OWNER_VAR: identity()}
        proc = GroupPopen(self._command([str(a) for a in argv], cwd), start_new_session=True, **kwargs)
        self._registry.add("pids", identity(proc.pid))
        return proc

    def exec_prefix(self) -> list[str]:
        """A local command line that, followed by argv, runs argv in the node (for `exec`)."""
        return self._command([], "/")

    def run(self, argv: list[str], timeout: float = 30.0, check: bool = False) -> str:
        """Run argv in the node to completion; stdout and stderr together. NodeError after `timeout`,
        and with `check` when argv exits non-zero."""
        proc = self.popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          env=self.env({}), stdin=subprocess.DEVNULL)
        try:
            out, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            raise NodeError(f"{self.name}: {' '.join(argv[:3])} did not finish within {timeout:g} s") from None
        if check and proc.returncode != 0:
            raise NodeError(f"{self.name}: {' '.join(argv)} failed (exit {proc.returncode}): {out.strip()[-300:]}")
        return out

    def set_cpu(self, fraction: float | None) -> None:
        """Change the CPU limit while the node runs (a fraction of the whole machine; None: no limit),
        for its processes now and later."""
        raise NotImplementedError(f"{self.kind} nodes cannot change their CPU limit while running")

    def shared_dir(self, path: Path) -> str:
        """A local folder the node's processes can write and every node of the run reads the same
        (tf_keras' backups); its path there."""
        raise NotImplementedError(f"{self.kind} nodes do not share a writable folder with this machine")

    @classmethod
    @abstractmethod
    def usage(cls, nodes: list["Node"]) -> dict[str, Usage]:
        """Counters of several nodes of this kind at once (one pass over /proc, not one per node)."""

    # cleanup ----------------------------------------------------------------------------------
    @classmethod
    def remove_records(cls, records: list) -> tuple[list[str], list]:
        """Remove what a run recorded in this kind's `records` list (teardown, or `cleanup` after a
        crash): (what was done, the records to keep for the next cleanup)."""
        return [], []

    @classmethod
    def destroy_leftovers(cls, run_alive: Callable[[str], bool]) -> list[str]:
        """`cleanup`: what runs that are over left unrecorded; run_alive(owner) says which are not, the
        owner being the run's identity (testbed.owner.identity(), "PID-START")."""
        return []


class GroupPopen(subprocess.Popen):
    """A process that leads its own session: signals go to its whole process group (what a node
    process forks, e.g. nsenter entering a PID namespace, goes with it)."""

    def send_signal(self, sig) -> None:
        self.poll()
        if self.returncode is None:
            try:
                os.killpg(self.pid, sig)
            except ProcessLookupError:
                pass


def netns_counters(pid: int) -> tuple[int, int]:
    """(tx_bytes, rx_bytes) of the network namespace of `pid`, summed over its interfaces but loopback."""
    tx = rx = 0
    with open(f"/proc/{pid}/net/dev") as fh:
        for line in fh.readlines()[2:]:
            name, data = line.split(":", 1)
            if name.strip() == "lo":
                continue
            fields = data.split()
            rx += int(fields[0])
            tx += int(fields[8])
    return tx, rx


def in_namespaces(enter: list[str], argv: list[str], cwd: str, cgroup_dirs=()) -> list[str]:
    """Command line that runs argv after `enter` (an nsenter prefix), in cwd, having joined
    `cgroup_dirs` first (so a limit applies to it and to its children). Plain argv throughout:
    the cgroup step passes its paths as arguments to a fixed script."""
    return join_cgroups(cgroup_dirs, [*enter, "env", "-C", cwd, *argv])


def join_cgroups(cgroup_dirs, command: list[str]) -> list[str]:
    """Command line that joins `cgroup_dirs` (none: as it is), then runs `command`."""
    if not cgroup_dirs:
        return command
    join = 'while [ "$1" != -- ]; do echo $$ > "$1/cgroup.procs" || exit 125; shift; done; shift; exec "$@"'
    return ["sh", "-c", join, "sh", *(str(d) for d in cgroup_dirs), "--", *command]


def local_env(extra: dict[str, str]) -> dict[str, str]:
    """This machine's environment plus `extra` (for nodes that share its file system)."""
    return dict(os.environ, **extra)
