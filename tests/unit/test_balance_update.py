"""Static balancing's weighted update equals the plain average over the global batch: workers of different
batches, each gradient weighted by its share (workloads/balance/), all-reduced by the engine's own collective
(PyTorch DDP over two gloo processes; TensorFlow's MirroredStrategy over two logical CPUs, through the train step
the built-in loop uses), against one model stepping on the whole global batch; to float tolerance, and apart
from the unweighted update, which differs."""
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from workloads import balance

REPO = Path(__file__).resolve().parents[2]
SIZES = [43, 21]            # 1 core and 0.5 core sharing a global batch of 64


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _torch_worker(rank: int, port: int, weighted: bool, result) -> None:
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    try:
        x, y = _global_batch()
        start = sum(SIZES[:rank])
        xs, ys = x[start:start + SIZES[rank]], y[start:start + SIZES[rank]]
        model = torch.nn.parallel.DistributedDataParallel(_torch_model())
        weight = balance.weights(SIZES)[rank] if weighted else 1.0
        opt = torch.optim.SGD(model.parameters(), lr=0.5)
        loss = torch.nn.functional.cross_entropy(model(xs), ys)
        (loss * weight).backward()
        opt.step()
        result[rank] = torch.cat([p.detach().flatten() for p in model.parameters()]).tolist()
    finally:
        dist.destroy_process_group()


def _global_batch():
    import torch

    gen = torch.Generator().manual_seed(1)
    return torch.randn(sum(SIZES), 20, generator=gen), torch.randint(0, 5, (sum(SIZES),), generator=gen)


def _torch_model():
    import torch

    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(20, 16), torch.nn.ReLU(), torch.nn.Linear(16, 5))


def _torch_update(weighted: bool) -> list[float]:
    import torch.multiprocessing as mp

    result = mp.Manager().dict()
    mp.start_processes(_torch_worker, args=(_free_port(), weighted, result), nprocs=2, join=True, start_method="spawn")
    assert result[0] == pytest.approx(result[1], abs=1e-7)      # DDP: both workers hold the same weights
    return result[0]


def test_pytorch_ddp_weighted_update_is_the_plain_average_over_the_global_batch():
    import torch

    model = _torch_model()
    x, y = _global_batch()
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    torch.nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
    whole = torch.cat([p.detach().flatten() for p in model.parameters()]).tolist()
    assert _torch_update(True) == pytest.approx(whole, abs=1e-6)
    assert _torch_update(False) != pytest.approx(whole, abs=1e-4)


TF_SCRIPT = r"""
import json, os, sys
os.environ["TF_USE_LEGACY_KERAS"] = "1"
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
sys.path.insert(0, sys.argv[1])
import numpy as np
import tensorflow as tf
import tf_keras as keras
from workloads import balance
from workloads.balance import static

cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
sizes, weighted = json.loads(sys.argv[2]), sys.argv[3] == "1"
rng = np.random.default_rng(1)
x = rng.normal(size=(sum(sizes), 20)).astype("float32")
y = rng.integers(0, 5, size=(sum(sizes),)).astype("int64")

def build():
    tf.random.set_seed(0)
    model = keras.Sequential([keras.layers.Dense(16, activation="relu", input_shape=(20,)), keras.layers.Dense(5)])
    model.compile(optimizer=keras.optimizers.SGD(0.5),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model

whole = build()
start = whole.get_weights()
whole.train_on_batch(x, y)
strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
with strategy.scope():
    model = build()
    model.set_weights(start)
weights = balance.weights(sizes) if weighted else [1.0, 1.0]
cuts = [0, sizes[0], sum(sizes)]
def replica(ctx):
    i = ctx.replica_id_in_sync_group
    return (x[cuts[i]:cuts[i + 1]], y[cuts[i]:cuts[i + 1]])
data = strategy.experimental_distribute_values_from_function(replica)
static.tf_setup(model, weights[0])          # the built-in loop's set-up: Keras' step swapped for the weighted one
table = tf.constant(weights, tf.float32)      # two replicas in one process: each its own weight, in its context
model.gradient_weight = lambda: tf.gather(table, tf.distribute.get_replica_context().replica_id_in_sync_group)
strategy.run(tf.function(model.train_step), args=(data,))
print(json.dumps({"balanced": [w.numpy().ravel().tolist() for w in model.weights],
                  "whole": [w.numpy().ravel().tolist() for w in whole.weights]}))
"""


def _tf_update(weighted: bool) -> dict:
    import json

    out = subprocess.run([sys.executable, "-c", TF_SCRIPT, str(REPO), json.dumps(SIZES), "1" if weighted else "0"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    return ([v for w in got["balanced"] for v in w], [v for w in got["whole"] for v in w])


def test_tensorflow_weighted_update_is_the_plain_average_over_the_global_batch():
    balanced, whole = _tf_update(True)
    assert balanced == pytest.approx(whole, abs=1e-6)
    unweighted, whole = _tf_update(False)
    assert unweighted != pytest.approx(whole, abs=1e-4)
