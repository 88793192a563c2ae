"""The value types of the experiment file: quantities with units (parsed on the way in, formatted back
in a JSON dump), names, counts and the checks behind them. Pure: pydantic, the standard library and
the spec's units and limits."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, PlainSerializer, WithJsonSchema

import testbed.units as units
import testbed.limits as limits
from testbed.spec.faults.grammar import parse_start
from testbed.spec.keypaths import suggest
from testbed.spec.kinds import kind_names

NODE_NAME = r"^[a-z][a-z0-9]{0,7}$"
EXPERIMENT_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"


def _ci(word: str) -> str:
    """Case-insensitive regex for a word, for JSON schema patterns (which have no flags)."""
    return "".join(f"[{c.lower()}{c.upper()}]" if c.isalpha() else re.escape(c) for c in word)


@dataclass(frozen=True)
class Scaled:
    """How a value scales with the time dilation K (testbed/emulation/dilation.py reads these marks): 'time' is
    emulated time, x K on the wall clock; 'rate' a link rate, / K; 'wall' a real-world time, as it is (connecting
    to real machines and servers is not emulated). The quantity types carry theirs (Time: time, Bandwidth: rate);
    a field's own mark, written after its type's, overrides it (the last mark of an annotation counts)."""
    rule: Literal["time", "rate", "wall"]


def _quantity(kind: type, parse, fmt, unit_names, example: str, doc: str, *marks):
    pattern = rf"^\s*[+-]?[0-9.]+([eE][+-]?[0-9]+)?\s*({'|'.join(_ci(u) for u in unit_names)})\s*$"
    schema = {"type": "string", "pattern": pattern, "examples": [example], "description": doc}
    return Annotated[kind, BeforeValidator(parse), PlainSerializer(fmt, when_used="json"),
                     WithJsonSchema(schema), *marks]


def _bandwidth(value: object) -> int:
    return units.parse_bandwidth(value, limits.MIN_BANDWIDTH, limits.MAX_BANDWIDTH)


def _time(value: object) -> float:
    return units.parse_time(value, limits.MAX_TIME)


def _size(value: object) -> int:
    return units.parse_size(value, limits.MAX_SIZE)


def _positive_time(value: object) -> float:
    seconds = _time(value)
    if seconds <= 0:
        raise ValueError(f"time must be greater than 0 (got {value!r})")
    return seconds


def check_node_name(value: object) -> str:
    """Host/switch names: 1-8 of [a-z0-9], starting with a letter, with the reason why."""
    if not isinstance(value, str):
        raise ValueError(f"a node name must be a string (got {value!r})")
    if re.fullmatch(NODE_NAME, value):
        return value
    why = ("names become interface names like h1-eth0, which Linux limits to 15 characters, "
           "and they reach shell commands")
    if len(value) > 8:
        problem = f"{value!r} is too long ({len(value)} characters, at most 8)"
    else:
        problem = f"{value!r} is not a valid node name"
    raise ValueError(f"{problem}: use 1-8 lowercase letters or digits starting with a letter; {why}")


def check_kind(value: object) -> str:
    if value in kind_names():
        return value
    hint = suggest(value, kind_names()) if isinstance(value, str) else ""
    raise ValueError(f"unknown node kind {value!r} (known kinds: {', '.join(kind_names())}){hint}")


def check_experiment_name(value: object) -> str:
    if isinstance(value, str) and re.fullmatch(EXPERIMENT_NAME, value):
        return value
    raise ValueError(f"{value!r} is not a valid experiment name: 1-64 of letters, digits, _ . -, "
                     "starting with a letter or digit (it becomes a results folder name)")


Bandwidth = _quantity(int, _bandwidth, units.format_bandwidth, units.BANDWIDTH_UNITS,
                      "10mbit", "bits/s: bit, kbit, mbit, gbit, tbit (not bps: tc reads that as bytes/s)", Scaled("rate"))
Time = _quantity(float, _time, units.format_time, units.TIME_UNITS, "10ms",
                 "time: us, ms, s, m (minutes)", Scaled("time"))
PositiveTime = _quantity(float, _positive_time, units.format_time, units.TIME_UNITS, "500ms",
                         "time > 0: us, ms, s, m (minutes)", Scaled("time"))
Size = _quantity(int, _size, units.format_size, units.SIZE_UNITS, "512mb",
                 "bytes: b, kb, mb, gb (SI), kib, mib, gib (binary)")
Percent = _quantity(float, units.parse_percent, units.format_percent, ["%"], "0.5%", "percent 0-100")
NodeName = Annotated[str, BeforeValidator(check_node_name),
                     WithJsonSchema({"type": "string", "pattern": NODE_NAME})]
Count = Annotated[int, Field(ge=1, le=limits.MAX_COUNT)]
Whole = Annotated[int, Field(ge=0, le=limits.MAX_COUNT)]
Kind = Annotated[str, BeforeValidator(check_kind), WithJsonSchema({"enum": kind_names()})]


def check_subnet(value: object) -> str:
    """An IPv4 network for the emulated hosts' addresses, written as NETWORK/PREFIX (e.g. 10.0.0.0/16)."""
    import ipaddress
    example = "e.g. 10.0.0.0/22 (1022 hosts) or 172.16.0.0/16"
    try:
        net = ipaddress.IPv4Network(value, strict=False) if isinstance(value, str) and "/" in value else None
    except ValueError:
        net = None
    if net is None:
        raise ValueError(f"{value!r} is not an IPv4 network: write NETWORK/PREFIX, {example}")
    if str(net) != value:
        raise ValueError(f"{value!r} has host bits set: write {net}")
    if net.prefixlen > 30:
        raise ValueError(f"{value} holds no hosts: use a /30 or larger network, {example}")
    if not net.is_private or net.is_loopback or net.is_link_local:
        raise ValueError(f"{value} is not a private network: use one inside 10.0.0.0/8, 172.16.0.0/12 or "
                         f"192.168.0.0/16, {example}")
    return value


Subnet = Annotated[str, BeforeValidator(check_subnet),
                   WithJsonSchema({"type": "string", "examples": ["10.0.0.0/24", "10.0.0.0/22", "172.16.0.0/16"]})]


def _count_or_list(value: Any) -> str:
    return "list" if isinstance(value, list) else "count"


def _trace_start(value: object) -> str:
    parse_start(value)
    return " ".join(value.split())


TraceStart = Annotated[str, BeforeValidator(_trace_start), WithJsonSchema(
    {"type": "string", "pattern": r"^\s*(start|(step|epoch)\s+[0-9]+|[0-9.]+\s*(us|ms|s|m))\s*$", "examples": ["step 20"]}),
    Scaled("time")]
