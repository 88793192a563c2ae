"""The one speedup: per configuration, the steady samples/s over its repeats, the speedup (steady samples/s
at N nodes over one node's, for the same model, engine, batch per worker, fixed mode and bandwidth) and
the projected time to train the user's job (report.job: warm-up + samples / steady samples/s).
summary.csv, every figure, the trend sentences and the report's first answer read it from here."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from analysis.tables import spread, steady
from analysis.tables.tables import (CONFIG_KEYS, GROUP_KEYS, Experiment, blank_as_nan, has_steady_columns, ok_runs,
                             same_values, with_steady_columns)


def summary(runs: pd.DataFrame, job: "Job | None" = None) -> pd.DataFrame:
    """Per configuration (CONFIG_KEYS; ok runs): the measured training time over repeats, the steady
    throughput and the speedup, and the projected time to train `job` (default: the file's own
    workload, Job()).

    - steady_samples_per_s_mean/min/max: over the repeats whose steady state was judged (runs.csv
      ``steady`` "ok"); n_steady of n_runs; the others are in ``not_judged`` with their reasons.
    - speedup = steady samples/s here / steady samples/s of the one-node configuration of the same
      model, engine, batch per worker, fixed mode and bandwidth (``baseline_strategy``: the same
      strategy, else single, else allreduce, else whatever ran on one node): the ratio of the means;
      speedup_min/max = this point's slowest repeat over one node's fastest, and its fastest over
      one node's slowest; efficiency = speedup / nodes; speedup_verdict: analysis.tables.spread's verdict
      on the two groups of repeats. NaN where either side was not judged (``not_judged`` says why).
    - projected_time_s = warm-up + job_samples / steady samples/s (means over repeats); min/max: over
      the repeats and within each from the steady step's quartiles (ps: the repeats only, its
      quartiles are of intervals between closures, not of steps).
    - time_*: the measured training time (warm-up included; under fixed steps N nodes trained N
      times the samples of one): never divided into a ratio.
    """
    runs = runs if has_steady_columns(runs) else with_steady_columns(runs)
    ok = ok_runs(runs)
    if ok.empty:
        return pd.DataFrame(columns=SUMMARY_COLUMNS)
    ok = _with_projection(ok, job or Job())
    g = ok.groupby(CONFIG_KEYS, dropna=False)
    out = g.agg(bw=("bw", "first"), n_runs=("training_time_s", "size"),
                time_mean_s=("training_time_s", "mean"), time_std_s=("training_time_s", "std"),
                time_min_s=("training_time_s", "min"), time_max_s=("training_time_s", "max"),
                time_per_step_mean_s=("time_per_step_s", "mean"), n_steady=("_judged", "sum"),
                steady_samples_per_s_mean=("_sps", "mean"), steady_samples_per_s_min=("_sps", "min"),
                steady_samples_per_s_max=("_sps", "max"), steady_step_s_mean=("_step", "mean"),
                warmup_s_mean=("_warm", "mean"), job_samples=("_job", "first"), job_epochs=("_epochs", "first"),
                job_samples_per_epoch=("_per_epoch", "first"),
                projected_time_min_s=("_lo", "min"), projected_time_max_s=("_hi", "max")).reset_index()
    out["n_steady"] = out["n_steady"].astype(int)
    out["not_judged"] = [_not_judged(rows) for _, rows in g]       # the groups in the order agg gives them
    _add_speedups(out)
    out["projected_time_s"] = out["warmup_s_mean"] + out["job_samples"] / out["steady_samples_per_s_mean"]
    out = out.sort_values(["model", "engine", "batch_per_worker", "fixed", "strategy", "bw_bps", "hosts"])
    return blank_as_nan(out[SUMMARY_COLUMNS].reset_index(drop=True), ["baseline_strategy", "speedup_verdict",
                                                                      "not_judged"])


SUMMARY_COLUMNS = CONFIG_KEYS + [
    "bw", "n_runs", "time_mean_s", "time_std_s", "time_min_s", "time_max_s", "time_per_step_mean_s", "n_steady",
    "steady_samples_per_s_mean", "steady_samples_per_s_min", "steady_samples_per_s_max", "steady_step_s_mean",
    "warmup_s_mean", "baseline_strategy", "baseline_samples_per_s", "speedup", "speedup_min", "speedup_max",
    "efficiency", "speedup_verdict", "job_samples", "job_epochs", "job_samples_per_epoch", "projected_time_s", "projected_time_min_s",
    "projected_time_max_s", "not_judged"]


def _not_judged(rows: pd.DataFrame) -> str:
    """Why some or all of a configuration's repeats have no steady figure ('' when all have one)."""
    bad = rows[~rows["_judged"]]
    if bad.empty:
        return ""
    why = "; ".join(dict.fromkeys(str(v) if pd.notna(v) and str(v).strip() else "no steady figure recorded"
                                  for v in bad["steady"]))
    return why if len(bad) == len(rows) else f"{len(bad)} of {len(rows)} runs not judged ({why}); the others counted"


def baseline_row(summary: pd.DataFrame, row) -> pd.Series | None:
    """The one-node configuration `row` is compared with: same model, engine, batch per worker, fixed
    mode and bandwidth; the same strategy, else single, else allreduce, else any; the usual all-reduce
    (communication none) before any other setting."""
    keys = GROUP_KEYS + ["bw_bps"]
    one = summary[(summary["hosts"] == 1) & same_values(summary, {k: row[k] for k in keys})]
    if "communication" in one:          # one node with the usual all-reduce first: nothing travels anyway
        one = one.iloc[np.argsort((one["communication"] != "none").to_numpy(), kind="stable")]
    for strat in (row["strategy"], "single", "allreduce"):
        hit = one[one["strategy"] == strat]
        if len(hit):
            return hit.iloc[0]
    return one.iloc[0] if len(one) else None


def _add_speedups(out: pd.DataFrame) -> None:
    cols = {c: [] for c in ("baseline_strategy", "baseline_samples_per_s", "speedup", "speedup_min", "speedup_max",
                            "speedup_verdict")}
    for i, row in out.iterrows():
        base = baseline_row(out, row)
        got = dict(baseline_strategy="", baseline_samples_per_s=np.nan, speedup=np.nan, speedup_min=np.nan,
                   speedup_max=np.nan, speedup_verdict="")
        if base is None:
            out.at[i, "not_judged"] = out.at[i, "not_judged"] or "no one-node run of the same model, engine, " \
                "batch per worker, mode and bandwidth to compare with"
        else:
            got["baseline_strategy"] = base["strategy"]
            got["baseline_samples_per_s"] = base["steady_samples_per_s_mean"]
            if base["n_steady"] and row["n_steady"]:
                got["speedup"] = row["steady_samples_per_s_mean"] / base["steady_samples_per_s_mean"]
                got["speedup_min"] = row["steady_samples_per_s_min"] / base["steady_samples_per_s_max"]
                got["speedup_max"] = row["steady_samples_per_s_max"] / base["steady_samples_per_s_min"]
                if row["hosts"] != 1:
                    got["speedup_verdict"] = spread.judge(
                        (int(base["n_steady"]), base["steady_samples_per_s_min"], base["steady_samples_per_s_max"]),
                        (int(row["n_steady"]), row["steady_samples_per_s_min"], row["steady_samples_per_s_max"])).verdict
            elif not base["n_steady"] and row["n_steady"]:
                out.at[i, "not_judged"] = f"one node ({base['strategy']}) not judged: {base['not_judged']}"
        for k, v in got.items():
            cols[k].append(v)
    for k, v in cols.items():
        out[k] = v
    out["efficiency"] = out["speedup"] / out["hosts"]


def _with_projection(ok: pd.DataFrame, job: "Job") -> pd.DataFrame:
    """ok runs with what summary aggregates: whether judged, the steady figures of the judged ones, the
    job's samples (per group, from its fewest nodes) and each run's projected time range (_lo, _hi:
    its warm-up plus the job at the quartiles' step; ps: at its mean interval)."""
    judged = ok["steady"].astype(str).eq(steady.OK) & ok["steady_samples_per_s"].gt(0)
    ok = ok.assign(_judged=judged, _sps=ok["steady_samples_per_s"].where(judged),
                   _step=ok["steady_step_s"].where(judged), _warm=ok["warmup_s"].where(judged))
    g = ok.groupby(GROUP_KEYS, dropna=False)
    fewest = ok["hosts"] == g["hosts"].transform("min")
    epochs = ok["epochs"].where(fewest).groupby([ok[k] for k in GROUP_KEYS], dropna=False).transform("median")
    per_epoch = ok["samples_per_epoch"].where(fewest).groupby([ok[k] for k in GROUP_KEYS], dropna=False) \
        .transform("median")
    trained = ok["samples_trained"].where(fewest).groupby([ok[k] for k in GROUP_KEYS], dropna=False) \
        .transform("median")
    ok["_job"] = [job.samples_for(e, d) for e, d in zip(epochs, per_epoch)]
    if job.samples is None and job.epochs is None:      # a script's own work: what it trained at its fewest nodes
        ok["_job"] = ok["_job"].fillna(trained)
    ok["_epochs"], ok["_per_epoch"] = epochs, per_epoch
    step, per = ok["_step"], ok["samples_per_step"]
    # ps and local SGD: the steady step is the mean (its quartiles are not of whole steps' time)
    sync = ok["strategy"].ne("ps") & ~ok["communication"].astype(str).str.startswith("local SGD")
    fast = step.where(~sync, np.fmin(ok["steady_step_q1_s"], step))
    slow = step.where(~sync, np.fmax(ok["steady_step_q3_s"], step))
    ok["_lo"] = ok["_warm"] + ok["_job"] * fast / per
    ok["_hi"] = ok["_warm"] + ok["_job"] * slow / per
    return ok


@dataclass(frozen=True)
class Job:
    """The training the report projects every point to (the experiment file's report.job): a number of
    samples, or epochs of samples_per_epoch (the data set's size; default: the workload's samples per
    epoch). Not stated: the file's own workload, its epochs x its samples per epoch, both of the
    configuration with the fewest nodes (under fixed steps the samples per epoch grow with the nodes;
    the one-node point's is the work the file describes)."""
    samples: float | None = None
    epochs: float | None = None
    samples_per_epoch: float | None = None
    stated: bool = False

    def samples_for(self, epochs, samples_per_epoch) -> float:
        """The job's samples, given the workload's epochs and samples per epoch (at its fewest nodes)."""
        if self.samples is not None:
            return float(self.samples)
        e = self.epochs if self.epochs is not None else epochs
        d = self.samples_per_epoch if self.samples_per_epoch is not None else samples_per_epoch
        try:
            return float(e) * float(d)
        except (TypeError, ValueError):
            return np.nan

    def describe(self, samples: float, epochs=None, samples_per_epoch=None) -> str:
        """'1M samples (report.job)', or where the figure comes from (`epochs`, `samples_per_epoch`: the
        workload's at its fewest nodes)."""
        if self.samples is not None:
            return f"{count(samples)} samples (report.job)"
        e = self.epochs if self.epochs is not None else epochs
        d = self.samples_per_epoch if self.samples_per_epoch is not None else samples_per_epoch
        known = e is not None and d is not None and np.isfinite(float(e)) and np.isfinite(float(d))
        of = f"{float(e):g} epoch{'s' if float(e) != 1 else ''} of {count(d)} samples" if known else \
            "the samples it trained"
        if self.stated:
            per = "" if self.samples_per_epoch is not None else "; samples per epoch: the workload's"
            return f"{count(samples)} samples ({of}, report.job{per})"
        return (f"{count(samples)} samples (the file's own workload: {of} at its fewest nodes; report.job sets "
                "another)")


def count(x) -> str:
    """1234567 -> '1.23M', 640 -> '640'."""
    x = float(x)
    for div, unit in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= div:
            return f"{x / div:.3g}{unit}"
    return f"{x:.3g}"


def training_job(exp: "Experiment") -> Job:
    """report.job of the experiment file, as its runs' spec.yaml keep it (Job(): not stated)."""
    for spec in exp.specs.values():
        if "report" not in spec and "workload" not in spec:
            continue
        job = (spec.get("report") or {}).get("job")
        if not job:
            return Job()
        return Job(samples=job.get("samples"), epochs=job.get("epochs"),
                   samples_per_epoch=job.get("samples_per_epoch"), stated=True)
    return Job()
