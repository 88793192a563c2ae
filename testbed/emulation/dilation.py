"""Time dilation K: the emulated world runs K times slower than the wall clock (Gupta et al., NSDI
2006; DieCast, NSDI 2008). Choosing K for a sweep, and the scaling rules, as pure functions.

- a node of `cores` cores gets cores/K real cores (budgets.real_cores);
- a link's rate is divided by K; its delay and jitter are multiplied by K;
- every time the user writes is emulated time: the wall clock waits K times as long;
- every time recorded on the wall clock is divided by K (rates per second multiplied by K), with
  the raw wall figure kept in its own column (`training_time_s` -> `training_time_wall_s`).
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, Iterable

import testbed.units as units
from testbed.emulation.budgets import DEFAULT_RESERVE

AUTO_STEP = 0.25
_EPS = 1e-9

# How each quantity-valued key of the experiment file scales ("[]": every item of a list):
#   time  emulated time, x K on the wall clock (delay and jitter included; 'step N' triggers stay; a
#         trace file's own times and rates are scaled as it is read: spec.traces.link_traces(scale=K))
#   rate  a link rate, / K
#   wall  real-world time, unchanged: connecting to real machines and servers is not emulated
# tests/unit/test_emulation.py walks the spec models and fails on any such key missing here.
SCALED_KEYS: tuple[tuple[str, str], ...] = (
    ("topology.link.bw", "rate"),
    ("topology.link.delay", "time"),
    ("topology.link.jitter", "time"),
    ("topology.bottleneck.bw", "rate"),
    ("topology.bottleneck.delay", "time"),
    ("topology.bottleneck.jitter", "time"),
    ("topology.links[].bw", "rate"),
    ("topology.links[].delay", "time"),
    ("topology.links[].jitter", "time"),
    ("topology.link.trace_start", "time"),
    ("topology.link.trace_granularity", "time"),
    ("topology.bottleneck.trace_start", "time"),
    ("topology.bottleneck.trace_granularity", "time"),
    ("topology.links[].trace_start", "time"),
    ("topology.links[].trace_granularity", "time"),
    ("workload.timeout", "time"),
    ("monitor.interval", "time"),
    ("faults[].at", "time"),
    ("faults[].duration", "time"),
    ("faults[].delay", "time"),
    ("faults[].bw", "rate"),
    ("checks.duration", "wall"),           # sized by round trips where it runs (checks.wall_duration)
    ("ssh.connect_timeout", "wall"),
    ("cluster.connect_timeout", "wall"),
)

# runs.csv figures measured on the wall clock: durations / K and per-second figures x K on their way to
# the table (to_emulated), each raw figure kept in its wall column.
RUN_TIME_COLUMNS = ("training_time_s", "time_per_step_s", "time_lost_s", "tf_import_s", "torch_import_s",
                    "compute_per_step_s", "warmup_s", "steady_step_s", "steady_step_q1_s", "steady_step_q3_s")
RUN_RATE_COLUMNS = ("samples_per_s", "net_throughput_mean_bps", "steady_samples_per_s")


def choose(points: Iterable[Iterable[float]], machine_cores: float, reserve: float = DEFAULT_RESERVE,
           step: float = AUTO_STEP) -> float:
    """`dilation: auto`: the smallest K >= 1 at which the largest of `points` (each a list of its nodes'
    cores; a run asks for one point at a time) fits this machine with the reserve, rounded UP to a
    multiple of `step`.

    Rounding up keeps the fit (a larger K needs less) and gives a factor that reads well in logs
    and reports ("x2.75", not "x2.6667") and whole-ish quotas; it costs at most `step`/K of extra
    run time."""
    largest = max((sum(p) for p in points), default=0.0)
    room = machine_cores - reserve
    if room <= 0:
        raise ValueError(f"the reserve of {reserve:g} core leaves nothing of this {machine_cores:g}-core machine")
    k = max(1.0, largest / room)
    return max(1.0, math.ceil(k / step - _EPS) * step)


def wall_time(emulated_s: float, dilation: float) -> float:
    """A time the user wrote (emulated) as wall-clock time: x K (rounded to the microsecond)."""
    return round(emulated_s * dilation, 6)


def emulated_time(wall_s: float, dilation: float) -> float:
    """A time measured on the wall clock as emulated time: / K."""
    return wall_s / dilation


def link_rate(bps: int, dilation: float) -> int:
    """A link's rate in the dilated world, bits/s: / K."""
    return max(1, round(bps / dilation))


def _time(value: Any, k: float) -> Any:
    if isinstance(value, str):
        try:
            seconds = units.parse_time(value)
        except ValueError:
            return value                      # a 'step N' / 'epoch N' trigger: counts, not time
        return units.format_time(wall_time(seconds, k))
    return wall_time(value, k)


def _rate(value: Any, k: float) -> Any:
    if isinstance(value, str):
        return units.format_bandwidth(link_rate(units.parse_bandwidth(value), k))
    return link_rate(value, k)


_RULES: dict[str, Callable[[Any, float], Any]] = {"time": _time, "rate": _rate, "wall": lambda v, k: v}


def _parts(pattern: str) -> list[str]:
    return pattern.replace("[]", ".[]").split(".")


def _scaled(node: Any, parts: list[str], change: Callable[[Any], Any]) -> Any:
    """`node` (a spec model, a list of them, or a value) with change() applied at every leaf `parts`
    reaches; absent or null leaves are left as they are."""
    if node is None:
        return None
    if not parts:
        return change(node)
    head, rest = parts[0], parts[1:]
    if head == "[]":
        return [_scaled(item, rest, change) for item in node] if isinstance(node, list) else node
    if not hasattr(node, "model_copy") or head not in type(node).model_fields:
        return node
    return node.model_copy(update={head: _scaled(getattr(node, head), rest, change)})


def wall_spec(spec, dilation: float):
    """What this machine runs for an experiment (a typed spec) at dilation K: every key of SCALED_KEYS
    scaled by its rule (rates / K, times x K, real-world times as they are); the spec is left as it is."""
    if dilation < 1:
        raise ValueError(f"dilation must be >= 1 (got {dilation})")
    if dilation == 1:
        return spec
    out = spec
    for pattern, rule in SCALED_KEYS:
        out = _scaled(out, _parts(pattern), lambda v, r=_RULES[rule]: r(v, dilation))
    return out


LINK_RULES = tuple((path.rsplit(".", 1)[1], rule) for path, rule in SCALED_KEYS if path.startswith("topology.link."))


def wall_link(params, dilation: float):
    """A link's parameters (LinkParams) on this machine's clock: rate / K, delay, jitter and trace times x K."""
    for key, rule in LINK_RULES:
        params = _scaled(params, [key], lambda v, r=_RULES[rule]: r(v, dilation))
    return params


def wall_graph(graph, dilation: float):
    """A graph's links (and the links a WAN file dropped) on this machine's clock; its hosts as they
    are (their real-core budgets are resolved when the graph is built)."""
    if dilation == 1:
        return graph
    def on_wall(edges):
        return type(edges)(dataclasses.replace(e, params=wall_link(e.params, dilation)) for e in edges)
    return dataclasses.replace(graph, links=on_wall(graph.links), dropped=on_wall(graph.dropped))


def wall_column(column: str) -> str:
    """Where a figure's raw wall-clock value goes: training_time_s -> training_time_wall_s,
    samples_per_s -> samples_per_wall_s."""
    return column[:-2] + "_wall_s" if column.endswith("_s") else column + "_wall"


def to_emulated(row: dict, dilation: float, times: Iterable[str] = RUN_TIME_COLUMNS,
                rates: Iterable[str] = RUN_RATE_COLUMNS) -> dict:
    """A copy of a result row in emulated units: time columns / K, per-second columns x K, each
    raw value kept beside it (wall_column). Missing columns and non-numbers are left as they are."""
    out = dict(row)
    for columns, scale in ((times, 1 / dilation), (rates, dilation)):
        for column in columns:
            value = row.get(column)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                out[wall_column(column)] = value
                out[column] = value * scale
    return out
