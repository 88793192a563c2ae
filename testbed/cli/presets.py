"""`run --preset NAME`: a named set of `--set` overrides and run options for one purpose, leaving the
file's own values and the defaults alone for every run without it.

`smoke` makes `run topologies/smoke.yaml` a quick CI check that the testbed works on a machine: its
iperf3 checks measure 1 s a reading instead of 3 (still judged against `checks.tolerance`, still
retried up to `checks.attempts` times), the monitor samples every 2 s instead of every 0.5 s (its
columns stay: the first and last samples are always taken), and the report is not drawn unless
`--report` asks for it. The overrides come before the command line's own `--set`, which win; they are
part of the spec, so the points get run ids of their own (they never resume a run made without the
preset)."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Preset:
    name: str
    help: str
    overrides: tuple[str, ...]      # --set KEY.PATH=VALUE, applied before the command line's own
    report: bool = True             # draw the report at the end (`--report` draws it anyway)

    def describe(self) -> str:
        """What it changes, for the run's log."""
        sets = " ".join(f"--set {o}" for o in self.overrides)
        return f"preset {self.name}: {sets}" + ("" if self.report else "; no report (--report draws it)")


PRESETS = {p.name: p for p in [
    Preset("smoke", "a quick CI check: 1 s iperf3 readings, the monitor every 2 s, no report unless --report",
           ("checks.duration=1s", "monitor.interval=2s"), report=False),
]}
