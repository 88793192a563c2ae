"""strategy auto: the advisor's choice, its model, the runner glue, the spec keys, the scorecard."""
import math
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis import advisor, costmodel
from test_costmodel import with_steps

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "report_small"


def _model():
    return costmodel.default_model()


# -- strategy auto ---------------------------------------------------------------------------
def test_advisor_prefers_ps_with_a_slow_worker_and_all_reduce_on_a_fast_even_network():
    model = _model()
    hosts = [f"h{i}" for i in range(1, 7)]
    even = advisor.advise(model, hosts, 200_000, 32, 20, bw_bps=9.6e8, configured_bps=1e9)
    assert even.strategy == "allreduce"
    assert even.samples_per_s_allreduce > even.samples_per_s_ps
    slow = advisor.advise(model, hosts, 200_000, 32, 20, bw_bps=9.6e8, configured_bps=1e9,
                          cpu={"h6": 0.002})     # one host nearly without CPU: all-reduce waits for it
    assert slow.strategy == "ps"
    assert slow.predicted_step_s_allreduce > even.predicted_step_s_allreduce
    cols = slow.columns()
    assert cols["advisor_choice"] == "ps"
    assert cols["predicted_step_s_allreduce"] == pytest.approx(slow.predicted_step_s_allreduce, rel=1e-4)
    assert "strategy auto chose ps" in slow.reason


def test_advisor_without_room_for_ps_and_without_checks():
    model = _model()
    a = advisor.advise(model, ["h1", "h2"], 200_000, 32, 20, bw_bps=None, configured_bps=1e7)
    assert a.strategy == "allreduce" and math.isnan(a.predicted_step_s_ps)
    assert a.columns()["predicted_step_s_ps"] is None
    assert "ps needs 3 hosts" in a.reason
    # no measurement: configured x the model's measured/configured ratio
    b = advisor.advise(model, ["h1", "h2"], 200_000, 32, 20, bw_bps=1e7 * model.rho, configured_bps=1e7)
    assert a.predicted_step_s_allreduce == pytest.approx(b.predicted_step_s_allreduce)
    with pytest.raises(ValueError, match="needs a bandwidth"):
        advisor.advise(model, ["h1", "h2"], 200_000, 32, 20, bw_bps=None, configured_bps=None)
    # an explicit placement is honoured
    c = advisor.advise(model, ["h1", "h2"], 200_000, 32, 20, bw_bps=1e7, configured_bps=1e7,
                       ps_placement={"chief": ["h1"], "ps": ["h1"], "worker": ["h1", "h2"]})
    assert np.isfinite(c.predicted_step_s_ps)


def test_advisor_model_from_results(tmp_path):
    fixture = str(with_steps(FIXTURE, tmp_path / "exp"))      # every run's steps: its steady state judged
    m = advisor.load_model(fixture)
    assert m.fits["allreduce"].n_runs > 0 and m.fits["ps"].n_runs > 0
    assert advisor.load_model(None).source == "defaults"
    both = advisor.load_model([fixture, fixture])
    assert both.fits["allreduce"].n_runs == 2 * m.fits["allreduce"].n_runs
    empty = tmp_path / "empty"
    shutil.copytree(fixture, empty)
    runs = pd.read_csv(empty / "runs.csv")
    runs.assign(status="failed").to_csv(empty / "runs.csv", index=False)
    with pytest.raises(ValueError, match="no successful run"):
        advisor.load_model(str(empty))


def test_provisional_workload():
    from testbed.spec.models import Workload
    w = Workload(strategy="auto")
    assert advisor.provisional(w).strategy == "allreduce"
    assert w.strategy == "auto"
    same = Workload(strategy="ps")
    assert advisor.provisional(same) is same


def test_job_gradient_bytes():
    from testbed.spec.models import Workload
    from workloads.models import gradient_bytes
    w = Workload(strategy="auto", model="mlp", model_params={"width": 64, "depth": 1})
    assert advisor.job_gradient_bytes(w) == gradient_bytes("mlp", {"width": 64, "depth": 1})
    assert advisor.job_gradient_bytes(Workload(strategy="auto", advisor={"gradient_size": "2mb"})) == 2_000_000


# -- strategy auto in the experiment file ----------------------------------------------------
def test_spec_strategy_auto(tmp_path):
    from spec_helpers import issues, load, one, write
    from testbed.spec.rules import advisor_results_paths
    # two hosts are enough: with no room for ps the advisor picks all-reduce
    exp = load(tmp_path, "name: demo\ntopology: {hosts: 2}\nworkload: {strategy: auto}\n")
    assert exp.workload.strategy == "auto" and exp.workload.advisor.results is None
    # results relative to the file's folder when there, else to the working directory
    res = tmp_path / "res"
    res.mkdir()
    (res / "runs.csv").write_text("run_id\n")
    exp = load(tmp_path, "name: demo\nworkload:\n  strategy: auto\n  advisor: {results: res}\n")
    assert advisor_results_paths(exp) == [str(res)]
    exp = load(tmp_path, "name: demo\nworkload:\n  strategy: auto\n  advisor: {results: [res, res]}\n")
    assert advisor_results_paths(exp) == [str(res)] * 2
    issue = one(tmp_path, "name: demo\nworkload:\n  strategy: auto\n  advisor: {results: nope}\n")
    assert (issue.line, issue.key) == (4, "workload.advisor.results") and "no runs.csv" in issue.message
    # a user's script: the testbed cannot count its parameters before it runs
    write(tmp_path, "print()\n", "train.py")
    issue = one(tmp_path, "name: demo\nworkload:\n  strategy: auto\n  script: train.py\n")
    assert issue.key == "workload.advisor.gradient_size"
    assert load(tmp_path, "name: demo\nworkload:\n  strategy: auto\n  script: train.py\n"
                "  advisor: {gradient_size: 20mb}\n").workload.advisor.gradient_size == 20_000_000
    found = issues(tmp_path, "name: demo\ntopology: {hosts: 3}\nworkload:\n  strategy: auto\n"
                   "  ps: {placement: {chief: [h1], ps: [h9], worker: [h2]}}\n")
    assert any("no host 'h9'" in i.message for i in found)
    issue = one(tmp_path, "name: demo\nworkload: {strategy: best}\n")
    assert issue.key == "workload.strategy" and "auto" in issue.message


def test_advisor_scorecard_and_report_sentence():
    from analysis import report
    base = dict(status="ok", training_time_s=1.0, model="mlp", hosts=4, bw="10mbit", bw_bps=1e7)
    runs = pd.DataFrame([
        dict(base, strategy="allreduce", samples_per_s=300.0),
        dict(base, strategy="ps", samples_per_s=100.0),
        dict(base, strategy="allreduce", advisor_choice="allreduce", samples_per_s=290.0,
             predicted_step_s_allreduce=0.4, predicted_step_s_ps=0.3),
        dict(base, bw_bps=1e9, bw="1gbit", strategy="ps", advisor_choice="ps", samples_per_s=500.0,
             predicted_step_s_allreduce=0.1, predicted_step_s_ps=0.05),
    ])
    card = advisor.scorecard(runs)
    assert list(card["right"]) == [True, None]          # 1 Gbit/s: neither strategy measured alone
    assert card.loc[0, "measured_samples_per_s_allreduce"] == 300.0
    assert advisor.scorecard(runs.drop(columns="advisor_choice")).empty
    text = report._cost_model_sentences({"advisor": card})
    assert text == ["strategy auto chose allreduce 1 time(s), ps 1 time(s); where both strategies were also "
                    "measured it chose the one with more samples/s in 1 of 1 points."]
