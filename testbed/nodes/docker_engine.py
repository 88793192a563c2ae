"""The Docker engine: find it, start it when it is installed but not running, talk to it.

Everything goes through the docker SDK on the unix socket; the `docker` command line is never
used. Without systemd nobody starts `dockerd`, so `ensure_dockerd` starts it the way a service
manager would: in its own session, detached from our terminal and signals, its output in a log
file, so it outlives the testbed. Two processes may call it at the same time: a lock file under
/run/dltestbed/ lets one start the engine while the other waits for the socket.

Starting dockerd sets the iptables FORWARD policy to DROP, which cuts hosts on Linux bridges off
from each other; the network code deals with that, this module does not touch iptables."""
from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Callable

SOCKET = "/var/run/docker.sock"
PID_FILE = Path("/var/run/docker.pid")
BASE_URL = f"unix://{SOCKET}"
LOG_FILE = Path("/var/log/dltestbed-docker_engine.log")
STATE_DIR = Path(os.environ.get("DLTB_STATE_DIR", "/run/dltestbed"))
LOCK_FILE = STATE_DIR / "docker_engine.lock"
START_TIMEOUT_S = 60.0
PING_TIMEOUT_S = 2.0

NOT_INSTALLED = ("docker nodes need the Docker engine, which is not installed: run ./testbed.sh test "
                 "or scripts/bootstrap.sh (installs Debian's docker.io)")

Progress = Callable[[str], None]

# dockerd processes started here; kept referenced so Python does not warn about a running child
_started: list[subprocess.Popen] = []


class DockerUnavailable(RuntimeError):
    """The Docker engine cannot be used; the message says why and what to do."""


@contextlib.contextmanager
def file_lock(path: Path, waiting: Callable[[], None] = lambda: None):
    """Hold an exclusive fcntl lock on `path` (created if needed); call `waiting` if it is taken."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as fd:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            waiting()
            fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)


def dockerd_path() -> str | None:
    found = shutil.which("dockerd")
    if found:
        return found
    for candidate in ("/usr/sbin/dockerd", "/usr/bin/dockerd"):
        if os.access(candidate, os.X_OK):
            return candidate
    return None


def docker_installed() -> bool:
    return dockerd_path() is not None


def _api(timeout: float):
    import docker
    return docker.APIClient(base_url=BASE_URL, timeout=timeout)


def dockerd_running(timeout: float = PING_TIMEOUT_S) -> bool:
    """True when the engine's socket answers a ping within `timeout` seconds."""
    if not os.path.exists(SOCKET):
        return False
    try:
        api = _api(timeout)
    except Exception:
        return False
    try:
        return bool(api.ping())
    except Exception:
        return False
    finally:
        api.close()


def _log_tail(lines: int = 8) -> str:
    try:
        text = LOG_FILE.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join(text[-lines:])


def _start(binary: str) -> subprocess.Popen:
    LOG_FILE.parent.mkdir(parents=True, exist_ok=True)
    with open(LOG_FILE, "ab") as log:
        log.write(f"--- dltestbed started {binary} at {time.strftime('%Y-%m-%d %H:%M:%S')}\n".encode())
        log.flush()
        proc = subprocess.Popen([binary], stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                cwd="/", close_fds=True, start_new_session=True)
    _started.append(proc)
    return proc


def _wait_for_socket(proc: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if dockerd_running():
            return
        code = proc.poll()
        if code is not None:
            raise DockerUnavailable(
                f"the Docker engine (dockerd) exited with code {code} while starting; its log "
                f"{LOG_FILE} ends with:\n{_log_tail()}")
        time.sleep(0.25)
    raise DockerUnavailable(
        f"the Docker engine (dockerd, pid {proc.pid}) did not answer on {SOCKET} within "
        f"{timeout:.0f} s: see {LOG_FILE}")


def ensure_dockerd(progress: Progress = lambda msg: None, timeout: float = START_TIMEOUT_S) -> None:
    """Make sure the Docker engine answers on its socket, starting `dockerd` if needed."""
    if dockerd_running():
        return
    binary = dockerd_path()
    if binary is None:
        raise DockerUnavailable(NOT_INSTALLED)
    if os.geteuid() != 0:
        if os.path.exists(SOCKET) and not os.access(SOCKET, os.R_OK | os.W_OK):
            raise DockerUnavailable(f"this user may not use the Docker engine's socket {SOCKET}: run the "
                                    "testbed as root (./testbed.sh run)")
        raise DockerUnavailable("the Docker engine is installed but not running, and starting it needs "
                                "root: run the testbed as root (./testbed.sh run)")
    with file_lock(LOCK_FILE):  # a concurrent caller may be starting it right now
        if dockerd_running():
            return
        pid = running_pid()
        if pid is not None:   # running but slow to answer (a busy machine): wait, never start a second one
            progress(f"waiting for the Docker engine (dockerd, pid {pid}) to answer")
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                if dockerd_running(timeout=10):
                    return
                time.sleep(0.5)
            raise DockerUnavailable(f"the Docker engine (dockerd, pid {pid}) runs but did not answer on {SOCKET} "
                                    f"within {timeout:.0f} s: see {LOG_FILE}, or stop it (kill {pid}) and retry")
        PID_FILE.unlink(missing_ok=True)      # stale: its dockerd is gone, and it would refuse to start
        progress("starting Docker engine (dockerd)")
        _wait_for_socket(_start(binary), timeout)


def running_pid() -> int | None:
    """The pid of a running dockerd, from its pid file, or None."""
    try:
        pid = int(PID_FILE.read_text().strip())
        return pid if Path(f"/proc/{pid}/comm").read_text().strip() == "dockerd" else None
    except (OSError, ValueError):
        return None


def client(timeout: float = 120.0, progress: Progress = lambda msg: None):
    """A docker.DockerClient on the engine's unix socket (started first if needed)."""
    import docker
    ensure_dockerd(progress)
    return docker.DockerClient(base_url=BASE_URL, timeout=timeout)
