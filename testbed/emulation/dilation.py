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
import functools
import math
import types
import typing
from typing import Any, Callable, Iterable

from pydantic import BaseModel

import testbed.units as units
from testbed.emulation.budgets import DEFAULT_RESERVE
from testbed.spec.values import Scaled

AUTO_STEP = 0.25
_EPS = 1e-9

# How each quantity-valued key of the experiment file scales is marked on the spec's models (spec.values.Scaled):
#   time  emulated time, x K on the wall clock (delay and jitter included; 'step N' triggers stay; a
#         trace file's own times and rates are scaled as it is read: spec.faults.traces.link_traces(scale=K))
#   rate  a link rate, / K
#   wall  real-world time, unchanged: connecting to real machines and servers is not emulated
# wall_spec walks a spec and scales every marked value; scaled_paths lists the marked keys (tests/unit/test_emulation.py
# holds them to the keys scaled so far and fails on a time or rate key left unmarked).

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
_RATES_ONLY: dict[str, Callable[[Any, float], Any]] = {"time": lambda v, k: v, "rate": _rate, "wall": lambda v, k: v}


_UNIONS = (typing.Union, types.UnionType)


def scale_rule(annotation: Any, metadata: Iterable = ()) -> str | None:
    """The rule a field scales by: the last Scaled mark of its metadata, else of its type (an Annotated
    type, or one inside an Optional or a Union); None: unmarked."""
    marks = [m for m in metadata if isinstance(m, Scaled)]
    members = typing.get_args(annotation) if typing.get_origin(annotation) in _UNIONS else (annotation,)
    for member in members:
        if not marks and typing.get_origin(member) is typing.Annotated:
            marks = [m for m in member.__metadata__ if isinstance(m, Scaled)]
    return marks[-1].rule if marks else None


@functools.lru_cache(maxsize=None)
def _marked(model: type) -> dict[str, str]:
    """A model's fields that scale, by name -> rule (wall fields left out: they stay as they are)."""
    out = {name: scale_rule(info.annotation, info.metadata) for name, info in model.model_fields.items()}
    return {name: rule for name, rule in out.items() if rule in ("time", "rate")}


def _on_wall(node: Any, k: float, rules=_RULES) -> Any:
    """`node` (a spec model, a list or dict of them, or any other value) with every marked value inside it
    scaled at K; what holds nothing to scale is returned as it is (the same object)."""
    if isinstance(node, list):
        items = [_on_wall(item, k, rules) for item in node]
        return node if all(a is b for a, b in zip(items, node)) else items
    if isinstance(node, dict):
        values = {key: _on_wall(value, k, rules) for key, value in node.items()}
        return node if all(values[key] is value for key, value in node.items()) else values
    if not isinstance(node, BaseModel):
        return node
    marked, update = _marked(type(node)), {}
    for name in type(node).model_fields:
        value = getattr(node, name)
        if value is None:
            continue
        new = rules[marked[name]](value, k) if name in marked else _on_wall(value, k, rules)
        if new is not value:
            update[name] = new
    return node.model_copy(update=update) if update else node


def scaled_paths(model: type, prefix: str = "") -> dict[str, str]:
    """Every marked key of a spec model, as a path ('[]': every item of a list, '.*': every value of a
    mapping) -> its rule, 'wall' ones included."""
    out = {}
    for name, info in model.model_fields.items():
        rule = scale_rule(info.annotation, info.metadata)
        if rule is not None:
            out[prefix + name] = rule
        for sub, suffix in _models_in(info.annotation):
            if sub is not model:
                out.update(scaled_paths(sub, f"{prefix}{name}{suffix}."))
    return out


def _models_in(annotation: Any):
    """(model, path suffix) of every model inside an annotation: '[]' through a list, '.*' a dict."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation, ""
    origin = typing.get_origin(annotation)
    step = "[]" if origin is list else ".*" if origin is dict else ""
    for arg in typing.get_args(annotation):
        for model, suffix in _models_in(arg):
            yield model, step + suffix


def wall_spec(spec, dilation: float, byte_scale: int = 1):
    """What this machine runs for an experiment (a typed spec) at dilation K: every value its models mark
    Scaled scaled by its rule (rates / K, times x K, real-world times as they are), and under byte scaling
    F every rate / F again (testbed/emulation/byte_scale.py); the spec is left as it is."""
    if dilation < 1 or byte_scale < 1:
        raise ValueError(f"dilation and byte scale must be >= 1 (got {dilation}, {byte_scale})")
    wall = spec if dilation == 1 else _on_wall(spec, dilation)
    return wall if byte_scale == 1 else _on_wall(wall, byte_scale, _RATES_ONLY)


def wall_link(params, dilation: float, byte_scale: int = 1):
    """A link's parameters (LinkParams) on this machine's clock: rate / K (/ F), delay, jitter and trace times x K."""
    wall = _on_wall(params, dilation)
    return wall if byte_scale == 1 else _on_wall(wall, byte_scale, _RATES_ONLY)


def wall_graph(graph, dilation: float, byte_scale: int = 1):
    """A graph's links (and the links a WAN file dropped) on this machine's clock, rates / F again under byte
    scaling; its hosts as they are (their real-core budgets are resolved when the graph is built)."""
    if dilation == 1 and byte_scale == 1:
        return graph
    def on_wall(edges):
        return type(edges)(dataclasses.replace(e, params=wall_link(e.params, dilation, byte_scale)) for e in edges)
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
