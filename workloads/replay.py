"""Replayed compute (`emulation.compute: replay`): a training step whose forward and backward pass is a
wait of the calibrated time, while the gradients, of the model's real shapes and dtypes, go through the
engine's real communication path.

- TensorFlow: the model's train_step is replaced. It reads every trainable variable (under
  ParameterServerStrategy, the pull from the servers), waits the forward pass, then each layer's
  backward, last layer first, and hands each layer zero gradients of its variables' shapes as its wait
  ends (the all-reduce of the last layers' gradients overlaps the first layers' backward, as in a real
  step; under ps, the push to the servers). The waits are tf.data sleeps, graph ops, so they run where
  the step runs: on the remote workers of the ps strategy too.
- PyTorch: a stand-in module owns the real model's parameters. Its forward and backward wait layer by
  layer in proportion to the calibrated per-layer times, and its backward hands zero gradients to each
  layer's parameters as the real one would, so DistributedDataParallel's buckets are all-reduced while
  the earlier layers' backward still waits: the real overlap. Where the machine it stands for computes on
  the CPU cores its communication uses (a CPU profile, a calibration here), the two compete: each
  layer's backward wait also waits what the communication's CPU since the step began would have taken
  from the compute there, and the step's end what the communication after the backward pass would
  have taken on that machine's cores (`Contention`).

The losses of replayed steps mean nothing: the events carry none. The calibration (`main`, run in a process
of its own before the network exists, on idle CPUs: testbed/run/point/calibration.py) measures the real step,
its layers' times and the stand-in's own step; testbed/emulation/replayed_compute.py makes the waits of them.
workloads/usage.py reports a task's CPU time and its threads' wait for a CPU, for the verdict.
"""
from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from workloads.usage import others_cpu_s, process_cpu_s  # noqa: E402

CALIBRATION_WARMUP, CALIBRATION_STEPS = 3, 20
PR_SET_TIMERSLACK = 29          # prctl's option (linux/prctl.h)


# --------------------------------------------------------------------------- TensorFlow

def sleep_op(seconds):
    """A graph op that waits `seconds` (a number or a tensor) and gives 0.0: a tf.data sleep dataset's element, made
    and read inside the step (nothing prefetches it); it runs on the ps strategy's remote workers too."""
    import tensorflow as tf
    from tensorflow.python.data.experimental.ops import testing

    micros = tf.cast(tf.round(tf.convert_to_tensor(seconds, tf.float64) * 1e6), tf.int64)
    one = tf.data.Dataset.from_tensors(tf.constant(0.0)).apply(testing.sleep(micros)).take(1)
    return one.get_single_element()     # take(1): the check for a second element does not sleep again


def tf_parameter_layers(model) -> list:
    """The tf_keras model's layers that own trainable variables, in the model's (topological) order."""
    return [layer for layer in model.layers if layer.trainable_weights]


def replay_tensorflow(model, layer_waits, worker_index=None) -> None:
    """Replace the compiled tf_keras model's train_step by the replayed one (module docstring).
    `layer_waits`: each parameter layer's (forward, backward) seconds (tf_parameter_layers order), or, given
    worker_index() (a tensor: the ps strategy's worker running the step), one such list per worker. Each
    layer's zero gradients are made as its backward wait ends, last layer first: the collective of the last
    layers' gradients starts while the first layers' backward still waits, as in a real step."""
    import tensorflow as tf

    layers = tf_parameter_layers(model)
    owner = {v.ref(): i for i, layer in enumerate(layers) for v in layer.trainable_weights}
    table = tf.constant(layer_waits, tf.float64)

    def train_step(data):
        waits = table if worker_index is None else tf.gather(table, worker_index())
        variables = model.trainable_variables
        values = [tf.identity(v) for v in variables]         # the pull, under the ps strategy
        with tf.control_dependencies(values):
            done = sleep_op(tf.reduce_sum(waits[:, 0]))      # the forward pass
        zeros = {}
        for i in reversed(range(len(layers))):               # the backward pass, layer by layer
            with tf.control_dependencies([done]):
                done = zeros[i] = sleep_op(waits[i, 1])
        grads = [value * zeros.get(owner.get(v.ref()), done) for value, v in zip(values, variables)]
        model.optimizer.apply_gradients(zip(grads, variables))
        return {"loss": tf.constant(float("nan"))}
    model.train_step = train_step


def tf_layer_times(model, x, steps: int = 10) -> list[tuple[float, float]]:
    """Each parameter layer's (forward, backward) seconds, on prefixes of the model (inputs to a layer's output):
    forward alone and with its gradients, less the largest earlier such prefix inside it (exact for a chain)."""
    import tensorflow as tf
    import tf_keras as keras

    layers = tf_parameter_layers(model)
    timed = []
    for layer in layers:
        prefix = keras.Model(model.inputs, layer.output)
        inside = {id(other) for other in prefix.layers}
        weights = prefix.trainable_variables

        @tf.function
        def forward(x, prefix=prefix):
            return tf.reduce_sum(prefix(x, training=True))

        @tf.function
        def both(x, prefix=prefix, weights=weights):
            with tf.GradientTape() as tape:
                y = tf.reduce_sum(prefix(x, training=True))
            return tape.gradient(y, weights)
        f = _timed_steps(lambda: forward(x), 2, steps)[0]
        fb = _timed_steps(lambda: both(x), 2, steps)[0]
        earlier = [j for j, other in enumerate(layers[:len(timed)]) if id(other) in inside]
        f0, fb0 = max(((timed[j][2], timed[j][3]) for j in earlier), default=(0.0, 0.0), key=lambda t: t[1])
        timed.append((max(0.0, f - f0), max(0.0, (fb - fb0) - (f - f0)), f, fb))
    return [(f, b) for f, b, _, _ in timed]


# --------------------------------------------------------------------------- PyTorch

def parameter_layers(model) -> list:
    """The model's modules that own parameters, in the order they were registered (a Sequential's forward order)."""
    return [m for m in model.modules() if any(True for _ in m.parameters(recurse=False))]


class Contention:
    """The wall time the node's CPU work beyond the stand-in's own would have taken on the machine it stands
    for, waited for. The node runs unbudgeted: each CPU second took a wall second here.
    - During the backward pass, where that machine computes on the cores its communication uses, the
      communication's threads delayed the compute there by 1/cores of a second per CPU second, x K on the
      wall clock: `during` = K / cores (0: it computes elsewhere, on a GPU). `settle()`, after each layer's
      backward wait, waits for their CPU since the last call, and again for what they used meanwhile,
      until they used (almost) none.
    - The rest of the step's CPU beyond the stand-in's own (`own_cpu_s`: the communication after the backward
      pass, the framework's work between the waits) ran at a whole CPU where that machine's cores give it 1/K
      of one each: there it would have lasted `after` + 1 = K / cores wall seconds per CPU second. How much
      of that lengthens the step depends on how much of it overlapped the wait for the network, which the
      node cannot see: all of it on the critical path, the step waits `after` per CPU second; all of it
      streamed under the wait, only what it would have lasted beyond the step's tail here (from the backward
      pass's end). `close()`, at the end of each step, waits the middle of the two and counts half their
      distance in `unsure_s`, which the verdict adds to its bound; and, under byte scaling, waits
      `unsent_wait_s`: what the exchange's CPU for the bytes not sent would have taken there.
    - The layers' waits wake late (`slept`): beyond `overshoot_s` (calibrated, and the waits shortened by
      it) that lengthened the step, and counts in `unsure_s` too. With `own_s` (a GPU machine's node: the
      stand-in's own step as calibrated, DDP's own work in it), what counts is how far the forward and
      backward pass was from its waits, `own_s` and `overshoot_s`, either way: the lateness, and any work on
      the step's path that the calibration had more or less of.
    `charged_cpu_s`: all the CPU so accounted for so far (the verdict bounds the rest)."""

    MIN_WAIT_S = 1e-4
    ROUNDS = 50

    def __init__(self, during: float, after: float = 0.0, own_cpu_s: float = 0.0, others=others_cpu_s,
                 total=process_cpu_s, unsent_wait_s: float = 0.0, overshoot_s: float = 0.0,
                 own_s: float | None = None):
        self.during, self.after, self.own_cpu_s, self.unsent_wait_s = during, after, own_cpu_s, unsent_wait_s
        self.overshoot_s, self._late = overshoot_s, 0.0    # the layers' waits' lateness a step: calibrated, this one
        self.own_s, self._asked = own_s, 0.0     # the waits asked since the forward pass began
        self._forward_at: float | None = None
        self.others, self.total = others, total
        self.charged_cpu_s = 0.0
        self.unsure_s = 0.0                      # wall seconds the waits may be off by (half the range)
        self._mark = others()
        self._step_from: float | None = None     # the process's CPU when the step began (the last close)
        self._step_charged = 0.0
        self._backward_end: float | None = None  # when the step's last backward wait (and its settle) ended

    def begin(self) -> None:
        """A step's forward pass starts: the communication's CPU before it is not this step's backward's."""
        self._mark = self.others()
        self._forward_at, self._asked = time.perf_counter(), 0.0
        if self._step_from is None:
            self._step_from = self.total()

    def settle(self) -> None:
        if self.during > 0:
            for _ in range(self.ROUNDS):
                now = self.others()
                used, self._mark = now - self._mark, now
                if used * self.during < self.MIN_WAIT_S:
                    break
                self._charge(used, used * self.during)
        self._backward_end = time.perf_counter()

    def slept(self, asked_s: float, took_s: float) -> None:
        """A layer's wait asked for `asked_s` and took `took_s` (it wakes late: the kernel's wake-up latency)."""
        self._late += max(0.0, took_s - asked_s)
        self._asked += asked_s

    def close(self) -> None:
        late, self._late = self._late, 0.0
        if self._step_from is None:
            return
        # waits that woke later than calibrated lengthened the step by as much: the verdict's bound holds it
        self.unsure_s += self._off_calibration(late)
        rest = self.total() - self._step_from - self._step_charged - self.own_cpu_s
        if self.after > 0 and rest > 0:
            tail = time.perf_counter() - self._backward_end if self._backward_end is not None else 0.0
            critical = rest * self.after
            streamed = max(0.0, rest * (self.after + 1) - max(tail, rest))
            self.unsure_s += (critical - streamed) / 2
            wait = (critical + streamed) / 2
            self._charge(rest, wait if wait >= self.MIN_WAIT_S else 0.0)
        if self.unsent_wait_s > 0:      # byte scaling: what the bytes not sent would have cost there
            time.sleep(self.unsent_wait_s)
        self._step_from, self._step_charged, self._backward_end = self.total(), 0.0, None

    def _off_calibration(self, late: float) -> float:
        """Wall seconds the step's compute may be off by from its calibration: its waits' lateness beyond the
        overshoot, or, with `own_s`, how far its forward and backward pass was from its waits, `own_s` and the
        overshoot, either way (a stand-in quicker than calibrated shortens the step as a slower one lengthens it)."""
        if self.own_s is None or self._forward_at is None or self._backward_end is None:
            return max(0.0, late - self.overshoot_s)
        span = self._backward_end - self._forward_at
        return abs(span - self._asked - self.own_s - self.overshoot_s)     # (close() asks nothing before this)

    def _charge(self, cpu_s: float, wait_s: float) -> None:
        self.charged_cpu_s += cpu_s
        self._step_charged += cpu_s
        if wait_s > 0:
            self._asked += wait_s
            time.sleep(wait_s)


def idle_wait(gap_s: float, points) -> float:
    """The extra compute after a pause of `gap_s`, linear between the profile's (pause, extra) points, from
    none at no pause, and the last point's beyond it."""
    last_gap, last_extra = 0.0, 0.0
    for gap, extra in points:
        if gap_s <= gap:
            return last_extra + (extra - last_extra) * (gap_s - last_gap) / (gap - last_gap)
        last_gap, last_extra = gap, extra
    return last_extra


def precise_timers() -> None:
    """This thread's sleeps wake when asked, not up to the kernel's default timer slack (50 us) later."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).prctl(PR_SET_TIMERSLACK, 1, 0, 0, 0)


def _timed_sleep(wait_s: float, contention: Contention | None) -> None:
    start = time.perf_counter()
    time.sleep(wait_s)
    if contention is not None:
        contention.slept(wait_s, time.perf_counter() - start)


def _wait_function(contention: Contention | None, clock: dict):
    import torch

    class Wait(torch.autograd.Function):
        """Identity on its input that waits in forward and in backward, and gives its parameters zero
        gradients of their shapes."""

        @staticmethod
        def forward(ctx, x, forward_s, backward_s, *params):
            _timed_sleep(forward_s, contention)
            ctx.backward_s, ctx.params = backward_s, params
            return x.clone()

        @staticmethod
        def backward(ctx, grad):
            _timed_sleep(ctx.backward_s, contention)
            if contention is not None:
                contention.settle()
            clock["computed"] = time.perf_counter()
            return (grad, None, None, *[torch.zeros_like(p) for p in ctx.params])
    return Wait


def stand_in(model, waits: list[tuple[float, float]], classes: int, contention: Contention | None = None,
             idle=()):
    """A torch module that owns `model`'s parameters and replays its compute: `waits` holds each
    parameter layer's (forward, backward) seconds (parameter_layers order), `contention` what the
    communication's CPU takes from them, `idle` the (pause, extra) points of the compute after a pause
    (idle_wait): a step's forward waits them for the time since the last backward wait ended. Its output
    has the shape of the model's logits (batch x classes)."""
    import torch
    from torch import nn

    layers = parameter_layers(model)
    if len(waits) != len(layers):
        raise ValueError(f"{len(waits)} layer waits for a model of {len(layers)} parameter layers")
    precise_timers()                    # (the thread that builds it runs its forward and, on CPUs, its backward)
    clock: dict = {}                    # "computed": when the last backward wait ended
    wait = _wait_function(contention, clock)

    class StandIn(nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, x):
            if contention is not None:
                contention.begin()
            if idle and "computed" in clock:
                _timed_sleep(idle_wait(time.perf_counter() - clock["computed"], idle), contention)
            h = torch.zeros(1)
            for layer, (forward_s, backward_s) in zip(layers, waits):
                h = wait.apply(h, forward_s, backward_s, *layer.parameters(recurse=False))
            return h.expand(x.shape[0], classes)
    return StandIn()


def layer_times(model, step, steps: int = 5) -> list[tuple[float, float]]:
    """Each parameter layer's (forward, backward) seconds in a real step, the median of `steps`
    steps: forward from each layer's output to the previous one's, backward from each layer's
    gradients ready to the previous ready ones (a layer without parameters counts with the next
    one). `step()` runs one training step of `model`."""
    layers = parameter_layers(model)
    marks: dict[str, list] = {"forward": [], "backward": []}

    def forward_hook(module, args, output):
        marks["forward"].append((layers.index(module), time.perf_counter()))

    def grad_hook(layer):
        def ready(param):
            marks["backward"].append((layer, time.perf_counter()))
        return ready

    handles = [m.register_forward_hook(forward_hook) for m in layers]
    handles += [p.register_post_accumulate_grad_hook(grad_hook(i)) for i, m in enumerate(layers)
                for p in m.parameters(recurse=False)]
    samples = []
    try:
        for _ in range(steps):
            marks["forward"].clear()
            marks["backward"].clear()
            t0 = time.perf_counter()
            step()
            samples.append(_per_layer(len(layers), t0, marks))
    finally:
        for h in handles:
            h.remove()
    return [(_median([s[i][0] for s in samples]), _median([s[i][1] for s in samples])) for i in range(len(layers))]


def _per_layer(n: int, t0: float, marks: dict) -> list[tuple[float, float]]:
    forward_end = {i: t for i, t in marks["forward"]}
    ready: dict[int, float] = {}
    for i, t in marks["backward"]:
        ready[i] = max(ready.get(i, t), t)
    out, last = [], t0
    for i in range(n):
        out.append([max(0.0, forward_end.get(i, last) - last), 0.0])
        last = forward_end.get(i, last)
    later = last                         # backward starts after the last forward mark (the loss)
    for i in reversed(range(n)):
        out[i][1] = max(0.0, ready.get(i, later) - later)
        later = ready.get(i, later)
    return [tuple(x) for x in out]


def _median(xs: list[float]) -> float:
    xs = sorted(xs)
    return xs[len(xs) // 2] if xs else 0.0


# --------------------------------------------------------------------------- calibration

def _timed_steps(step, warmup: int, steps: int) -> tuple[float, float]:
    """(wall, CPU) seconds per step of `steps` calls of step() after `warmup` calls."""
    for _ in range(warmup):
        step()
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(steps):
        step()
    return (time.perf_counter() - t0) / steps, (time.process_time() - c0) / steps


def calibrate_tensorflow(model: str, params: dict, batch: int, warmup: int, steps: int) -> dict:
    """The built-in model's local step as Keras fit runs it, its time per parameter layer, the stand-in's step."""
    import tensorflow as tf

    from workloads import data as wdata
    from workloads import models

    p = models.resolve_params(model, params)

    def timed(waits=None):
        tf.random.set_seed(0)
        net = models.compile_model(models.build_model(model, p))
        if waits is not None:
            replay_tensorflow(net, waits)
        data = iter(wdata.synthetic_dataset(model, p, 0, batch).repeat())
        run = net.make_train_function()
        return _timed_steps(lambda: run(data), warmup, steps), net, data

    real, net, data = timed()
    return _calibration(real, tf_layer_times(net, next(data)[0]), lambda waits: timed(waits)[0])


def _torch_stepper(module, x, y, optimizer, loss_of=None):
    """One training step of `module` on (x, y) as a function."""
    from torch.nn import functional

    loss_of = loss_of or (lambda net, x, y: functional.cross_entropy(net(x), y))

    def step():
        optimizer.zero_grad()
        loss_of(module, x, y).backward()
        optimizer.step()
    return step


def _stand_in_steps(make, batch: int, warmup: int, steps: int, wrap=None):
    """stand(waits): the wall and CPU seconds per step of the stand-in of the module make() returns, waiting
    `waits`, as a node runs it (a dummy batch, the no-op optimizer of workloads/torch_train.py); `wrap`: the
    stand-in in DistributedDataParallel (make() is called per stand(): DDP hooks its module's parameters)."""
    import torch

    x, y = torch.zeros(batch, 1), torch.zeros(batch, dtype=torch.long)

    def stand(waits):
        net = stand_in(make(), waits, 1)
        net = wrap(net) if wrap else net
        return _timed_steps(_torch_stepper(net, x, y, torch.optim.SGD(net.parameters(), lr=0.0)), warmup, steps)
    return stand


@contextlib.contextmanager
def alone_in_ddp(byte_scale: float):
    """wrap(module): the module in DistributedDataParallel, its buckets as a replayed node's (scaled_buckets), over
    a gloo group of this process alone (a file store in a temporary folder: no peer, no traffic). What DDP's
    own work costs a step (its hooks, its buckets' copies) is then part of the stand-in's measured step."""
    import shutil
    import tempfile

    import torch.distributed as dist
    from torch import nn

    folder = tempfile.mkdtemp(prefix="dltb-calibration-")
    dist.init_process_group("gloo", init_method=f"file://{folder}/store", rank=0, world_size=1)

    def wrap(module):
        with scaled_buckets(byte_scale):
            return nn.parallel.DistributedDataParallel(module)
    try:
        yield wrap
    finally:
        dist.destroy_process_group()
        shutil.rmtree(folder, ignore_errors=True)


def calibrate_pytorch(model: str, params: dict, batch: int, warmup: int, steps: int) -> dict:
    """The model's local step (a built-in or zoo model), its time per parameter layer, the stand-in's step."""
    import torch

    from workloads import torch_models, zoo

    p = torch_models.resolve_params(model, params)
    x, y = torch_models.synthetic_batch(model, p, 0, 0, batch)
    loss_of = lambda net, x, y: zoo.loss(model, net, x, y)  # noqa: E731
    torch.manual_seed(0)
    real = torch_models.build(model, p)
    step = _torch_stepper(real, x, y, torch.optim.Adam(real.parameters(), lr=1e-3), loss_of)
    measured = _timed_steps(step, warmup, steps)
    layers = layer_times(real, step)
    return _calibration(measured, layers, _stand_in_steps(lambda: real, batch, warmup, steps))


def profile_model(shapes):
    """A torch module with parameters of the profiled shapes and dtypes, one child per profiled layer (the
    profile's order): what a node replaying a profile all-reduces, with no model code."""
    import torch
    from torch import nn

    layers = nn.ModuleList()
    for params in shapes:
        layer = nn.Module()
        for i, (shape, dtype) in enumerate(params):
            layer.register_parameter(f"p{i}", nn.Parameter(torch.zeros(shape, dtype=getattr(torch, dtype))))
        layers.append(layer)
    return layers


@contextlib.contextmanager
def scaled_buckets(byte_scale: float):
    """DistributedDataParallel's default bucket sizes (the first bucket's 1 MiB, the others' 25 MiB) / F while
    a model of byte-scaled gradients (1/F the elements) is wrapped: its parameters fall into the buckets, in
    the order, those of the full gradient would (emulation.byte_scale)."""
    import torch.distributed as dist
    from torch.nn.parallel import distributed as ddp

    if byte_scale <= 1:
        yield
        return
    first, cap = dist._DEFAULT_FIRST_BUCKET_BYTES, ddp._DEFAULT_BUCKET_CAP_MB
    dist._DEFAULT_FIRST_BUCKET_BYTES, ddp._DEFAULT_BUCKET_CAP_MB = max(1, round(first / byte_scale)), cap / byte_scale
    try:
        yield
    finally:
        dist._DEFAULT_FIRST_BUCKET_BYTES, ddp._DEFAULT_BUCKET_CAP_MB = first, cap


def calibrate_profile(path: str, warmup: int, steps: int, byte_scale: int = 1, ddp: bool = False) -> dict:
    """A profile's figures for replay: its step and its layers' times as measured where it was taken, and
    the stand-in's own step here (PyTorch: a module of the profiled shapes, each of 1/`byte_scale` its
    elements, in DistributedDataParallel with `ddp`; TensorFlow: the profiled model, built here), in the
    layers' backward-ready order."""
    from workloads.profiling import fileformat

    doc = fileformat.load(path)
    layers = [(layer["forward_s"], layer["backward_s"]) for layer in fileformat.replay_layers(doc)]
    real = (doc["step_s"], doc["cpu_s"])
    if doc["engine"] == "pytorch":
        shapes = fileformat.scaled_shapes(fileformat.param_shapes(doc), byte_scale)
        with alone_in_ddp(byte_scale) if ddp else contextlib.nullcontext() as wrap:
            return _calibration(real, layers, _stand_in_steps(lambda: profile_model(shapes), doc["batch"], warmup,
                                                              steps, wrap))
    import tensorflow as tf

    from workloads import data as wdata
    from workloads import models

    p = models.resolve_params(doc["model"], doc["model_params"])

    def stand(waits):
        tf.random.set_seed(0)
        net = models.compile_model(models.build_model(doc["model"], p))
        if len(tf_parameter_layers(net)) != len(layers):
            raise ValueError(f"{path}: {len(layers)} layers profiled, {len(tf_parameter_layers(net))} built here")
        replay_tensorflow(net, waits)
        data = iter(wdata.synthetic_dataset(doc["model"], p, 0, doc["batch"]).repeat())
        run = net.make_train_function()
        return _timed_steps(lambda: run(data), warmup, steps)
    return _calibration(real, layers, stand)


def spread_wait(total_s: float, times) -> list[tuple[float, float]]:
    """`total_s` split over the layers in proportion to their measured (forward, backward) times (else evenly)."""
    times = list(times)
    whole = sum(f + b for f, b in times)
    if whole <= 0:
        share = total_s / (2 * len(times)) if times else 0.0
        return [(share, share) for _ in times]
    return [(total_s * f / whole, total_s * b / whole) for f, b in times]


def _calibration(real: tuple[float, float], layers, stand) -> dict:
    """The calibration's figures: the real step (wall, CPU), the layers' times, the stand-in's own step
    with no wait (stand(waits) times it), and the waits' overshoot: the stand-in waiting the real step's
    remainder, spread over the layers, against the real step (the sleeps' wake-up latency)."""
    (real_s, real_cpu), zero = real, [(0.0, 0.0)] * len(layers)
    stand_s, stand_cpu = stand(zero)
    full_s, _ = stand(spread_wait(max(0.0, real_s - stand_s), layers))
    return {"real_step_s": real_s, "real_cpu_s": real_cpu, "stand_in_step_s": stand_s, "stand_in_cpu_s": stand_cpu,
            "overshoot_s": max(0.0, full_s - max(real_s, stand_s)), "layers": layers}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description="calibrate the replayed compute of a built-in model")
    ap.add_argument("--engine", required=True, choices=("tensorflow", "pytorch"))
    ap.add_argument("--model", required=True)
    ap.add_argument("--profile", default=None, help="a profile: its step, and the stand-in's here")
    ap.add_argument("--params", default="{}", help="model_params as JSON")
    ap.add_argument("--byte-scale", type=int, default=1, help="a profile's stand-in sends 1/F of each tensor")
    ap.add_argument("--ddp", action="store_true", help="a profile's stand-in in DistributedDataParallel")
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--warmup", type=int, default=CALIBRATION_WARMUP)
    ap.add_argument("--steps", type=int, default=CALIBRATION_STEPS)
    args = ap.parse_args(argv)
    params = json.loads(args.params)
    if args.engine == "tensorflow":
        os.environ.update(TF_USE_LEGACY_KERAS="1", TF_CPP_MIN_LOG_LEVEL="2", TF_NUM_INTRAOP_THREADS=str(args.threads))
    else:
        import torch
        torch.set_num_threads(args.threads)
    if args.profile:
        result = calibrate_profile(args.profile, args.warmup, args.steps, args.byte_scale, args.ddp)
    elif args.engine == "tensorflow":
        result = calibrate_tensorflow(args.model, params, args.batch, args.warmup, args.steps)
    else:
        result = calibrate_pytorch(args.model, params, args.batch, args.warmup, args.steps)
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
