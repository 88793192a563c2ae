"""Alpha-beta cost model of the communication in one training step.

Symbols: N workers, k parameter servers, S = gradient_bytes * 8 (bits), B = configured link
bandwidth (bits/s), alpha = per-message latency (s).

* Ring all-reduce (reduce-scatter + all-gather, 2(N-1) rounds of S/N each)::

      t_ring = 2(N-1)/N * S/B + 2(N-1) * alpha

* Parameter server: every worker pushes its gradient (S) and pulls the parameters (S);
  the variables are split over the k servers, so each server link carries N*S/k one way
  for the push and N*S/k the other way for the pull, one after the other::

      t_ps = 2 * S * N / (k * B) + 2 * alpha

One node (N = 1) or strategy 'single' communicates nothing: t = 0.

Measured communication per step = time_per_step_s - compute, where compute is the mean
1-node time per step of the same model. ``fit_alpha`` fits alpha by least squares on that.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from analysis.tables import ok_runs


def ring_allreduce_time(n, s_bits, b_bps, alpha):
    """2(N-1)/N * S/B + 2(N-1)*alpha; 0 when N <= 1."""
    n = np.asarray(n, dtype=float)
    t = 2 * (n - 1) / n * np.asarray(s_bits, float) / np.asarray(b_bps, float) \
        + 2 * (n - 1) * alpha
    return np.where(n > 1, t, 0.0)


def parameter_server_time(n, k, s_bits, b_bps, alpha):
    """2*S*N/(k*B) + 2*alpha; 0 when there are no workers."""
    n = np.asarray(n, dtype=float)
    k = np.maximum(np.nan_to_num(np.asarray(k, dtype=float), nan=1.0), 1.0)
    t = 2 * np.asarray(s_bits, float) * n / (k * np.asarray(b_bps, float)) + 2 * alpha
    return np.where(n > 0, t, 0.0)


def _terms(runs: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Per run: (bandwidth term in s, coefficient of alpha), so t = bw_term + coef*alpha."""
    n = runs["workers"].fillna(runs["hosts"]).to_numpy(float)
    k = runs["servers"].to_numpy(float)
    s = runs["gradient_bytes"].to_numpy(float) * 8
    b = runs["bw_bps"].to_numpy(float)
    strat = runs["strategy"].astype(str).to_numpy()
    is_ps = strat == "ps"
    bw_term = np.where(is_ps, parameter_server_time(n, k, s, b, 0.0),
                       ring_allreduce_time(n, s, b, 0.0))
    coef = np.where(is_ps, np.where(n > 0, 2.0, 0.0), np.where(n > 1, 2 * (n - 1), 0.0))
    single = (strat == "single") | (runs["hosts"].to_numpy(float) <= 1)
    return np.where(single, 0.0, bw_term), np.where(single, 0.0, coef)


def predict(runs_df: pd.DataFrame, alpha: float) -> pd.Series:
    """Predicted communication time per step (s) for each row of a runs table."""
    bw_term, coef = _terms(runs_df)
    return pd.Series(bw_term + coef * alpha, index=runs_df.index, name="predicted_comm_s")


def compute_term(runs_df: pd.DataFrame) -> pd.Series:
    """Per row: mean 1-node time per step of the same model (ok runs), NaN if none."""
    ok = ok_runs(runs_df)
    one = ok[ok["hosts"] == 1].groupby("model")["time_per_step_s"].mean()
    return runs_df["model"].map(one).rename("compute_s")


def fit_alpha(runs_df: pd.DataFrame) -> float:
    """Least-squares alpha (>= 0) over ok multi-node runs: measured comm = bw_term + coef*alpha.

    Returns NaN when no run can be used (no 1-node baseline or no multi-node run).
    """
    ok = ok_runs(runs_df)
    measured = ok["time_per_step_s"] - compute_term(ok)
    bw_term, coef = _terms(ok)
    use = (coef > 0) & measured.notna().to_numpy() & np.isfinite(bw_term)
    if not use.any():
        return float("nan")
    y = measured.to_numpy(float)[use] - bw_term[use]
    c = coef[use]
    return max(0.0, float(np.dot(c, y) / np.dot(c, c)))


def comparison(runs_df: pd.DataFrame, alpha: float | None = None) -> pd.DataFrame:
    """Measured vs predicted time per step for every ok run, with relative errors.

    predicted_step_s = compute_s + predicted_comm_s; rel_error = (pred - meas) / meas.
    """
    ok = ok_runs(runs_df)
    if alpha is None:
        alpha = fit_alpha(runs_df)
    alpha_used = 0.0 if np.isnan(alpha) else alpha
    out = ok.reindex(columns=["run_id", "model", "strategy", "hosts", "workers", "servers",
                              "bw_bps", "bw", "gradient_bytes"])
    out["measured_step_s"] = ok["time_per_step_s"]
    out["compute_s"] = compute_term(runs_df).loc[ok.index]
    out["measured_comm_s"] = out["measured_step_s"] - out["compute_s"]
    out["predicted_comm_s"] = predict(ok, alpha_used)
    out["predicted_step_s"] = out["compute_s"] + out["predicted_comm_s"]
    out["rel_error"] = (out["predicted_step_s"] - out["measured_step_s"]) / out["measured_step_s"]
    out["alpha_s"] = alpha_used
    return out.sort_values(["strategy", "bw_bps", "hosts", "run_id"]).reset_index(drop=True)
