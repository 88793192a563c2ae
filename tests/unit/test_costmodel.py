"""Alpha-beta cost model: hand-computed values, prediction per run, alpha fit."""
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis import costmodel

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "report_small"


def test_ring_allreduce_hand_computed():
    # N=4, S=1e6 bytes, B=10 Mbit/s, alpha=1 ms: 2*3/4 * 8e6/1e7 + 6*0.001 = 1.2 + 0.006
    t = costmodel.ring_allreduce_time(4, 1e6 * 8, 10e6, 0.001)
    assert float(t) == pytest.approx(1.206)
    # bandwidth term alone: 1.5 * 0.8 s
    assert float(costmodel.ring_allreduce_time(4, 8e6, 1e7, 0.0)) == pytest.approx(1.2)


def test_ring_allreduce_one_node_is_free():
    assert float(costmodel.ring_allreduce_time(1, 8e6, 1e7, 0.001)) == 0.0


def test_parameter_server_hand_computed():
    # N=2 workers, k=1 server: 2*8e6*2/(1*1e7) + 2*0.001 = 3.202; k=2 halves the bw term
    assert float(costmodel.parameter_server_time(2, 1, 8e6, 1e7, 0.001)) == pytest.approx(3.202)
    assert float(costmodel.parameter_server_time(2, 2, 8e6, 1e7, 0.001)) == pytest.approx(1.602)
    # servers unknown (NaN) counts as one server
    assert float(costmodel.parameter_server_time(2, np.nan, 8e6, 1e7, 0.0)) == pytest.approx(3.2)


def _runs(rows):
    base = dict(status="ok", model="mlp", gradient_bytes=1_000_000, servers=0,
                training_time_s=1.0, run_id="r")
    return pd.DataFrame([{**base, **r} for r in rows])


def test_predict_per_row():
    runs = _runs([
        dict(strategy="allreduce", hosts=4, workers=4, bw_bps=1e7),
        dict(strategy="ps", hosts=4, workers=2, servers=1, bw_bps=1e7),
        dict(strategy="single", hosts=1, workers=1, bw_bps=1e7),
        dict(strategy="allreduce", hosts=1, workers=1, bw_bps=1e7),
        dict(strategy="allreduce", hosts=2, workers=np.nan, bw_bps=1e8),  # workers from hosts
    ])
    got = costmodel.predict(runs, 0.001).tolist()
    assert got == pytest.approx([1.206, 3.202, 0.0, 0.0, 8e6 / 1e8 + 0.002])


def _synthetic(alpha, compute=0.02):
    rows = [dict(strategy="allreduce", hosts=1, workers=1, bw_bps=1e7, time_per_step_s=compute)]
    for n in (2, 3, 4):
        for bw in (1e7, 1e8, 1e9):
            comm = float(costmodel.ring_allreduce_time(n, 8e6, bw, alpha))
            rows.append(dict(strategy="allreduce", hosts=n, workers=n, bw_bps=bw,
                             time_per_step_s=compute + comm))
    rows.append(dict(strategy="ps", hosts=4, workers=2, servers=1, bw_bps=1e8,
                     time_per_step_s=compute + float(
                         costmodel.parameter_server_time(2, 1, 8e6, 1e8, alpha))))
    return _runs(rows)


def test_fit_alpha_recovers_alpha_on_exact_data():
    runs = _synthetic(0.003)
    assert costmodel.fit_alpha(runs) == pytest.approx(0.003, rel=1e-9)
    cmp = costmodel.comparison(runs)
    assert cmp["rel_error"].abs().max() < 1e-9
    assert (cmp["compute_s"] == 0.02).all()


def test_fit_alpha_is_least_squares_closed_form():
    runs = _synthetic(0.003)
    runs.loc[runs["hosts"] == 2, "time_per_step_s"] += 0.05  # noise on a subset
    multi = runs[runs["hosts"] > 1]
    n = multi["workers"].to_numpy(float)
    coef = np.where(multi["strategy"] == "ps", 2.0, 2 * (n - 1))
    bw_term = costmodel.predict(multi, 0.0).to_numpy()
    y = multi["time_per_step_s"].to_numpy() - 0.02 - bw_term
    assert costmodel.fit_alpha(runs) == pytest.approx(coef @ y / (coef @ coef))


def test_fit_alpha_clamped_and_nan():
    runs = _synthetic(0.0)
    runs.loc[runs["hosts"] > 1, "time_per_step_s"] *= 0.5  # faster than the bandwidth allows
    assert costmodel.fit_alpha(runs) == 0.0
    assert np.isnan(costmodel.fit_alpha(runs[runs["hosts"] > 1]))  # no 1-node compute term


def test_failed_runs_ignored():
    runs = _synthetic(0.003)
    bad = runs.iloc[[1]].assign(status="failed", time_per_step_s=1000.0)
    assert costmodel.fit_alpha(pd.concat([runs, bad])) == pytest.approx(0.003)


def test_comparison_on_fixture_matches_hand_computation():
    runs = pd.read_csv(FIXTURE / "runs.csv")
    alpha = costmodel.fit_alpha(runs)
    cmp = costmodel.comparison(runs, alpha)
    ok = runs[runs["status"] == "ok"]
    assert len(cmp) == len(ok)
    compute = ok.loc[ok["hosts"] == 1, "time_per_step_s"].mean()
    row = ok[(ok["strategy"] == "allreduce") & (ok["hosts"] == 4)
             & (ok["bw_bps"] == 10_000_000) & (ok["repeat"] == 0)].iloc[0]
    want = compute + 2 * 3 / 4 * row["gradient_bytes"] * 8 / 1e7 + 6 * alpha
    got = cmp.set_index("run_id").loc[row["run_id"]]
    assert got["predicted_step_s"] == pytest.approx(want)
    assert got["rel_error"] == pytest.approx((want - row["time_per_step_s"]) / row["time_per_step_s"])
