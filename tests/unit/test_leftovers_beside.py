"""The integration tests' check for leftovers (tests/leftovers.py) leaves alone the processes of the tests that
`./testbed.sh test` runs beside them (the unit tests, those in a virtual machine): those of their sessions, and
those below them in a session of their own."""
import os
import subprocess
import time

import psutil

import leftovers


def lane(lanes: list) -> tuple[subprocess.Popen, list[int]]:
    """A session of its own (setsid names it by its pid) with two children, one in a new session; kept in
    `lanes` before anything can fail."""
    proc = subprocess.Popen(["setsid", "sh", "-c", "setsid sleep 30 & sleep 30 & wait"])
    lanes.append(proc)
    deadline = time.monotonic() + 30
    while len(psutil.Process(proc.pid).children()) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    children = [child.pid for child in psutil.Process(proc.pid).children()]
    assert len(children) == 2
    return proc, children


def test_the_processes_of_the_tests_beside_are_known_by_their_session_or_their_ancestor(monkeypatch):
    lanes = []
    try:
        (unit, unit_children), (guest, guest_children) = lane(lanes), lane(lanes)
        monkeypatch.setattr(leftovers, "BESIDE", {str(unit.pid), str(guest.pid)})
        assert all(leftovers.beside(pid) for pid in [unit.pid, *unit_children, guest.pid, *guest_children])
        assert not leftovers.beside(os.getpid())
        monkeypatch.setattr(leftovers, "BESIDE", {str(unit.pid)})             # the unit tests only
        assert all(leftovers.beside(pid) for pid in [unit.pid, *unit_children])
        assert not any(leftovers.beside(pid) for pid in [guest.pid, *guest_children])
        monkeypatch.setattr(leftovers, "BESIDE", set())                       # no tests beside
        assert not any(leftovers.beside(pid) for pid in [unit.pid, *unit_children])
    finally:
        for proc in lanes:
            for child in psutil.Process(proc.pid).children():
                child.kill()
            proc.kill()
            proc.wait()
