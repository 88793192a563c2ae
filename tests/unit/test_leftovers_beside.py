"""The integration tests' check for leftovers (tests/leftovers.py) leaves alone the processes of the unit tests
that `./testbed.sh test` runs beside them: those of their session, and those below it in a session of their own."""
import os
import subprocess
import time
from pathlib import Path

import psutil

import leftovers


def test_the_unit_tests_processes_beside_are_known_by_their_session_or_their_ancestor(monkeypatch):
    lane = subprocess.Popen(["setsid", "sh", "-c", "setsid sleep 30 & sleep 30 & wait"])
    try:
        deadline = time.monotonic() + 30
        while len(psutil.Process(lane.pid).children()) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        children = [child.pid for child in psutil.Process(lane.pid).children()]
        assert len(children) == 2
        monkeypatch.setattr(leftovers, "BESIDE", str(lane.pid))        # setsid made its session, named by its pid
        assert all(leftovers.beside(pid) for pid in [lane.pid, *children])
        assert not leftovers.beside(os.getpid())
        monkeypatch.setattr(leftovers, "BESIDE", None)                  # no unit tests beside
        assert not any(leftovers.beside(pid) for pid in [lane.pid, *children])
    finally:
        for proc in psutil.Process(lane.pid).children():
            proc.kill()
        lane.kill()
        lane.wait()


def test_a_marked_process_is_left_behind_while_it_lives_and_not_once_it_has_ended(monkeypatch):
    monkeypatch.setattr(leftovers, "BESIDE", None)
    proc = subprocess.Popen(["sh", "-c", "sleep 30", "iperf3"])      # a marker in its command line
    try:
        # Popen returns once the exec began; the kernel sets the new command line a moment later (read empty
        # meanwhile on a busy machine): what the check reads of a process that a test left is long past that
        deadline = time.monotonic() + 10
        while b"iperf3" not in Path(f"/proc/{proc.pid}/cmdline").read_bytes() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert leftovers.left_behind(proc.pid)
        assert any(entry.startswith(f"{proc.pid} ") for entry in leftovers.snapshot()["processes"])
    finally:
        proc.kill()
        proc.wait()
    assert not leftovers.left_behind(proc.pid)          # ended between the scan and the question: not left
