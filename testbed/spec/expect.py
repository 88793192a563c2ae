"""`expect:` of the experiment file: what its results must show, judged after the run
(analysis/comparisons/expectations.py).

Each item is one of
  {metric: COLUMN, min: X, max: Y, where: {KEY.PATH: VALUE}}   a figure of runs.csv, checks.csv or the summary
  {fidelity: ok, where: ...}                                   every point's fidelity verdict
  {against: FOLDER, where: ...}                                no configuration slower than stored results

The metric names are kept here, beside the tables they come from, so that the spec checks them without
reading any result (a unit test holds them to the runner's and the analysis' columns). `where` keys are
checked and their values normalised in validate.py (`where_issues`), which can validate a whole point.
"""
from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, WithJsonSchema, model_validator

import testbed.limits as limits
from testbed.spec.keypaths import suggest
from testbed.spec.settings import Strict

# Numeric columns of runs.csv (testbed/run/point/record.py), judged per run point.
RUN_METRICS = (
    "wall_time_s", "training_time_s", "time_per_step_s", "samples_per_s", "final_loss", "steps",
    "tf_import_s", "torch_import_s", "tf_threads", "hosts", "bw_bps", "params", "gradient_bytes", "global_batch",
    "workers", "servers", "steps_per_epoch", "samples_per_step", "samples_per_epoch", "samples_trained",
    "warmup_steps", "warmup_s", "steady_steps", "steady_step_s", "steady_step_q1_s", "steady_step_q3_s",
    "steady_samples_per_s", "cpu_mean_pct", "mem_peak_bytes", "net_bytes_total", "net_throughput_mean_bps",
    "monitor_overhead_pct", "timer_p50_ms", "timer_p99_ms", "timer_max_ms", "restarts", "time_lost_s", "switches",
    "predicted_step_s_allreduce", "predicted_step_s_ps", "dilation", "machine_cores", "compute_per_step_s",
    "compute_slicing", "training_time_wall_s", "time_per_step_wall_s", "samples_per_wall_s", "rank", "start_step",
    "sync_every", "theory_bytes_per_worker_step", "steady_bytes_per_worker_step", "theory_steady_bytes_per_worker_step")
# Numeric columns of checks.csv, judged per run point over every pair checked (the worst pair counts).
CHECK_METRICS = ("checks.ratio", "checks.rtt_ms", "checks.measured_bps")
# Numeric columns of the report's summary (analysis/tables/speedup.py), judged per configuration after the sweep.
SUMMARY_METRICS = (
    "n_runs", "time_mean_s", "time_std_s", "time_min_s", "time_max_s", "time_per_step_mean_s", "n_steady",
    "steady_samples_per_s_mean", "steady_samples_per_s_min", "steady_samples_per_s_max", "steady_step_s_mean",
    "warmup_s_mean", "baseline_samples_per_s", "speedup", "speedup_min", "speedup_max", "efficiency",
    "job_samples", "job_epochs", "job_samples_per_epoch", "projected_time_s", "projected_time_min_s",
    "projected_time_max_s")
METRICS = RUN_METRICS + CHECK_METRICS + SUMMARY_METRICS


def check_metric(value: object) -> str:
    """A metric name of METRICS, else a message with the closest name."""
    if isinstance(value, str) and value in METRICS:
        return value
    hint = suggest(str(value), METRICS) or " (see docs/ci.md for the names)"
    raise ValueError(f"unknown metric {str(value)[:60]!r}: a numeric column of runs.csv (e.g. steady_samples_per_s), "
                     f"of checks.csv (checks.ratio, checks.rtt_ms) or of the report's summary (speedup){hint}")


Metric = Annotated[str, BeforeValidator(check_metric), WithJsonSchema({"type": "string", "enum": list(METRICS)})]
KINDS = ("metric", "fidelity", "against")


class Expectation(Strict):
    """One thing the results must show: a metric within bounds, the fidelity verdict ok, or no configuration
    slower than stored results beyond the spread of the repeats."""

    metric: Metric | None = Field(None, description="a numeric column of runs.csv (per point), checks.csv as "
                                  "checks.COLUMN (per point, every pair) or the report's summary (per configuration)")
    min: float | None = Field(None, description="metric: the lowest value that passes")
    max: float | None = Field(None, description="metric: the highest value that passes")
    fidelity: Literal["ok"] | None = Field(None, description="ok: every point's fidelity verdict is ok (not degraded)")
    against: Annotated[str, Field(min_length=1)] | None = Field(
        None, description="a results folder (relative to this file): no configuration of this run slower than "
        "there beyond the spread of the repeats")
    where: Annotated[dict[str, Any], Field(max_length=limits.MAX_WHERE)] = Field(
        default_factory=dict, description="key path (as under sweep) -> value: only the run points with these values")

    @model_validator(mode="after")
    def _one_kind(self):
        given = [k for k in KINDS if getattr(self, k) is not None]
        if not given:
            raise ValueError("an expectation is {metric: COLUMN, min: X, max: Y}, {fidelity: ok} or "
                             "{against: FOLDER}")
        if len(given) > 1:
            raise ValueError(f"one expectation, one of metric, fidelity, against (this one has {' and '.join(given)})")
        bounds = [k for k in ("min", "max") if getattr(self, k) is not None]
        if self.metric is not None and not bounds:
            raise ValueError(f"metric {self.metric} needs min:, max: or both")
        if self.metric is None and bounds:
            raise ValueError(f"{' and '.join(bounds)} bound a metric: add metric: COLUMN, or leave them out")
        if len(bounds) == 2 and self.min > self.max:
            raise ValueError(f"min {self.min:g} is above max {self.max:g}: nothing could pass")
        return self

    @property
    def kind(self) -> str:
        return next(k for k in KINDS if getattr(self, k) is not None)
