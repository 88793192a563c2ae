"""Quota slices: what a budget under a core costs the code that runs in it.

A budget of C < 1 core is a CPU quota of 1 ms per 1/C ms (budgets.quota): the node runs 1 ms, then
pauses. This script runs the same work (training steps of the built-in MLP, 269k parameters, batch
32, one TensorFlow thread, as a tf.function like Keras's fit; and, for contrast, the same MLP's
forward and backward pass in plain numpy) in a cgroup pinned to one CPU, at each budget, through
the testbed's own cgroup code. Imports and warm-up run before the work joins the budget. Per budget it
prints the wall time per step, the CPU time per step, the CPU time per step as a ratio to the
unlimited run of the same work (1.00: slicing costs nothing), and the share of a core the work got
against the budget (the quota held). The unlimited run is measured first and last, so the spread
of the reference is visible.

Run as root:  .venv/bin/python bench/slices.py [--budgets 0.8,0.4,0.2,0.1] [--seconds 3] [--cpu 0]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from machine import machine_state  # noqa: E402
from testbed.emulation.budgets import quota  # noqa: E402
from testbed.nodes import cgroups  # noqa: E402

GROUP = "bench-slices"

WORK = r"""
import json, os, resource, sys, time
sys.path.insert(0, {repo!r})
os.environ.update(OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
kind, seconds, groups = sys.argv[1], float(sys.argv[2]), sys.argv[3:]
if kind == "tensorflow":
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
    import numpy as np, tensorflow as tf
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    from workloads.models import build_model, compile_model
    import tf_keras as keras
    from workloads.models import build_model
    model = build_model("mlp", {{"width": 256, "depth": 2}})
    opt, loss_fn = keras.optimizers.Adam(1e-3), keras.losses.SparseCategoricalCrossentropy()
    x = tf.constant(np.random.rand(32, 784).astype("float32")); y = tf.constant(np.random.randint(0, 10, 32))

    @tf.function
    def step():                 # what Keras's fit runs per step, without its callbacks
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
        return loss
else:
    import numpy as np
    w1, w2, w3 = (np.random.rand(*s).astype("float32") for s in ((784, 256), (256, 256), (256, 10)))
    x = np.random.rand(32, 784).astype("float32")
    def step():
        h1 = np.maximum(x @ w1, 0); h2 = np.maximum(h1 @ w2, 0); o = h2 @ w3
        d2 = (o @ w3.T) * (h2 > 0); d1 = (d2 @ w2.T) * (h1 > 0)
        return (h2.T @ o).sum() + (h1.T @ d2).sum() + (x.T @ d1).sum()
for _ in range(10):
    step()
for group in groups:            # join the budget only now: imports and warm-up run at full speed
    open(os.path.join(group, "cgroup.procs"), "w").write(str(os.getpid()))
for _ in range(3):
    step()
cpu = lambda: sum(resource.getrusage(resource.RUSAGE_SELF)[:2])
n, t0, c0 = 0, time.perf_counter(), cpu()
while time.perf_counter() - t0 < seconds:
    step(); n += 1
print(json.dumps({{"steps": n, "wall_s": time.perf_counter() - t0, "cpu_s": cpu() - c0}}))
"""


def measure(kind: str, budget: float | None, cpu: int, seconds: float) -> dict:
    """Run the work in the bench's cgroup at `budget` real cores (None: no quota), pinned to `cpu`."""
    cores = os.cpu_count() or 1
    dirs = cgroups.apply_limits(GROUP, budget / cores if budget else None, None, cores=cores, cpus=[cpu])
    try:
        wall = seconds / budget if budget else seconds
        out = subprocess.run([sys.executable, "-c", WORK.format(repo=str(REPO)), kind, str(wall), *map(str, dirs)],
                             stdout=subprocess.PIPE, text=True, check=True).stdout
        return json.loads(out.strip().splitlines()[-1])
    finally:
        for d in dirs:
            cgroups.remove(d)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--budgets", default="0.8,0.4,0.2,0.1", help="real cores per run (each also as its quota slices)")
    ap.add_argument("--seconds", type=float, default=3.0, help="CPU seconds of work per budget (wall: / budget)")
    ap.add_argument("--cpu", type=int, default=0, help="the CPU the work is pinned to")
    ap.add_argument("--work", default="tensorflow,numpy")
    args = ap.parse_args()
    print(machine_state())
    budgets = [None] + [float(b) for b in args.budgets.split(",")] + [None]
    print(f"{'work':>10} {'budget':>7} {'slices':>16} {'wall ms/step':>12} {'cpu ms/step':>11} {'cpu x none':>10} {'core/budget':>11}")
    for kind in args.work.split(","):
        reference = None
        for budget in budgets:
            r = measure(kind, budget, args.cpu, args.seconds)
            cpu_step = r["cpu_s"] / r["steps"]
            if budget is None and reference is None:
                reference = cpu_step
            q = quota(budget) if budget else None
            slices = f"{q.quota_us / 1000:g} ms / {q.period_us / 1000:g} ms" if q else "none"
            held = f"{r['cpu_s'] / r['wall_s'] / budget:.2f}" if budget else "-"
            print(f"{kind:>10} {budget or 'none':>7} {slices:>16} {1000 * r['wall_s'] / r['steps']:12.2f} "
                  f"{1000 * cpu_step:11.3f} {cpu_step / reference:10.2f} {held:>11}", flush=True)
    print(machine_state())


if __name__ == "__main__":
    main()
