"""Byte scaling of replayed points (`emulation.byte_scale: F`), pure rules.

Each replayed node sends gradients of 1/F the elements (every tensor's element count / F, at least 1, in the
same layer and bucket order and dtype) over links of 1/F the rate (beyond the dilation: bw / (K x F) on the
wall clock), so each transfer takes its time on the wire while this machine's CPU per exchange (gloo's
per-byte work, the switch's forwarding) falls F-fold. Latency, delay and the number of messages are not
scaled. Each byte sent stands for F of the emulated gradient's: the gradient bytes, the wire's bytes and
rates recorded, and the checks' rates, are multiplied back by F (`EMULATED_BYTE_COLUMNS`).

`auto` chooses F with the dilation in one place (`choose`): the smallest power of 2 at which the gradient
bytes' CPU, the stand-ins' own (which falls with their tensors), and the bytes' demand on the switch need no
larger K than the largest F allowed would (nor than a dilation the file fixed). The largest allowed is no
larger than SCALE_MAX, than keeps the narrowest link at MIN_SCALED_BANDWIDTH or more on the wall clock, nor
than keeps MIN_SENT_BYTES of the gradient sent a step and the tensors' rounding up within ROUNDING_MAX of the
bytes (`shapes_cap`). The floors come from measurements under an earlier charge of the measured CPU x F (a
1 MB gradient over 100 Mbit/s: 2.5 %, 11 % and 28 % longer at F = 2, 4 and 8, 50 times longer at F = 256,
4 kB sent at 3 Mbit/s); with the CPU of the bytes not sent waited instead (replayed_compute.unsent_cpu_s),
F = 8 read within 1 % of every byte sent where no CPU contention is estimated (docs/faithful-compute.md).
"""
from __future__ import annotations

import math
from typing import Callable

from testbed import limits
from workloads.profiling.fileformat import scaled_shapes

SCALE_MAX = limits.MAX_BYTE_SCALE   # auto's largest F: a 100 MB gradient still sends 100 KB a step
ROUNDING_MAX = 0.01            # the bytes sent x F may exceed the gradient's by this share (each tensor rounds up)
MIN_SENT_BYTES = 2 ** 20       # auto sends at least this much of a gradient a step (a smaller one: every byte)
MIN_SCALED_BANDWIDTH = limits.MIN_SCALED_BANDWIDTH
# runs.csv figures of the bytes on the wire: x F on their way to the table (the emulated gradient's bytes)
EMULATED_BYTE_COLUMNS = ("net_bytes_total", "net_throughput_mean_bps", "steady_bytes_per_worker_step")


def shapes_cap(shapes, sent_bytes: Callable[[tuple], int], cap: int = SCALE_MAX) -> int:
    """The largest power of 2 up to `cap` at which the bytes sent (each tensor's elements / F, rounded up) stay
    MIN_SENT_BYTES or more, and x F exceed the gradient's by at most ROUNDING_MAX: beyond it the messages'
    fixed costs, and the rounding, would lengthen the step with F."""
    whole, f = sent_bytes(shapes), 1
    while f * 2 <= cap:
        sent = sent_bytes(scaled_shapes(shapes, f * 2))
        if sent < MIN_SENT_BYTES or sent * f * 2 > whole * (1 + ROUNDING_MAX):
            break
        f *= 2
    return f


def wall_rate(bps: int, k: float, f: int) -> float:
    """A link's rate on this machine's wall clock at dilation K and byte scale F."""
    return bps / (k * f)


def floor_cap(narrowest_bps: int | None, k_of: Callable[[int], float], cap: int = SCALE_MAX) -> int:
    """The largest power of 2 up to `cap` at which the narrowest link, at bw / (K x F) with K = k_of(F), stays
    at MIN_SCALED_BANDWIDTH or more (1 at least: byte scaling adds nothing below it)."""
    f = 1
    while f * 2 <= cap and (not narrowest_bps or wall_rate(narrowest_bps, k_of(f * 2), f * 2) >= MIN_SCALED_BANDWIDTH):
        f *= 2
    return f


def choose(need: Callable[[int], float], narrowest_bps: int | None, fixed_k: float | None = None,
           cap: int = SCALE_MAX, most: float = math.inf) -> tuple[float, int]:
    """(K, F) of `byte_scale: auto`: the smallest power of 2, F, at which the dilation the point needs at F,
    need(F) (the bytes sent and the stand-ins that send them, not held to `most`: beyond it a larger F still
    lightens the load), is no more than at the largest F floor_cap allows (nor than a dilation the file
    fixed). K is need(F) held to `most` under `dilation: auto`, else `fixed_k`."""
    k_of = (lambda f: min(most, need(f))) if fixed_k is None else (lambda f: fixed_k)
    top = floor_cap(narrowest_bps, k_of, cap)
    k_floor = max(need(top), fixed_k or 1.0)
    f = 1
    while f < top and need(f) > k_floor:
        f *= 2
    return k_of(f), f


def to_emulated_bytes(row: dict, f: int, columns=EMULATED_BYTE_COLUMNS) -> dict:
    """A copy of a result row with the wire's byte figures x F (non-numbers left as they are)."""
    out = dict(row)
    if f == 1:
        return out
    for column in columns:
        value = row.get(column)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            out[column] = value * f
    return out
