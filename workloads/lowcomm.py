"""workload.communication inside the built-in training loops (docs/communication.md): PyTorch's DDP
communication hooks and model averaging; TensorFlow's all-reduce of cast gradients and of the model
every H steps, with DiLoCo's outer optimizer in both. Engines are imported inside the functions.

Steps count from 1. With start_step s and sync_every H, steps 1..s all-reduce their gradients; after
them each worker steps alone and the model is averaged after steps s+1, s+1+H, s+1+2H, ... (PyTorch's
PeriodicModelAverager with warmup_steps s: both engines follow its schedule)."""
from __future__ import annotations

import types

DEFAULTS = {"compression": "none", "rank": 4, "start_step": 10, "sync_every": 1, "outer": None}


def settings(job: dict) -> dict:
    """The job's communication settings with their defaults (a job without the section: plain all-reduce)."""
    return {**DEFAULTS, **(job.get("communication") or {})}


def in_force(c: dict) -> dict:
    """What the `start` event says: {} for plain all-reduce, else the settings that apply."""
    if c["compression"] == "powersgd":
        return {"compression": "powersgd", "rank": c["rank"], "start_step": c["start_step"]}
    if c["compression"] != "none":
        return {"compression": c["compression"]}
    if c["sync_every"] > 1:
        return {"sync_every": c["sync_every"], "start_step": c["start_step"],
                **({"outer": dict(c["outer"])} if c.get("outer") else {})}
    return {}


def synced(step: int, start: int, every: int) -> bool:
    """Whether the model is averaged after this step (counted from 1)."""
    return step > start and (step - 1 - start) % every == 0


# -- PyTorch --------------------------------------------------------------------------------------
def bf16_hook(process_group, bucket):
    """fp16_compress_hook's twin in bfloat16 for gloo (PyTorch's own bf16 hook asks for NCCL)."""
    import torch
    import torch.distributed as dist

    group = process_group if process_group is not None else dist.group.WORLD
    buffer = bucket.buffer()
    compressed = buffer.to(torch.bfloat16).div_(group.size())
    fut = dist.all_reduce(compressed, group=group, async_op=True).get_future()

    def decompress(f):
        buffer.copy_(f.value()[0])
        return buffer
    return fut.then(decompress)




def ddp_options(c: dict, model) -> dict:
    """DistributedDataParallel's options for the setting. PowerSGD gets the whole model in one bucket: with
    several, its per-bucket collectives reach gloo in a different order on each worker, which aborts
    ("Received data size doesn't match expected size", torch 2.13, a model over DDP's 1 MiB first bucket)."""
    if c["compression"] != "powersgd":
        return {}
    size = sum(p.numel() * p.element_size() for p in model.parameters())
    return {"bucket_cap_mb": size / 2**20 + 1}


def torch_setup(model, c: dict):
    """Register the setting on a DistributedDataParallel model; returns after_step(step), to call after each
    optimizer step (local SGD's averaging and outer step; nothing otherwise)."""
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks, post_localSGD_hook, powerSGD_hook

    if c["compression"] == "fp16":
        model.register_comm_hook(None, default_hooks.fp16_compress_hook)
    elif c["compression"] == "bf16":
        model.register_comm_hook(None, bf16_hook)
    elif c["compression"] == "powersgd":
        state = powerSGD_hook.PowerSGDState(process_group=None, matrix_approximation_rank=int(c["rank"]),
                                            start_powerSGD_iter=int(c["start_step"]))
        model.register_comm_hook(state, powerSGD_hook.powerSGD_hook)
    if c["sync_every"] <= 1:
        return lambda step: None
    from torch.distributed.algorithms.model_averaging import averagers

    start, every = int(c["start_step"]), int(c["sync_every"])
    state = post_localSGD_hook.PostLocalSGDState(process_group=None, subgroup=None, start_localSGD_iter=start,
                                                 post_local_gradient_allreduce=False)
    model.register_comm_hook(state, post_localSGD_hook.post_localSGD_hook)
    averager = averagers.PeriodicModelAverager(period=every, warmup_steps=start)
    params = list(model.parameters())
    outer = TorchOuter(params, **c["outer"]) if c.get("outer") else None

    def after_step(step: int) -> None:
        averager.average_parameters(params)       # its own count: averages exactly when synced(step)
        if outer is not None:
            if step == start:
                outer.snapshot(params)
            elif synced(step, start, every):
                outer.step(params)
    return after_step


class TorchOuter:
    """DiLoCo's outer step on the averaged model: delta = anchor - average, momentum buffer m = mu m + delta,
    anchor -= lr (delta + mu m) (Nesterov) or lr m; the model becomes the anchor."""

    def __init__(self, params, lr: float = 0.7, momentum: float = 0.9, nesterov: bool = True):
        import torch

        self.lr, self.mu, self.nesterov = float(lr), float(momentum), bool(nesterov)
        self.anchor = [p.detach().clone() for p in params]
        self.buf = [torch.zeros_like(p) for p in self.anchor]

    def snapshot(self, params) -> None:
        for a, p in zip(self.anchor, params):
            a.copy_(p.detach())

    def step(self, params) -> None:
        import torch

        with torch.no_grad():
            for a, b, p in zip(self.anchor, self.buf, params):
                delta = a - p.data
                b.mul_(self.mu).add_(delta)
                a.sub_(self.lr * (delta + self.mu * b if self.nesterov else b))
                p.data.copy_(a)


# -- TensorFlow (all-reduce) ----------------------------------------------------------------------
def tf_setup(model, strategy, c: dict) -> list:
    """Apply the setting to a compiled tf_keras model under MultiWorkerMirroredStrategy: a train step
    that all-reduces gradients cast to 16 bits, or local steps and a callback that averages the model
    (put the returned callbacks before the timing callback, so that a step's time holds its average)."""
    import tensorflow as tf

    if c["compression"] in ("fp16", "bf16"):
        model.train_step = types.MethodType(_train_step(getattr(tf, {"fp16": "float16"}.get(c["compression"],
                                                                                       "bfloat16"))), model)
        return []
    if c["sync_every"] <= 1:
        return []
    callback = _local_sgd_callback(model, strategy, c)
    if int(c["start_step"]) == 0:
        model.train_step = types.MethodType(_train_step(None), model)
    return [callback]


def _train_step(dtype):
    """tf_keras' train step with the gradients all-reduced in `dtype` (summed, as Keras aggregates them), or
    with dtype None applied alone: a local step (the loss Keras scaled by 1/replicas scaled back)."""
    import tensorflow as tf
    import tf_keras as keras

    def train_step(self, data):
        x, y, weight = keras.utils.unpack_x_y_sample_weight(data)
        with tf.GradientTape() as tape:
            y_pred = self(x, training=True)
            loss = self.compute_loss(x, y, y_pred, weight)
        variables = self.trainable_variables
        grads = [tf.convert_to_tensor(g) for g in tape.gradient(loss, variables)]
        if dtype is None:
            replicas = float(tf.distribute.get_strategy().num_replicas_in_sync)
            grads = [g * replicas for g in grads]
        else:
            ctx = tf.distribute.get_replica_context()
            summed = ctx.all_reduce(tf.distribute.ReduceOp.SUM, [tf.cast(g, dtype) for g in grads])
            grads = [tf.cast(g, v.dtype) for g, v in zip(summed, variables)]
        self.optimizer.apply_gradients(zip(grads, variables), skip_gradients_aggregation=True)
        return self.compute_metrics(x, y, y_pred, weight)
    return train_step


def _local_sgd_callback(model, strategy, c: dict):
    """The callback of local SGD under TensorFlow: after start_step steps of the usual all-reduce it swaps in
    the local train step; after each synced step it all-reduces the model (mean) and, with an outer
    optimizer, takes DiLoCo's outer step (on per-worker copies, equal on every worker)."""
    import tensorflow as tf
    import tf_keras as keras

    start, every, outer = int(c["start_step"]), int(c["sync_every"]), c.get("outer")
    variables = model.trainable_variables
    anchors = [tf.Variable(tf.zeros(v.shape, v.dtype), trainable=False) for v in variables] if outer else []
    bufs = [tf.Variable(tf.zeros(v.shape, v.dtype), trainable=False) for v in variables] if outer else []

    def assign(var, value):
        return var.assign(value)

    def replica():
        ctx = tf.distribute.get_replica_context()
        mean = ctx.all_reduce(tf.distribute.ReduceOp.MEAN, [v.read_value() for v in variables])
        if outer:
            lr, mu = float(outer["lr"]), float(outer["momentum"])
            new = []
            for a, b, m in zip(anchors, bufs, mean):
                delta = a - m
                b.assign(mu * b + delta)
                a.assign(a - lr * (delta + mu * b if outer.get("nesterov", True) else b))
                new.append(a.read_value())
            mean = new
        ctx.merge_call(lambda strat, values: [strat.extended.update(v, assign, args=(x,))
                                              for v, x in zip(variables, values)], args=(mean,))

    average = tf.function(lambda: strategy.run(replica))

    class LocalSGD(keras.callbacks.Callback):
        step = 0

        def on_train_begin(self, logs=None):
            if start == 0:
                self._snapshot()

        def on_train_batch_end(self, batch, logs=None):
            self.step += 1
            if self.step == start:
                self._snapshot()
                model.train_step = types.MethodType(_train_step(None), model)
                model.make_train_function(force=True)
            elif synced(self.step, start, every):
                average()

        def _snapshot(self):
            for a, v in zip(anchors, variables):
                a.assign(v.read_value())
    return LocalSGD()


def sent_bytes() -> int | None:
    """Bytes this task's node has sent so far: every interface of its network namespace but lo
    (/proc/net/dev); None where it cannot be read."""
    try:
        with open("/proc/net/dev") as fh:
            lines = fh.read().splitlines()[2:]
    except OSError:
        return None
    total = 0
    for line in lines:
        name, _, counters = line.partition(":")
        fields = counters.split()
        if name.strip() != "lo" and len(fields) >= 9:
            total += int(fields[8])
    return total
