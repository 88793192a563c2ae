"""What a worker sends per step under each communication setting, in theory (docs/communication.md).

Pure: model shapes from workloads/models.py, arithmetic, no engine. A step's bytes per worker: an
all-reduce of S bytes sends 2(N-1)/N x S (ring; gloo's and TensorFlow's algorithms send as much); each
method of workloads/communication/ says what a step sends after its start (its `theory`: compressed
gradients, or the model every H steps), and how many steps of plain all-reduce come first. ps: push S and
pull S per step of a worker (no setting applies).

A Plan gives the bytes of any step and their mean over a window of steps, which is what runs.csv's
theory columns hold beside what the wire measured.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import workloads.communication as methods
from workloads.models import param_count, tensor_shapes

FLOAT32 = 4
COLUMNS = list(methods.keys())      # runs.csv's workload.communication columns, in order
NUMERIC_COLUMNS = [k for k, key in methods.keys().items() if key.kind in ("int", "float")]
TEXT_COLUMNS = [k for k in COLUMNS if k not in NUMERIC_COLUMNS]
# What a node's interface counts per byte of payload it sends over TCP on Ethernet: a full 1448-byte segment
# (MTU 1500, TCP timestamps) goes out as a 1514-byte frame, and the node acknowledges the equal payload it
# receives in a ring with a 66-byte frame about every second segment
MSS, FRAME_OVERHEAD = 1448, 66
WIRE_PER_PAYLOAD_BYTE = (MSS + FRAME_OVERHEAD) / MSS + FRAME_OVERHEAD / (2 * MSS)


def on_the_wire(payload_bytes: float) -> float:
    """The bytes a node's interface counts for `payload_bytes` of a ring's exchange (full segments: small
    messages carry more headers per byte, so a step of a few kB reads above this)."""
    return payload_bytes * WIRE_PER_PAYLOAD_BYTE


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


def plan(model: str | None, params: dict | None, strategy: str, workers: int, settings: dict | None = None,
         gradient_bytes: float | None = None) -> Plan:
    """The Plan of one run: its model (gradient_bytes: S when known, else 4 x the built-in model's
    parameters), strategy, workers and workload.communication settings (missing keys: their defaults)."""
    s = float(gradient_bytes) if gradient_bytes else FLOAT32 * param_count(model, params)
    if strategy == "ps":
        return Plan(2 * s, 2 * s)
    ring = ring_factor(workers) if strategy != "single" else 0.0
    c = {**methods.defaults(), **(settings or {})}
    return method_plan(methods.method_of(c), c, ring * s, ring, lambda: tensor_shapes(model, params))


def method_plan(method, c: dict, full: float, ring: float, shapes) -> Plan:
    """The Plan of one method's setting, a plain step sending `full` bytes."""
    after, start, every = method.theory(c, full, ring, shapes)
    return Plan(full, after, int(start), int(every))


def factor(p: Plan) -> tuple[float, int]:
    """(bytes factor, sync every): what a step after the start sends against a plain all-reduce step, and
    how many steps share one sync: the cost model's communication term is scaled by both."""
    if p.full <= 0:
        return 1.0, 1
    return p.after / p.full, p.every


def steps_per_sync(settings: dict) -> int:
    """How many steps share one sync under a setting (local SGD: sync_every; 1 for the others)."""
    c = {**methods.defaults(), **settings}
    return method_plan(methods.method_of(c), c, 1.0, 1.0, lambda: []).every


def columns(settings: dict) -> dict:
    """runs.csv's workload.communication columns of a setting (workloads/communication/)."""
    return methods.columns(settings)


def settings_of(cells: dict) -> dict:
    """A setting from runs.csv's workload.communication columns (NaN or empty cells: the key's default)."""
    out = {}
    for name, key in methods.keys().items():
        value = cells.get(name)
        if not methods.text(value):
            out[name] = key.default
        elif key.kind in ("int", "float"):
            number = methods.number(value, key.default)
            out[name] = int(number) if key.kind == "int" else number
        else:
            out[name] = value
    return out


def label(cells: dict) -> str:
    """How the report names a setting ('none', 'local SGD every 8', ...: its method's label) from
    runs.csv's columns; empty or NaN cells (results without these columns) read as none."""
    return methods.label(cells)


def wire_per_step(series, first: int, last: int) -> float:
    """Bytes per step a node sent over steps first+1..last, from (step, cumulative tx bytes at its end)
    pairs (step events' tx_bytes); NaN when either end is missing or the counter went back."""
    at = {int(k): float(v) for k, v in series if v is not None and not math.isnan(float(v))}
    if first not in at or last not in at or last <= first or at[last] < at[first]:
        return math.nan
    return (at[last] - at[first]) / (last - first)
