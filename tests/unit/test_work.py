"""workload.fixed: the same work at every node count (data) or the same steps per worker (steps); what a
point trains, and what runs.csv records of it."""
import pytest

from spec_helpers import issues, load
from testbed.roles import Task, assign_tasks
from testbed.run.point.record import work_columns
from testbed.run.training.training import job_document
from testbed.spec import expand_points

BASE = """
name: w
topology: {hosts: 4, link: {bw: 10mbit}}
workload: {batch_per_worker: 32, epochs: 2, samples_per_epoch: 1024}
sweep:
  topology.hosts: [1, 2, 3, 4]
"""


def workers(tasks):
    return sum(t.task_type == "worker" for t in tasks)


def test_fixed_data_is_the_default_and_every_node_count_trains_the_same_samples(tmp_path):
    points = expand_points(load(tmp_path, BASE))
    trained = {}
    for p in points:
        w = p.spec.workload
        tasks = assign_tasks(w, p.spec.topology.host_names())
        n = workers(tasks)
        assert w.fixed == "data" and w.samples_per_step(n) == 32 * n
        trained[n] = w.steps_at(n) * w.samples_per_step(n)
        assert abs(trained[n] - 1024) <= w.samples_per_step(n) / 2       # within one global batch
    assert {n: t // (32 * n) for n, t in trained.items()} == {1: 32, 2: 16, 3: 11, 4: 8}


def test_fixed_steps_runs_steps_per_epoch_on_every_worker(tmp_path):
    exp = load(tmp_path, "name: w\nworkload: {fixed: steps, steps_per_epoch: 7}\n")
    assert [exp.workload.steps_at(n) for n in (1, 2, 8)] == [7, 7, 7]


def test_fixed_data_defaults_to_one_workers_epoch_of_steps_per_epoch(tmp_path):
    w = load(tmp_path, "name: w\nworkload: {steps_per_epoch: 12, batch_per_worker: 16}\n").workload
    assert w.epoch_samples() == 192 and [w.steps_at(n) for n in (1, 2, 4)] == [12, 6, 3]


def test_ps_steps_are_one_workers_batch_whatever_the_workers(tmp_path):
    w = load(tmp_path, "name: w\ntopology: {hosts: 3}\nworkload: {strategy: ps, samples_per_epoch: 640}\n").workload
    assert [w.steps_at(n) for n in (1, 2, 5)] == [20, 20, 20]
    assert w.steps_at(2, "allreduce") == 10       # the same data under all-reduce: half the steps


def test_a_tiny_epoch_still_trains_one_step(tmp_path):
    w = load(tmp_path, "name: w\nworkload: {samples_per_epoch: 10}\n").workload
    assert w.steps_at(4) == 1


@pytest.mark.parametrize("workload, key, words", [
    ("{fixed: steps, samples_per_epoch: 640}", "workload.samples_per_epoch", "is for fixed: data"),
    ("{samples_per_epoch: 640, steps_per_epoch: 20}", "workload.samples_per_epoch", "not both"),
    ("{fixed: all}", "workload.fixed", "not one of data, steps"),
])
def test_bad_work_settings_are_refused_at_their_line(tmp_path, workload, key, words):
    found = [i for i in issues(tmp_path, f"name: w\nworkload: {workload}\n") if i.key == key]
    assert found and words in found[0].message and found[0].line == 2, found


def test_a_step_trigger_counts_the_points_own_steps(tmp_path):
    text = BASE + "faults:\n  - {at: step 20, action: kill, task: worker 1}\n"
    found = issues(tmp_path, text)
    # 4 nodes: 8 steps an epoch, 16 in all; 3 nodes: 11 an epoch, 22 in all
    assert any("step 20 is past the end of training (16 steps: 2 epoch(s) of 8)" in i.message for i in found), found
    assert not any("(22 steps" in i.message for i in found)


def test_the_job_carries_the_points_steps_and_runs_csv_records_the_work(tmp_path):
    w = load(tmp_path, BASE).workload
    tasks = [Task(f"h{i}", "worker", i - 1, 50501) for i in (1, 2, 3, 4)]
    job = job_document(w, {"worker": [f"10.0.0.{i}:50501" for i in (1, 2, 3, 4)]})
    assert job["steps_per_epoch"] == 8
    row = {"steps": 16, "global_batch": 128}
    assert work_columns(w, tasks, row) == dict(fixed="data", steps_per_epoch=8, samples_per_step=128,
                                               samples_per_epoch=1024, samples_trained=2048,
                                               lr_scaling="none", learning_rate=0.001)


def test_a_scripts_work_is_its_own(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("print('hi')\n")
    w = load(tmp_path, "name: w\nworkload: {script: train.py}\n").workload
    cols = work_columns(w, [Task("h1", "worker", 0, 1)], {"steps": 30, "global_batch": 64})
    assert cols == dict(fixed="script", steps_per_epoch=None, samples_per_step=64, samples_per_epoch=None,
                        samples_trained=1920, lr_scaling=None, learning_rate=None)
    found = issues(tmp_path, "name: w\nworkload: {script: train.py, samples_per_epoch: 64}\n")
    assert any(i.key == "workload.samples_per_epoch" and "your script decides" in i.message for i in found)


@pytest.mark.parametrize("rule, rates", [
    ("none", [0.002, 0.002, 0.002]),
    ("linear", [0.002, 0.004, 0.008]),
    ("sqrt", [0.002, 0.002 * 2 ** 0.5, 0.004]),
])
def test_the_learning_rate_follows_the_global_batch_by_its_rule(tmp_path, rule, rates):
    w = load(tmp_path, f"name: w\nworkload: {{learning_rate: 0.002, lr_scaling: {rule}}}\n").workload
    assert [w.learning_rate_at(n) for n in (1, 2, 4)] == pytest.approx(rates)
    assert w.learning_rate_at(4, "ps") == 0.002 and w.learning_rate_at(4, "single") == 0.002   # one worker's batch a step


def test_the_job_and_runs_csv_carry_the_points_learning_rate(tmp_path):
    w = load(tmp_path, BASE.replace("samples_per_epoch: 1024", "samples_per_epoch: 1024, lr_scaling: linear")).workload
    tasks = [Task(f"h{i}", "worker", i - 1, 50501) for i in (1, 2, 3)]
    job = job_document(w, {"worker": [f"10.0.0.{i}:50501" for i in (1, 2, 3)]})
    assert job["learning_rate"] == pytest.approx(0.003)
    cols = work_columns(w, tasks, {"steps": 22})
    assert cols["lr_scaling"] == "linear" and cols["learning_rate"] == pytest.approx(0.003)
    assert load(tmp_path, "name: w\n").workload.learning_rate_at(4) == 0.001      # the default: Adam's 1e-3, unscaled


def test_a_bad_learning_rate_rule_is_refused_at_its_line(tmp_path):
    found = [i for i in issues(tmp_path, "name: w\nworkload: {lr_scaling: cubic}\n") if i.key == "workload.lr_scaling"]
    assert found and found[0].line == 2, found
