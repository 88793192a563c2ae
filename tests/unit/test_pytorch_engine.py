"""engine pytorch without a network: torchrun's environment per rank, the spec's rules, the step
clock's events, and the PyTorch models against the TensorFlow parameter counts."""
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from spec_helpers import issues, load

from testbed.roles import Task, cluster_spec, torchrun_env
from workloads import models, torch_models
from workloads.events import Emitter, StepClock, task_identity


def test_torchrun_environment_per_rank():
    tasks = [Task(h, "worker", i, 50501) for i, h in enumerate(["h1", "h2", "h3"])]
    cluster = cluster_spec(tasks, {"h1": "10.0.0.1", "h2": "10.0.0.2", "h3": "10.0.0.3"})
    envs = [torchrun_env(cluster, t, f"{t.host}-eth0") for t in tasks]
    assert envs[2] == {"RANK": "2", "WORLD_SIZE": "3", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1",
                       "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "50501", "GLOO_SOCKET_IFNAME": "h3-eth0"}
    assert [e["RANK"] for e in envs] == ["0", "1", "2"] and {e["MASTER_ADDR"] for e in envs} == {"10.0.0.1"}
    single = torchrun_env({}, Task("h1", "single", 0, 50501), None)
    assert single == {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1",
                      "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "50501"}


def test_events_know_their_task_from_torchrun_variables(monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert task_identity() == ("worker", 1)
    monkeypatch.setenv("WORLD_SIZE", "1")
    assert task_identity() == ("single", 0)


def test_the_step_clock_writes_step_epoch_and_done_events():
    out = io.StringIO()
    clock = StepClock(global_batch=64, emit=Emitter("worker", 0, "h1", stream=out))
    for loss in (2.0, 1.0):
        clock.step(loss)
    clock.epoch_end()
    clock.step(0.5)
    clock.epoch_end()
    clock.done()
    events = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [e["event"] for e in events] == ["step", "step", "epoch", "step", "epoch", "done"]
    assert [e["step"] for e in events if e["event"] == "step"] == [1, 2, 3]
    epochs = [e for e in events if e["event"] == "epoch"]
    assert [(e["epoch"], e["steps"], e["loss"]) for e in epochs] == [(1, 2, 1.5), (2, 1, 0.5)]
    done = events[-1]
    assert done["steps"] == 3 and done["final_loss"] == 0.5 and done["asynchronous"] is False
    assert done["samples_per_s"] == pytest.approx(3 * 64 / done["training_time_s"])


BASE = "name: t\ntopology: {hosts: 3}\nworkload: {engine: pytorch%s}\n"


def test_pytorch_settings_load_and_what_it_does_not_run_is_refused_at_its_key(tmp_path):
    assert load(tmp_path, BASE % ", strategy: allreduce, model: cnn").workload.engine == "pytorch"
    cases = {", strategy: ps": "workload.strategy", ", model: caption": "workload.model",
             ", recovery: backup": "workload.recovery", ", allreduce: {implementation: ring}": "workload.allreduce"}
    for extra, key in cases.items():
        found = issues(tmp_path, BASE % extra)
        assert [f.key for f in found] == [key], (extra, found)
        assert "pytorch" in found[0].message.lower()
    # docker nodes run it: the worker image has PyTorch's CPU build
    docker = load(tmp_path, "name: t\ntopology: {hosts: 2, host_overrides: {h2: {kind: docker}}}\n"
                            "workload: {engine: pytorch}\n")
    assert docker.workload.engine == "pytorch"
    reserved = issues(tmp_path, BASE % ", env: {MASTER_PORT: '1234'}")
    assert [f.key for f in reserved] == ["workload.env.MASTER_PORT"]


@pytest.mark.parametrize("name, params", [("mlp", {}), ("mlp", {"width": 64, "depth": 3}),
                                          ("cnn", {}), ("cnn", {"filters": 8, "dense": 32})])
def test_the_pytorch_models_have_the_tensorflow_parameter_counts(name, params):
    p = models.resolve_params(name, params)
    model = torch_models.build(name, p)
    assert torch_models.trainable_count(model) == models.param_count(name, p)
    x, y = torch_models.synthetic_batch(name, p, 0, 3, 8)
    assert model(x).shape == (8, p["classes"]) and y.shape == (8,)
    again, _ = torch_models.synthetic_batch(name, p, 0, 3, 8)
    other, _ = torch_models.synthetic_batch(name, p, 0, 4, 8)
    assert bool((x == again).all()) and not bool((x == other).all())


DDP_AFTER_LOADING = """
import os, socket, sys
import torch, torch.distributed as dist
from workloads.torch_train import DDP_IMPORTS
for name in DDP_IMPORTS:
    __import__(name)
with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK="0", WORLD_SIZE="1")
dist.init_process_group("gloo")
before = set(sys.modules)
torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 2))
print(sorted(m for m in set(sys.modules) - before if m.count(".") <= 1))
"""


def test_the_engine_loads_what_distributed_data_parallel_imports():
    """What the all-reduce task loads with its quota lifted leaves DDP's constructor nothing heavy to import
    under the node's budget (torch._dynamo alone: 835 modules, 2.7 s of CPU here)."""
    proc = subprocess.run([sys.executable, "-c", DDP_AFTER_LOADING], cwd=Path(__file__).resolve().parents[2],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "[]"
