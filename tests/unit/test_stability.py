"""PS against all-reduce on speed and stability, from made-up tables whose answer is known."""
import numpy as np
import pandas as pd
import pytest

from analysis import figures, report, stability, tables


def _tables(ps_noise=0.2, ar_noise=0.05):
    """2 repeats of ps and all-reduce at 10 and 100 Mbit/s, 40 steps each: the loss falls from 2 to
    0.5 along the same curve in step count, with noise of the given size; a PS step takes 0.05 s,
    an all-reduce step 0.1 s. PS's lead task is the chief, all-reduce's worker 0 (worker 1's rows
    must not count)."""
    rng = np.random.default_rng(1)
    runs, steps = [], []
    for bw in (10_000_000, 100_000_000):
        for strategy, dt, noise in (("ps", 0.05, ps_noise), ("allreduce", 0.1, ar_noise)):
            for repeat in (0, 1):
                run_id = f"{strategy}-{bw}-r{repeat}"
                runs.append(dict(experiment="s", run_id=run_id, repeat=repeat, hosts=3, bw_bps=bw, bw=f"{bw}",
                                 strategy=strategy, model="mlp", status="ok", training_time_s=40 * dt,
                                 time_per_step_s=dt, samples_per_s=32 / dt))
                lead = ("chief", 0) if strategy == "ps" else ("worker", 0)
                loss = 0.5 + 1.5 * np.exp(-np.arange(1, 41) / 8) + rng.normal(0, noise, 40)
                for role, index in (lead, ("worker", 1)):
                    for k in range(40):
                        steps.append(dict(experiment="s", run_id=run_id, role=role, task_index=index, host="h1",
                                          kind="step", epoch=1, step=k + 1, time_s=dt, t=1000 + k * dt,
                                          loss=loss[k] if role == lead[0] else 9.0, samples_per_s=np.nan))
    return pd.DataFrame(runs), pd.DataFrame(steps)


def test_time_to_target_final_loss_and_noise_per_run():
    runs, steps = _tables(ps_noise=0.0, ar_noise=0.0)
    curves = stability.loss_curves(runs, steps)
    assert (curves["loss"] < 9).all(), "worker 1 of all-reduce is not the lead task"
    per = stability.per_run(curves, target=1.0)
    # the loss falls below 1.0 at step 9 (0.5 + 1.5 e^(-9/8) = 0.987): 9 steps in
    ps, ar = per[per["strategy"] == "ps"].iloc[0], per[per["strategy"] == "allreduce"].iloc[0]
    assert ps["time_to_target_s"] == pytest.approx(9 * 0.05) and ar["time_to_target_s"] == pytest.approx(9 * 0.1)
    assert ps["final_loss"] == pytest.approx(np.mean(0.5 + 1.5 * np.exp(-np.arange(37, 41) / 8)))
    assert ps["noise"] == pytest.approx(np.diff(0.5 + 1.5 * np.exp(-np.arange(21, 41) / 8)).std())
    assert np.isnan(stability.per_run(curves, target=0.1)["time_to_target_s"]).all()


def test_the_sentences_say_which_claim_this_run_supports():
    runs, steps = _tables()
    curves = stability.loss_curves(runs, steps)
    target = stability.default_target(curves)
    table = stability.per_strategy(stability.per_run(curves, target))
    said = stability.sentences(table, target, figures.mbit)
    assert len(said) == 5 and said[-1].startswith("TensorFlow 2's parameter-server training is asynchronous")
    fast = [s for s in said if "reached the target loss" in s]
    assert len(fast) == 2 and all('which supports "PS is faster"' in s for s in fast), fast
    stable = [s for s in said if "step-to-step loss noise" in s]
    assert len(stable) == 2 and all('this supports "all-reduce is more stable"' in s for s in stable), stable
    # the other way round: a noisier all-reduce does not support the claim
    runs, steps = _tables(ps_noise=0.02, ar_noise=0.3)
    curves = stability.loss_curves(runs, steps)
    target = stability.default_target(curves)
    said = stability.sentences(stability.per_strategy(stability.per_run(curves, target)), target, figures.mbit)
    assert all('does not support "all-reduce is more stable"' in s for s in said if "noise" in s)


def test_report_draws_convergence_and_keeps_the_tables(tmp_path):
    runs, steps = _tables()
    folder = tmp_path / "strategies"
    folder.mkdir()
    runs.to_csv(folder / "runs.csv", index=False)
    steps.to_csv(folder / "steps.csv", index=False)
    html = report.build_report(folder).read_text()
    assert (folder / "figures" / "convergence.png").stat().st_size > 10_000 and "convergence.png" in html
    kept = pd.read_csv(folder / "tables" / "stability.csv")
    assert sorted(kept["strategy"]) == ["allreduce", "allreduce", "ps", "ps"] and (kept["runs"] == 2).all()
    assert "PS is faster" in html and "all-reduce is more stable" in html and "asynchronous" in html
    exp = tables.load_experiment(folder)
    assert stability.stated_target(exp) is None       # no spec.yaml: the default target
