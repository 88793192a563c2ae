"""The PyTorch side of the profiler: global module, backward and optimizer hooks that time a training
step, so the same recorder measures a zoo model's loop and a user's unmodified script.

A step runs from one optimizer step's end to the next's. In it: the input (until the first module's
forward starts: batch, copy to the device, zero_grad), the forward pass (each parameter layer's
output marked), the backward pass (from `loss.backward()`, each parameter's gradient marked when it
is accumulated), and the optimizer step. Marks are CUDA events on a GPU (read after the step's
synchronize) and perf_counter on the CPU. Steps alternate between plain (step boundaries only: the
step's times) and detailed (every layer marked: how the step splits over the layers), so the hooks'
own cost stays out of the step's time. Then idle steps: each after a pause of one of IDLE_GAPS_S (as a
node's compute follows its wait for the network) and then one in a row, to compare with. Caches gone
cold, a core woken from idle, a GPU clocked down: the step after a pause can take more than the ones in
a row (`idle` in the profile).
"""
from __future__ import annotations

import statistics
import time

FIRST_BUCKET_BYTES, BUCKET_BYTES = 2**20, 25 * 2**20     # DistributedDataParallel's defaults
IDLE_GAPS_S, IDLE_REPEATS = (0.03, 0.1, 0.3, 1.0), 4        # pauses before the idle steps, and steps per pause


class EnoughSteps(Exception):
    """Raised from the optimizer hook once every step wanted was measured: ends a script's loop."""


class Recorder:
    def __init__(self, device: str, warmup: int, steps: int, idle_gaps=IDLE_GAPS_S, idle_repeats: int = IDLE_REPEATS):
        import torch

        self.torch, self.cuda = torch, device.startswith("cuda")
        self.warmup, self.steps = warmup, steps
        # still to take, in order: each pause, then a step in a row (0) to compare with, the pauses in turn
        self.pauses = [x for _ in range(idle_repeats) for gap in idle_gaps for x in (gap, 0.0)]
        self.gap: float | None = None    # the pause before the step being recorded (None: not an idle step yet)
        self.idle: list[tuple[float, float]] = []      # (pause, cycle) of each idle step and the one after it
        self.step_index = -1            # the step being recorded (-1: before the first optimizer step)
        self.marks: dict = {}
        self.layers: list = []          # modules owning parameters, in first-forward order
        self.names: dict[int, str] = {}
        self.owner: dict[int, int] = {}  # id(param) -> layer index
        self.params: list = []          # (layer index, name, param) in registration order
        self.plain: list[dict] = []
        self.detailed: list[dict] = []
        self.cpu: list[float] = []
        self.qualified: dict[int, str] = {}     # layer index -> its name in the model (name_layers)
        self._handles: list = []
        self._backward = None

    # ------------------------------------------------------------------ marks
    def now(self):
        if self.cuda:
            event = self.torch.cuda.Event(enable_timing=True)
            event.record()
            return event
        return time.perf_counter()

    def seconds(self, a, b) -> float:
        return a.elapsed_time(b) / 1000 if self.cuda else b - a

    @property
    def detail(self) -> bool:
        return self.gap is None and self.step_index >= 0 and self.step_index % 2 == 1

    # ------------------------------------------------------------------ hooks
    def install(self) -> None:
        from torch.nn.modules import module
        from torch.optim import optimizer

        self._handles = [module.register_module_forward_pre_hook(self._pre_forward),
                         module.register_module_forward_hook(self._forward),
                         optimizer.register_optimizer_step_pre_hook(self._optimizer_start),
                         optimizer.register_optimizer_step_post_hook(self._optimizer_end)]
        tensor = self.torch.Tensor
        self._backward = tensor.backward
        recorder = self

        def backward(self, *args, **kwargs):
            if "backward" not in recorder.marks:
                recorder.marks["backward"] = recorder.now()
            return recorder._backward(self, *args, **kwargs)
        tensor.backward = backward
        self.marks = {"end": self.now(), "cpu": time.process_time()}

    def remove(self) -> None:
        for h in self._handles:
            h.remove()
        if self._backward is not None:
            self.torch.Tensor.backward = self._backward
        self._handles, self._backward = [], None

    def _pre_forward(self, module, args):
        if "forward" not in self.marks:         # (a mark is a CUDA event: made once per step, not per module)
            self.marks["forward"] = self.now()

    def _forward(self, module, args, output):
        key = id(module)
        if key not in self.names:
            self._adopt(module)
        index = self.names[key][1] if isinstance(self.names[key], tuple) else None
        if index is not None and self.detail:
            self.marks.setdefault("layers", {})[index] = self.now()

    def _adopt(self, module) -> None:
        """A module seen for the first time: a layer of its own if it owns parameters no earlier layer owns."""
        own = [(n, p) for n, p in module.named_parameters(recurse=False) if id(p) not in self.owner]
        if not own:
            self.names[id(module)] = type(module).__name__
            return
        index = len(self.layers)
        self.layers.append(module)
        self.names[id(module)] = (type(module).__name__, index)
        for name, param in own:
            self.owner[id(param)] = index
            self.params.append((index, name, param))
            if param.requires_grad:
                self._handles.append(param.register_post_accumulate_grad_hook(self._ready(index)))

    def _ready(self, index: int):
        def hook(param):
            if self.detail:
                self.marks.setdefault("ready", {})[index] = self.now()
        return hook

    def _optimizer_start(self, optimizer, args, kwargs):
        if "optimizer" not in self.marks:
            self.marks["optimizer"] = self.now()

    def _optimizer_end(self, optimizer, args, kwargs):
        end = self.now()
        if self.cuda:
            self.torch.cuda.synchronize()
        cpu = time.process_time()
        marks, self.marks = self.marks, {"end": end, "cpu": cpu}
        if self.gap is not None:
            if "forward" in marks:
                self.idle.append((self.gap, self.seconds(marks["end"], end)))
        elif self.step_index >= self.warmup and "forward" in marks:
            self._keep(marks, end, cpu)
        self.step_index += 1
        if len(self.plain) >= self.steps and len(self.detailed) >= self.steps:
            if not self.pauses:
                raise EnoughSteps()
            self.gap = self.pauses.pop(0)
            if self.gap:
                time.sleep(self.gap)
                self.marks = {"end": self.now(), "cpu": time.process_time()}

    def _keep(self, marks: dict, end, cpu: float) -> None:
        s = self.seconds
        backward = marks.get("backward", marks["optimizer"])
        step = {"input_s": s(marks["end"], marks["forward"]), "forward_s": s(marks["forward"], backward),
                "backward_s": s(backward, marks["optimizer"]), "optimizer_s": s(marks["optimizer"], end),
                "step_s": s(marks["forward"], end), "cycle_s": s(marks["end"], end)}
        if self.detail:
            step["layers"] = {i: s(marks["forward"], t) for i, t in marks.get("layers", {}).items()}
            step["ready"] = {i: s(backward, t) for i, t in marks.get("ready", {}).items()}
            self.detailed.append(step)
        else:
            self.plain.append(step)
            self.cpu.append(cpu - marks["cpu"])

    # ------------------------------------------------------------------ results
    def result(self) -> dict:
        """The medians: the step's parts from the plain steps, each layer's from the detailed ones."""
        if not self.plain or not self.detailed:
            raise RuntimeError(f"too few steps after the warm-up ({self.warmup}): measured "
                               f"{len(self.plain) + len(self.detailed)}")
        med = statistics.median
        out = {key: med(s[key] for s in self.plain)
               for key in ("step_s", "cycle_s", "input_s", "forward_s", "backward_s", "optimizer_s")}
        ordered = sorted(self.plain, key=lambda s: s["step_s"])
        out["step_spread_s"] = [ordered[len(ordered) // 10]["step_s"], ordered[-1 - len(ordered) // 10]["step_s"]]
        out["cpu_s"] = med(self.cpu)
        n = len(self.layers)
        done = [med(s["layers"].get(i, 0.0) for s in self.detailed) for i in range(n)]
        ready = [med(s["ready"].get(i, 0.0) for s in self.detailed) for i in range(n)]
        order = sorted(range(n), key=lambda i: done[i])          # forward (execution) order
        layers, last = [], 0.0
        for i in order:
            layers.append({"index": i, "forward_s": max(0.0, done[i] - last)})
            last = max(last, done[i])
        earlier = 0.0
        by_ready = {}
        for i in sorted(range(n), key=lambda i: ready[i]):       # the order gradients become ready
            by_ready[i] = max(0.0, ready[i] - earlier)
            earlier = max(earlier, ready[i])
        shapes = self._shapes()
        out["layers"] = [{"name": self._name(e["index"]), "forward_s": e["forward_s"],
                          "backward_s": by_ready[e["index"]], "grad_ready_s": ready[e["index"]],
                          "params": shapes[e["index"]]} for e in layers]
        out["buckets"] = buckets([(i, p) for i, _, p in self.params if p.requires_grad], ready, order)
        out["idle"] = idle_extra(self.idle)
        return out

    def _name(self, index: int) -> str:
        return self.qualified.get(index) or self.names[id(self.layers[index])][0]

    def _shapes(self) -> dict[int, list]:
        out: dict[int, list] = {i: [] for i in range(len(self.layers))}
        for i, name, p in self.params:
            if p.requires_grad:
                out[i].append({"name": name, "shape": list(p.shape), "dtype": str(p.dtype).replace("torch.", "")})
        return out

    def name_layers(self, root) -> None:
        """Qualified names (layer1.0.conv1) of the layers, from the model's root module."""
        where = {id(m): n for n, m in root.named_modules()}
        self.qualified = {i: where.get(id(m)) or type(m).__name__ for i, m in enumerate(self.layers)}


def idle_extra(idle: list[tuple[float, float]]) -> list[list[float]]:
    """[pause, extra] per pause: the median over its steps of what the step after the pause took beyond the
    step right after it (a machine whose speed drifts while it measures drifts out of the difference)."""
    by_gap: dict[float, list[float]] = {}
    for (gap, cold), (after, hot) in zip(idle, idle[1:]):
        if gap > 0 and after == 0:
            by_gap.setdefault(gap, []).append(cold - hot)
    return [[gap, max(0.0, statistics.median(extra))] for gap, extra in sorted(by_gap.items())]


def buckets(params: list, ready: list[float], order: list[int]) -> list[list[int]]:
    """DistributedDataParallel's buckets after its first step's rebuild: the parameters in the order
    their gradients become ready, filled up to 1 MiB for the first bucket and 25 MiB for the others
    (a bucket closes once it holds its limit). Each bucket lists positions in the profile's layers
    (forward order), one entry per parameter."""
    position = {layer: k for k, layer in enumerate(order)}
    out, current, size, limit = [], [], 0, FIRST_BUCKET_BYTES
    for layer, p in sorted(params, key=lambda lp: ready[lp[0]]):
        current.append(position[layer])
        size += p.numel() * p.element_size()
        if size >= limit:
            out.append(current)
            current, size, limit = [], 0, BUCKET_BYTES
    if current:
        out.append(current)
    return out
