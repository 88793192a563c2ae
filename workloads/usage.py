"""A replayed task's usage, for the verdict: its CPU time, the part of it a `replay.Contention` accounted for,
and its threads' wait for a CPU (the scheduler's run delay), as `usage` events (testbed/run/point/record.py
reads them)."""
from __future__ import annotations

import threading
import time
from pathlib import Path

_sampler_cpu_s = 0.0           # the usage sampler's own thread's CPU so far (UsageSampler)


def process_cpu_s() -> float:
    """CPU seconds this process has used, the usage sampler's thread left out."""
    return time.process_time() - _sampler_cpu_s


def others_cpu_s() -> float:
    """CPU seconds of this process's threads but the caller's and the sampler's: the communication's (gloo's)."""
    return max(0.0, time.process_time() - time.thread_time() - _sampler_cpu_s)


def run_delay_s(pid: str = "self", skip: int | None = None) -> float:
    """Seconds this process's threads have waited for a CPU so far (the scheduler's run delay, the
    second field of /proc/PID/task/TID/schedstat), summed over its threads alive now but `skip`."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        if task.name == str(skip):
            continue
        try:
            total += int((task / "schedstat").read_text().split()[1])
        except (OSError, IndexError, ValueError):
            continue
    return total / 1e9


class UsageSampler:
    """`usage` events every `interval` seconds from a daemon thread, and one at stop: this process's CPU seconds
    (all threads), the part of them `contention` (a replay.Contention) accounted for (charged_cpu_s), what its
    waits may be off by (unsure_s), and its threads' run delay, with the time they were read. The sampler's own
    thread is left out: on a VM a wake-up can cost a millisecond of CPU, which would otherwise count as the
    node's."""

    def __init__(self, emit, interval: float = 0.25, contention=None):
        self.emit, self.interval, self.contention = emit, interval, contention
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="usage", daemon=True)
        self._own_tid = None

    def sample(self) -> None:
        c = self.contention
        charged, unsure = (c.charged_cpu_s, c.unsure_s) if c is not None else (0.0, 0.0)
        self.emit("usage", cpu_s=round(process_cpu_s(), 6), charged_cpu_s=round(charged, 6),
                  unsure_s=round(unsure, 6), run_delay_s=round(run_delay_s(skip=self._own_tid), 6))

    def _loop(self) -> None:
        global _sampler_cpu_s
        self._own_tid = threading.get_native_id()
        before = _sampler_cpu_s          # earlier samplers' threads, ended
        while not self._stop.wait(self.interval):
            self.sample()
            _sampler_cpu_s = before + time.thread_time()

    def __enter__(self) -> "UsageSampler":
        self.sample()
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()
