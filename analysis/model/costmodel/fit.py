"""Fitting the cost model per strategy: Levenberg-Marquardt on log(predicted/measured) of the steady steps
and warm-ups, a soft-L1 loss and a weak pull towards the defaults."""
from __future__ import annotations

import json
import math
import os

import numpy as np
import pandas as pd

from analysis.model.costmodel.run_features import features, fitted_rows, judged
from analysis.model.costmodel.formulas import (DEFAULT_REFERENCE, DEFAULTS, PARAMS, STRATEGIES, TCP_CEILING, CostModel,
                                              Point, StrategyFit, slowdowns, steady_time, warmup_time)

# -- fitting ---------------------------------------------------------------------------------
LOSS_SCALE = 0.25      # soft-L1 loss: log errors beyond ~25% count linearly, not squared
PRIOR_WEIGHT = 0.01    # pull (in log units) towards DEFAULTS: decides only what the data cannot


AT_LEAST_ONE = ("p", "gamma")   # p >= 1 (a norm); gamma >= 1 (no faster than the measured goodput)


def _to_theta(family: str, p: dict) -> np.ndarray:
    # start no closer than 0.02 to the bound 1, where the parametrisation would leave no gradient
    return np.array([math.log(max(p[k] - 1.0, 0.02)) if k in AT_LEAST_ONE else math.log(max(p[k], 1e-12))
                     for k in PARAMS[family]])


def _from_theta(family: str, theta) -> dict:
    return {k: (1.0 + math.exp(t)) if k in AT_LEAST_ONE else math.exp(t)
            for k, t in zip(PARAMS[family], np.clip(theta, -30, 30))}


def _equations(rows: pd.DataFrame, u: float, cores: float, work_ref: float) -> list:
    """(kind, Point, measured): per run whose steady state was judged, a steady equation and, when
    its warm-up was measured, a warm-up equation; a run without a judged steady step has none (it
    is left out of the fit: ``fitted_rows``)."""
    eqs = []
    for _, f in rows.iterrows():
        if not (np.isfinite(f["steady_s"]) and f["steady_s"] > 0):
            continue
        fr = json.loads(f["fractions"]) if f["fractions"] else None
        rtt = f["rtt_s"] if np.isfinite(f["rtt_s"]) else 0.0
        pt = Point(f["family"], int(f["workers"]), max(int(f["shards"] or 1), 1), f["s_bits"],
                   f["bw_meas_bps"], rtt, slowdowns(f["workers"], u, cores, fr, _shared(f)),
                   f["s_bits"] * f["batch"] / work_ref, _share(f), *_setting(f))
        eqs.append(("steady", pt, f["steady_s"]))
        if np.isfinite(f["warmup_s"]) and f["warmup_s"] > 0:
            eqs.append(("warmup", pt, f["warmup_s"]))
    return eqs


def _share(f) -> float:
    """A feature row's ring share (absent or NaN, as in features of older code: 1)."""
    v = f.get("share", 1.0)
    return 1.0 if v is None or not np.isfinite(v) or v < 1 else float(v)


def _setting(f) -> tuple[float, float]:
    """A feature row's (bytes factor, sync every) of its workload.communication (absent or NaN: plain, 1 and 1)."""
    out = []
    for key in ("bytes_factor", "sync_every"):
        v = f.get(key, 1.0)
        out.append(1.0 if v is None or not np.isfinite(v) or v <= 0 else float(v))
    return out[0], out[1]


def _shared(f) -> bool:
    """A feature row's workers shared one machine (absent or NaN: yes, as before budgets)."""
    v = f.get("shared", True)
    return True if v is None or (isinstance(v, float) and math.isnan(v)) else bool(v)


def _predict_eq(family, p, kind, pt) -> float:
    return steady_time(family, p, pt) if kind == "steady" else warmup_time(family, p, pt)


def _residuals(family, theta, eqs) -> np.ndarray:
    p = _from_theta(family, theta)
    return np.array([math.log(max(_predict_eq(family, p, k, pt), 1e-12) / y) for k, pt, y in eqs])


def _soft_l1(r):
    z = (r / LOSS_SCALE) ** 2
    return 2 * LOSS_SCALE ** 2 * (np.sqrt(1 + z) - 1), 1 / np.sqrt(1 + z)


def levenberg_marquardt(fun, theta0, prior, prior_weight=PRIOR_WEIGHT, iters=300):
    """Minimise sum soft_l1(fun(theta)) + prior_weight^2 |theta - prior|^2 (IRLS inside LM).
    Returns (theta, data Jacobian at the optimum)."""
    theta = np.array(theta0, dtype=float)

    def cost(th):
        return float(np.sum(_soft_l1(fun(th))[0]) + prior_weight ** 2 * np.sum((th - prior) ** 2))

    def jac(th, r0):
        j = np.empty((len(r0), len(th)))
        for i in range(len(th)):
            h = np.zeros_like(th)
            h[i] = 1e-6
            j[:, i] = (fun(th + h) - r0) / 1e-6
        return j

    lam, c0 = 1e-2, cost(theta)
    r = fun(theta)
    j = jac(theta, r)
    for _ in range(iters):
        _, wts = _soft_l1(r)
        a = j.T @ (wts[:, None] * j) + prior_weight ** 2 * np.eye(len(theta))
        g = j.T @ (wts * r) + prior_weight ** 2 * (theta - prior)
        step = np.linalg.solve(a + lam * np.diag(np.diag(a) + 1e-12), -g)
        trial = theta + step
        c1 = cost(trial)
        if c1 < c0:
            theta, c0, lam = trial, c1, max(lam / 3, 1e-9)
            r = fun(theta)
            j = jac(theta, r)
            if np.max(np.abs(step)) < 1e-7:
                break
        else:
            lam *= 4
            if lam > 1e9:
                break
    return theta, j


def fit_family(feats: pd.DataFrame, family: str, u: float, cores: float, work_ref: float) -> StrategyFit:
    """Fit one strategy's parameters on its runs in `feats` whose steady state was judged."""
    rows = feats[(feats["family"] == family) & judged(feats)]
    eqs = _equations(rows, u, cores, work_ref)
    prior = _to_theta(family, DEFAULTS[family])
    if not eqs:
        return StrategyFit(dict(DEFAULTS[family]), 0, list(PARAMS[family]))
    theta, j = levenberg_marquardt(lambda th: _residuals(family, th, eqs), prior, prior)
    # a parameter whose change moves no prediction was decided by the defaults alone
    sensitivity = np.abs(j).max(axis=0) * np.maximum(np.abs(theta), 1.0)
    defaulted = [k for k, s in zip(PARAMS[family], sensitivity) if s < 1e-3]
    return StrategyFit(_from_theta(family, theta), len(rows), defaulted)


def fit_features(feats: pd.DataFrame, cores: float | None = None, u: float | None = None,
                 rho: float | None = None, source: str = "") -> CostModel:
    """Fit every strategy present in `feats` (rows of `features`); absent strategies get defaults."""
    cores = float(cores or feats.attrs.get("cores") or os.cpu_count() or 1)
    u = float(u or feats.attrs.get("u") or 1.0)
    work = feats["s_bits"] * feats["batch"]
    work_ref = float(work.median()) if len(feats) else DEFAULT_REFERENCE["work"]
    fits = {fam: fit_family(feats, fam, u, cores, work_ref) for fam in STRATEGIES}
    rtt, steps = feats["rtt_s"].dropna(), feats["steps"].dropna()
    samples = feats["samples_trained"].dropna() if "samples_trained" in feats else pd.Series(dtype=float)
    return CostModel(fits=fits, cores=cores, u=u,
                     rho=float(rho or feats.attrs.get("rho") or TCP_CEILING),
                     rtt_s=float(rtt.median()) if len(rtt) else DEFAULT_REFERENCE["rtt_s"],
                     steps=int(steps.median()) if len(steps) else DEFAULT_REFERENCE["steps"],
                     work=work_ref, source=source, samples=float(samples.median()) if len(samples) else 0.0)


def fit(exp, cores: float | None = None, include_degraded: bool = False) -> CostModel:
    """Fit on every ok run of an experiment (analysis.tables.tables.Experiment) whose steady state was
    judged, degraded runs left out unless include_degraded."""
    return fit_features(fitted_rows(features(exp, cores), include_degraded), source=str(exp.path))
