"""The SSH layer: log in to a machine with its host key checked (paramiko), run argv lists there
as exec channels that behave like subprocess.Popen, and copy files by SFTP.

Shared by the remote kind (nodes/remote.py), cluster nodes (cluster/node.py) and the cluster's
servers (testbed.cluster). Host keys are verified by default (an unknown key is refused unless the
caller accepts it, a changed key always); results and logs carry host keys and labels, never key
material or passwords; every word of a command line is quoted (shlex), so no name reaches a remote
shell unquoted. paramiko is imported on first connection."""
from __future__ import annotations

import getpass
import io
import logging
import os
import posixpath
import re
import shlex
import signal
import subprocess
import threading
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from testbed.nodes.base import REPO, NodeError

log = logging.getLogger("testbed.nodes.ssh_connection")
logging.getLogger("paramiko").setLevel(logging.CRITICAL)   # its tracebacks; connect_error says it in a sentence
CODE = ("testbed/__init__.py", "testbed/callback.py")   # with workloads/: what tasks and users' scripts import
# Run argv (after "sh" cwd NAME=VALUE...) in cwd, in a new process group whose id is printed first;
# the line's exit status is the command's (128+N when signal N ended it). A background job of a
# non-interactive shell is no group leader, so setsid makes the group without forking.
LAUNCH = ('setsid sh -c \'echo "dltestbed-pgid $$"; cd "$1" || exit 125; shift; exec env "$@"\' sh "$@" '
          '</dev/null & wait "$!" 2>/dev/null')    # (dash would tell stderr 'Terminated')
PGID_LINE = re.compile(rb"^dltestbed-pgid (\d+)$")


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
        """A remote host's login: its `remote` settings and the experiment's `ssh` section (None: the defaults)."""
        r, ssh = host.setting("remote"), host.ssh
        target = cls(r.address, r.port or 22, r.user or getpass.getuser(),
                     os.path.expanduser(r.key_file) if r.key_file else None)
        if ssh is None:
            return target
        return replace(target, known_hosts=os.path.expanduser(ssh.known_hosts),
                       accept_unknown=ssh.accept_unknown_host_keys, timeout=ssh.connect_timeout)

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
        import paramiko
        try:
            return self.client.open_sftp()
        except paramiko.SSHException as err:
            raise NodeError(f"{self.target.label}: its sshd refused an SFTP session ({err}), and the testbed "
                            "copies the workload code by SFTP: enable sshd's SFTP subsystem there "
                            "(`Subsystem sftp internal-sftp` in /etc/ssh/sshd_config, then reload sshd)") from None

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


# ---- files ------------------------------------------------------------------------------------

def mkdirs(sftp, path: str) -> str:
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
    copied, made = 0, {mkdirs(sftp, there)}
    for local in sorted(files or (f for f in folder.rglob("*") if f.is_file())):
        if "__pycache__" in local.parts:
            continue
        remote = posixpath.join(there, local.relative_to(folder).as_posix())
        if posixpath.dirname(remote) not in made:
            made.add(mkdirs(sftp, posixpath.dirname(remote)))
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
    root = mkdirs(sftp, workdir)
    return root, copy_tree(sftp, REPO, root, [*(REPO / "workloads").rglob("*.py"), *(REPO / f for f in CODE)])

