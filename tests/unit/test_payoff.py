"""The report's comparison of communication settings by time to a target loss (analysis/tables/payoff.py), on
made-up tables: the numbers, the verdicts with the spread, the pay-off sentences, the report's sections."""
import numpy as np
import pandas as pd
import pytest

from analysis import report
from analysis.tables import payoff, spread, tables

# (setting, strategy, hosts, bw, compression, rank, sync_every, seconds per step, steps)
SETTINGS = [
    ("one", "single", 1, 1e9, "none", np.nan, 1, 0.01, 40),
    ("plain", "allreduce", 4, 1e7, "none", np.nan, 1, 1.0, 10),
    ("fp16", "allreduce", 4, 1e7, "fp16", np.nan, 1, 0.5, 10),
    ("psgd", "allreduce", 4, 1e7, "powersgd", 4, 1, 0.02, 10),
    ("plain", "allreduce", 4, 1e9, "none", np.nan, 1, 0.05, 10),
]


def _experiment(tmp_path, repeats=3, settings=SETTINGS, write=False):
    """Runs whose lead loss falls linearly: one machine 0.02 a step (40 steps of 32 samples), the four-node
    runs 0.08 a step (10 steps of 128): the target, the highest lowest mean of 5 losses (steps 6-10: 2.3 -
    0.08 x 7), is 1.74, which one machine reaches at step 31 (0.31 s) and the others at step 10; repeat r
    takes 1 + r/100 times as long."""
    runs, steps = [], []
    for name, strategy, hosts, bw, compression, rank, every, tau, n in settings:
        for r in range(repeats):
            run_id = f"{name}-{hosts}-{bw:g}-r{r}"
            jitter = 1 + 0.01 * r
            runs.append(dict(experiment="x", run_id=run_id, repeat=r, hosts=hosts, bw_bps=bw, bw=f"{bw:g}",
                             strategy=strategy, engine="pytorch", model="mlp", params=269322,
                             gradient_bytes=1077288, global_batch=32 * hosts, workers=hosts, status="ok",
                             training_time_s=n * tau, steps=n, fixed="data", samples_per_epoch=1280, epochs=1,
                             batch_per_worker=32, compute="budgets", cores=1, compression=compression, rank=rank,
                             sync_every=every, outer="", steady="ok", steady_step_s=tau,
                             steady_samples_per_s=32 * hosts / tau,
                             warmup_s=tau, warmup_steps=1, steady_steps=n - 1, steps_per_epoch=n,
                             samples_per_step=32 * hosts, samples_trained=1280,
                             theory_steady_bytes_per_worker_step=1e5, steady_bytes_per_worker_step=1.05e5))
            drop = 0.02 if hosts == 1 else 0.08
            steps += [dict(experiment="x", run_id=run_id, role="single" if hosts == 1 else "worker", task_index=0,
                           host="h1", kind="step", epoch=1, step=k, time_s=tau * jitter, loss=2.3 - drop * (k - 1),
                           samples_per_s=np.nan, t=1000.0 + k) for k in range(1, n + 1)]
    runs, steps = pd.DataFrame(runs), pd.DataFrame(steps)
    if write:
        runs.to_csv(tmp_path / "runs.csv", index=False)
        steps.to_csv(tmp_path / "steps.csv", index=False)
        return tables.load_experiment(tmp_path)
    return tables.Experiment(tmp_path, "x", tables.with_faithful_defaults(runs),
                             pd.DataFrame(columns=tables.CHECKS_COLUMNS), steps, pd.DataFrame(columns=tables.USAGE_COLUMNS))


def test_time_to_target_per_run(tmp_path):
    runs = payoff.per_run(_experiment(tmp_path)).set_index("run_id")
    assert runs["target_loss"].unique() == pytest.approx([1.74])
    assert runs.loc["one-1-1e+09-r0", "time_to_target_s"] == pytest.approx(31 * 0.01)
    assert runs.loc["plain-4-1e+07-r0", "time_to_target_s"] == pytest.approx(10.0)
    assert runs.loc["plain-4-1e+07-r2", "time_to_target_s"] == pytest.approx(10.0 * 1.02)
    assert set(runs["setting"]) == {"one machine", "all-reduce, plain", "all-reduce, fp16",
                                    "all-reduce, powersgd rank 4"}
    assert runs["reached"].all()


def test_settings_against_one_machine_and_plain_all_reduce(tmp_path):
    table = payoff.per_setting(payoff.per_run(_experiment(tmp_path)))
    at10 = table[table["bw_bps"] == 1e7].set_index("setting")
    psgd = at10.loc["all-reduce, powersgd rank 4"]
    assert psgd["time_to_target_s"] == pytest.approx(0.2 * 1.01)
    assert psgd["vs_plain"] == pytest.approx(10.0 / 0.2)
    assert psgd["vs_plain_verdict"] == spread.APART
    # one machine ran at 1 Gbit/s only: it stands for one machine at 10 Mbit/s too (it sends nothing)
    assert psgd["one_machine_s"] == pytest.approx(0.31 * 1.01)
    assert psgd["vs_one_machine"] == pytest.approx(0.31 / 0.2) and psgd["vs_one_machine_verdict"] == spread.APART
    assert at10.loc["all-reduce, fp16", "vs_plain"] == pytest.approx(2.0)
    assert np.isnan(at10.loc["all-reduce, plain", "vs_plain"])


def test_the_pay_off_says_the_fastest_and_by_how_much(tmp_path):
    said = payoff.payoff_sentences(payoff.per_setting(payoff.per_run(_experiment(tmp_path))))
    at10 = next(s for s in said if s.startswith("At 10 Mbit/s"))
    assert "fastest way to the target was all-reduce, powersgd rank 4 on 4 nodes" in at10
    assert "1.55× faster than one machine (beyond the spread of the repeats)" in at10
    assert "50× faster than plain all-reduce on the same nodes (beyond the spread" in at10
    at1g = next(s for s in said if s.startswith("At 1 Gbit/s"))
    assert "fastest way to the target was one machine" in at1g and "did not pay off" in at1g
    assert "all-reduce, plain, was 1.61× slower than one machine (beyond the spread" in at1g
    assert not any("run more repeats" in s for s in said)


def test_too_few_repeats_are_said(tmp_path):
    said = payoff.payoff_sentences(payoff.per_setting(payoff.per_run(_experiment(tmp_path, repeats=2))))
    at10 = next(s for s in said if s.startswith("At 10 Mbit/s,"))
    assert "the ranges lie apart but the repeats are too few to judge" in at10
    assert any(s.startswith("At 10 Mbit/s:") and "run more repeats" in s for s in said)


def test_a_setting_that_did_not_always_reach_the_target(tmp_path):
    exp = _experiment(tmp_path)
    slow = exp.steps["run_id"] == "fp16-4-1e+07-r1"
    exp.steps.loc[slow, "loss"] = 2.3                        # never falls: the target is stated
    spec = tmp_path / "runs" / exp.runs["run_id"].iloc[0] / "spec.yaml"
    spec.parent.mkdir(parents=True)
    spec.write_text("report: {target_loss: 1.74}\n")
    table = payoff.per_setting(payoff.per_run(exp))
    fp16 = table[(table["setting"] == "all-reduce, fp16")].iloc[0]
    assert (fp16["runs"], fp16["reached"]) == (3, 2) and np.isnan(fp16["time_to_target_s"])
    said = payoff.comparison_sentences(table)
    assert any("all-reduce, fp16 (4 nodes): 2 of 3 runs reached it" in s for s in said)


def test_no_section_without_a_setting(tmp_path):
    plain = [s for s in SETTINGS if s[4] == "none"]
    assert payoff.section(_experiment(tmp_path, settings=plain)) == {}


def test_the_report_has_the_sections(tmp_path):
    _experiment(tmp_path, write=True)
    html = report.build_report(tmp_path).read_text()
    assert "<h2>Communication settings</h2>" in html and "<h2>What would make it pay off here</h2>" in html
    assert "fastest way to the target was all-reduce, powersgd rank 4" in html
    assert (tmp_path / "figures" / "communication_wire.png").is_file()
    settings = pd.read_csv(tmp_path / "tables" / "communication.csv")
    assert set(settings["setting"]) >= {"one machine", "all-reduce, powersgd rank 4"}
    summary = pd.read_csv(tmp_path / "tables" / "summary.csv")
    assert set(summary["communication"]) == {"none", "fp16", "powersgd rank 4"}
    net = pd.read_csv(tmp_path / "tables" / "network.csv")
    assert net["steady_ratio_to_theory"].dropna().round(3).unique().tolist() == [1.05]


def test_degraded_runs_are_left_out_of_the_ranking_and_said(tmp_path):
    exp = _experiment(tmp_path)
    psgd = exp.runs["run_id"].str.startswith("psgd")
    exp.runs.loc[psgd, "fidelity"] = "degraded: cpu: the machine was saturated"
    one = exp.runs["run_id"].str.startswith("one")
    exp.runs.loc[one, "fidelity"] = "degraded: cpu: runnable tasks waited for a CPU 17% of the time"
    t = payoff.section(exp)
    assert "all-reduce, powersgd rank 4" not in set(t["communication"]["setting"])
    left = t["communication_left_out"].set_index("setting")
    assert left.loc["all-reduce, powersgd rank 4", "runs"] == 3 and left.loc["one machine", "bw_bps"] == 1e9
    said = payoff.payoff_sentences(t["communication"], t["communication_left_out"])
    at10 = [s for s in said if s.startswith("At 10 Mbit/s")]
    assert "the fastest way to the target was all-reduce, fp16 on 4 nodes" in at10[0]
    assert "no counted one-machine run of the same work to compare with" in at10[0]
    assert at10[1] == ("At 10 Mbit/s, not counted above: all-reduce, powersgd rank 4 (4 nodes, 3 runs), whose timing "
                       "this machine did not keep faithful (see Degraded runs); the ranking is among the rest.")
    at1g = [s for s in said if s.startswith("At 1 Gbit/s")]
    assert any("not counted above: one machine (1 node, 3 runs)" in s for s in at1g)
    # counted when the report counts degraded runs
    exp.include_degraded = True
    assert payoff.section(exp)["communication_left_out"].empty
