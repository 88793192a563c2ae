"""strategy auto: the advisor's choice (by samples/s over the job: steady rate and warm-up), its
model, the runner glue, the spec keys, the scorecard (measured steady samples/s)."""
import math
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis.model import advisor, costmodel
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
    fixture = str(with_steps(FIXTURE, tmp_path / "exp"))
    m = advisor.load_model(fixture)
    assert m.fits["allreduce"].n_runs > 0 and m.fits["ps"].n_runs > 0
    assert advisor.load_model(None).source == "defaults"
    both = advisor.load_model([fixture, fixture])
    assert both.fits["allreduce"].n_runs == 2 * m.fits["allreduce"].n_runs
    empty = tmp_path / "empty"
    shutil.copytree(fixture, empty)
    runs = pd.read_csv(empty / "runs.csv")
    runs.assign(status="failed").to_csv(empty / "runs.csv", index=False)
    with pytest.raises(ValueError, match="no successful run whose steady state was judged"):
        advisor.load_model(str(empty))
    # runs whose steady state was not judged cannot be fitted on either
    bare = with_steps(FIXTURE, tmp_path / "bare", only=set())
    with pytest.raises(ValueError, match="steady state was judged"):
        advisor.load_model(str(bare))


def _warm_model(ps_warmup: float):
    """Defaults, with ps faster in the steady state than all-reduce but a warm-up of `ps_warmup` s."""
    model = costmodel.default_model()
    model.fits["ps"].params.update(w=ps_warmup, v=0.0, beta=0.0)
    model.fits["allreduce"].params.update(w=0.5, v=0.0, beta=0.0)
    return model


def test_advisor_compares_samples_per_second_over_the_job_not_time_per_step():
    hosts = [f"h{i}" for i in range(1, 7)]
    slow_host = {"h6": 0.02}            # 10x slower: all-reduce waits for it; ps's other workers do not
    model = _warm_model(ps_warmup=60.0)
    kw = dict(bw_bps=9.6e8, configured_bps=1e9, cpu=slow_host)
    steady = advisor.advise(model, hosts, 200_000, 32, None, **kw)
    assert steady.samples_per_s_ps > steady.samples_per_s_allreduce and steady.strategy == "ps"
    assert np.isnan(steady.job_samples_per_s_ps) and "steady samples/s" in steady.reason
    # the steady step and the steady samples/s belong together: samples per step / step
    assert steady.samples_per_s_allreduce == pytest.approx(6 * 32 / steady.predicted_step_s_allreduce)
    assert steady.samples_per_s_ps == pytest.approx(32 / steady.predicted_step_s_ps)
    # a short job: ps's warm-up of a minute outweighs its faster steady state
    short = advisor.advise(model, hosts, 200_000, 32, None, samples=3200, **kw)
    assert short.strategy == "allreduce"
    for s in ("allreduce", "ps"):
        rate, warm = getattr(short, f"samples_per_s_{s}"), getattr(short, f"warmup_s_{s}")
        assert short.deciding(s) == pytest.approx(3200 / (warm + 3200 / rate))
    assert "samples/s over the job" in short.reason and "over a job of 3200 samples" in short.reason
    long = advisor.advise(model, hosts, 200_000, 32, None, samples=1e8, **kw)
    assert long.strategy == "ps"
    # fixed steps: each strategy runs the steps, all-reduce training six times the samples per step
    steps = advisor.advise(model, hosts, 200_000, 32, 100, **kw)
    assert steps.deciding("allreduce") == pytest.approx(
        100 * 192 / (steps.warmup_s_allreduce + 100 * steps.predicted_step_s_allreduce))
    assert steps.deciding("ps") == pytest.approx(100 * 32 / (steps.warmup_s_ps + 100 * steps.predicted_step_s_ps))


def test_the_job_of_a_workload_is_its_samples_under_fixed_data_and_its_steps_under_fixed_steps():
    from testbed.spec.models import Workload
    data = Workload(strategy="auto", epochs=2, steps_per_epoch=10, batch_per_worker=16)
    assert data.fixed == "data" and advisor.job_of(data) == {"steps": None, "samples": 2 * 10 * 16}
    assert advisor.job_of(Workload(strategy="auto", epochs=2, samples_per_epoch=1000)) == {"steps": None,
                                                                                           "samples": 2000}
    assert advisor.job_of(Workload(strategy="auto", fixed="steps", epochs=3, steps_per_epoch=7)) == {"steps": 21}
    # what decide() passes: advise's arguments but the job, then the job (either kind)
    model, kw = _warm_model(ps_warmup=1.0), dict(bw_bps=9.6e8, configured_bps=1e9)
    for workload in (data, Workload(strategy="auto", fixed="steps", epochs=3, steps_per_epoch=7)):
        advice = advisor.advise(model=model, hosts=["h1", "h2"], gradient_bytes=200_000, batch_per_worker=16, **kw,
                                **advisor.job_of(workload))
        assert advice.strategy in ("allreduce", "ps")


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
    from testbed.spec.rules.experiment import advisor_results_paths
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
    from analysis.report.sections import cost_model
    base = dict(status="ok", training_time_s=1.0, model="mlp", hosts=4, bw="10mbit", bw_bps=1e7, steady="ok")
    runs = pd.DataFrame([
        # the whole run's samples/s (warm-up included) says ps; the steady samples/s say all-reduce
        dict(base, strategy="allreduce", samples_per_s=90.0, steady_samples_per_s=300.0),
        dict(base, strategy="ps", samples_per_s=100.0, steady_samples_per_s=120.0),
        dict(base, strategy="allreduce", advisor_choice="allreduce", samples_per_s=290.0,
             predicted_step_s_allreduce=0.4, predicted_step_s_ps=0.3),
        dict(base, bw_bps=1e9, bw="1gbit", strategy="ps", advisor_choice="ps", samples_per_s=500.0,
             predicted_step_s_allreduce=0.1, predicted_step_s_ps=0.05),
    ])
    card = advisor.scorecard(runs)
    assert list(card["right"]) == [True, None]          # 1 Gbit/s: neither strategy measured alone
    assert card.loc[0, "measured_samples_per_s_allreduce"] == 300.0 and card.loc[0, "measured_better"] == "allreduce"
    assert advisor.scorecard(runs.drop(columns="advisor_choice")).empty
    text = cost_model.accuracy_sentences({"advisor": card})
    assert text == ["strategy auto chose allreduce 1 time(s), ps 1 time(s); where both strategies were also "
                    "measured it chose the one with more samples/s in 1 of 1 points."]
    # a run whose steady state was not judged does not count
    unjudged = runs.assign(steady=["ok", "too few steady steps to judge", "ok", "ok"])
    assert list(advisor.scorecard(unjudged)["right"]) == [None, None]


def test_switch_verdict_over_the_samples_left_counts_the_other_strategys_warm_up():
    # all-reduce predicted at 0.3 s per 48-sample step (160 samples/s) after a 2 s warm-up
    advice = advisor.Advice("allreduce", 0.3, 0.25, 160.0, 64.0, "", "hand-made", warmup_s_allreduce=2.0)
    # fixed data: 1600 samples left, whichever strategy trains them (ps in 100 steps of 16)
    v = advisor.switch_verdict(1, "ps", 0.25, 16, advice, 0.2, restart_s=6.0, steps_left=100, samples_left=1600)
    assert v.predicted_samples_per_s == pytest.approx(1600 / (2.0 + 6.0 + 1600 / 160.0))
    assert "2 s of warm-up and 6 s to restart over 1600 samples left" in v.reason
    # fixed steps: the other runs the steps left, each of its own samples per step
    w = advisor.switch_verdict(1, "ps", 0.25, 16, advice, 0.2, restart_s=6.0, steps_left=100)
    assert w.predicted_samples_per_s == pytest.approx(100 * 48 / (2.0 + 6.0 + 100 * 0.3))
