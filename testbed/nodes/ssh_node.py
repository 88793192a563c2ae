"""What the remote kind and cluster nodes share: a node driven over one SSH connection (testbed.nodes.ssh_connection).

Every process is an exec channel in a process group of its own that carries the node's token in its
environment (DLTESTBED_RUN); the token, the groups and anything else the node makes there are
recorded in the registry ("remote") before they exist, so `stop` ends them all and `cleanup` can
reconnect after a crash. A sampler of the machine's /proc feeds the monitor."""
from __future__ import annotations

import json
import logging
import os
import posixpath
import secrets
import subprocess
import sys
from pathlib import Path

from testbed.nodes.base import STANDARD_PATH, Node, NodeError, Usage
from testbed.nodes.ssh_connection import Connection, Lines, RemotePopen, Target, copy_tree

log = logging.getLogger("testbed.remote")

TOKEN_VAR = "DLTESTBED_RUN"
AGENT = (Path(__file__).with_name("remote_agent.py")).read_text()
SAMPLE_INTERVAL = 0.25          # seconds between the sampler's lines; the monitor takes the latest
RECORDS = "remote"              # the registry's list of what runs on other machines


def undo(conn, r: dict) -> list[str]:
    """Remove what one record of a run says it made on the machine (`stop`, and `cleanup` after a
    crash): its processes (the token), shaping, staged files, cgroups; what was done."""
    done, where = [], conn.target.label
    if "token" in r:
        _, out = conn.exec([r["python"], "-c", AGENT, "end", r["token"]])
        done.append(f"ended {out.strip() or '?'} process(es) of run {r['token']} on {where}")
    if "tc" in r:
        conn.exec(["tc", "qdisc", "del", "dev", r["tc"], "root"])
        done.append(f"removed shaping from {r['tc']} on {where}")
    if "stage" in r:        # what the run staged: job files and the user's script
        conn.exec(["rm", "-rf", "--", r["stage"]])
        done.append(f"removed the files staged in {r['stage']} on {where}")
    if "cgroup" in r:
        _, out = conn.exec([r["python"], "-c", AGENT, "uncgroup", *r["cgroup"]])
        done.append(f"removed {out.strip() or '?'} cgroup(s) of {r['cgroup'][0].rsplit('/', 1)[-1]} on {where}")
    return done


class SshNode(Node):
    """A node whose processes run on another machine, reached at `target`."""

    def __init__(self, host, registry, target: Target):
        super().__init__(host, registry)
        self.target = target
        self.token = f"{os.getpid()}-{host.name}-{secrets.token_hex(4)}"
        self.conn: Connection | None = None        # the SSH connection, from prepare() on
        self.workdir: str | None = None             # the copy of the workload code there
        self._cores = 1
        self._records: list[dict] = []
        self._latest: Usage | None = None

    def _connect(self) -> None:
        """Log in (host key checked), record the run's token there and count the machine's cores."""
        self.conn = Connection(self.target)
        self._record(token=self.token, python=self.python)
        cores = self.conn.exec(["getconf", "_NPROCESSORS_ONLN"])[1].strip()
        self._cores = int(cores) if cores.isdigit() else 1

    def _start_sampler(self, interface: str) -> None:
        """The agent's /proc sampler there, for `usage` (interface: whose counters; agent's -netns: all)."""
        self.popen([self.python, "-c", AGENT, "sample", self.token, interface, f"{SAMPLE_INTERVAL:g}"],
                   stdout=Lines(self._sampled), stderr=subprocess.DEVNULL)

    def _record(self, **item) -> dict:
        record = {"machine": self.conn.record, **item}
        self._records.append(record)
        self._registry.add(RECORDS, record)
        return record

    def _sampled(self, line: bytes) -> None:
        try:
            self._latest = Usage(**json.loads(line))
        except (ValueError, TypeError):
            pass

    def stop(self) -> None:
        """End every process of the run there and remove the shaping; say so if the machine is gone."""
        if self.conn is None:
            return
        try:
            for r in self._records:
                undo(self.conn, r)
            self._registry.discard(RECORDS, *self._records)
        except NodeError as err:
            log.warning("%s: %s; its processes may still run there: `run_experiment.py cleanup` retries",
                        self.name, err)
        finally:
            self.conn.close()

    @property
    def machine_cores(self) -> int:
        return self._cores

    @property
    def repo(self) -> str:
        return self.workdir

    def env(self, extra):
        """A plain environment; once the run has staged files there, TMPDIR in its stage folder, so the
        tasks' temporary files go with it (stop, and `cleanup` after a crash)."""
        root = self._stage_root()
        tmp = {"TMPDIR": root} if any(r.get("stage") == root for r in self._records) else {}
        return {"PATH": STANDARD_PATH, "LANG": "C.UTF-8", **tmp, **extra}

    def _stage_root(self) -> str:
        return posixpath.join(self.workdir, "stage", self.token)

    def stage(self, path: Path) -> str:
        """Copy a local file (e.g. job.json) into the workdir's stage/ (removed at stop); its path there."""
        path = Path(path)
        return posixpath.join(self.stage_files(path.parent, [path]), path.name)

    def stage_files(self, folder: Path, files: list[Path]) -> str:
        """Below workdir/stage/<token>/, which the node removes at stop (and `cleanup` after a crash)."""
        root = self._stage_root()
        if not any(r.get("stage") == root for r in self._records):
            self._record(stage=root)
        there = posixpath.join(root, Path(folder).name)
        with self.conn.sftp() as sftp:
            copy_tree(sftp, Path(folder), there, [Path(f) for f in files])
        return there

    def exec_prefix(self) -> list[str]:
        """ssh(1) to the machine; the argv that follows the prefix is quoted word by word for its shell
        (ssh itself would join the words with blanks)."""
        t = self.target
        ssh = ["ssh", "-p", str(t.port), "-o", f"UserKnownHostsFile={t.known_hosts}", "-o", "BatchMode=yes",
               *(["-i", t.key_file] if t.key_file else []), f"{t.user}@{t.address}"]
        quote = ("import os, shlex, sys; n = int(sys.argv[1]); "
                 "os.execvp('ssh', sys.argv[2:2 + n] + ['--', shlex.join(sys.argv[2 + n:])])")
        return [sys.executable, "-c", quote, str(len(ssh)), *ssh]

    def _command(self, argv, cwd):
        return [*self.exec_prefix(), "sh", "-c", 'cd "$1" && shift && exec "$@"', "sh", cwd, *argv]

    def popen(self, argv, cwd: str = "/", stdin=None, env=None, **kwargs) -> RemotePopen:
        """Start argv there in a process group of its own, with the node's token; recorded for cleanup."""
        if stdin not in (None, subprocess.DEVNULL):
            raise ValueError("remote processes read no stdin")
        env = {**(env if env is not None else self.env({})), TOKEN_VAR: self.token}
        holder = {}
        proc = RemotePopen(self.conn, [str(a) for a in argv], cwd, env,
                           on_exit=lambda: self._registry.discard(RECORDS, holder.get("record")), **kwargs)
        if proc.returncode is None and proc.pid is not None:
            holder["record"] = self._record(pgid=proc.pid)
        return proc

    @classmethod
    def usage(cls, nodes) -> dict[str, Usage]:
        """The latest line of each machine's sampler."""
        return {n.name: n._latest for n in nodes if n._latest is not None}
