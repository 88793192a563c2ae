"""Entry point of a PyTorch training task (engine pytorch; docs/developer/contracts.md, "Workload").

python workloads/torch_train.py --job JOB.json --task-type single|worker --task-index I --host NAME

The built-in mlp or cnn model, trained with DistributedDataParallel over torch.distributed's gloo
backend (strategy allreduce) or alone (single). The testbed sets what torchrun would set
(MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE) and GLOO_SOCKET_IFNAME,
the host's emulated interface. Prints the same JSON events as workloads/train.py on stdout.
"""
from __future__ import annotations

import contextlib
import datetime
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from workloads import balance, cpuquota, lowcomm, replay, torch_models, usage, zoo  # noqa: E402  (no torch import at module level)
from workloads.events import Emitter, StepClock, holding_done  # noqa: E402
from workloads.models import resolve_params  # noqa: E402
from workloads.train import PROBE_STEPS, PROBE_WARMUP, task_main  # noqa: E402

INIT_TIMEOUT_S = 300        # the group's rendezvous (x the dilation): every worker must have started
# DistributedDataParallel's constructor imports these (torch._dynamo: 835 modules, 2.7 s of CPU here): loaded with
# the engine, outside the node's budget, they no longer take 4-8 s of a dilated run's engine start
DDP_IMPORTS = ("torch._dynamo",)


def run_training(job: dict, emit: Emitter) -> None:
    import torch
    import torch.distributed as dist
    from torch import nn

    threads = int(os.environ.get("TF_NUM_INTRAOP_THREADS") or 0)
    if threads:
        torch.set_num_threads(threads)
    distributed = job["strategy"] == "allreduce"
    rank, world = 0, 1
    if distributed:
        k = float(os.environ.get("DLTESTBED_DILATION") or 1)
        dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=INIT_TIMEOUT_S * k))
        rank, world = dist.get_rank(), dist.get_world_size()
    name, seed = job["model"], int(job.get("seed", 0))
    p = resolve_params(name, job.get("model_params"))
    bpw, epochs, per_epoch = int(job.get("batch_per_worker", 32)), int(job.get("epochs", 1)), int(job["steps_per_epoch"])
    own, weight = balance.worker(job.get("balance"), emit.base["host"], bpw)   # balanced: its batch, its share
    torch.manual_seed(seed)                 # the same initial weights on every worker (DDP also broadcasts them)
    replayed = job.get("replay")
    shapes = (replayed or {}).get("shapes")     # replayed from profiles: no model code, its parameters' shapes
    model = replay.profile_model(shapes) if shapes else torch_models.build(name, p)
    trainable = torch_models.trainable_count(model)
    batches = lambda batch_id: torch_models.synthetic_batch(name, p, seed, batch_id, own)  # noqa: E731
    loss_of = lambda net, x, y: zoo.loss(name, net, x, y)  # noqa: E731  (the built-in models' too)
    contention = None
    if replayed:
        mine = replayed["hosts"][emit.base["host"]]
        contention = replay.Contention(float(mine.get("charge", 0.0)), float(mine.get("after_charge", 0.0)),
                                       float(mine.get("own_cpu_s", 0.0)),
                                       unsent_wait_s=float(mine.get("unsent_wait_s", 0.0)),
                                       overshoot_s=float(mine.get("overshoot_s", 0.0)), own_s=mine.get("own_s"))
        waits = [tuple(x) for x in balance.scale_waits(mine["layers"], own, bpw)]
        model = replay.stand_in(model, waits, 1, contention, mine.get("idle", ()))
        dummy = (torch.zeros(own, 1), torch.zeros(own, dtype=torch.long))
        batches, loss_of = (lambda batch_id: dummy), (lambda net, x, y: nn.functional.cross_entropy(net(x), y))
    comm = lowcomm.settings(job) if distributed else lowcomm.settings({})
    after_step = lambda step: None  # noqa: E731
    if distributed:
        with replay.scaled_buckets(float(((replayed or {}).get("emulated") or {}).get("byte_scale", 1))):
            model = nn.parallel.DistributedDataParallel(model, **lowcomm.ddp_options(comm, model))
        after_step = lowcomm.torch_setup(model, comm)     # a DDP hook, or local SGD's averaging
    # a replayed step's optimizer is part of the waited time: the stand-in's is a no-op (its gradients are zeros)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0) if replayed \
        else torch.optim.Adam(model.parameters(), lr=float(job.get("learning_rate", 1e-3)))
    # byte-scaled replay (emulation.byte_scale): the emulated gradient's figures, not the scaled one's sent
    emulated = (replayed or {}).get("emulated") or {"params": trainable, "gradient_bytes": 4 * trainable}
    emit("start", strategy=job["strategy"], model=name, params=emulated["params"],
         gradient_bytes=emulated["gradient_bytes"],
         global_batch=bpw * world, workers=world, servers=0, steps_per_epoch=per_epoch, epochs=epochs,
         steps_per_execution=1, engine="pytorch", compute="replay" if replayed else "real",
         communication=lowcomm.in_force(comm), **balance.in_force(job.get("balance"), own, weight))
    held = []               # `done`, stamped when training ended, written after the probe: it stays last
    clock = StepClock(global_batch=bpw * world, emit=holding_done(emit, held), counter=lowcomm.sent_bytes, batch=own)
    batch_id, step = rank, 0
    resizer = balance.resizer(job.get("balance"), rank)      # balance dynamic: the batches re-sized as it trains
    with usage.UsageSampler(emit, contention=contention) if replayed else contextlib.nullcontext():
        for _ in range(epochs):
            for _ in range(per_epoch):
                t0 = time.perf_counter()
                x, y = batches(batch_id)
                batch_id += world
                optimizer.zero_grad()
                # balance dynamic: the step's compute timed apart from its collective (DDP's held back, one after)
                with model.no_sync() if resizer is not None else contextlib.nullcontext():
                    loss = loss_of(model, x, y)
                    (loss * weight if weight != 1.0 else loss).backward()   # DDP all-reduces the gradients, by bucket
                computed = time.perf_counter() - t0
                if resizer is not None:
                    resizer.timed(computed)
                    _average_gradients(model)
                optimizer.step()
                step += 1
                after_step(step)
                if contention is not None:
                    contention.close()
                clock.step(None if replayed else loss.item(),      # a replayed step's loss means nothing
                           **({"compute_s": round(computed, 6)} if resizer is not None else {}))
                if resizer is not None and resizer.after_step(step, _all_gather):
                    own, weight = resizer.batch, resizer.weight
                    clock.batch = own
            clock.epoch_end()
    clock.done()
    if not replayed:            # a replayed step's compute was calibrated before the run
        compute_probe(name, p, seed, own, emit, loss_of, lead=emit.base.get("task_index") == 0)
    for line in held:
        emit.write(line)


def _average_gradients(model) -> None:
    """What DDP's backward does, after it: every gradient averaged over the ranks (one all-reduce of them all)."""
    import torch.distributed as dist
    from torch._utils import _flatten_dense_tensors, _unflatten_dense_tensors

    grads = [p.grad for p in model.parameters() if p.grad is not None]
    flat = _flatten_dense_tensors(grads)
    dist.all_reduce(flat)
    flat /= dist.get_world_size()
    for g, mean in zip(grads, _unflatten_dense_tensors(flat, grads)):
        g.copy_(mean)


def _all_gather(value: float) -> list[float]:
    """Every rank's `value`, in rank order (a small all-gather over the process group)."""
    import torch
    import torch.distributed as dist

    mine = torch.tensor([float(value)], dtype=torch.float64)
    every = [torch.zeros_like(mine) for _ in range(dist.get_world_size())]
    dist.all_gather(every, mine)
    return [float(t) for t in every]


def compute_probe(name: str, p: dict, seed: int, batch: int, emit: Emitter, loss_of,
                  warmup: int = PROBE_WARMUP, steps: int = PROBE_STEPS, lead: bool = True) -> None:
    """Local steps of a fresh model with no collective: the compute part of a step (the `compute`
    event, as workloads/train.py emits it: cpuquota.compute_probe)."""
    def setup():
        import torch

        model = torch_models.build(name, p)
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
        x, y = torch_models.synthetic_batch(name, p, seed, 0, batch)

        def timed():
            for i in range(warmup + steps):
                if i == warmup:
                    t0, c0 = time.perf_counter(), time.process_time()
                optimizer.zero_grad()
                loss_of(model, x, y).backward()
                optimizer.step()
            return (time.perf_counter() - t0) / steps, (time.process_time() - c0) / steps
        return timed

    cpuquota.compute_probe(setup, steps, emit, lead)


def pytorch_task(job, args, emit) -> None:
    if job.get("strategy") not in ("single", "allreduce"):
        raise ValueError(f"engine pytorch runs strategies single and allreduce, not {job.get('strategy')!r}")
    cpuquota.load_engine("torch", "torch.distributed", *(DDP_IMPORTS if job["strategy"] == "allreduce" else ()))
    run_training(job, emit)


def main(argv=None) -> None:
    task_main(pytorch_task, argv)     # exits without the process group's teardown, which waits for every peer


if __name__ == "__main__":
    main()
