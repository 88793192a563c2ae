"""Python API: the command line's load, validate, run and read-back as functions.

    from testbed import api
    exp = api.load("topologies/smoke.yaml", overrides=["topology.link.bw=50mbit"])
    outcome = api.run(exp, out="results/smoke-50")      # as root, like `run_experiment.py run`
    tables = api.load_results(outcome.folder)           # {"runs": DataFrame, "steps": ..., ...}

    with api.network("topologies/smoke.yaml") as net:   # as root: the network, until the block ends
        print(net.exec("h2", ["ping", "-c1", net.ip("h1")]).stdout)

A spec may also be a dict with the YAML file's structure. It gets the same checks and
`FILE:LINE: KEY: MESSAGE` errors as a file: the file is `<dict>` and the lines are those of
`yaml.safe_dump(spec, sort_keys=False)`, the dict written out as YAML in its own key order.
"""
from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence

import yaml

from testbed.spec import Experiment, SpecError, SpecIssue, expand_points, load_spec
from testbed.spec.load import load_spec_text

DICT_FILE = "<dict>"
NEEDS_ROOT = "needs root (Mininet, Open vSwitch and tc)"


def dict_to_yaml(spec: dict) -> str:
    """The YAML text whose line numbers name a dict spec's keys in errors."""
    try:
        return yaml.safe_dump(spec, sort_keys=False, default_flow_style=False)
    except yaml.YAMLError as exc:
        raise SpecError([SpecIssue(DICT_FILE, 1, "", f"not expressible as YAML: {exc}")]) from None


def load(source: str | os.PathLike | dict | Experiment, overrides: Sequence[str] = ()) -> Experiment:
    """A validated Experiment from a YAML path or a dict; overrides are `--set` strings
    ("topology.link.bw=10mbit"). Raises testbed.spec.SpecError listing every problem."""
    if isinstance(source, Experiment):
        if overrides:
            raise ValueError("overrides apply to a path or a dict, not to a loaded Experiment")
        return source
    if isinstance(source, dict):
        return load_spec_text(dict_to_yaml(source), DICT_FILE, overrides)
    return load_spec(source, overrides)


def validate(source: str | os.PathLike | dict, overrides: Sequence[str] = ()) -> list[SpecIssue]:
    """Every problem of a spec (schema, cross-checks, sweep) as SpecIssue(file, line, key,
    message); [] when it is valid. No root: the kernel probe runs at `run`."""
    try:
        expand_points(load(source, overrides))
    except SpecError as err:
        return list(err.errors)
    return []


@dataclass
class Outcome:
    """What `run` did: the results folder, the sweep summary (done, failed, skipped run ids,
    interrupted) and the report it wrote (None when no point finished)."""

    folder: Path
    summary: Any  # testbed.run.sweep.sweep.SweepSummary
    report: Path | None

    @property
    def ok(self) -> bool:
        return not self.summary.failed and not self.summary.interrupted


def run(spec_or_path, out: str | os.PathLike | None = None, progress: bool = False,
        retry_failed: bool = False, overrides: Sequence[str] = ()) -> Outcome:
    """Run every point of a spec (path, dict or Experiment) as `run_experiment.py run` does:
    results in `out` (default results/<name>), points already recorded are skipped (resume),
    failed ones rerun with retry_failed, report.html at the end. progress: print the progress
    bar and per-run detail on stderr. Needs root (Mininet, Open vSwitch, tc)."""
    exp = load(spec_or_path, overrides)
    if os.geteuid() != 0:
        raise PermissionError(f"running an experiment {NEEDS_ROOT}")
    from rich.console import Console

    from analysis.report import build_report
    from testbed.run.sweep.sweep import run_sweep

    folder = Path(out or Path("results") / exp.name)
    folder.mkdir(parents=True, exist_ok=True)
    summary = run_sweep(exp, folder, retry_failed=retry_failed, quiet=not progress,
                        console=Console(stderr=True, quiet=not progress))
    report = build_report(folder) if summary.done or summary.skipped else None
    return Outcome(folder, summary, report)


@contextmanager
def network(spec, overrides: Sequence[str] = (), checks: bool | None = None,
            progress=False) -> Iterator[Any]:
    """`with network(spec) as net:` the first run point of a spec (path, dict or Experiment) up as
    `run_experiment.py up` brings it up (the same resolution, preflight and bring-up, under the
    one-network lock; `exec` reaches it from another shell), torn down when the block ends, whatever
    ends it (an exception, Ctrl-C, SIGTERM). `net` is a testbed.run.live.live_network.LiveNetwork: exec,
    popen, ip, hosts, links, set_link, link_down, link_up, fault.

    checks: run the spec's checks first (None: when the spec has a `checks:` section); a failed check
    raises testbed.run.live.live_network.ChecksFailed unless checks.fail_run is false. progress: True
    prints the bring-up's messages on stderr; a function gets each one. Raises SpecError for a bad spec
    or a refused preflight, PermissionError without root, testbed.owner.LockHeld when another run holds
    the network."""
    exp = load(spec, overrides)
    if os.geteuid() != 0:
        raise PermissionError(f"a live network {NEEDS_ROOT}: run Python as root")
    from testbed.run.live.live_network import open_network

    with open_network(exp, checks=checks, progress=_progress(progress)) as net:
        yield net


def _progress(progress):
    """A progress function from progress=False (none), True (stderr) or a function."""
    if callable(progress):
        return progress
    if progress:
        return lambda msg: print(msg, file=sys.stderr, flush=True)
    return lambda msg: None


def load_results(folder: str | os.PathLike) -> dict:
    """The result tables of a results folder as DataFrames: runs, checks, steps, usage, evals
    (an absent table is an empty frame with the contract's columns)."""
    from testbed.run import results

    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder}: no such results folder")
    return {name: results.read_table(folder, name) for name in results.TABLES}
