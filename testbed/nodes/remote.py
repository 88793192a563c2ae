"""The remote kind: a real machine reached over SSH (paramiko), on a network of its own.

One connection per machine carries everything: the workload code, copied by SFTP into the workdir
(only what changed), every process as an exec channel whose output streams back into local files,
and a sampler of the machine's /proc for the monitor. Each process runs in a process group of its
own and carries the node's token in its environment (DLTESTBED_RUN); the machine, the token, the
groups and any shaping are recorded in the registry before they exist, so teardown ends them all
and `cleanup` can reconnect after a crash. Nothing from the YAML reaches a remote shell unquoted:
command lines are built from argv lists with shlex."""
from __future__ import annotations

import getpass
import io
import json
import logging
import os
import posixpath
import re
import secrets
import shlex
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, replace
from functools import lru_cache
from pathlib import Path

from testbed.nodes.base import REPO, STANDARD_PATH, Node, NodeError, Usage

log = logging.getLogger("testbed.remote")
logging.getLogger("paramiko").setLevel(logging.CRITICAL)   # its tracebacks; connect_error says it in a sentence
TOKEN_VAR = "DLTESTBED_RUN"
AGENT = (Path(__file__).with_name("remote_agent.py")).read_text()
SAMPLE_INTERVAL = 0.25          # seconds between the sampler's lines; the monitor takes the latest
CODE = ("testbed/__init__.py", "testbed/callback.py")   # with workloads/: what tasks and users' scripts import
# Run argv (after "sh" cwd NAME=VALUE...) in cwd, in a new process group whose id is printed first;
# the line's exit status is the command's (128+N when signal N ended it). A background job of a
# non-interactive shell is no group leader, so setsid makes the group without forking.
LAUNCH = ('setsid sh -c \'echo "dltestbed-pgid $$"; cd "$1" || exit 125; shift; exec env "$@"\' sh "$@" '
          '</dev/null & wait "$!" 2>/dev/null')    # (dash would tell stderr 'Terminated')
PGID_LINE = re.compile(rb"^dltestbed-pgid (\d+)$")
TOOLS = {"iperf3": "iperf3", "ping": "iputils-ping", "ss": "iproute2", "setsid": "util-linux"}


def command_line(argv: list[str], cwd: str, env: dict[str, str]) -> str:
    """The line a machine's login shell runs for argv (see LAUNCH); every word quoted."""
    bad = [k for k in env if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", k)]
    if bad:
        raise ValueError(f"not an environment variable name: {bad[0]!r}")
    return shlex.join(["sh", "-c", LAUNCH, "sh", cwd, *(f"{k}={v}" for k, v in env.items()), *map(str, argv)])


def exit_code(status: int) -> int:
    """subprocess's returncode for a remote exit status: -N when signal N ended the command."""
    return -(status - 128) if 128 < status < 128 + 65 else status


# ---- connection ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Target:
    """Where and how to log in: a remote host's settings with the defaults filled in."""

    address: str
    port: int = 22
    user: str = "root"
    key_file: str | None = None
    known_hosts: str = os.path.expanduser("~/.ssh/known_hosts")
    accept_unknown: bool = False
    timeout: float = 10.0
    host_key: str | None = None      # "type base64": accept exactly this key (cleanup after a run)

    @classmethod
    def of(cls, host) -> "Target":
        from testbed.spec.models import SshConf
        r, ssh = host.remote, host.ssh or SshConf()
        return cls(r.address, r.port or 22, r.user or getpass.getuser(),
                   os.path.expanduser(r.key_file) if r.key_file else None, os.path.expanduser(ssh.known_hosts),
                   ssh.accept_unknown_host_keys, ssh.connect_timeout)

    @property
    def label(self) -> str:
        return f"{self.user}@{self.address}:{self.port}"

    @property
    def key_name(self) -> str:
        """The machine's name in known_hosts."""
        return self.address if self.port == 22 else f"[{self.address}]:{self.port}"


class UnknownHostKey(Exception):
    def __init__(self, key):
        super().__init__("unknown host key")
        self.key = key


def connect_error(target: Target, err: Exception) -> str:
    """A sentence saying why the machine refused us, or we it, and what to do."""
    import paramiko
    where = target.label
    if isinstance(err, UnknownHostKey):
        return (f"{where}: unknown host key {err.key.get_name()} {err.key.fingerprint} (not in "
                f"{target.known_hosts}). Check it on the machine (ssh-keygen -lf /etc/ssh/ssh_host_*_key.pub) and "
                f"add it (ssh-keyscan -p {target.port} {target.address} >> {target.known_hosts}), or set "
                "ssh.accept_unknown_host_keys: true to run anyway and record it in topology.json")
    if isinstance(err, paramiko.BadHostKeyException):
        return (f"{where}: the host key has CHANGED: {target.known_hosts} holds {err.expected_key.get_name()} "
                f"{err.expected_key.fingerprint}, the machine offers {err.key.get_name()} {err.key.fingerprint}. "
                "Refusing (this can be an attack). If the machine was reinstalled, remove the old key: "
                f"ssh-keygen -f {target.known_hosts} -R '{target.key_name}'")
    if isinstance(err, paramiko.PasswordRequiredException):
        return (f"{where}: key_file {target.key_file} is encrypted: load it into the ssh agent (ssh-add) "
                "and leave key_file unset")
    if isinstance(err, paramiko.AuthenticationException):
        used = f"key_file {target.key_file}" if target.key_file else "the ssh agent and ~/.ssh/id_* keys"
        return f"{where}: login refused with {used} (add the public key to ~/.ssh/authorized_keys there)"
    if isinstance(err, (OSError, EOFError, paramiko.ssh_exception.NoValidConnectionsError)):
        return f"{where} did not answer within {target.timeout:g} s: {err}"
    return f"{where}: SSH failed: {type(err).__name__}: {err}"


class Connection:
    """One authenticated SSH connection to a machine whose host key was checked."""

    def __init__(self, target: Target):
        import paramiko
        from paramiko.hostkeys import HostKeyEntry
        self.target = target
        self.client = paramiko.SSHClient()
        keys = self.client.get_host_keys()
        if target.host_key:
            entry = HostKeyEntry.from_line(f"{target.key_name} {target.host_key}")
            keys.add(target.key_name, entry.key.get_name(), entry.key)
        elif os.path.exists(target.known_hosts):
            keys.load(target.known_hosts)
        accepted = []

        class Policy(paramiko.MissingHostKeyPolicy):
            def missing_host_key(self, client, hostname, key):
                if not target.accept_unknown or target.host_key:
                    raise UnknownHostKey(key)
                accepted.append(key)

        self.client.set_missing_host_key_policy(Policy())
        t = target.timeout
        try:
            self.client.connect(target.address, target.port, target.user, key_filename=target.key_file,
                                allow_agent=target.key_file is None, look_for_keys=target.key_file is None,
                                timeout=t, banner_timeout=t, auth_timeout=t, channel_timeout=t)
        except Exception as err:  # noqa: BLE001 - every failure becomes one clear sentence
            self.client.close()
            raise NodeError(connect_error(target, err)) from None
        self.transport = self.client.get_transport()
        self.transport.set_keepalive(15)
        key = self.transport.get_remote_server_key()
        self.host_key = f"{key.get_name()} {key.get_base64()}"
        self.key_facts = {"host_key": self.host_key, "host_key_sha256": key.fingerprint,
                          "host_key_in_known_hosts": not accepted}

    @property
    def record(self) -> dict:
        """How `cleanup` reconnects: the settings and exactly the key seen now (no secrets)."""
        return asdict(replace(self.target, accept_unknown=False, host_key=self.host_key))

    def sftp(self):
        """An SFTP session, for a `with` block (sessions per connection are few: sshd's MaxSessions)."""
        return self.client.open_sftp()

    def exec(self, argv: list[str], timeout: float = 60.0) -> tuple[int, str]:
        """Run argv (quoted word by word) to completion: (exit status, stdout and stderr)."""
        try:
            chan = self.transport.open_session(timeout=timeout)
            chan.set_combine_stderr(True)
            chan.settimeout(timeout)
            chan.exec_command(shlex.join(map(str, argv)))
            out = b"".join(iter(lambda: chan.recv(65536), b""))
            return chan.recv_exit_status(), out.decode(errors="replace")
        except TimeoutError:
            raise NodeError(f"{self.target.label}: {argv[0]} said nothing for {timeout:g} s") from None
        except Exception as err:  # noqa: BLE001 - the connection is gone
            raise NodeError(f"{self.target.label} did not answer ({argv[0]}): {str(err) or type(err).__name__}") from None

    def close(self) -> None:
        self.client.close()


# ---- processes ----------------------------------------------------------------------------------

class Lines:
    """A stdout sink that hands each complete line (bytes) to `callback`."""

    def __init__(self, callback):
        self.callback, self._rest = callback, b""

    def write(self, data: bytes) -> None:
        *lines, self._rest = (self._rest + data).split(b"\n")
        for line in lines:
            self.callback(line)

    def close(self) -> None:
        pass


def _sink(target):
    """Where a stream goes: PIPE -> a buffer, a file -> our own handle on it, DEVNULL/None -> nowhere."""
    if target == subprocess.PIPE:
        return io.BytesIO()
    if hasattr(target, "fileno"):
        return open(os.dup(target.fileno()), "ab", buffering=0)   # the caller closes its own right away
    return target if hasattr(target, "write") else None


class RemotePopen:
    """A process on a machine with the subprocess.Popen methods the stages use. `pid` is its process
    group id there: signals go to the whole group."""

    def __init__(self, conn: Connection, argv, cwd, env, stdout=None, stderr=None, text=False, on_exit=None):
        self.args, self.returncode, self._text = argv, None, text
        self._conn, self._on_exit = conn, on_exit
        self._out, self._err = _sink(stdout), (None if stderr == subprocess.STDOUT else _sink(stderr))
        line = command_line(argv, cwd, env)
        try:
            self._chan = conn.transport.open_session(timeout=conn.target.timeout)
            self._chan.set_combine_stderr(stderr == subprocess.STDOUT)
            self._chan.exec_command(line)
        except Exception as err:  # noqa: BLE001 - e.g. the connection is gone
            raise NodeError(f"{conn.target.label}: could not start {argv[0]}: {str(err) or type(err).__name__}") from None
        self.pid = self._read_pgid()
        self._pumps = [threading.Thread(target=self._pump, args=(self._chan.recv, self._out), daemon=True)]
        if stderr != subprocess.STDOUT:
            self._pumps.append(threading.Thread(target=self._pump, args=(self._chan.recv_stderr, self._err), daemon=True))
        for t in self._pumps:
            t.start()

    def _read_pgid(self) -> int | None:
        """The group id the launcher prints first (lines before it, e.g. from a login script, pass on)."""
        buf = b""
        self._chan.settimeout(self._conn.target.timeout)
        try:
            while True:
                chunk = self._chan.recv(4096)
                buf += chunk
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    match = PGID_LINE.match(line)
                    if match:
                        return int(match.group(1))
                    self._write(self._out, line + b"\n")
                if not chunk:
                    return None
        except OSError:
            return None
        finally:
            self._chan.settimeout(None)
            self._write(self._out, buf)

    @staticmethod
    def _write(sink, data: bytes) -> None:
        if sink is not None and data:
            sink.write(data)

    def _pump(self, recv, sink) -> None:
        try:
            for chunk in iter(lambda: recv(65536), b""):
                self._write(sink, chunk)
        except OSError:
            pass    # the connection went away: poll() says so

    def poll(self) -> int | None:
        if self.returncode is None and self._chan.exit_status_ready() and not any(t.is_alive() for t in self._pumps):
            status = self._chan.recv_exit_status()
            if status < 0:      # closed without an exit status: the connection was lost
                self._write(self._err or self._out, f"\ndltestbed: lost the connection to "
                            f"{self._conn.target.label}\n".encode())
                status = 255
            self.returncode = exit_code(status)
            for sink in (self._out, self._err):
                if sink is not None and not isinstance(sink, io.BytesIO):
                    sink.close()
            if self._on_exit:
                self._on_exit()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(self.args, timeout)
            time.sleep(0.02)
        return self.returncode

    def communicate(self, input=None, timeout: float | None = None):
        self.wait(timeout)
        return tuple(self._text_of(s) if isinstance(s, io.BytesIO) else None for s in (self._out, self._err))

    def _text_of(self, buf: io.BytesIO):
        return buf.getvalue().decode(errors="replace") if self._text else buf.getvalue()

    def send_signal(self, sig) -> None:
        if self.poll() is not None or self.pid is None:
            return
        try:
            self._conn.exec(["kill", "-s", signal.Signals(sig).name[3:], "--", f"-{self.pid}"], timeout=30)
        except NodeError as err:    # no answer: drop the connection, so every process of it ends here
            log.warning("%s; closing the connection", err)
            self._conn.close()

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


# ---- what a machine lacks -----------------------------------------------------------------------

def machine_problems(run, remote) -> list[tuple[str, str]]:
    """(remote.<field>, what is missing) on one machine, asked through run(argv) -> (status, output)."""
    found = []
    status, out = run([remote.python, "-c", "import sys; print(sys.version_info >= (3, 9))"])
    if status != 0 or out.strip() != "True":
        found.append(("python", f"python {remote.python} does not run there (Python 3.9+ needed): {_last(out)}"))
    else:
        status, out = run([remote.python, "-c", "import tensorflow, tf_keras"])
        if status != 0:
            found.append(("python", f"{remote.python} cannot import tensorflow and tf_keras: {_last(out)} "
                          "(pip install tensorflow-cpu tf_keras into it)"))
    tools = [*TOOLS, *(["tc"] if remote.shape else [])]
    _, out = run(["sh", "-c", 'for t in "$@"; do command -v "$t" >/dev/null || echo "$t"; done', "sh", *tools])
    missing = out.split()
    if missing:
        found.append(("address", f"missing there: {', '.join(missing)} (Debian/Ubuntu packages: "
                      f"{', '.join(sorted({TOOLS.get(t, 'iproute2') for t in missing}))})"))
    if run(["test", "-d", f"/sys/class/net/{remote.interface}"])[0] != 0:
        found.append(("interface", f"no interface {remote.interface} there (`ip link` lists them)"))
    if remote.shape and run(["id", "-u"])[1].strip() != "0":
        found.append(("shape", "shape: true needs user root there (tc changes the interface's queueing)"))
    return found


def _last(out: str) -> str:
    lines = [ln.strip() for ln in out.splitlines() if ln.strip()]
    return lines[-1][:200] if lines else "no output"


@lru_cache(maxsize=None)
def _probe(host) -> tuple[tuple[str, str], ...]:
    """(key path, message) per problem of one remote host; asked once per host and process."""
    target = Target.of(host)
    try:
        conn = Connection(target)
    except NodeError as err:
        return ((f"{host.key}.remote.address", f"{host.name}: {err}"),)
    try:
        found = machine_problems(lambda argv: conn.exec(argv, timeout=300), host.remote)   # (importing TF is slow)
    except NodeError as err:
        found = [("address", str(err))]
    finally:
        conn.close()
    return tuple((f"{host.key}.remote.{field}", f"{host.name} ({target.label}): {message}") for field, message in found)


# ---- the node -----------------------------------------------------------------------------------

class RemoteNode(Node):
    kind = "remote"

    def __init__(self, host, registry):
        super().__init__(host, registry)
        self.remote, self.target = host.remote, Target.of(host)
        self.token = f"{os.getpid()}-{host.name}-{secrets.token_hex(4)}"
        self.conn: Connection | None = None        # the SSH connection, from prepare() on
        self._cores = 1
        self.workdir = None
        self._records: list[dict] = []
        self._latest: Usage | None = None

    @classmethod
    def problems(cls, hosts, progress=lambda msg: None):
        """Log in to every machine at once (host key checked) and ask what it lacks."""
        progress(f"checking {len(hosts)} remote machine(s): host keys, python, TensorFlow, iperf3")
        with ThreadPoolExecutor(max_workers=8) as pool:
            return [p for found in pool.map(_probe, hosts) for p in found]

    def prepare(self, progress=lambda msg: None) -> None:
        """Connect, record the run on the machine, copy the workload code, start the sampler."""
        self.conn = Connection(self.target)
        if not self.conn.key_facts["host_key_in_known_hosts"]:
            log.warning("%s (%s): accepted the unknown host key %s (ssh.accept_unknown_host_keys); recorded "
                        "in topology.json", self.name, self.target.label, self.conn.key_facts["host_key_sha256"])
        self._record(token=self.token, python=self.remote.python)
        cores = self.conn.exec(["getconf", "_NPROCESSORS_ONLN"])[1].strip()
        self._cores = int(cores) if cores.isdigit() else 1
        with self.conn.sftp() as sftp:
            self.workdir, copied = sync_code(sftp, self.remote.workdir or "dltestbed")
        progress(f"{self.name}: {self.target.label}, code in {self.workdir} ({copied} file(s) copied)")
        self.popen([self.python, "-c", AGENT, "sample", self.token, self.remote.interface, f"{SAMPLE_INTERVAL:g}"],
                   stdout=Lines(self._sampled), stderr=subprocess.DEVNULL)

    def _record(self, **item) -> dict:
        record = {"machine": self.conn.record, **item}
        self._records.append(record)
        self._registry.add("remote", record)
        return record

    def _sampled(self, line: bytes) -> None:
        try:
            self._latest = Usage(**json.loads(line))
        except (ValueError, TypeError):
            pass

    def mininet_host(self):
        return None                 # a real machine: its network exists already

    def shape(self, params, qdisc: str) -> None:
        """With remote.shape: the link's limits on the machine's interface (egress), by tc."""
        from testbed.net.shaping import End, link_plan
        plan = link_plan([End(self.remote.interface, self, False)], params, "tc", qdisc)
        commands = plan.tc.get(self, []) if self.remote.shape else []
        if commands:
            self._record(tc=self.remote.interface)
        for args in commands:
            status, out = self.conn.exec(["tc", *args])
            if status != 0:
                raise NodeError(f"{self.name} ({self.target.label}): tc {' '.join(args)} failed: {_last(out)}")

    def stop(self) -> None:
        """End every process of the run there and remove the shaping; say so if the machine is gone."""
        if self.conn is None:
            return
        try:
            self.conn.exec([self.python, "-c", AGENT, "end", self.token])
            for r in self._records:
                if "tc" in r:
                    self.conn.exec(["tc", "qdisc", "del", "dev", r["tc"], "root"])
            self._registry.discard("remote", *self._records)
        except NodeError as err:
            log.warning("%s: %s; its processes may still run there: `run_experiment.py cleanup` retries",
                        self.name, err)
        finally:
            self.conn.close()

    @property
    def facts(self) -> dict:
        return {"machine": self.target.label, **self.conn.key_facts} if self.conn else {}

    @property
    def machine(self) -> str:
        return self.target.address          # a machine of its own: its cores are not shared with this one's

    @property
    def machine_cores(self) -> int:
        return self._cores

    @property
    def python(self) -> str:
        return self.remote.python

    @property
    def repo(self) -> str:
        return self.workdir         # the copy of the workload code on the machine

    def env(self, extra):
        return {"PATH": STANDARD_PATH, "LANG": "C.UTF-8", **extra}

    def stage(self, path: Path) -> str:
        """Copy a local file (e.g. job.json) or folder (a user's script) into the workdir's stage/;
        its path there."""
        path = Path(path)
        there = posixpath.join(self.workdir, "stage", path.name)
        with self.conn.sftp() as sftp:
            if path.is_dir():
                copy_tree(sftp, path, there)
            else:
                _mkdirs(sftp, posixpath.dirname(there))
                sftp.put(str(path), there)
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
                           on_exit=lambda: self._registry.discard("remote", holder.get("record")), **kwargs)
        if proc.returncode is None and proc.pid is not None:
            holder["record"] = self._record(pgid=proc.pid)
        return proc

    @classmethod
    def usage(cls, nodes) -> dict[str, Usage]:
        """The latest line of each machine's sampler."""
        return {n.name: n._latest for n in nodes if n._latest is not None}


def _mkdirs(sftp, path: str) -> str:
    """Make path and its parents on the machine (relative: to the login directory); the absolute path."""
    parts = path.strip("/").split("/")
    for i in range(1, len(parts) + 1):
        sub = ("/" if path.startswith("/") else "") + "/".join(parts[:i])
        try:
            sftp.stat(sub)
        except OSError:
            sftp.mkdir(sub)
    return sftp.normalize(path)


def copy_tree(sftp, folder: Path, there: str, files=None) -> int:
    """Copy the files under a local folder (or just `files` of it) to the same places under `there`,
    skipping __pycache__ and files of the same size and mtime there; how many were copied."""
    copied, made = 0, {_mkdirs(sftp, there)}
    for local in sorted(files or (f for f in folder.rglob("*") if f.is_file())):
        if "__pycache__" in local.parts:
            continue
        remote = posixpath.join(there, local.relative_to(folder).as_posix())
        if posixpath.dirname(remote) not in made:
            made.add(_mkdirs(sftp, posixpath.dirname(remote)))
        st = local.stat()
        try:
            old = sftp.stat(remote)
            same = old.st_size == st.st_size and int(old.st_mtime) == int(st.st_mtime)
        except OSError:
            same = False
        if not same:
            sftp.put(str(local), remote)
            sftp.utime(remote, (int(st.st_atime), int(st.st_mtime)))
            copied += 1
    return copied


def sync_code(sftp, workdir: str) -> tuple[str, int]:
    """The project's code a task needs into workdir (only what changed); (its absolute path, files copied)."""
    root = _mkdirs(sftp, workdir)
    return root, copy_tree(sftp, REPO, root, [*(REPO / "workloads").rglob("*.py"), *(REPO / f for f in CODE)])


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
                if "token" in r:
                    _, out = conn.exec([r["python"], "-c", AGENT, "end", r["token"]])
                    actions.append(f"ended {out.strip() or '?'} process(es) of run {r['token']} on {target.label}")
                if "tc" in r:
                    conn.exec(["tc", "qdisc", "del", "dev", r["tc"], "root"])
                    actions.append(f"removed shaping from {r['tc']} on {target.label}")
                actions += _remove_cluster_record(conn, r, target.label)
        except NodeError as err:
            actions.append(f"{err}: kept for the next cleanup")
            left += group
        finally:
            conn.close()
    return actions, left


def _remove_cluster_record(conn, r: dict, where: str) -> list[str]:
    """What a cluster run made on a server (testbed.cluster): a Mininet shell (its namespace goes with
    it), a bridge, a link end in the root namespace."""
    done = []
    if "shell" in r:
        status, _ = conn.exec(["pkill", "-KILL", "-f", f"^bash --norc --noediting -is mininet:{r['shell']}$"])
        if status == 0:
            done.append(f"ended the Mininet shell of {r['shell']} on {where}")
    if "bridge" in r:
        status, _ = conn.exec(["sh", "-c", 'ovs-vsctl --timeout=5 br-exists "$1" || [ -e "/sys/class/net/$1" ] || exit 3; '
                               'ovs-vsctl --timeout=5 --if-exists del-br "$1"; ip link del "$1" 2>/dev/null; true',
                               "sh", r["bridge"]])
        if status == 0:
            done.append(f"deleted OVS bridge {r['bridge']} on {where}")
    if "link" in r:
        status, _ = conn.exec(["sh", "-c", '[ -e "/sys/class/net/$1" ] && ip link del "$1"', "sh", r["link"]])
        if status == 0:
            done.append(f"deleted interface {r['link']} on {where}")
    return done
