"""Who owns what: a run's identity, whether it is still alive, and the locks a run holds.

A run is known by its process: "PID-START", START being the process's start time in clock ticks
since boot (/proc/PID/stat), so a pid the kernel hands out again is never taken for the run. Every
process a node starts carries it in DLTESTBED_OWNER, state files and container labels record it,
and OVS bridges are tagged with it. `cleanup` asks `alive()`, never a command line."""
from __future__ import annotations

import fcntl
import json
import os
import signal
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

OWNER_VAR = "DLTESTBED_OWNER"
OVS_OWNER_KEY = "dltestbed-owner"     # the external_ids key of a bridge that holds its run's identity


class LockHeld(RuntimeError):
    """A lock is held by another live process; the message names it and since when."""


def start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot; None when there is no such process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat[stat.rindex(")") + 2:].split()[19])     # field 22, counted after "(comm)"


def identity(pid: int | None = None) -> str:
    """"PID-START" of a process (default: this one)."""
    pid = os.getpid() if pid is None else pid
    return f"{pid}-{start_time(pid) or 0}"


def alive(owner: str | int | None) -> bool:
    """The owner's process still runs and is the same process ("PID-START"). A bare pid (records of
    older versions) counts as alive while any process has it."""
    text = str(owner or "")
    pid, _, start = text.partition("-")
    if not pid.isdigit() or int(pid) <= 0:
        return False
    now = start_time(int(pid))
    return now is not None and (not start or str(now) == start)


def process_owner(pid: int) -> str | None:
    """The DLTESTBED_OWNER in a process's environment (None: not a testbed process, or gone)."""
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return None
    key = OWNER_VAR.encode() + b"="
    for entry in environ.split(b"\0"):
        if entry.startswith(key):
            return entry[len(key):].decode(errors="replace")
    return None


class ProcessLock:
    """An exclusive lock on a file, held by this process until released, re-entrant within it (a
    sweep holds it and each point takes it again). The file says who holds it and since when, so a
    second process is refused at once with that (LockHeld)."""

    _held: dict[str, list] = {}            # path -> [fd, depth], per process
    _guard = threading.Lock()

    def __init__(self, path: Path, what: str):
        self.path, self.what = Path(os.path.realpath(path)), what     # one key per file, however named

    def __enter__(self) -> "ProcessLock":
        with self._guard:
            held = self._held.get(str(self.path))
            if held:
                held[1] += 1
                return self
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                raise LockHeld(f"{self.what} is taken: {self.holder()}. Wait for that run to end, or stop "
                               "it (Ctrl-C in its terminal); `run_experiment.py cleanup` never ends a live "
                               "run") from None
            os.ftruncate(fd, 0)
            os.write(fd, json.dumps({"owner": identity(), "command": " ".join(sys.argv)[:200],
                                     "since": time.strftime("%Y-%m-%d %H:%M:%S %Z")}).encode())
            self._held[str(self.path)] = [fd, 1]
        return self

    def __exit__(self, *exc) -> None:
        with self._guard:
            held = self._held[str(self.path)]
            held[1] -= 1
            if held[1] == 0:
                del self._held[str(self.path)]
                os.ftruncate(held[0], 0)
                fcntl.flock(held[0], fcntl.LOCK_UN)
                os.close(held[0])

    def holder(self) -> str:
        """Who holds the lock, as the holder wrote it: pid, command and since when."""
        try:
            doc = json.loads(self.path.read_text() or "{}")
        except (OSError, ValueError):
            doc = {}
        if not doc:
            return "held by another process"
        pid = str(doc.get("owner", "?")).split("-")[0]
        return f"held by pid {pid} ({doc.get('command') or '?'}) since {doc.get('since', '?')}"


@contextmanager
def signals_deferred():
    """Run the block with SIGINT and SIGTERM held back (in the main thread), delivered when it ends: a
    teardown is not cut short by Ctrl-C, and the interrupt still comes, once what the run made is gone."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held = {signal.SIGINT, signal.SIGTERM}
    before = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)
