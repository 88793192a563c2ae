"""PS against all-reduce on speed and stability, from made-up tables whose answer is known."""
import numpy as np
import pandas as pd
import pytest

from analysis import report
from analysis.figures import figures
from analysis.tables import stability, tables
from analysis.text import mbit


def _tables(ps_noise=0.2, ar_noise=0.05, repeats=3):
    """`repeats` repeats of ps and all-reduce at 10 and 100 Mbit/s, 40 steps each, 2 workers with a
    batch of 32: the loss falls from 2 to 0.5 along the same curve in step count, with noise of the
    given size; a PS step (one worker's 32 samples) takes 0.05 s, an all-reduce step (64) 0.1 s. PS's
    lead task is the chief, all-reduce's worker 0 (worker 1's rows must not count)."""
    rng = np.random.default_rng(1)
    runs, steps = [], []
    for bw in (10_000_000, 100_000_000):
        for strategy, dt, noise in (("ps", 0.05, ps_noise), ("allreduce", 0.1, ar_noise)):
            for repeat in range(repeats):
                run_id = f"{strategy}-{bw}-r{repeat}"
                runs.append(dict(experiment="s", run_id=run_id, repeat=repeat, hosts=3, bw_bps=bw, bw=f"{bw}",
                                 strategy=strategy, model="mlp", status="ok", training_time_s=40 * dt,
                                 time_per_step_s=dt, samples_per_s=32 / dt, global_batch=64, workers=2))
                lead = ("chief", 0) if strategy == "ps" else ("worker", 0)
                loss = 0.5 + 1.5 * np.exp(-np.arange(1, 41) / 8) + rng.normal(0, noise, 40)
                for role, index in (lead, ("worker", 1)):
                    for k in range(40):
                        steps.append(dict(experiment="s", run_id=run_id, role=role, task_index=index, host="h1",
                                          kind="step", epoch=1, step=k + 1, time_s=dt, t=1000 + k * dt,
                                          loss=loss[k] if role == lead[0] else 9.0, samples_per_s=np.nan))
    return pd.DataFrame(runs), pd.DataFrame(steps)


def _said(**kw) -> list[str]:
    runs, steps = _tables(**kw)
    curves = stability.loss_curves(runs, steps)
    target = stability.default_target(curves)
    return stability.sentences(stability.per_strategy(stability.per_run(curves, target)), target, mbit)


def test_time_to_target_final_loss_and_noise_per_run():
    runs, steps = _tables(ps_noise=0.0, ar_noise=0.0)
    curves = stability.loss_curves(runs, steps)
    assert (curves["loss"] < 9).all(), "worker 1 of all-reduce is not the lead task"
    per = stability.per_run(curves, target=1.0)
    # the mean of the last 5 losses first falls to 1.0 or below at step 11 (steps 7-11)
    curve = 0.5 + 1.5 * np.exp(-np.arange(1, 41) / 8)
    means = [curve[k - 5:k].mean() for k in range(5, 41)]
    first = 5 + next(i for i, v in enumerate(means) if v <= 1.0)
    ps, ar = per[per["strategy"] == "ps"].iloc[0], per[per["strategy"] == "allreduce"].iloc[0]
    assert ps["time_to_target_s"] == pytest.approx(first * 0.05) and ar["time_to_target_s"] == pytest.approx(first * 0.1)
    assert ps["final_loss"] == pytest.approx(curve[36:].mean())
    assert ps["noise"] == pytest.approx(np.diff(curve[20:]).std())
    assert ps["noise_per_sample"] == pytest.approx(ps["noise"] * np.sqrt(32))
    assert ar["noise_per_sample"] == pytest.approx(ar["noise"] * np.sqrt(64))
    assert (ps["samples_per_step"], ps["samples"], ar["samples"]) == (32, 40 * 32, 40 * 64)
    assert np.isnan(stability.per_run(curves, target=0.1)["time_to_target_s"]).all()


def test_the_default_target_is_reached_by_every_run():
    # a run that drops only in its last 3 steps (its final loss 1.0, but no 5 steps' mean below 1.4)
    # and one that stays at 0.5: the target is 1.4, which both reach
    late = [2.0] * 27 + [1.0] * 3
    curves = pd.DataFrame([dict(run_id=r, strategy=r, bw_bps=1e7, repeat=0, samples_per_step=32, step=k + 1,
                                elapsed_s=0.1 * (k + 1), loss=loss)
                           for r, losses in (("ps", late), ("allreduce", [0.5] * 30)) for k, loss in enumerate(losses)])
    assert stability.default_target(curves) == pytest.approx(1.4)
    per = stability.per_run(curves, stability.default_target(curves))
    assert per["time_to_target_s"].notna().all()


def test_one_dip_below_the_target_is_not_reaching_it():
    runs, steps = _tables(ps_noise=0.0, ar_noise=0.0, repeats=1)
    lead = (steps["run_id"] == "ps-10000000-r0") & (steps["role"] == "chief")
    steps.loc[lead & (steps["step"] == 2), "loss"] = 0.2          # one noisy step far below the target
    per = stability.per_run(stability.loss_curves(runs, steps), target=1.0).set_index("run_id")
    assert per.loc["ps-10000000-r0", "time_to_target_s"] == per.loc["ps-100000000-r0", "time_to_target_s"] > 2 * 0.05


def test_the_sentences_say_which_claim_this_run_supports_beyond_the_spread():
    said = _said()
    assert len(said) == 7 and said[-1].startswith("TensorFlow 2's parameter-server training is asynchronous")
    fast = [s for s in said if "reached the target loss" in s]
    assert len(fast) == 2 and all('the ranges lie apart, which supports "PS is faster"' in s for s in fast), fast
    assert all("over 3 runs" in s for s in fast)
    stable = [s for s in said if "step-to-step loss noise" in s]
    assert len(stable) == 2 and all('which supports "all-reduce is more stable"' in s for s in stable), stable
    assert all("one worker's batch of 32 samples and an all-reduce loss the mean over 64" in s for s in stable)
    final = [s for s in said if "the final loss was" in s]
    assert len(final) == 2 and all("after 1,280 samples" in s and "after 2,560" in s for s in final)
    # the other way round: a noisier all-reduce does not support the claim
    assert all('does not support "all-reduce is more stable"' in s for s in _said(ps_noise=0.02, ar_noise=0.3)
               if "noise" in s)


def test_two_repeats_a_side_are_too_few_for_a_verdict():
    said = _said(repeats=2)
    claims = [s for s in said if "reached the target loss" in s or "step-to-step loss noise" in s]
    assert len(claims) == 4 and all("by chance alone 33% of the time, so no verdict" in s for s in claims), claims
    assert not any("supports" in s for s in claims)


def test_report_draws_convergence_and_keeps_the_tables(tmp_path):
    runs, steps = _tables()
    folder = tmp_path / "strategies"
    folder.mkdir()
    runs.to_csv(folder / "runs.csv", index=False)
    steps.to_csv(folder / "steps.csv", index=False)
    html = report.build_report(folder).read_text()
    assert (folder / "figures" / "convergence.png").stat().st_size > 10_000 and "convergence.png" in html
    kept = pd.read_csv(folder / "tables" / "stability.csv")
    assert sorted(kept["strategy"]) == ["allreduce", "allreduce", "ps", "ps"] and (kept["runs"] == 3).all()
    assert "PS is faster" in html and "all-reduce is more stable" in html and "asynchronous" in html
    exp = tables.load_experiment(folder)
    assert stability.stated_target(exp) is None       # no spec.yaml: the default target


def test_the_engines_are_kept_apart(tmp_path):
    """PyTorch's all-reduce runs beside TensorFlow's ps and all-reduce (another synthetic task, another collective,
    with a loss that ends far lower) are not pooled into TensorFlow's: the comparison, its target and its
    sentences are TensorFlow's alone, and say so."""
    runs, steps = _tables()
    runs = runs.assign(engine="tensorflow")
    torch_runs = runs[runs["strategy"] == "allreduce"].assign(engine="pytorch")
    torch_runs["run_id"] = "torch-" + torch_runs["run_id"]
    torch_steps = steps[steps["run_id"].isin(set(runs.loc[runs["strategy"] == "allreduce", "run_id"]))].copy()
    torch_steps["run_id"] = "torch-" + torch_steps["run_id"]
    torch_steps["loss"] = torch_steps["loss"] - 0.45
    folder = tmp_path / "engines"
    folder.mkdir()
    pd.concat([runs, torch_runs]).to_csv(folder / "runs.csv", index=False)
    pd.concat([steps, torch_steps]).to_csv(folder / "steps.csv", index=False)
    exp = tables.load_experiment(folder)
    curves, per, target = stability.analyse(exp)
    assert set(curves["engine"]) == set(per["engine"]) == {"tensorflow"} and len(per) == 12
    alone = stability.analyse(tables.load_experiment(_write(tmp_path / "alone", runs, steps)))
    assert target == alone[2]
    page = report.build_report(folder).read_text()
    assert "At 10 Mbit/s (TensorFlow runs), PS reached the target loss" in page
    kept = pd.read_csv(folder / "tables" / "stability.csv")
    assert (kept["runs"] == 3).all()


def _write(folder, runs, steps):
    folder.mkdir()
    runs.to_csv(folder / "runs.csv", index=False)
    steps.to_csv(folder / "steps.csv", index=False)
    return folder
