"""A sweep without a network, for unit tests of `run`: each point goes to a stand-in for the runner."""
from contextlib import nullcontext
from types import SimpleNamespace

from testbed.cli import run as run_command
from testbed.run.sweep import sweep


def stand_in_sweep(monkeypatch, run_point) -> None:
    """`run` with no root, lock, preflight or signal handlers, each point resolved as is and run by
    `run_point(resolved, exp_dir, progress)`, which writes the point's runs.csv row itself."""
    monkeypatch.setattr(sweep, "run_lock", nullcontext)
    monkeypatch.setattr(sweep.point, "resolve_all", lambda points, machine, progress=None, switch=None: [
        SimpleNamespace(run_id=p.run_id, repeat=p.repeat, spec=p.spec) for p in points])
    monkeypatch.setattr(sweep, "preflight", lambda exp, points, progress=None: None)
    monkeypatch.setattr(sweep, "run_point", run_point)
    monkeypatch.setattr(run_command, "need_root", lambda what: None)
    monkeypatch.setattr(run_command, "interrupt_on_signals", lambda: None)
