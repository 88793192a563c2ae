"""Local SGD (sync_every H > 1): after start_step steps of plain all-reduce each worker steps alone and
the float32 model is averaged (all-reduced, mean) after steps s+1, s+1+H, s+1+2H, ... (PyTorch's
PeriodicModelAverager with warmup_steps s: both engines follow its schedule), optionally with DiLoCo's
outer optimizer over the change each average made (outer). Steps count from 1."""
from __future__ import annotations

import types

from workloads.communication import START_STEP, Key, number, text, tf_step

NAME, TITLE, ORDER = "local_sgd", "local SGD", 40
KEY, CHOOSE = "sync_every", "sync_every"
OUTER = {"lr": Key(0.7, "outer learning rate (1 with momentum 0: plain averaging)", kind="float", gt=0, le=10),
         "momentum": Key(0.9, kind="float", ge=0, lt=1),
         "nesterov": Key(True, kind="bool")}


def _outer_cell(value) -> str:
    """runs.csv's outer: DiLoCo's optimizer as text, empty without."""
    if not value:
        return ""
    v = value if isinstance(value, dict) else value.model_dump()
    return f"lr {v['lr']:g}, momentum {v['momentum']:g}" + (", nesterov" if v["nesterov"] else "")


KEYS = {"start_step": START_STEP,
        "sync_every": Key(1, "local SGD: each worker steps alone and the model is averaged every this many steps "
                          "(1: every step's gradients are all-reduced, the usual)", ge=1, le="MAX_COUNT", always=True),
        "outer": Key(None, "sync_every: DiLoCo's outer optimizer over the averaged change (lr, momentum, "
                     "nesterov); null: plain averaging", kind="section", keys=OUTER, always=True, column=_outer_cell,
                     doc="DiLoCo's outer optimizer: SGD with (Nesterov) momentum over the change the averaging made.",
                     orphan="{key} is DiLoCo's optimizer over the averaged model: set sync_every (e.g. 8), "
                     "or remove {key}")}
ENGINES = ("tensorflow", "pytorch")
STRATEGIES = ("allreduce",)
WHAT = "local SGD (sync_every)"
UPDATE_EFFECT = "lets each node step alone between averages"
ALONE = "local SGD averages the float32 model every sync_every steps and sends no gradients"
PREDICT, PREDICT_HELP = "sync:H", "local SGD"
DOC = ("each worker steps alone, the model averaged every `sync_every` steps after `start_step` plain steps; "
       "`outer`: DiLoCo's outer optimizer")


def chosen(c: dict) -> bool:
    return number(c.get("sync_every"), 1) > 1


def run_problems(c: dict, run: dict) -> list[tuple]:
    if run["recovery"] != "none":
        return [("sync_every", "a task restarted from a backup would lose its place in the averaging period and "
                 "the outer optimizer's state: set recovery: none", ("workload.recovery",))]
    return []


def in_force(c: dict) -> dict:
    return {"sync_every": c["sync_every"], "start_step": c["start_step"],
            **({"outer": dict(c["outer"])} if c.get("outer") else {})}


def synced(step: int, start: int, every: int) -> bool:
    """Whether the model is averaged after this step (counted from 1)."""
    return step > start and (step - 1 - start) % every == 0


# -- PyTorch --------------------------------------------------------------------------------------
def torch_setup(model, c: dict):
    """Local SGD on a DDP model; returns after_step(step), to call after each optimizer step (the averaging
    and the outer step)."""
    from torch.distributed.algorithms.ddp_comm_hooks import post_localSGD_hook
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


# -- TensorFlow -----------------------------------------------------------------------------------
def tf_setup(model, strategy, c: dict) -> list:
    """Local steps and a callback that averages the model (put it before the timing callback, so that a step's
    time holds its average)."""
    callback = _callback(model, strategy, c)
    if int(c["start_step"]) == 0:
        model.train_step = types.MethodType(tf_step.train_step(None), model)
    return [callback]


def _callback(model, strategy, c: dict):
    """After start_step steps of the usual all-reduce it swaps in the local train step; after each synced step
    it all-reduces the model (mean) and, with an outer optimizer, takes DiLoCo's outer step (on per-worker
    copies, equal on every worker)."""
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
                model.train_step = types.MethodType(tf_step.train_step(None), model)
                model.make_train_function(force=True)
            elif synced(self.step, start, every):
                average()

        def _snapshot(self):
            for a, v in zip(anchors, variables):
                a.assign(v.read_value())
    return LocalSGD()


# -- theory, names --------------------------------------------------------------------------------
def theory(c: dict, full: float, ring: float, shapes) -> tuple[float, int, int]:
    """Nothing between averages, the float32 model all-reduced on every H-th step (1/H of it on average)."""
    return full, int(c["start_step"]), int(c["sync_every"])


def label(c: dict) -> str:
    return f"local SGD every {int(number(c.get('sync_every')))}" + (", DiLoCo outer" if text(c.get("outer")) else "")


def run_label(value: dict) -> str:
    every = value.get("sync_every", 1)
    return f"sync{every}" + ("outer" if value.get("outer") else "")


def predict_settings(arg: str) -> dict | None:
    if arg.isdigit() and int(arg) >= 1:
        return {"sync_every": int(arg)}
    return None
