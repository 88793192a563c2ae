"""The cost model against measurement: predicted steady steps of measured runs, in sample and held out,
their accuracy, the floor repeats set, the runs left out, and everything at once for the report."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd

from analysis.tables import steady
from analysis.model.costmodel.run_features import features, fitted_rows, judged
from analysis.model.costmodel.fit import _share, _shared, fit_features
from analysis.model.costmodel.formulas import STRATEGIES, CostModel, _family, samples_per_step

# -- prediction and validation ---------------------------------------------------------------
def predict_features(model: CostModel, feats: pd.DataFrame) -> pd.DataFrame:
    """Predicted steady step, warm-up, steady samples/s (and runs.csv's time per step) of measured
    runs (their own machine: shared, or under compute budgets separate)."""
    out = []
    for _, f in feats.iterrows():
        t = model.terms(f["family"], f["workers"], f["s_bits"], f["bw_meas_bps"],
                        shards=max(int(f["shards"] or 1), 1), rtt_s=f["rtt_s"],
                        fractions=json.loads(f["fractions"]) if f["fractions"] else None,
                        shared=_shared(f), work=f["s_bits"] * f["batch"], share=_share(f))
        per_step = f["samples_per_step"] if "samples_per_step" in f and np.isfinite(f["samples_per_step"]) \
            else samples_per_step(f["family"], f["workers"], f["batch"])
        out.append(dict(predicted_steady_s=t["steady_s"], predicted_warmup_s=t["warmup_s"],
                        predicted_samples_per_s=per_step / t["steady_s"] if t["steady_s"] > 0 else np.nan,
                        predicted_step_s=t["steady_s"] + t["warmup_s"] / f["steps"],
                        predicted_compute_s=t["compute_s"], predicted_comm_s=t["comm_s"],
                        bound=t["bound"]))
    return pd.DataFrame(out, index=feats.index)


# measured_step_s / predicted_step_s: runs.csv's time per step (the warm-up spread over the run's
# steps) and the model's figure for it, for reference; the accuracy is on the steady step.
COMPARISON = ["run_id", "strategy", "family", "model", "fixed", "batch", "hosts", "workers", "servers", "bw",
              "bw_bps", "bw_meas_bps", "steps", "slowdown", "samples_per_step", "steady", "measured_steady_s",
              "predicted_steady_s", "rel_error", "measured_warmup_s", "predicted_warmup_s",
              "measured_samples_per_s", "predicted_samples_per_s", "measured_step_s", "predicted_step_s",
              "split", "bound", "degraded"]


def _compare(model, feats, split) -> pd.DataFrame:
    if feats.empty:
        return pd.DataFrame(columns=COMPARISON)
    out = feats.assign(**predict_features(model, feats))
    out["measured_steady_s"] = feats["steady_s"]
    out["measured_warmup_s"] = feats["warmup_s"]
    out["measured_samples_per_s"] = feats["steady_samples_per_s"]
    out["measured_step_s"] = feats["time_per_step_s"]
    out["rel_error"] = (out["predicted_steady_s"] - out["measured_steady_s"]) / out["measured_steady_s"]
    out["split"] = split
    return out[COMPARISON]


def comparison(feats: pd.DataFrame, model: CostModel | None = None) -> pd.DataFrame:
    """In-sample: measured vs predicted steady step (rel_error) of every run, the model fitted on all."""
    model = model or fit_features(feats)
    return _compare(model, feats, "in-sample").sort_values(
        ["strategy", "bw_bps", "hosts", "run_id"]).reset_index(drop=True)


def holdout(feats: pd.DataFrame, cores: float | None = None) -> pd.DataFrame:
    """Per strategy: fit on the runs with fewer workers than the largest count, predict the steady
    step of the runs with the largest count (they took no part in the fit). Only runs whose steady
    state was judged; empty when a strategy has one worker count."""
    feats_j = feats[judged(feats)]
    parts = []
    for fam in STRATEGIES:
        rows = feats_j[feats_j["family"] == fam]
        if rows["workers"].nunique() < 2:
            continue
        top = rows["workers"].max()
        train = feats_j[(feats_j["family"] == fam) & (feats_j["workers"] < top)].copy()
        train.attrs.update(feats.attrs)
        model = fit_features(train, cores)
        parts.append(_compare(model, rows[rows["workers"] == top], "held-out")
                     .assign(trained_on=f"workers <= {int(train['workers'].max())}"))
    if not parts:
        return pd.DataFrame(columns=COMPARISON + ["trained_on"])
    return pd.concat(parts, ignore_index=True)


ACCURACY = ["strategy", "split", "runs", "median_abs_rel_error", "max_abs_rel_error"]


def accuracy(*tables: pd.DataFrame) -> pd.DataFrame:
    """Median and max |relative error| of the steady step, per strategy and split (runs without a
    judged steady step are not counted)."""
    parts = [t for t in tables if len(t)]
    if not parts:
        return pd.DataFrame(columns=ACCURACY)
    df = pd.concat(parts, ignore_index=True)
    df = df[pd.to_numeric(df["rel_error"], errors="coerce").notna()]
    if df.empty:
        return pd.DataFrame(columns=ACCURACY)
    family = df["family"] if "family" in df else df["strategy"].map(_family)
    df = df.assign(abs_err=df["rel_error"].astype(float).abs(), family=family)
    out = df.groupby(["family", "split"], sort=False).agg(
        runs=("abs_err", "size"), median_abs_rel_error=("abs_err", "median"),
        max_abs_rel_error=("abs_err", "max")).reset_index().rename(columns={"family": "strategy"})
    return out[ACCURACY]


REPEAT_KEY = ["family", "model", "hosts", "workers", "servers", "bw_bps", "batch", "steps"]


def repeat_floor(feats: pd.DataFrame) -> pd.DataFrame:
    """The error no model can beat: per strategy, the |relative error| of predicting the steady
    step of each configuration measured more than once (repeats, or sweeps fitted together) by the
    geometric mean of its own measurements. Empty when no configuration was measured twice."""
    cols = ["strategy", "configurations", "runs", "median_abs_rel_error", "max_abs_rel_error"]
    feats = feats[judged(feats)] if "steady_s" in feats else feats.iloc[:0]
    if feats.empty:
        return pd.DataFrame(columns=cols)
    key = [k for k in REPEAT_KEY if k in feats]
    t = feats["steady_s"].astype(float)
    group = feats.groupby(key, dropna=False)["steady_s"]
    mean = np.exp(np.log(t).groupby([feats[k] for k in key], dropna=False).transform("mean"))
    twice = group.transform("size") > 1
    df = feats[twice].assign(err=(mean[twice] / t[twice] - 1).abs())
    if df.empty:
        return pd.DataFrame(columns=cols)
    out = df.groupby("family").agg(configurations=("err", lambda e: df.loc[e.index, key].drop_duplicates().shape[0]),
                                   runs=("err", "size"), median_abs_rel_error=("err", "median"),
                                   max_abs_rel_error=("err", "max")).reset_index()
    return out.rename(columns={"family": "strategy"})[cols]


DEGRADED_SPLIT = "degraded, not fitted"
NOT_JUDGED_SPLIT = "steady state not judged, not fitted"


def evaluate(exp, cores: float | None = None, include_degraded: bool | None = None) -> dict:
    """The model fitted on an experiment, its features, in-sample and held-out comparisons and
    accuracy (of the steady step); {} when no run can be fitted. Runs whose steady state was not
    judged are left out of the fit and listed in ``not_judged`` (their predictions, nothing measured
    to compare with); degraded runs are left out unless include_degraded (default:
    exp.include_degraded) and predicted apart (``degraded``)."""
    if include_degraded is None:
        include_degraded = getattr(exp, "include_degraded", False)
    every = features(exp, cores)
    feats = fitted_rows(every, include_degraded)
    if feats.empty:
        return {}
    model = fit_features(feats, source=str(exp.path))
    ins = comparison(feats, model)
    held = holdout(feats, cores)
    rest = every.loc[every.index.difference(feats.index)]
    return dict(model=model, features=feats, in_sample=ins, held_out=held,
                degraded=_compare(model, rest[judged(rest)], DEGRADED_SPLIT),
                not_judged=_compare(model, rest[~judged(rest)], NOT_JUDGED_SPLIT),
                accuracy=accuracy(ins, held), floor=repeat_floor(feats))


def fit_notes(exp) -> list[str]:
    """Sentences for the report: the runs left out of the cost model's fit because their steady
    state was not judged, with why (one sentence per reason)."""
    ev = evaluate_cached(exp)
    left = ev["not_judged"] if ev else features(exp)
    left = left[left["steady"] != steady.OK] if len(left) else left
    out = []
    for why, rows in left.groupby("steady", sort=False):
        ids = list(rows["run_id"].astype(str))
        ids = ", ".join(ids[:5]) + (f" and {len(ids) - 5} more" if len(ids) > 5 else "")
        out.append(f"{len(rows)} run(s) left out of the cost model's fit, their steady state not judged "
                   f"({why}): {ids}.")
    if not ev and out:
        out.append("No run's steady state was judged: there is no cost model to fit.")
    return out


def evaluate_cached(exp) -> dict:
    """evaluate(exp), computed once per loaded experiment (the report and two figures use it)."""
    key = (id(exp.runs), len(exp.runs), id(exp.steps), len(exp.steps), getattr(exp, "include_degraded", False))
    cached = exp.__dict__.get("_costmodel")
    if cached is None or cached[0] != key:
        cached = (key, evaluate(exp))
        exp.__dict__["_costmodel"] = cached
    return cached[1]
