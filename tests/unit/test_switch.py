"""strategy switch: the decision rule, the Switcher at epoch ends, the job rewrite, the spec keys,
the steps.csv strategy and the runs.csv figures of a run that switched."""
import json
import math
from types import SimpleNamespace

import pytest

from analysis.model import advisor
from spec_helpers import issues, load
from testbed.run.training import strategy_switch
from testbed.run.faults.faults import Record
from testbed.spec.graph import build_graph
from testbed.roles import Task, assign_tasks
from testbed.run.point.record import step_rows_from
from testbed.run.training.training import Outcome, Training

BASE = """
name: sw
topology: {hosts: 3, link: {bw: 10mbit}}
workload:
  strategy: switch
  model_params: {width: 32}
  batch_per_worker: 16
  epochs: 3
  steps_per_epoch: 4
  switch: {start: ps, margin: 0.2}
"""


def _advice(ar_rate, ps_rate):
    return advisor.Advice("allreduce", 48 / ar_rate, 16 / ps_rate, ar_rate, ps_rate, "", "hand-made")


# -- the decision rule on hand-made numbers ----------------------------------------------------
def test_switch_when_the_other_is_predicted_faster_by_more_than_the_margin():
    # ps measured 0.5 s per step of 16 samples = 32 samples/s; all-reduce predicted 48 (+50%)
    v = advisor.switch_verdict(1, "ps", 0.5, 16, _advice(48.0, 20.0), margin=0.2)
    assert v.switch and v.to == "allreduce" and v.measured_samples_per_s == pytest.approx(32)
    assert v.predicted_samples_per_s == 48.0 and "+50%" in v.reason
    # the same numbers with a margin above the predicted gain: stay
    assert not advisor.switch_verdict(1, "ps", 0.5, 16, _advice(48.0, 20.0), margin=0.6).switch
    # exactly at the margin is not beyond it
    assert not advisor.switch_verdict(1, "ps", 0.5, 16, _advice(38.4, 20.0), margin=0.2).switch


def test_the_restart_cost_spread_over_the_steps_left_can_outweigh_the_gain():
    # all-reduce predicted 0.3 s per 48-sample step (160 samples/s); ps measured 16 / 0.25 s = 64
    advice = advisor.Advice("allreduce", 0.3, 0.25, 160.0, 64.0, "", "hand-made")
    assert advisor.switch_verdict(1, "ps", 0.25, 16, advice, 0.2, restart_s=6.0, steps_left=100).switch
    few = advisor.switch_verdict(1, "ps", 0.25, 16, advice, 0.2, restart_s=6.0, steps_left=10)
    assert not few.switch and few.predicted_samples_per_s == pytest.approx(48 / (0.3 + 0.6))
    assert "6 s to restart over 10 steps left" in few.reason


def test_no_switch_to_a_strategy_that_cannot_be_placed_or_without_a_measurement():
    assert not advisor.switch_verdict(2, "allreduce", 0.1, 48, _advice(100.0, math.nan), 0.0).switch
    assert advisor.switch_verdict(2, "allreduce", 0.1, 48, _advice(100.0, 1e6), 0.0).to == "ps"
    assert not advisor.switch_verdict(2, "allreduce", 0.0, 48, _advice(100.0, 1e6), 0.0).switch


def test_provisional_strategy_of_switch_is_its_start(tmp_path):
    exp = load(tmp_path, BASE)
    assert advisor.provisional(exp.workload).strategy == "ps"
    assert exp.workload.switch.max_switches == 1


# -- the Switcher at epoch ends ---------------------------------------------------------------
def _events(strategy, epochs, step_s, start_t=0.0):
    out, t, step = [{"event": "start", "strategy": strategy, "t": start_t}], start_t, 0
    for epoch in range(1, epochs + 1):
        for _ in range(4):
            step, t = step + 1, t + step_s
            out.append({"event": "step", "strategy": strategy, "epoch": epoch, "step": step, "time_s": step_s,
                        "t": t, "loss": 1.0})
        out.append({"event": "epoch", "strategy": strategy, "epoch": epoch, "time_s": 4 * step_s, "t": t})
    return out


def _switcher(tmp_path, text=BASE, measured=9.56e6):
    exp = load(tmp_path, text)
    graph = build_graph(exp.topology)
    checks = [{"tool": "iperf3", "measured_bps": measured}, {"tool": "ping", "rtt_ms": 0.3}]
    sw = strategy_switch.Switcher(exp, graph, checks, shared=True)
    tasks = assign_tasks(advisor.provisional(exp.workload), [h.name for h in graph.hosts])
    training = SimpleNamespace(workload=advisor.provisional(exp.workload), tasks=tasks, faults=None)
    return sw, training


def test_switcher_decides_once_per_epoch_never_after_the_last_and_at_most_max_switches(tmp_path):
    sw, training = _switcher(tmp_path)
    slow = 100.0       # a ps step of 100 s: any all-reduce prediction beats it
    assert sw.check(training, _events("ps", 0, slow)) is None          # no epoch ended yet
    verdict = sw.check(training, _events("ps", 1, slow))
    assert verdict is not None and verdict.switch and verdict.to == "allreduce" and verdict.epoch == 1
    assert verdict.measured_samples_per_s == pytest.approx(16 / slow)
    assert sw.check(training, _events("ps", 1, slow)) is None          # max_switches 1 reached
    sw2, training = _switcher(tmp_path, BASE.replace("margin: 0.2", "margin: 0.2, max_switches: 3"))
    fast = 1e-6        # a ps step of 1 us: no prediction beats it
    assert sw2.check(training, _events("ps", 1, fast)) is None
    assert sw2.check(training, _events("ps", 1, fast)) is None and len(sw2.verdicts) == 1   # asked once
    assert sw2.check(training, _events("ps", 3, slow)) is None         # the last epoch: nothing left to gain
    # a restarted attempt is judged on its own steps
    restarted = _events("ps", 1, fast) + _events("ps", 2, slow, start_t=100)
    assert sw2.check(training, restarted).epoch == 2
    # the tasks' start-up (launch to the start event) is counted against a switch
    sw3, training = _switcher(tmp_path, BASE.replace("margin: 0.2", "margin: 0.2, max_switches: 3"))
    training.launched = -1e6           # a start-up of 10^6 s: no switch pays for that
    assert sw3.check(training, _events("ps", 1, slow)) is None
    assert "restart over 128 samples left" in sw3.verdicts[-1].reason    # fixed data: 8 ps steps of 16 samples


def test_switcher_bandwidth_follows_a_set_bw_fault(tmp_path):
    text = BASE + "faults:\n  - {at: step 2, action: set_bw, link: [h2, s1], bw: 1mbit}\n"
    sw, _ = _switcher(tmp_path, text, measured=9.0e6)
    assert sw.bandwidth(None) == 9.0e6                                  # the checks' measurement
    exp = load(tmp_path, text)
    rec = Record(0, exp.faults[0])
    applier = SimpleNamespace(records=[rec])
    assert sw.bandwidth(applier) == 9.0e6                               # not applied yet
    rec.applied_t = 1.0
    assert sw.bandwidth(applier) == pytest.approx(1e6 * 9.0e6 / 10e6)   # 1 mbit x measured/configured
    rec.undone_t = 2.0
    assert sw.bandwidth(applier) == 9.0e6


def test_switcher_cpu_follows_a_set_cpu_fault_and_a_straggler_favours_ps(tmp_path):
    text = BASE.replace("hosts: 3", "hosts: 6").replace("start: ps", "start: allreduce").replace(
        "epochs: 3", "epochs: 4").replace("steps_per_epoch: 4", "steps_per_epoch: 50") + \
        "faults:\n  - {at: step 2, action: set_cpu, host: h6, cpu: 0.002}\n"
    sw, training = _switcher(tmp_path, text, measured=9.56e8)
    exp = load(tmp_path, text)
    rec = Record(0, exp.faults[0])
    training.faults = SimpleNamespace(records=[rec])
    assert sw.cpu(training.faults)["h6"] is None
    step = 0.05        # all-reduce of 6 workers x 16 samples: 1920 samples/s measured
    assert sw.check(training, _events("allreduce", 1, step)) is None    # even hosts: stay
    rec.applied_t = 1.0
    assert sw.cpu(training.faults)["h6"] == 0.002
    verdict = sw.check(training, _events("allreduce", 2, step * 50))    # h6 at 0.2 % of the machine
    assert verdict is not None and verdict.to == "ps", sw.verdicts[-1].reason


# -- the job rewrite --------------------------------------------------------------------------
class _Node:
    def __init__(self, i):
        self.address, self.machine, self.machine_cores, self.limits = f"10.0.0.{i}", "m", 2, {"cpu": None}
        self.host = SimpleNamespace(cores=None)        # the graph host: no emulated machine size

    def shared_dir(self, path):
        return str(path)


def test_switch_rewrites_the_job_with_the_other_strategys_tasks(tmp_path, monkeypatch):
    exp = load(tmp_path, BASE)
    graph = build_graph(exp.topology)
    hosts = [h.name for h in graph.hosts]
    net = SimpleNamespace(nodes={h: _Node(i + 1) for i, h in enumerate(hosts)}, graph=graph)
    workload = advisor.provisional(exp.workload)
    tasks = assign_tasks(workload, hosts)
    started, stopped = [], []
    monkeypatch.setattr(Training, "_start", lambda self, task, job, mode="w": started.append((task, job, mode)) or
                        SimpleNamespace(poll=lambda: None))
    monkeypatch.setattr(Training, "_stop", staticmethod(lambda procs: stopped.extend(procs)))
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    tr = Training(net, workload, tasks, run_dir, switcher=object())
    tr.backup_dir = str(run_dir / "backup")
    tr.job_path = tr._write_job("job.json")
    first = json.loads(tr.job_path.read_text())
    assert first["strategy"] == "ps" and set(first["cluster"]) == {"chief", "ps", "worker"}
    assert first["recovery"] == {"backup_dir": tr.backup_dir, "every_steps": "epoch"}
    tr.procs = {t: SimpleNamespace(poll=lambda: None) for t in tasks}
    tr.switch("allreduce", 1, "faster")
    assert len(stopped) == 3                                            # chief, ps and worker stopped
    assert [t.task_type for t in tr.tasks] == ["worker"] * 3 and tr.workload.strategy == "allreduce"
    job = json.loads((run_dir / "job-switch1.json").read_text())
    assert job["strategy"] == "allreduce" and list(job["cluster"]) == ["worker"]
    assert job["cluster"]["worker"] == [f"10.0.0.{i}:{exp.workload.port}" for i in (1, 2, 3)]
    assert job["recovery"] == first["recovery"]                         # the same backup, at epoch ends
    assert {(t, mode) for t, _, mode in started} == {(t, "a") for t in tr.tasks}
    assert tr.switches[0]["from"] == "ps" and tr.switches[0]["to"] == "allreduce" and not tr.restarts
    assert [t.task_type for t in tr.leads] == ["chief", "worker"]
    assert set(tr.ran) == set(tasks) | set(tr.tasks)


# -- results ----------------------------------------------------------------------------------
def test_steps_rows_carry_the_strategy_of_each_step():
    chief, worker = Task("h1", "chief", 0, 1), Task("h1", "worker", 0, 1)
    unmarked = [{k: v for k, v in e.items() if k != "strategy"} for e in _events("allreduce", 1, 0.1)]
    rows = step_rows_from({chief: _events("ps", 1, 0.5), worker: unmarked}, "x", "r1", strategy="switch")
    assert {r["strategy"] for r in rows if r["role"] == "chief"} == {"ps"}
    assert {r["strategy"] for r in rows if r["role"] == "worker"} == {"switch"}   # no field: the run's


def _step(strategy, step, t):
    return {"event": "step", "strategy": strategy, "epoch": (step - 1) // 4 + 1, "step": step, "time_s": 0.5, "t": t}


def test_figures_of_a_run_that_switched_count_each_step_once_with_its_strategys_samples():
    chief, worker = Task("h1", "chief", 0, 1), Task("h1", "worker", 0, 1)
    # ps steps 1-4 (epoch 1) and 5 (stopped in epoch 2); all-reduce resumes at step 5 and runs 5-8
    before = [{"event": "start", "t": 0.0}] + [_step("ps", s, 0.5 * s) for s in range(1, 6)]
    after = [{"event": "start", "t": 3.0}, {"event": "resume", "step": 4, "t": 3.5}]
    after += [_step("allreduce", s, 4.0 + 0.25 * (s - 5)) for s in range(5, 9)]
    after.append({"event": "done", "t": 5.0, "steps": 8, "final_loss": 0.5})
    outcome = Outcome(True, None, {chief: before, worker: after}, [], [{"from": "ps", "to": "allreduce"}],
                      [chief, worker])
    cols = strategy_switch.columns(outcome, SimpleNamespace(batch_per_worker=16), hosts=3)
    assert cols["switches"] == 1 and cols["steps"] == 8 and cols["final_loss"] == 0.5
    assert cols["training_time_s"] == 5.0 and cols["time_per_step_s"] == pytest.approx(5.0 / 8)
    assert cols["samples_per_s"] == pytest.approx((4 * 16 + 4 * 48) / 5.0)   # step 5 counted once, as all-reduce
    assert cols["time_lost_s"] > 0


# -- spec ------------------------------------------------------------------------------------
@pytest.mark.parametrize("old, new, key, words", [
    ("epochs: 3", "epochs: 1", "workload.epochs", "epochs to 2 or more"),
    ("hosts: 3", "hosts: 2", "workload.strategy", "needs at least 3 hosts"),    # ps cannot be placed
])
def test_switch_spec_problems(tmp_path, old, new, key, words):
    found = issues(tmp_path, BASE.replace(old, new))
    assert any(e.key == key and words in e.message for e in found), found


def test_switch_refuses_a_script_and_a_missing_results_folder(tmp_path):
    (tmp_path / "s.py").write_text("print(1)\n")
    found = issues(tmp_path, BASE + "  script: s.py\n  advisor: {results: nowhere}\n")
    keys = {e.key: e.message for e in found}
    assert "cannot be switched" in keys["workload.script"]
    assert "no runs.csv" in keys["workload.advisor.results"]


def test_report_sentence_of_a_run_that_switched():
    import pandas as pd
    runs = pd.DataFrame([dict(run_id="r1", status="ok", switches=1, time_lost_s=9.16),
                         dict(run_id="r2", status="ok", switches=0, time_lost_s=0.0)])
    epoch = dict(kind="epoch", run_id="r1")
    steps = pd.DataFrame([dict(epoch, role="chief", task_index=0, strategy="ps", samples_per_s=120.0, t=1),
                          dict(epoch, role="worker", task_index=0, strategy="allreduce", samples_per_s=390.0, t=2),
                          dict(epoch, role="worker", task_index=1, strategy="allreduce", samples_per_s=1.0, t=2),
                          dict(epoch, role="worker", task_index=0, strategy="allreduce", samples_per_s=400.0, t=3)])
    (sentence,) = advisor.switch_sentences(runs, steps)
    assert "r1 switched strategy 1 time(s) (ps -> allreduce)" in sentence
    assert "ps 120, allreduce 395" in sentence and "9.16 s" in sentence
