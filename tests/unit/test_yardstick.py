"""The first answer's one yardstick (analysis/tables/yardstick.py, analysis/report/sections/answer.py), on made-up
tables: time to the target loss where every run learned on the same data, the projected time of the job at
steady samples/s where the loss did not fall, the runs were replayed or the node counts trained different data;
and where the two point different ways, one sentence with both and why."""
import dataclasses

import numpy as np
import pandas as pd
import pytest

from analysis.report.sections import answer
from analysis.tables import tables, yardstick

# (strategy, hosts, seconds per step, steps, loss drop per step): one machine takes 32 samples a step in 0.01 s
# (3200 samples/s); four nodes 128 in 0.03 s (4267 samples/s, 1.33x one machine's) but their loss falls less a
# step. The target, the highest of the runs' lowest means of 5 losses, is four nodes' 2.3 - 0.015 x 7 = 2.195:
# one machine reaches it at step 9 (0.09 s), four nodes at step 10 (0.3 s): 3.33x later.
POINTS = [("single", 1, 0.01, 40, 0.02), ("allreduce", 4, 0.03, 10, 0.015)]


def _experiment(tmp_path, fixed="data", compute="budgets", drop=True, loss=True):
    runs, steps = [], []
    for strategy, hosts, tau, n, fall in POINTS:
        for r in range(3):
            run_id = f"{strategy}-{hosts}-r{r}"
            runs.append(dict(experiment="x", run_id=run_id, repeat=r, hosts=hosts, bw_bps=1e8, bw="100mbit",
                             strategy=strategy, engine="pytorch", model="mlp", params=1000, global_batch=32 * hosts,
                             workers=hosts, status="ok", training_time_s=n * tau, time_per_step_s=tau, steps=n,
                             fixed=fixed, samples_per_epoch=640, epochs=2, batch_per_worker=32, compute=compute,
                             cores=1, steady="ok", steady_step_s=tau, steady_samples_per_s=32 * hosts / tau,
                             warmup_s=tau, warmup_steps=1, steady_steps=n - 1, steps_per_epoch=n / 2,
                             samples_per_step=32 * hosts, samples_trained=1280,
                             final_loss=2.3 - fall * (n - 1) * drop if loss else np.nan))
            steps += [dict(experiment="x", run_id=run_id, role="single" if hosts == 1 else "worker", task_index=0,
                           host="h1", kind="step", epoch=1, step=k, time_s=tau * (1 + 0.01 * r),
                           loss=(2.3 - fall * (k - 1) * drop) if loss else np.nan, samples_per_s=np.nan, t=1000.0 + k)
                      for k in range(1, n + 1)]
    pd.DataFrame(runs).to_csv(tmp_path / "runs.csv", index=False)
    pd.DataFrame(steps).to_csv(tmp_path / "steps.csv", index=False)
    return tables.load_experiment(tmp_path)


def _choice(exp) -> yardstick.Yardstick:
    return yardstick.choose(tables.ok_runs(tables.counted_runs(exp)), yardstick.learning(exp))


def _answer(exp) -> list[str]:
    return answer.answer_sentences(exp, answer.section_tables(exp))


def test_runs_that_learn_on_the_same_data_are_compared_by_time_to_target(tmp_path):
    exp = _experiment(tmp_path)
    assert yardstick.learning(exp)["learns"].all()
    assert _choice(exp).kind == yardstick.TARGET
    said = _answer(exp)
    assert "Yardstick: the time to reach the target loss 2.19" in said[0] or "target loss 2.2 " in said[0], said[0]
    assert "every run's loss fell on the same data" in said[0] and "would train" not in " ".join(said)
    at = next(s for s in said if s.startswith("At 100 Mbit/s"))
    assert "one one-core machine (single) reached the target in 0.091 s" in at, at
    assert "4 one-core machines in 0.3 s (0.3 s to 0.31 s): 3.33× slower, beyond the spread of the repeats" in at, at


def test_where_samples_per_second_and_time_to_target_disagree_one_sentence_says_both_and_why(tmp_path):
    at = next(s for s in _answer(_experiment(tmp_path)) if s.startswith("At 100 Mbit/s"))
    assert ("4 one-core machines process samples 1.33× faster but learn less from each: they reach the target "
            "3.33× later (each update averages 128 samples against one machine's 32, so 4× fewer updates over "
            "the same data).") in at, at
    assert "faster" not in at.split(" process samples ")[0]       # never called faster on its own


def test_runs_whose_loss_does_not_fall_are_compared_at_steady_samples_per_second(tmp_path):
    exp = _experiment(tmp_path, drop=False)
    assert not yardstick.learning(exp)["learns"].any()
    assert _choice(exp) == yardstick.Yardstick(yardstick.THROUGHPUT, "the loss did not clearly fall (3% or more) in any of the 6 runs")
    said = _answer(exp)
    assert "Yardstick: the projected time of the job at steady samples per second, as the loss did not clearly fall" in said[0]
    at = next(s for s in said if s.startswith("At 100 Mbit/s"))
    assert "would train" in at and "1.33× faster" in at and "reached the target" not in at


def test_replayed_runs_have_no_loss_and_are_compared_at_steady_samples_per_second(tmp_path):
    exp = _experiment(tmp_path, compute="replay", loss=False)
    assert _choice(exp) == yardstick.Yardstick(yardstick.THROUGHPUT, "the runs replayed their compute (no loss)")
    assert "time_to_target" not in answer.section_tables(exp)
    assert "as the runs replayed their compute (no loss)" in _answer(exp)[0]


def test_runs_without_a_loss_or_on_different_data_are_compared_at_steady_samples_per_second(tmp_path):
    assert _choice(_experiment(tmp_path, loss=False)) == yardstick.Yardstick(
        yardstick.THROUGHPUT, "the runs logged no loss to compare by")
    steps = _experiment(tmp_path, fixed="steps")
    assert _choice(steps).why == "the node counts trained different data (workload.fixed: steps)"


@pytest.mark.parametrize("speed, ratio, apart", [(1.18, 1 / 3.11, True), (0.5, 1.2, True), (1.5, 1.2, False),
                                                 (0.5, 0.9, False), (1.002, 0.5, False), (np.nan, 0.5, False)])
def test_opposite_directions(speed, ratio, apart):
    assert yardstick.opposite(speed, ratio) is apart


def test_what_changes_how_much_a_sample_teaches():
    one = pd.DataFrame({"global_batch": [32], "workers": [1], "strategy": ["single"]})
    four = pd.DataFrame({"global_batch": [128], "workers": [4], "strategy": ["allreduce"]})
    ps = pd.DataFrame({"global_batch": [96], "workers": [3], "strategy": ["ps"]})
    powersgd = four.assign(compression="powersgd", rank=4, start_step=2)
    local_sgd = four.assign(compression="none", sync_every=8, start_step=2)
    assert yardstick.per_sample_reasons(powersgd, one, "allreduce") == [
        "each update averages 128 samples against one machine's 32, so 4× fewer updates over the same data",
        "powersgd rank 4 compresses the gradients to low rank"]
    assert yardstick.per_sample_reasons(ps, one, "ps") == [
        "the parameter server applies each worker's gradients without waiting for the others (asynchronous)"]
    assert yardstick.per_sample_reasons(local_sgd, local_sgd, "allreduce") == [
        "local SGD every 8 lets each node step alone between averages"]
    scaled = four.assign(learning_rate=0.004, lr_scaling="linear")     # workload.lr_scaling: a larger batch's step
    assert yardstick.per_sample_reasons(scaled, one.assign(learning_rate=0.001, lr_scaling="linear"), "allreduce") == [
        "each update averages 128 samples against one machine's 32, so 4× fewer updates over the same data, each at "
        "4× one machine's learning rate (lr_scaling linear)"]


def test_a_loss_that_drifts_at_chance_level_has_not_learned(tmp_path):
    """2.315 to 2.304 over a run (10 classes at chance level) is not learning: no time to target by it."""
    exp = _experiment(tmp_path)
    lead = exp.steps
    drifting = lead.assign(loss=2.315 - 0.011 * (lead["step"] - 1) / (lead["step"].max() - 1))
    finals = drifting.sort_values("step").groupby("run_id")["loss"].last()
    exp = dataclasses.replace(exp, steps=drifting, runs=exp.runs.assign(final_loss=exp.runs["run_id"].map(finals)))
    assert not yardstick.learning(exp)["learns"].any()
    assert _choice(exp).kind == yardstick.THROUGHPUT
