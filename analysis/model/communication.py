"""What a worker sends per step under each communication setting, in theory (docs/communication.md).

Pure: model shapes from workloads/models.py, arithmetic, no engine. A step's bytes per worker:

- all-reduce of S bytes: 2(N-1)/N x S (ring; gloo's and TensorFlow's algorithms send as much);
- fp16, bf16: the gradients cast to 2 bytes: S / 2 all-reduced;
- PowerSGD of rank r (PyTorch's powerSGD_hook): each weight of shape (n, ...) is an n x m matrix
  (m: the rest of its shape) sent as P (n x r) and Q (m x r), r(n + m) floats, where that is under
  half the matrix (min_compression_rate 2); biases and small matrices go uncompressed; plain
  all-reduce for the first start_step steps;
- local SGD every H steps: nothing between averages, the float32 model (S) all-reduced on every H-th
  step after start_step steps of plain all-reduce (1/H of it on average);
- ps: push S and pull S per step of a worker (no setting applies).

A Plan gives the bytes of any step and their mean over a window of steps, which is what runs.csv's
theory columns hold beside what the wire measured.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from workloads.models import _cnn_shapes, param_count, resolve_params

FLOAT32 = 4
MIN_COMPRESSION_RATE = 2       # PowerSGDState's default: compress a matrix only where it saves over half
# What a node's interface counts per byte of payload it sends over TCP on Ethernet: a full 1448-byte segment
# (MTU 1500, TCP timestamps) goes out as a 1514-byte frame, and the node acknowledges the equal payload it
# receives in a ring with a 66-byte frame about every second segment
MSS, FRAME_OVERHEAD = 1448, 66
WIRE_PER_PAYLOAD_BYTE = (MSS + FRAME_OVERHEAD) / MSS + FRAME_OVERHEAD / (2 * MSS)


def on_the_wire(payload_bytes: float) -> float:
    """The bytes a node's interface counts for `payload_bytes` of a ring's exchange (full segments: small
    messages carry more headers per byte, so PowerSGD's few kB a step read above this)."""
    return payload_bytes * WIRE_PER_PAYLOAD_BYTE


def tensor_shapes(model: str, params: dict | None = None) -> list[tuple[int, ...]]:
    """The parameter tensors of the built-in mlp or cnn in PyTorch's layout (weights (out, in[, k, k]),
    then their biases), in the order of workloads/torch_models.py."""
    p = resolve_params(model, params)
    if model == "mlp":
        dims = [p["input_dim"]] + [p["width"]] * p["depth"] + [p["classes"]]
        return [shape for a, b in zip(dims, dims[1:]) for shape in ((b, a), (b,))]
    if model == "cnn":
        h, w = _cnn_shapes(p)
        f, k, c = p["filters"], p["kernel"], p["channels"]
        return [(f, c, k, k), (f,), (2 * f, f, k, k), (2 * f,), (p["dense"], h * w * 2 * f), (p["dense"],),
                (p["classes"], p["dense"]), (p["classes"],)]
    raise ValueError(f"no PowerSGD layout for model {model!r} (PyTorch trains mlp and cnn)")


def powersgd_floats(shapes, rank: int, min_rate: float = MIN_COMPRESSION_RATE) -> int:
    """Floats one PowerSGD step all-reduces: r'(n + m) per n x m matrix worth compressing (r' =
    min(n, m, rank); worth it when r'(n + m) x min_rate < n m), every other tensor whole."""
    total = 0
    for shape in shapes:
        n = shape[0]
        m = math.prod(shape[1:]) if len(shape) > 1 else 1
        r = min(n, m, rank)
        total += (n + m) * r if (n + m) * r * min_rate < n * m else n * m
    return total


def ring_factor(workers) -> float:
    """2(N-1)/N: the share of an all-reduced buffer each worker sends (0 for one worker)."""
    n = float(workers)
    return 2 * (n - 1) / n if n > 1 else 0.0


@dataclass(frozen=True)
class Plan:
    """Bytes a worker sends per step: `full` in each of the first `start` steps (plain all-reduce), then
    `after` (compressed gradients; under local SGD the model average, on every `every`-th step only)."""
    full: float
    after: float
    start: int = 0
    every: int = 1

    def step_bytes(self, k: int) -> float:
        """The bytes of step k (counted from 1)."""
        if k <= self.start:
            return self.full
        return self.after if (k - 1 - self.start) % self.every == 0 else 0.0

    def sends(self, first: int, last: int) -> float:
        """The bytes of steps first..last (both included, counted from 1)."""
        if last < first:
            return 0.0
        plain = max(0, min(last, self.start) - first + 1)
        lo, hi = max(first, self.start + 1) - 1 - self.start, last - 1 - self.start
        later = hi // self.every - (lo - 1) // self.every if hi >= lo else 0
        return plain * self.full + later * self.after

    def mean(self, first: int, last: int) -> float:
        """Mean bytes per step over steps first..last (NaN for an empty window)."""
        return self.sends(first, last) / (last - first + 1) if last >= first else math.nan


def plan(model: str, params: dict | None, strategy: str, workers: int, compression: str = "none", rank: int = 4,
         start_step: int = 0, sync_every: int = 1, gradient_bytes: float | None = None) -> Plan:
    """The Plan of one run: its model (gradient_bytes: S when known, else 4 x the built-in model's
    parameters), strategy, workers and workload.communication settings."""
    s = float(gradient_bytes) if gradient_bytes else FLOAT32 * param_count(model, params)
    if strategy == "ps":
        return Plan(2 * s, 2 * s)
    ring = ring_factor(workers) if strategy != "single" else 0.0
    full = ring * s
    if compression in ("fp16", "bf16"):
        return Plan(full, full / 2)
    if compression == "powersgd":
        return Plan(full, ring * FLOAT32 * powersgd_floats(tensor_shapes(model, params), rank), int(start_step))
    if sync_every > 1:
        return Plan(full, full, int(start_step), int(sync_every))
    return Plan(full, full)


def factor(p: Plan) -> tuple[float, int]:
    """(bytes factor, sync every): what a step after the start sends against a plain all-reduce step, and
    how many steps share one sync: the cost model's communication term is scaled by both."""
    if p.full <= 0:
        return 1.0, 1
    return p.after / p.full, p.every


def label(compression, rank=None, sync_every=None, outer=None) -> str:
    """How the report names a setting: 'none', 'fp16', 'powersgd rank 4', 'local SGD every 8' (+ ', DiLoCo
    outer'); runs.csv's empty or NaN cells (results without these columns) read as none."""
    text = lambda v: "" if v is None or (isinstance(v, float) and math.isnan(v)) else str(v).strip()  # noqa: E731
    compression = text(compression) or "none"
    if compression == "powersgd":
        r = text(rank)
        return f"powersgd rank {int(float(r))}" if r else "powersgd"
    if compression != "none":
        return compression
    every = text(sync_every)
    if every and float(every) > 1:
        return f"local SGD every {int(float(every))}" + (", DiLoCo outer" if text(outer) else "")
    return "none"


def wire_per_step(series, first: int, last: int) -> float:
    """Bytes per step a node sent over steps first+1..last, from (step, cumulative tx bytes at its end)
    pairs (step events' tx_bytes); NaN when either end is missing or the counter went back."""
    at = {int(k): float(v) for k, v in series if v is not None and not math.isnan(float(v))}
    if first not in at or last not in at or last <= first or at[last] < at[first]:
        return math.nan
    return (at[last] - at[first]) / (last - first)
