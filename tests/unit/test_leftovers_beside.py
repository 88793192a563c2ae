"""The integration tests' check for leftovers (tests/leftovers.py) leaves alone the processes that `./testbed.sh
test` runs beside them (the unit tests, the image builds): those of their sessions, and those below them in a
session of their own."""
import os
import subprocess
import time

import psutil

import leftovers


def lane() -> tuple[subprocess.Popen, list[int]]:
    """A process in a session of its own, with a child in its session and one in a new session."""
    top = subprocess.Popen(["setsid", "sh", "-c", "setsid sleep 30 & sleep 30 & wait"])
    deadline = time.monotonic() + 30
    while len(psutil.Process(top.pid).children()) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    children = [child.pid for child in psutil.Process(top.pid).children()]
    assert len(children) == 2
    return top, [top.pid, *children]


def test_the_processes_beside_are_known_by_their_session_or_their_ancestor(monkeypatch):
    lanes = []
    try:
        (units, unit_pids), (builds, build_pids) = lanes = [lane(), lane()]
        monkeypatch.setattr(leftovers, "BESIDE", {str(units.pid), str(builds.pid)})  # setsid: sessions named by pid
        assert all(leftovers.beside(pid) for pid in unit_pids + build_pids)
        assert not leftovers.beside(os.getpid())
        monkeypatch.setattr(leftovers, "BESIDE", {str(units.pid)})                     # no image builds beside
        assert all(leftovers.beside(pid) for pid in unit_pids)
        assert not any(leftovers.beside(pid) for pid in build_pids)
        monkeypatch.setattr(leftovers, "BESIDE", set())                                # nothing beside
        assert not any(leftovers.beside(pid) for pid in unit_pids)
    finally:
        for top, _ in lanes:
            for proc in psutil.Process(top.pid).children():
                proc.kill()
            top.kill()
            top.wait()
