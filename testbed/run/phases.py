"""Where a run point's time goes: the sweep prints, after each point,

    phases: bring-up 4.1 s, checks 6.2 s, engine start 9.8 s, training 5.1 s, teardown 1.9 s, rest 0.8 s

and `run` the report's time (`phases: report 12.3 s`), so that a benchmark can record them. Each stage
marks its own phase into the recorder of the point being run: BringUp the bring-up, the checks and the
teardown (bringup/network_up.py); Training the engine's start (from launching the tasks to the lead task's
`start` or `script_start` event: imports, model, cluster) and the training (from that event until every
task has ended, the compute probe included). `rest` is what the point's wall time has besides them
(records, the monitor, the fidelity probe). Outside a sweep (`up`, testbed.api.network) nothing is
recorded: `add` and `timed` do nothing."""
from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Iterator

ORDER = ("bring-up", "checks", "engine start", "training", "teardown", "report")


class Phases:
    """Seconds per phase of one run point."""

    def __init__(self):
        self.seconds: dict[str, float] = {}

    def add(self, phase: str, seconds: float) -> None:
        self.seconds[phase] = self.seconds.get(phase, 0.0) + max(0.0, seconds)

    def text(self, total: float | None = None) -> str:
        """'phases: bring-up 4.1 s, ...'; with the point's wall time `total`, the rest beside them."""
        known = sorted(self.seconds.items(), key=lambda kv: ORDER.index(kv[0]) if kv[0] in ORDER else len(ORDER))
        parts = [f"{phase} {seconds:.1f} s" for phase, seconds in known]
        if total is not None:
            parts.append(f"rest {max(0.0, total - sum(self.seconds.values())):.1f} s")
        return "phases: " + ", ".join(parts)


_recording: list[Phases] = []      # the point being run in this process (the sweep runs one at a time)


@contextmanager
def recording() -> Iterator[Phases]:
    """Record the phases marked in the block (one run point)."""
    phases = Phases()
    _recording.append(phases)
    try:
        yield phases
    finally:
        _recording.remove(phases)


def add(phase: str, seconds: float) -> None:
    if _recording:
        _recording[-1].add(phase, seconds)


@contextmanager
def timed(phase: str) -> Iterator[None]:
    """The block's time counts to `phase` (however the block ends)."""
    started = time.monotonic()
    try:
        yield
    finally:
        add(phase, time.monotonic() - started)
