"""A run's warm-up and steady state (analysis/tables/steady.py), and the steady columns every consumer reads
(tables.with_steady_columns: results recorded before runs.csv had them get them from steps.csv)."""
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from analysis.tables import speedup, steady, tables

REPO = Path(__file__).resolve().parents[2]
FIG18 = REPO / "results" / "reference" / "thesis_fig18"       # read only


# -- split ----------------------------------------------------------------------------------------
def test_the_first_step_alone_is_the_warm_up():
    times = [0.9] + [0.10, 0.12, 0.11, 0.10, 0.13, 0.12, 0.11, 0.10, 0.12, 0.11]
    got = steady.split(times)
    assert (got.warmup_steps, got.warmup_s, got.steps, got.verdict) == (1, 0.9, 10, steady.OK)
    assert got.step_s == pytest.approx(np.median(times[1:]))
    assert (got.q1_s, got.q3_s) == pytest.approx(tuple(np.percentile(times[1:], [25, 75])))
    assert got.samples_per_s(64) == pytest.approx(64 / got.step_s)


def test_steps_over_twice_the_typical_one_after_the_first_are_warm_up_too():
    times = [2.0, 0.5, 0.3, 0.1] + [0.1] * 12
    got = steady.split(times)
    assert got.warmup_steps == 3 and got.warmup_s == pytest.approx(2.8)         # 0.3 > 2 x 0.1; then steady
    assert got.steps == 13 and got.step_s == pytest.approx(0.1)
    late = steady.split([2.0] + [0.1] * 12 + [0.5])         # a slow step later on stays in the steady part
    assert late.warmup_steps == 1 and late.steps == 13 and late.step_s == pytest.approx(0.1)


def test_fewer_than_ten_steady_steps_are_not_judged():
    got = steady.split([1.0] + [0.1] * (steady.MIN_STEADY_STEPS - 1))
    assert got.verdict.startswith("too few steady steps to judge: 9 after a 1-step warm-up")
    assert np.isnan(got.step_s) and np.isnan(got.samples_per_s(32)) and got.warmup_s == 1.0
    assert steady.split([1.0] + [0.1] * steady.MIN_STEADY_STEPS).verdict == steady.OK


def test_under_ps_the_steady_step_is_the_mean_interval():
    bursts = [3.0] + [0.0, 0.0, 0.3] * 5          # closures finishing in bursts: intervals, not step times
    got = steady.split(bursts, asynchronous=True)
    assert got.verdict == steady.OK and got.warmup_steps == 1
    assert got.step_s == pytest.approx(0.1)        # 1.5 s over 15 intervals; the median would be 0
    assert steady.split(bursts).step_s == 0.0


def test_no_step_timings():
    for times in ([], [None, float("nan")]):
        got = steady.split(times)
        assert got.warmup_steps == 0 and got.steps == 0 and np.isnan(got.step_s)
        assert got.verdict.startswith("no step timings")


def test_lead_times_are_the_chief_else_worker_0_in_the_order_they_ran():
    rows = [dict(run_id="a", kind="step", role="worker", task_index=i, step=s, t=10 * i + s, time_s=float(s + i))
            for i in (0, 1) for s in (2, 1, 3)]
    rows += [dict(run_id="b", kind="step", role=role, task_index=0, step=1, t=1.0, time_s=t)
             for role, t in (("worker", 5.0), ("chief", 7.0))]
    got = steady.lead_times(pd.DataFrame(rows))
    assert got == {"a": [1.0, 2.0, 3.0], "b": [7.0]}


# -- the steady columns of results recorded before them ---------------------------------------------
WORK_COLUMNS = ["fixed", "steps_per_epoch", "samples_per_step", "samples_per_epoch", "samples_trained"]


def older_copy(folder: Path, dest: Path) -> Path:
    """`folder`'s runs.csv and steps.csv as the runner wrote them before the work and steady columns, each run's
    spec.yaml with the steps per epoch it ran (fixed steps, the only mode then) and no fixed mode."""
    runs = pd.read_csv(folder / "runs.csv")
    runs.drop(columns=[c for c in runs if c in WORK_COLUMNS or c.startswith(("steady", "warmup"))]).to_csv(
        dest / "runs.csv", index=False)
    shutil.copy2(folder / "steps.csv", dest / "steps.csv")
    for r in runs.itertuples():
        spec = yaml.safe_load((folder / "runs" / r.run_id / "spec.yaml").read_text())
        spec["workload"] = {k: v for k, v in spec["workload"].items() if k not in ("fixed", "samples_per_epoch")}
        spec["workload"]["steps_per_epoch"] = int(r.steps) // int(spec["workload"]["epochs"])
        (dest / "runs" / r.run_id).mkdir(parents=True)
        (dest / "runs" / r.run_id / "spec.yaml").write_text(yaml.safe_dump(spec))
    return dest


def test_older_results_get_steady_columns_equal_to_an_independent_median_after_the_warm_up(tmp_path):
    older = older_copy(FIG18, tmp_path)
    exp = tables.load_experiment(older)
    raw = pd.read_csv(older / "runs.csv")
    assert "steady_step_s" not in raw and "fixed" not in raw       # the columns are derived here
    steps = pd.read_csv(older / "steps.csv")
    steps = steps[(steps["kind"] == "step") & (steps["role"] == "worker") & (steps["task_index"] == 0)]
    for r in exp.runs.itertuples():
        times = steps[steps["run_id"] == r.run_id].sort_values("t")["time_s"].to_numpy()
        typical = np.median(times[1:])
        warm = 1
        while warm < len(times) and times[warm] > 2 * typical:
            warm += 1
        assert r.fixed == "steps" and r.steady == "ok"
        assert r.warmup_steps == warm and r.warmup_s == pytest.approx(times[:warm].sum())
        assert r.steady_steps == len(times) - warm
        assert r.steady_step_s == pytest.approx(np.median(times[warm:]))
        assert r.samples_per_step == r.global_batch            # all-reduce: the global batch per step
        assert r.steady_samples_per_s == pytest.approx(r.global_batch / np.median(times[warm:]))
        assert r.samples_trained == r.steps * r.global_batch and r.epochs == 2
        assert r.steps_per_epoch == r.steps // 2 and r.samples_per_epoch == r.steps // 2 * r.global_batch


def test_ps_samples_per_step_is_one_workers_batch_and_recorded_values_are_kept():
    runs = pd.DataFrame(dict(run_id=["p", "a", "new"], strategy=["ps", "allreduce", "allreduce"], model="mlp",
                             global_batch=[64, 64, 64], workers=[2, 2, 2], steps=[40, 40, 40],
                             fixed=[np.nan, np.nan, "data"], steady=[np.nan, np.nan, "ok"],
                             steady_step_s=[np.nan, np.nan, 0.5], samples_per_step=[np.nan, np.nan, 64]))
    steps = pd.DataFrame([dict(run_id=r, kind="step", role="chief" if r == "p" else "worker", task_index=0,
                               step=i, t=i, epoch=1, time_s=1.0 if i == 0 else 0.2) for r in ("p", "a")
                          for i in range(20)])
    got = tables.with_steady_columns(runs, steps).set_index("run_id")
    assert got.loc["p", "samples_per_step"] == 32 and got.loc["a", "samples_per_step"] == 64
    assert got.loc["p", "steady_samples_per_s"] == pytest.approx(32 / 0.2)
    assert list(got["fixed"]) == ["steps", "steps", "data"] and list(got["batch_per_worker"]) == [32, 32, 32]
    assert got.loc["new", "steady_step_s"] == 0.5 and got.loc["new", "steady"] == "ok"    # as recorded
    assert got.loc["p", "steps_per_epoch"] == 20 and got.loc["p", "epochs"] == 2         # from steps.csv


def test_the_job_is_the_files_workload_at_its_fewest_nodes_unless_stated():
    runs = pd.DataFrame(dict(run_id=["a", "b"], status="ok", model="mlp", engine="tensorflow", strategy="allreduce",
                             hosts=[1, 2], bw_bps=1e7, bw="10mbit", training_time_s=10.0, time_per_step_s=0.5,
                             global_batch=[32, 64], workers=[1, 2], steps=20, fixed="steps", steps_per_epoch=10,
                             samples_per_step=[32, 64], samples_per_epoch=[320, 640], samples_trained=[640, 1280],
                             steady="ok", steady_step_s=0.4, steady_samples_per_s=[80.0, 160.0], warmup_s=1.0))
    own = speedup.summary(runs)
    assert list(own["job_samples"]) == [640, 640] and list(own["job_epochs"]) == [2, 2]     # 2 epochs of 320
    assert list(own["projected_time_s"]) == pytest.approx([1 + 640 / 80, 1 + 640 / 160])
    assert speedup.Job().describe(640, 2, 320).startswith("640 samples (the file's own workload: 2 epochs of 320")
    stated = speedup.summary(runs, speedup.Job(epochs=3, stated=True))
    assert list(stated["job_samples"]) == [960, 960]
    assert list(speedup.summary(runs, speedup.Job(samples=1e6, stated=True))["job_samples"]) == [1e6, 1e6]
    script = runs.assign(fixed="script", steps_per_epoch=np.nan, samples_per_epoch=np.nan)
    assert list(speedup.summary(script)["job_samples"]) == [640, 640]    # what the script trained on one node


# -- a results folder as the runner now writes it (used by the report tests) --------------------------
def as_new_results(folder: Path, step_of=None, fixed: str = "steps") -> pd.DataFrame:
    """Give `folder`'s runs.csv the work and steady columns the runner records (runs.csv as of
    workload.fixed): ok runs get a steady step (`step_of(row)`, default 0.9 x time_per_step_s), quartiles
    at 0.95 and 1.05 of it, a warm-up of 0.1 x their training time and samples per step from the global
    batch. Returns the runs written."""
    runs = pd.read_csv(folder / "runs.csv")
    per = runs["global_batch"].where(runs["strategy"] != "ps", runs["global_batch"] / runs["workers"])
    step = runs.apply(step_of, axis=1) if step_of else 0.9 * runs["time_per_step_s"]
    ok = runs["status"] == "ok"
    runs = runs.assign(fixed=fixed, samples_per_step=per, steps_per_epoch=runs["steps"] / 2,
                       samples_per_epoch=runs["steps"] / 2 * per, samples_trained=runs["steps"] * per,
                       warmup_steps=1, warmup_s=(0.1 * runs["training_time_s"]).where(ok),
                       steady_steps=runs["steps"] - 1, steady_step_s=step.where(ok),
                       steady_step_q1_s=(0.95 * step).where(ok), steady_step_q3_s=(1.05 * step).where(ok),
                       steady_samples_per_s=(per / step).where(ok),
                       steady=np.where(ok, "ok", "no step timings (the task emitted no step events)"))
    runs.to_csv(folder / "runs.csv", index=False)
    return runs
