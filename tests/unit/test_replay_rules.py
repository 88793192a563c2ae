"""Replayed compute without a network: the waits each node replays, the dilation auto picks, the verdict's
figures and rules, the spec's refusals, a point resolved under replay, the calibration's cache, and the
stand-ins of both engines (real TensorFlow and PyTorch, one process)."""
import json
import time
from pathlib import Path

import pytest

from testbed.emulation import fidelity
from testbed.emulation import replayed_compute as replay
from testbed.run.point import calibration
from testbed.run.point import point as rp
from spec_helpers import load
from testbed.spec import SpecError, expand_points
from workloads import replay as standins
from workloads import usage

CAL = {"real_step_s": 0.020, "real_cpu_s": 0.021, "stand_in_step_s": 0.002, "stand_in_cpu_s": 0.002,
       "overshoot_s": 0.0, "layers": [[0.004, 0.006], [0.002, 0.008]]}


def test_the_wall_wait_is_the_dilated_step_less_the_stand_ins_own_step():
    host = replay.from_calibration(CAL, 1)
    assert host.wall_wait(1) == pytest.approx(0.018)
    assert host.wall_wait(4) == pytest.approx(0.078)       # 4 x 20 ms, less the 2 ms run at full speed
    layers = host.job(4)["layers"]
    assert sum(f + b for f, b in layers) == pytest.approx(0.078)
    assert layers[1][1] == pytest.approx(0.078 * 0.008 / 0.020)   # in proportion to the measured times


def test_the_waits_overshoot_comes_off_the_wall_wait():
    host = replay.from_calibration({**CAL, "overshoot_s": 0.001}, 1)
    assert host.wall_wait(1) == pytest.approx(0.017) and host.wall_wait(4) == pytest.approx(0.077)


def test_a_node_of_fractional_cores_is_the_whole_cpus_step_scaled():
    assert replay.from_calibration(CAL, 0.5).step_s == pytest.approx(0.040)    # measured on 1 CPU
    assert replay.from_calibration(CAL, 1.5).step_s == pytest.approx(0.020 * 2 / 1.5)


def test_auto_picks_a_larger_factor_for_more_nodes_and_faster_links():
    host = replay.from_calibration(CAL, 1)
    few = replay.auto_factor([host] * 2, "pytorch", "allreduce", 1_000_000, 10_000_000, 2, 0.5)
    many = replay.auto_factor([host] * 32, "pytorch", "allreduce", 1_000_000, 10_000_000, 2, 0.5)
    fast = replay.auto_factor([host] * 32, "pytorch", "allreduce", 1_000_000, 1_000_000_000, 2, 0.5)
    assert few == 1.0 and 1.0 < many < fast
    assert many % replay.AUTO_STEP == 0


def test_node_figures_read_the_steady_window_between_samples():
    # two tasks on h1 (cpu 0.1 s per wall second each), one on h2 that also waited 0.02 s per second
    h1 = [[(0, 0.0, 0.0), (10, 1.0, 0.0)], [(0, 0.0, 0.0), (10, 1.0, 0.0)]]
    h2 = [[(0, 0.0, 0.0), (5, 0.5, 0.1), (10, 1.0, 0.2)]]
    nodes = {n.name: n for n in replay.node_figures({"h1": h1, "h2": h2}, [2.0, 6.0], k=2)}
    assert nodes["h1"].cpu_share == pytest.approx(0.2)        # 0.2 core x K 2 x (1 - 1/K)
    assert nodes["h2"].cpu_share == pytest.approx(0.1) and nodes["h2"].wait_share == pytest.approx(0.02)
    # h1 standing for a 16-core server: its communication had 16 cores there, its bound is a sixteenth
    server = replay.HostReplay(16, 0.02, 0.0, 0.0, ())
    served = {n.name: n for n in replay.node_figures({"h1": h1, "h2": h2}, [2.0, 6.0], k=2, hosts={"h1": server})}
    assert served["h1"].cpu_share == pytest.approx(0.2 / 16) and served["h2"].cpu_share == pytest.approx(0.1)


EIGHT_STEPS = [2.0 + 0.5 * i for i in range(9)]       # 8 steady steps from 2 s to 6 s


def test_a_stall_that_held_up_one_step_in_many_is_no_wait_and_one_in_every_step_is():
    ends = [float(t) for t in range(13)]                 # 12 steady steps of 1 s, sampled each second
    stalled = [[(t, 0.0, 0.8 if t >= 5 else 0.0) for t in ends]]        # 0.8 s waited in the fifth step only
    [node] = replay.node_figures({"h1": stalled}, ends, k=1)
    assert node.wait_share == 0 and not replay.reasons([node])
    steady = [[(t, 0.0, 0.06 * t) for t in ends]]                         # 6 % of every step
    [node] = replay.node_figures({"h1": steady}, ends, k=1)
    assert node.wait_share == pytest.approx(0.06) and "waited for a CPU 6.0%" in replay.reasons([node])[0]
    # in a third of the steps (every third one): the upper-quartile step waited
    third = [[(t, 0.0, 0.3 * (t // 3)) for t in ends]]
    [node] = replay.node_figures({"h1": third}, ends, k=1)
    assert node.wait_share == pytest.approx(0.3) and replay.reasons([node])


def test_the_cpu_bound_leaves_out_the_stand_ins_own_cpu_and_what_could_not_have_gone_faster():
    # h1: 0.2 core over 4 wall seconds = 0.8 CPU s; 8 steps whose stand-in uses 0.025 CPU s each (0.2 s): 0.6 s
    # of communication, x K 2 over 4 s: 0.3 of each emulated second, of which it ran on a whole CPU where the
    # node had half of one: half
    h1 = {"h1": [[(0, 0.0, 0.0), (10, 2.0, 0.0)]]}
    host = {"h1": replay.HostReplay(1, 0.5, 0.01, 0.025, ())}
    assert replay.node_figures(h1, EIGHT_STEPS, k=2, hosts=host)[0].cpu_share == pytest.approx(0.15)
    # at K = 1 it had what the machine it stands for has: nothing to gain
    assert replay.node_figures(h1, EIGHT_STEPS, k=1, hosts=host)[0].cpu_share == 0
    # a stand-in that used more than was measured leaves no negative bound
    greedy = {"h1": replay.HostReplay(1, 0.5, 0.01, 1.0, ())}
    assert replay.node_figures(h1, EIGHT_STEPS, k=2, hosts=greedy)[0].cpu_share == 0


def test_the_cpu_a_contention_wait_covered_is_left_out_of_the_bound():
    from testbed.run.point import record
    from testbed.roles import Task

    def usage(t, cpu, charged):
        return {"event": "usage", "t": t, "cpu_s": cpu, "charged_cpu_s": charged, "run_delay_s": 0.0}
    steps = [{"event": "step", "t": float(t)} for t in range(1, 11)]
    task = Task("h1", "worker", 0, 2222)
    plain = {task: steps + [usage(0, 0.0, 0.0), usage(10, 2.0, 0.0)]}
    covered = {task: steps + [usage(0, 0.0, 0.0), usage(10, 2.0, 1.5)]}
    row = {"warmup_steps": 1}
    [uncovered_node] = record.replay_nodes(plain, [task], row, 2.0)
    [covered_node] = record.replay_nodes(covered, [task], row, 2.0)
    assert covered_node.cpu_share == pytest.approx(uncovered_node.cpu_share / 4)   # 0.5 of 2.0 CPU s left


def test_contention_is_charged_as_the_machine_it_stands_for_would_have_shared_its_cores():
    host = replay.from_calibration(CAL, 1)
    assert host.job(4)["charge"] == 4 and host.job(4)["after_charge"] == 3
    assert replay.from_calibration(CAL, 0.5).charge(2) == 4 and replay.from_calibration(CAL, 2).after_charge(1) == 0
    gpu = replay.from_profile(CAL, 16, "gpu.json", device="cuda")
    assert gpu.charge(16) == 0 and gpu.after_charge(16) == 0     # its compute is on the GPU, 16 cores to talk
    assert replay.from_profile(CAL, 1, "cpu.json").charge(2) == 2


@pytest.mark.timing          # times itself: run with the CPUs to itself (testbed.sh test)
def test_a_contention_wait_lasts_what_the_cpu_beyond_the_stand_ins_would_have_taken():
    others, main = [0.0], [0.0]
    contention = standins.Contention(during=3.0, after=1.0, own_cpu_s=0.002, others=lambda: others[0],
                                     total=lambda: others[0] + main[0])

    def timed(call):
        t0 = time.perf_counter()
        call()
        return time.perf_counter() - t0
    contention.begin()
    others[0] += 0.010          # 10 ms of the communication's CPU during the backward pass: x 3
    during = timed(contention.settle)
    others[0] += 0.020          # 20 ms of it after the backward pass, 7 ms of the framework's, 2 of them the
    main[0] += 0.007            # stand-in's own: 25 ms x 1
    after = timed(contention.close)
    assert during == pytest.approx(0.030, abs=0.01) and after == pytest.approx(0.025, abs=0.01)
    assert contention.charged_cpu_s == pytest.approx(0.035)
    contention.begin()          # the next step counts from the end of the last one
    main[0] += 0.002
    assert timed(contention.close) < 0.01 and contention.charged_cpu_s == pytest.approx(0.035)
    idle = standins.Contention(during=0.0, after=0.0, others=lambda: others[0], total=lambda: others[0])
    idle.begin()
    others[0] += 1.0
    assert timed(idle.settle) + timed(idle.close) < 0.01 and idle.charged_cpu_s == 0


@pytest.mark.timing          # times itself: run with the CPUs to itself (testbed.sh test)
def test_the_cpu_after_the_backward_pass_waits_between_on_the_critical_path_and_under_the_network_wait():
    others = [0.0]
    contention = standins.Contention(during=4.0, after=3.0, others=lambda: others[0], total=lambda: others[0])

    def step(tail_s: float) -> float:
        contention.begin()
        contention.settle()                 # the backward pass ends
        others[0] += 0.010                  # 10 ms of the all-reduce's CPU: 40 ms on the machine's 1/4 core
        time.sleep(tail_s)                  # ... while the step's tail waited for the network this long
        t0 = time.perf_counter()
        contention.close()
        return time.perf_counter() - t0
    contention.begin()
    contention.close()                      # the first step's start
    # CPU-bound (the tail took no longer than its CPU): 40 ms less the 10 it took here, either way
    assert step(0.0) == pytest.approx(0.030, abs=0.008) and contention.unsure_s == pytest.approx(0.0, abs=1e-3)
    # a 25 ms tail: on the critical path 30 ms more, streamed under the wait 15: it waits 22.5, unsure by 7.5
    assert step(0.025) == pytest.approx(0.0225, abs=0.008)
    assert contention.unsure_s == pytest.approx(0.0075, abs=2e-3)
    # a slow network (a 60 ms tail): 30 or nothing
    assert step(0.060) == pytest.approx(0.015, abs=0.008)
    assert contention.unsure_s == pytest.approx(0.0225, abs=3e-3)
    assert contention.charged_cpu_s == pytest.approx(0.030)   # all three accounted for; the rest in unsure_s


def test_what_the_waits_may_be_off_by_adds_to_the_replay_bound():
    task = [(0.0, 0.0, 0.0, 0.0), (10.0, 0.0, 0.0, 0.4)]     # no CPU left uncovered, waits unsure by 0.4 of 10 s
    [node] = replay.node_figures({"h1": [task]}, [0.0, 10.0], 4.0)
    assert node.cpu_share == pytest.approx(0.04) and not replay.reasons([node])
    [node] = replay.node_figures({"h1": [[(0.0, 0.0, 0.0, 0.0), (10.0, 0.0, 0.0, 0.6)]]}, [0.0, 10.0], 4.0)
    assert "up to 6.0% off" in replay.reasons([node])[0]


def test_the_verdict_judges_replayed_nodes_by_cpu_and_wait_not_by_budgets():
    nodes = tuple(fidelity.NodeCpu(f"h{i}", cores=1.0, used_s=5.0) for i in range(16))
    calm = tuple(replay.NodeReplay(n.name, 0.02, 0.01) for n in nodes)
    m = fidelity.RunMeasures(wall_s=60, machine_cpus=2, nodes=nodes, replay=calm)
    assert fidelity.verdict(m) == "ok"                         # 16 one-core nodes on 2 cores: no plan to hold
    assert fidelity.verdict(fidelity.RunMeasures(wall_s=60, machine_cpus=2, nodes=nodes)).startswith("degraded: cpu")
    busy = calm[:-1] + (replay.NodeReplay("h15", 0.08, 0.07),)
    said = fidelity.verdict(fidelity.RunMeasures(wall_s=60, machine_cpus=2, nodes=nodes, replay=busy))
    assert "h15's unbudgeted CPU (communication, framework) could have put each steady step up to 8.0% off" in said and "waited for a CPU 7.0%" in said
    assert "no CPU figures" in fidelity.verdict(fidelity.RunMeasures(wall_s=60, machine_cpus=2, replay=()))


def test_each_replay_reason_advises_only_what_lowers_it_here():
    """The CPU bound grows with 1 - 1/K: a smaller dilation lowers it where K > 1, else only real compute
    does. The tasks' wait falls with a larger dilation, and with fewer nodes per CPU only where the nodes
    outnumber the CPUs (two nodes on two CPUs cannot be fewer per CPU)."""
    both = [replay.NodeReplay("h1", 0.06, 0.07), replay.NodeReplay("h2", 0.01, 0.01)]
    cpu, wait = replay.reasons(both, k=3, machine_cpus=2)
    assert cpu.endswith("(bound 5%; a smaller emulation.dilation lowers it, or compute: real)")
    assert wait.endswith("(its upper quartile; bound 5%; a larger emulation.dilation gives them more)")
    cpu, _ = replay.reasons(both, k=1, machine_cpus=2)
    assert cpu.endswith("(bound 5%; compute: real)")
    _, wait = replay.reasons(both * 2, k=3, machine_cpus=2)
    assert wait.endswith("a larger emulation.dilation gives them more, and fewer nodes per CPU)")
    said = fidelity.verdict(fidelity.RunMeasures(wall_s=60, machine_cpus=2, dilation=2.5, replay=tuple(both)))
    assert "6.0% off the machine it stands for (bound 5%; a smaller emulation.dilation lowers it" in said


REPLAY = """
name: r
topology: {hosts: 4, link: {bw: 10mbit}, host: {cores: 1}}
emulation: {dilation: auto, compute: replay}
workload: {model: cnn, batch_per_worker: 32}
"""


@pytest.mark.parametrize("change, words", [
    ("workload: {model: cnn, script: train.py}", "a workload.script is replayed from its profile"),
    ("workload: {model: caption, data: {kind: flickr8k, path: d}}", "give no BLEU"),
    ("topology: {hosts: 4, link: {bw: 10mbit}}", "set topology.host.cores"),
])
def test_replay_is_refused_where_it_cannot_replay(tmp_path, change, words):
    key = change.split(":")[0]
    text = "\n".join(change if line.startswith(key + ":") else line for line in REPLAY.splitlines())
    (tmp_path / "train.py").write_text("print(1)\n")
    with pytest.raises(SpecError) as err:
        load(tmp_path, text)
    assert words in str(err.value) and "emulation.compute" in str(err.value)


def test_a_replayed_point_has_no_budgets_and_its_own_dilation(tmp_path):
    exp = load(tmp_path, REPLAY)
    asked = []

    def fake(engine, model, params, batch, cores, progress):
        asked.append((engine, model, batch, cores))
        return CAL
    said = []
    (point,) = rp.resolve_all(expand_points(exp), 2, said.append, calibrate=fake)
    assert asked == [("tensorflow", "cnn", 32, 1.0)]           # one calibration per size of node
    assert all(h.budget is None and h.cpu is None and h.cores == 1.0 for h in point.graph.hosts)
    assert point.columns()["compute"] == "replay" and point.columns()["cores"] == 1.0
    assert point.k >= 1 and point.spec.emulation.dilation == point.k and "replayed compute" in said[0]
    job = point.replay_job()["hosts"]
    assert set(job) == {"h1", "h2", "h3", "h4"} and job["h1"]["wait_s"] == pytest.approx(0.020 * point.k - 0.002)


def test_a_node_larger_than_this_machine_is_refused_before_anything_starts(tmp_path):
    from testbed.run.bringup.network_up import preflight
    exp = load(tmp_path, REPLAY.replace("cores: 1", "cores: 4"))
    points = rp.resolve_all(expand_points(exp), 2, calibrate=lambda *a: CAL)
    with pytest.raises(SpecError, match="replay calibrates a machine of 4 cores on 4 CPUs"):
        preflight(exp, points, contact_nodes=False)


def test_a_calibration_is_measured_once_and_read_back_from_its_cache(tmp_path, monkeypatch):
    monkeypatch.setattr(calibration, "CACHE", tmp_path)
    said = []
    first = calibration.calibrate("pytorch", "cnn", {"filters": 8}, 16, 1, said.append)
    assert len(said) == 1 and 0 < first["stand_in_step_s"] and 0 < first["real_step_s"] < 1
    assert len(first["layers"]) == 4                         # the cnn's two convolutions and two dense layers
    (cached,) = tmp_path.glob("*.json")
    assert json.loads(cached.read_text())["inputs"]["batch"] == 16
    assert calibration.calibrate("pytorch", "cnn", {"filters": 8}, 16, 1, said.append) == first and len(said) == 1
    assert calibration.inputs("pytorch", "cnn", {"filters": 8}, 32, 1) != calibration.inputs(
        "pytorch", "cnn", {"filters": 8}, 16, 1)
    # a cache file of valid JSON but the wrong shape, or truncated, is measured again, not read
    for planted in ('{"inputs": {}, "result": {"stand_in_step_s": 1}}', '{"inputs": {}, "result": [1, 2]}', '{"inp'):
        cached.write_text(planted)
        again = calibration.calibrate("pytorch", "cnn", {"filters": 8}, 16, 1, said.append)
        assert set(again) >= {"real_step_s", "stand_in_step_s", "layers"} and "real_step_s" in json.loads(
            cached.read_text())["result"]
    assert len(said) == 4


@pytest.mark.timing          # times itself: run with the CPUs to itself (testbed.sh test)
def test_the_tensorflow_stand_in_waits_and_sends_zero_gradients_of_every_variable():
    import tensorflow as tf

    from workloads import data, models
    p = models.resolve_params("mlp", {"width": 16})
    model = models.compile_model(models.build_model("mlp", p))
    before = [v.numpy().copy() for v in model.trainable_variables]
    assert len(standins.tf_parameter_layers(model)) == 3
    standins.replay_tensorflow(model, [(0.01, 0.0), (0.0, 0.02), (0.0, 0.02)])
    run = model.make_train_function()
    batches = iter(data.synthetic_dataset("mlp", p, 0, 8))
    run(batches)                                              # traces
    t0 = time.perf_counter()
    for _ in range(3):
        logs = run(batches)
    per_step = (time.perf_counter() - t0) / 3
    assert 0.05 <= per_step < 0.2
    assert all((a == v.numpy()).all() for a, v in zip(before, model.trainable_variables))   # zero gradients
    assert int(model.optimizer.iterations.numpy()) == 4 and tf.math.is_nan(logs["loss"])


def test_the_pytorch_stand_in_waits_layer_by_layer_and_gives_every_parameter_a_gradient():
    import torch

    from workloads import torch_models
    model = torch_models.build("cnn", {"filters": 4, "dense": 8})
    waits = [(0.001, 0.01), (0.001, 0.02), (0.0, 0.005), (0.0, 0.005)]
    standin = standins.stand_in(model, waits, 10)
    x, y = torch_models.synthetic_batch("cnn", torch_models.resolve_params("cnn", {"filters": 4, "dense": 8}), 0, 0, 5)
    ready = []
    for i, layer in enumerate(standins.parameter_layers(model)):
        layer.weight.register_post_accumulate_grad_hook(lambda p, i=i: ready.append((i, time.perf_counter())))
    out = standin(x)
    assert out.shape == (5, 10)
    t0 = time.perf_counter()
    torch.nn.functional.cross_entropy(out, y).backward()
    assert [i for i, _ in ready] == [3, 2, 1, 0]             # the last layer's gradients first, as DDP expects
    assert ready[-1][1] - t0 >= 0.04                          # every layer's backward wait
    assert all(p.grad is not None and p.grad.shape == p.shape and not p.grad.any() for p in model.parameters())


def test_the_compute_after_a_pause_is_read_between_the_profiles_points_and_dilated_with_the_world():
    points = ((0.1, 0.004), (0.3, 0.010), (1.0, 0.012))
    assert standins.idle_wait(0.0, points) == 0 and standins.idle_wait(0.05, points) == pytest.approx(0.002)
    assert standins.idle_wait(0.2, points) == pytest.approx(0.007) and standins.idle_wait(5.0, points) == 0.012
    assert standins.idle_wait(0.5, ()) == 0
    host = replay.from_profile(CAL, 1, "p.json", idle=points)
    assert host.job(4)["idle"] == [[0.4, 0.016], [1.2, 0.04], [4.0, 0.048]]     # a pause and its compute, x K
    assert replay.from_calibration(CAL, 1).job(4)["idle"] == []


@pytest.mark.timing          # times itself: run with the CPUs to itself (testbed.sh test)
def test_the_pytorch_stand_in_waits_the_compute_after_a_pause_before_its_next_forward():
    import torch

    from workloads import torch_models
    model = torch_models.build("mlp", {"width": 8, "depth": 1})
    standin = standins.stand_in(model, [(0.0, 0.0)] * 2, 10, idle=((0.05, 0.2),))
    x = torch.zeros(3, 1)
    t0 = time.perf_counter()
    standin(x).sum().backward()                 # the first step: no pause before it
    first = time.perf_counter() - t0
    time.sleep(0.05)
    t0 = time.perf_counter()
    standin(x)
    assert first < 0.1 and time.perf_counter() - t0 >= 0.2


def test_the_pytorch_stand_ins_backward_waits_for_the_communications_cpu_after_each_layer():
    import torch

    from workloads import torch_models
    model = torch_models.build("mlp", {"width": 16})
    used, asked = [0.0], []

    def others():               # 5 ms more of the communication's CPU at each reading
        asked.append(used[0])
        used[0] += 0.005
        return used[0]
    contention = standins.Contention(during=1.0, others=others, total=lambda: 0.0)
    net = standins.stand_in(model, [(0.0, 0.0)] * 3, 10, contention)
    net(torch.zeros(4, 1)).sum().backward()
    # each layer's settle() charges what was used since the last reading, then sees 5 ms more and charges that
    # too, up to its rounds: a communication that never stops using CPU is charged a bounded amount
    assert 3 * 0.005 <= contention.charged_cpu_s <= 3 * standins.Contention.ROUNDS * 0.005 + 1e-9


@pytest.mark.timing          # times itself: run with the CPUs to itself (testbed.sh test)
def test_layer_times_measure_each_parameter_layer_of_a_real_step():
    import torch

    from workloads import torch_models
    model = torch_models.build("mlp", {"width": 512})
    p = torch_models.resolve_params("mlp", {"width": 512})
    x, y = torch_models.synthetic_batch("mlp", p, 0, 0, 64)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    def step():
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()
    # the median of 21 steps: on a busy machine one of 5 layer timings could be a preemption's 8 ms
    times = standins.layer_times(model, step, steps=21)
    assert len(times) == 3 and all(f > 0 and b > 0 for f, b in times)
    assert times[0][0] > times[2][0]                          # 784 x 512 weighs more than 512 x 10


def test_usage_samples_carry_cpu_time_and_run_delay():
    events = []
    with usage.UsageSampler(lambda event, **f: events.append(f), interval=0.01):
        sum(i * i for i in range(200_000))
    assert len(events) >= 2 and events[-1]["cpu_s"] >= events[0]["cpu_s"] and events[-1]["run_delay_s"] >= 0


def test_the_report_says_replayed_runs_are_machines_of_their_own_and_timing_only():
    import pandas as pd

    from analysis.report.sections import answer
    from analysis.tables import faithful, stability, tables
    runs = pd.DataFrame(dict(run_id=["a", "b"], hosts=[8, 16], status="ok", compute="replay", cores=1.0,
                             dilation=[2.0, 3.5], node_cores="", machine_cores=2, strategy="allreduce",
                             bw_bps=1e7, repeat=0, global_batch=[256, 512], workers=[8, 16],
                             training_time_s=10.0, time_per_step_s=1.0))
    said = faithful.setup_sentence(runs)
    assert "machines of 1 core each" in said and "compute replayed" in said and "timing only" in said
    assert answer.machines(16, runs) == "16 one-core machines"
    steps = pd.DataFrame(dict(run_id=["a", "a"], kind="step", role="worker", task_index=0, t=[1.0, 2.0],
                              time_s=[0.5, 0.5], loss=[0.9, 0.8], strategy="allreduce"))
    assert stability.loss_curves(runs, steps).empty          # a replayed step's loss is none of the report's
    assert tables.own_machines(runs).all()


def test_a_stand_in_runs_with_the_threads_it_was_calibrated_with_not_the_servers(tmp_path, monkeypatch):
    """A replayed 16-core GPU server's stand-in was calibrated on one CPU with one thread: its worker runs with
    one (16 OpenMP threads on this machine's CPUs would wait for them), and a calibrated node of 2 cores with 2."""
    from types import SimpleNamespace

    from testbed.roles import Task
    from testbed.run.training.training import Training
    cal = {"real_step_s": 0.04, "stand_in_step_s": 0.002, "stand_in_cpu_s": 0.002, "layers": [[0.01, 0.01]]}
    server, box = replay.from_profile(cal, 16, "gpu.json", device="cuda"), replay.from_calibration(cal, 2)
    assert server.job(4)["threads"] == 1 and box.job(4)["threads"] == 2
    node = SimpleNamespace(address="10.0.0.1", machine="m", machine_cores=2, limits={"cpu": None, "cores": 16},
                           shared_dir=str)
    tasks = [Task("h1", "worker", 0, 2222), Task("h2", "worker", 1, 2222)]
    net = SimpleNamespace(nodes={"h1": node, "h2": node})
    workload = SimpleNamespace(threads="auto", strategy="allreduce", model="torchvision/resnet50")
    training = Training(net, workload, tasks, tmp_path, replay={"hosts": {"h1": server.job(4), "h2": box.job(4)}})
    monkeypatch.setattr("testbed.run.training.training.job_document", lambda w, c: {})
    monkeypatch.setattr("testbed.run.training.training.balance_plan", lambda *a: None)
    training.backup_dir = None
    training._write_job("job.json")
    assert training.threads == {tasks[0]: 1, tasks[1]: 2}       # the machine's rule: 16 each


def test_waits_that_wake_later_than_calibrated_count_in_the_bound():
    """The calibration found the layers' waits 2 ms late a step, and shortened them by as much: a step whose
    waits woke 9 ms late took 7 ms longer than the machine it stands for, which the bound holds; one no later
    than calibrated adds nothing, nor does the step before the first close."""
    cpu = [0.0]
    contention = standins.Contention(during=0.0, overshoot_s=0.002, others=lambda: cpu[0], total=lambda: cpu[0])
    contention.slept(0.010, 0.013)
    contention.close()                       # before the first step began: nothing counted
    assert contention.unsure_s == 0.0
    contention.begin()
    for asked, took in [(0.010, 0.014), (0.020, 0.025), (0.001, 0.0005)]:
        contention.slept(asked, took)
    contention.close()
    assert contention.unsure_s == pytest.approx(0.007)
    contention.begin()
    contention.slept(0.010, 0.0115)
    contention.close()
    assert contention.unsure_s == pytest.approx(0.007)
    cal = {"real_step_s": 0.04, "stand_in_step_s": 0.002, "stand_in_cpu_s": 0.002, "layers": [[0.01, 0.01]],
           "overshoot_s": 0.003}
    assert replay.from_profile(cal, 16, "gpu.json", device="cuda").job(4)["overshoot_s"] == 0.003


def test_the_stand_ins_waits_report_how_late_they_woke():
    import torch
    from torch import nn
    late = []
    contention = standins.Contention(during=0.0)
    contention.slept = lambda asked, took: late.append((asked, took))
    model = standins.stand_in(nn.Sequential(nn.Linear(2, 2)), [(0.002, 0.003)], 2, contention)
    model(torch.zeros(1, 2)).sum().backward()
    assert [asked for asked, _ in late] == [0.002, 0.003] and all(took >= asked for asked, took in late)


def test_a_pytorch_stand_in_sleeps_without_the_kernels_timer_slack():
    """The thread that builds a stand-in runs its waits: its timer slack goes from the kernel's default 50 us
    (set here: a process inherits its parent's, and stand-ins built in this one set it) to 1 ns."""
    import subprocess
    import sys
    code = """if True:
        import ctypes
        from workloads import replay, torch_models
        ctypes.CDLL(None).prctl(replay.PR_SET_TIMERSLACK, 50000, 0, 0, 0)
        print(open("/proc/self/timerslack_ns").read().strip())
        replay.stand_in(torch_models.build("mlp", {"width": 8, "depth": 1}), [(0.0, 0.0)] * 2, 10)
        print(open("/proc/self/timerslack_ns").read().strip())"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          cwd=standins.__file__.rsplit("/workloads/", 1)[0])
    assert done.stdout.split() == ["50000", "1"], done.stderr[-2000:]


def test_a_gpu_nodes_compute_off_its_waits_and_calibrated_step_counts_in_the_bound(monkeypatch):
    """A GPU machine's node (own_s: its stand-in's step as calibrated, DDP's own work in it): a forward and
    backward pass of 60 ms that asked 40 ms of waits, against 8 ms of stand-in and 2 ms of lateness calibrated,
    took 10 ms beyond, which the bound holds; what follows the backward pass (the optimizer, DDP's wait for the
    exchange) is not the compute's; and a pass 1 ms quicker than calibrated shortened the step by 1 ms."""
    now, cpu = [0.0], [0.0]
    monkeypatch.setattr(standins.time, "perf_counter", lambda: now[0])
    contention = standins.Contention(during=0.0, overshoot_s=0.002, own_s=0.008, others=lambda: cpu[0],
                                     total=lambda: cpu[0])
    contention.begin()
    contention.slept(0.030, 0.031)
    contention.slept(0.010, 0.011)
    now[0] = 0.060
    contention.settle()
    now[0] = 0.090
    contention.close()
    assert contention.unsure_s == pytest.approx(0.010)
    contention.begin()
    contention.slept(0.040, 0.041)
    now[0] = 0.090 + 0.049
    contention.settle()
    contention.close()
    assert contention.unsure_s == pytest.approx(0.011)
    cal = {"real_step_s": 0.04, "stand_in_step_s": 0.008, "stand_in_cpu_s": 0.008, "layers": [[0.01, 0.01]]}
    assert replay.from_profile(cal, 16, "gpu.json", device="cuda").job(4)["own_s"] == 0.008
    assert replay.from_profile(cal, 1, "cpu.json", device="cpu").job(4)["own_s"] is None    # DDP's work is its own


def test_a_profiles_stand_in_calibrated_in_ddp_leaves_no_group_or_folder(tmp_path, monkeypatch):
    """The calibration in DistributedDataParallel: a gloo group of the process alone, through a file store in a
    temporary folder; both are gone after it."""
    import tempfile

    import torch.distributed as dist
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    profile = Path(standins.__file__).parents[1] / "profiles" / "cpu" / "mlp-b32-c1-pytorch.json"
    figures = standins.calibrate_profile(str(profile), 1, 3, ddp=True)
    assert figures["stand_in_step_s"] > 0 and figures["real_step_s"] > 0
    assert not dist.is_initialized() and not list(tmp_path.glob("dltb-calibration-*"))   # (torch may cache there)
