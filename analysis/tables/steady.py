"""A run's warm-up and its steady state, from the lead task's step times: the figures every answer
of the report is built on (docs/results.md, "Warm-up and steady state").

- The warm-up is the first step (it traces the training function and sets up the collective's
  groups) and the steps right after it that still take more than WARMUP_FACTOR x the typical step.
- The steady time per step is the median of the steps after the warm-up, with its quartiles as the
  spread. Under ps a step event is one worker's closure finishing while the others run: the events
  come in bursts, so their intervals are not step times; there the steady step is the mean interval
  (the steady steps' time over their count) and the quartiles are of the intervals.
- Fewer than MIN_STEADY_STEPS steps after the warm-up are too few to judge: no steady figures, and
  the verdict says why.

Pure: lists of seconds in, numbers out; used by the runner (runs.csv) and by the analysis (results
recorded before these columns existed are judged from steps.csv the same way).
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass

import numpy as np
import pandas as pd

MIN_STEADY_STEPS = 10
WARMUP_FACTOR = 2.0
OK = "ok"
LEAD_ROLES = ("chief", "worker", "single")     # the lead task: the chief, else worker 0, else the single task


@dataclass(frozen=True)
class Steady:
    """The warm-up and the steady state of one run (times in seconds; NaN where not judged)."""
    warmup_steps: int
    warmup_s: float
    steps: int                  # steady steps
    step_s: float               # median step (ps: mean interval)
    q1_s: float
    q3_s: float
    verdict: str                # "ok", or why there is no steady figure

    def samples_per_s(self, samples_per_step) -> float:
        """Steady samples per second at `samples_per_step` samples a step (NaN when not judged)."""
        try:
            per_step = float(samples_per_step)
        except (TypeError, ValueError):
            return float("nan")
        return per_step / self.step_s if self.step_s > 0 and per_step > 0 else float("nan")

    def columns(self, samples_per_step) -> dict:
        """runs.csv's warm-up and steady columns."""
        return dict(warmup_steps=self.warmup_steps, warmup_s=self.warmup_s, steady_steps=self.steps,
                    steady_step_s=self.step_s, steady_step_q1_s=self.q1_s, steady_step_q3_s=self.q3_s,
                    steady_samples_per_s=self.samples_per_s(samples_per_step), steady=self.verdict)


NAN = float("nan")


def typical(times, asynchronous: bool = False) -> float:
    """The typical step of these step times: their median, or under ps (asynchronous: intervals
    between closures finishing) their mean."""
    return (statistics.fmean if asynchronous else statistics.median)(times)


def split(times, asynchronous: bool = False) -> Steady:
    """The warm-up and steady state of one task's step times, in the order the steps ran."""
    times = [float(t) for t in times if t is not None and np.isfinite(t) and t >= 0]
    if not times:
        return Steady(0, NAN, 0, NAN, NAN, NAN, "no step timings (the task emitted no step events)")
    rest = times[1:]
    usual = typical(rest, asynchronous) if rest else NAN
    warm = 1
    while warm < len(times) and times[warm] > WARMUP_FACTOR * usual:
        warm += 1
    steady, warmup_s = times[warm:], sum(times[:warm])
    if len(steady) < MIN_STEADY_STEPS:
        return Steady(warm, warmup_s, len(steady), NAN, NAN, NAN,
                      f"too few steady steps to judge: {len(steady)} after a {warm}-step warm-up "
                      f"({MIN_STEADY_STEPS} needed; train more steps or samples per epoch)")
    q1, median, q3 = np.percentile(steady, [25, 50, 75])
    step = statistics.fmean(steady) if asynchronous else float(median)
    return Steady(warm, warmup_s, len(steady), step, float(q1), float(q3), OK)


def lead_times(steps: pd.DataFrame) -> dict:
    """run_id -> the lead task's step times in the order they ran (steps.csv rows of kind step)."""
    s = steps[(steps["kind"] == "step") & steps["time_s"].notna()]
    out = {}
    for run_id, rows in s.groupby("run_id"):
        for role in LEAD_ROLES:
            lead = rows[(rows["role"] == role) & (rows["task_index"].fillna(0) == 0)]
            if len(lead):
                order = "t" if lead["t"].notna().all() else "step"
                out[run_id] = lead.sort_values(order)["time_s"].to_list()
                break
    return out
