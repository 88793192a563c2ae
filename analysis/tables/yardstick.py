"""The yardstick the report's first answer compares node counts and settings by, one per group of runs (model,
engine, batch per worker and fixed mode: tables.GROUP_KEYS), and why.

- Time to the target loss, where every counted run of the group trained the same data (workload.fixed: data),
  computed its steps (not replayed), logged its loss (the lead task's, analysis/tables/stability.py) and
  learned: its final loss (the mean of its last tenth of steps) clearly below its first (the mean of its
  first stability.SMOOTH_STEPS), by at least LEARNED_DROP of it. The time to the target and the target are analysis/tables/payoff.py's:
  report.target_loss, else per work the highest of its runs' lowest means of SMOOTH_STEPS losses, a loss
  every run reached. Samples per second count samples, not what the model learns from them: a larger
  global batch (under fixed data it grows with the node count), compression, local SGD and asynchronous
  updates change how much a sample teaches (MLPerf and DAWNBench compare time to a target quality).
- Else the projected time of the job at steady samples per second (analysis/tables/speedup.py).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pandas as pd

import workloads.communication as methods
from analysis.model import communication
from analysis.tables import payoff, stability, tables

TARGET = "time to target"
THROUGHPUT = "steady samples/s"
# how far below its first losses a run's final loss must end to count as learned: a loss at chance level
# drifts by a few tenths of a per cent (2.315 to 2.304 for 10 classes); the reference runs fell by 5-85 %
LEARNED_DROP = 0.03


class Yardstick(NamedTuple):
    kind: str       # TARGET or THROUGHPUT
    why: str        # a few words: why this one


def learning(exp: tables.Experiment) -> pd.DataFrame:
    """payoff.per_run(exp) (the counted runs under fixed data with per-step losses, their time to the
    target) with `learns`: the run's final loss at least LEARNED_DROP below the mean of its first
    SMOOTH_STEPS losses."""
    runs = payoff.per_run(exp)
    if runs.empty:
        return runs.assign(learns=pd.Series(dtype=bool))
    lead = stability.lead_steps(exp.steps)
    first = lead.groupby("run_id", sort=False)["loss"].agg(lambda s: float(s.head(stability.SMOOTH_STEPS).mean()))
    return runs.assign(learns=(runs["final_loss"] <= (1 - LEARNED_DROP) * runs["run_id"].map(first)).to_numpy(bool))


def choose(group_runs: pd.DataFrame, learned: pd.DataFrame) -> Yardstick:
    """The yardstick of one group's counted ok runs (tables.ok_runs), `learned` being learning(exp)."""
    n = len(group_runs)
    fixed = set(group_runs["fixed"].astype(str))
    if fixed != {"data"}:
        return Yardstick(THROUGHPUT, "the node counts trained different data (workload.fixed: steps)"
                         if "steps" in fixed else "your script decided what each node count trained")
    compute = group_runs["compute"] if "compute" in group_runs else pd.Series("", index=group_runs.index)
    replayed = int((compute == tables.TIMING_ONLY).sum())
    if replayed:
        return Yardstick(THROUGHPUT, f"{_runs(replayed, n)} replayed their compute (no loss)")
    mine = learned[learned["run_id"].isin(set(group_runs["run_id"]))]
    if len(mine) < n:
        return Yardstick(THROUGHPUT, f"{_runs(n - len(mine), n)} logged no loss to compare by")
    flat = int((~mine["learns"].astype(bool)).sum())
    if flat:
        return Yardstick(THROUGHPUT, f"the loss did not clearly fall ({LEARNED_DROP:.0%} or more) in "
                                     f"{'any of the' if flat == n else f'{flat} of'} {n} runs")
    return Yardstick(TARGET, "every run's loss fell on the same data, and samples per second alone miss how much "
                             "each sample teaches")


def _runs(k: int, n: int) -> str:
    return "the runs" if k == n else f"{k} of {n} runs"


def opposite(speedup: float, ratio: float) -> bool:
    """Whether a throughput speedup and a time-to-target ratio (both above 1: faster) point different ways,
    each more than half a percent from 1 (trends.speed_words' 'as fast')."""
    ok = np.isfinite(speedup) and np.isfinite(ratio) and abs(speedup - 1) >= 0.005 and abs(ratio - 1) >= 0.005
    return bool(ok and (speedup > 1) != (ratio > 1))


def _rate_words(point: pd.DataFrame, one: pd.DataFrame) -> str:
    """', each at 2× one machine's learning rate (lr_scaling linear)' where the point's rate grew with its global
    batch (runs.csv's learning_rate, lr_scaling), else ''."""
    if "learning_rate" not in point or "learning_rate" not in one:
        return ""
    mine, theirs = (pd.to_numeric(r["learning_rate"], errors="coerce").median() for r in (point, one))
    if not (np.isfinite(mine) and np.isfinite(theirs) and theirs > 0) or abs(mine / theirs - 1) < 1e-9:
        return ""
    rule = point["lr_scaling"].iloc[0] if "lr_scaling" in point and len(point) else ""
    return f", each at {mine / theirs:.3g}× one machine's learning rate" + (f" (lr_scaling {rule})" if rule else "")


def per_sample_reasons(point: pd.DataFrame, one: pd.DataFrame, strategy: str) -> list[str]:
    """Why the runs of a point learn another amount from a sample than one machine's runs (`one`): more or
    fewer samples in each update (under fixed data fewer updates over the same data), its communication
    setting (its method's UPDATE_EFFECT, from the point's runs.csv columns), asynchronous updates (ps)."""
    out = []
    mine, theirs = (float(tables.samples_per_step(r).median()) if len(r) else np.nan for r in (point, one))
    if np.isfinite(mine) and np.isfinite(theirs) and mine > 0 and theirs > 0 and mine != theirs:
        fewer = mine > theirs
        out.append(f"each update averages {mine:g} samples against one machine's {theirs:g}, so "
                   f"{max(mine, theirs) / min(mine, theirs):.3g}× {'fewer' if fewer else 'more'} updates over the "
                   "same data" + _rate_words(point, one))
    cells = {c: point[c].iloc[0] for c in communication.COLUMNS if c in point and len(point)}
    method = methods.method_of(communication.settings_of(cells))
    if method.NAME != methods.PLAIN:
        effect = getattr(method, "UPDATE_EFFECT", "changes what each update carries")
        out.append(f"{communication.label(cells)} {effect}")
    if strategy == "ps":
        out.append("the parameter server applies each worker's gradients without waiting for the others "
                   "(asynchronous)")
    return out
