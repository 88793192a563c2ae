"""Strict unit parsing and formatting: bandwidth, time, size, percent.

A value is a number followed by a unit (case-insensitive, optional space). Bare numbers are
refused everywhere: a missing unit is the commonest way to be off by a factor of a million.
Parsing goes through Decimal, so "1.5mbit" is exactly 1_500_000 and formatting is exact.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

BANDWIDTH_UNITS = {"bit": 1, "kbit": 10**3, "mbit": 10**6, "gbit": 10**9, "tbit": 10**12}
BYTE_RATE_UNITS = {"bps": "bit", "kbps": "kbit", "mbps": "mbit", "gbps": "gbit", "tbps": "tbit"}
TIME_UNITS = {"us": Decimal("0.000001"), "ms": Decimal("0.001"), "s": Decimal(1), "m": Decimal(60)}
SIZE_UNITS = {"b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9,
              "kib": 2**10, "mib": 2**20, "gib": 2**30}

MAX_EXPONENT = 18   # |number| below 10**18 and, unless 0, above 10**-18: beyond, no unit makes sense
_VALUE = re.compile(r"^\s*([+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:e[+-]?\d+)?)\s*([a-z%]*)\s*$", re.I)


class UnitError(ValueError):
    """A value that is not a valid quantity of the expected kind."""


def _split(value: object, kind: str, example: str, most: str = "") -> tuple[Decimal, str]:
    """Split '10 mbit' into (Decimal('10'), 'mbit'); refuse bare numbers and non-strings."""
    if isinstance(value, bool) or value is None:
        raise UnitError(f"{kind} must be a number with a unit, e.g. {example} (got {_short(value)})")
    if isinstance(value, (int, float)):
        raise UnitError(f"{kind} needs a unit, e.g. {example}")
    if not isinstance(value, str):
        raise UnitError(f"{kind} must be a string like {example} (got {type(value).__name__})")
    match = _VALUE.match(value)
    if not match:
        raise UnitError(f"{_short(value)} is not a {kind}; write a number and a unit, e.g. {example}")
    number, unit = match.groups()
    if not unit:
        raise UnitError(f"{kind} needs a unit, e.g. {example}")
    try:
        amount = Decimal(number)
    except InvalidOperation as exc:  # pragma: no cover - the regex admits only valid numbers
        raise UnitError(f"{_short(value)} is not a number") from exc
    if amount and not -MAX_EXPONENT <= amount.adjusted() < MAX_EXPONENT:   # before any arithmetic
        size = "large" if amount.adjusted() > 0 else "small"
        raise UnitError(f"{_short(value)} is too {size} for a {kind}"
                        + (f"; at most {most}" if most and size == "large" else f", e.g. {example}"))
    return amount, unit.lower()


def _short(value: object) -> str:
    """repr of a value, cut to 40 characters (a hostile value may have 100,000 digits)."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _at_most(amount, most, kind: str, fmt, value: object):
    """`amount` unless it exceeds `most` (None: no cap)."""
    if most is not None and amount > most:
        raise UnitError(f"{kind} must be at most {fmt(most)} (got {_short(value)})")
    return amount


def _unknown(value: str, unit: str, kind: str, units) -> UnitError:
    names = ", ".join(units)
    return UnitError(f"unknown {kind} unit {unit[:20]!r} in {_short(value)}; use one of {names}")


def parse_bandwidth(value: object, least: int | None = None, most: int | None = None) -> int:
    """'10mbit' -> 10_000_000 bits/s, within [least, most] when given. Refuses bps/kbps/mbps/gbps
    (tc reads them as bytes/s)."""
    number, unit = _split(value, "bandwidth", "10mbit", format_bandwidth(most) if most else "")
    if unit in BYTE_RATE_UNITS:
        bit_unit, amount = BYTE_RATE_UNITS[unit], format_decimal(number)
        raise UnitError(
            f"{_short(value)}: tc reads {unit!r} as BYTES per second, not bits; "
            f"write {amount}{bit_unit} for {amount} {bit_unit}/s "
            f"(or {format_decimal(number * 8)}{bit_unit} if you really meant bytes)")
    if unit not in BANDWIDTH_UNITS:
        raise _unknown(str(value), unit, "bandwidth", BANDWIDTH_UNITS)
    bits = _positive_whole(number * BANDWIDTH_UNITS[unit], "bandwidth", "bits/s", value)
    if least is not None and bits < least:
        raise UnitError(f"bandwidth must be at least {format_bandwidth(least)} (got {_short(value)})")
    return _at_most(bits, most, "bandwidth", format_bandwidth, value)


def _positive_whole(amount, noun: str, unit_word: str, value: object) -> int:
    """`amount` as an int, refusing zero, negative and fractional amounts of the base unit."""
    if amount <= 0:
        raise UnitError(f"{noun} must be greater than 0 (got {_short(value)})")
    if amount != amount.to_integral_value():
        raise UnitError(f"{noun} must be a whole number of {unit_word} (got {_short(value)})")
    return int(amount)


def parse_time(value: object, most: float | None = None) -> float:
    """'500ms' -> 0.5 seconds; units us, ms, s, m (minutes). Negative times (and above `most`) are refused."""
    number, unit = _split(value, "time", "10ms", format_time(most) if most else "")
    if unit not in TIME_UNITS:
        raise _unknown(str(value), unit, "time", TIME_UNITS)
    if number < 0:
        raise UnitError(f"time must not be negative (got {_short(value)})")
    return _at_most(float(number * TIME_UNITS[unit]), most, "time", format_time, value)


def parse_size(value: object, most: int | None = None) -> int:
    """'512mb' -> 512_000_000 bytes; SI (kb, mb, gb) and binary (kib, mib, gib) units; at most `most`."""
    number, unit = _split(value, "size", "512mb", format_size(most) if most else "")
    if unit not in SIZE_UNITS:
        raise _unknown(str(value), unit, "size", SIZE_UNITS)
    return _at_most(_positive_whole(number * SIZE_UNITS[unit], "size", "bytes", value), most, "size",
                    format_size, value)


def parse_percent(value: object) -> float:
    """'0.5%' -> 0.5 (percent, 0..100). The % sign is required: 0.5 could mean 50% or 0.5%."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        raise UnitError(f"percent needs a % sign, e.g. {format_decimal(Decimal(str(value)))}%")
    number, unit = _split(value, "percent", "1%")
    if unit != "%":
        raise UnitError(f"percent must end in %, e.g. 1% (got {_short(value)})")
    if not 0 <= number <= 100:
        raise UnitError(f"percent must be between 0% and 100% (got {_short(value)})")
    return float(number)


def format_decimal(number: Decimal) -> str:
    """Plain decimal text without exponent or trailing zeros: Decimal('1.50E+3') -> '1500'."""
    text = format(number.normalize(), "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


def _shortest(amount: Decimal, units: dict) -> str:
    """Shortest exact 'number+unit' text; ties prefer whole numbers, then the larger unit."""
    candidates = []
    for unit, scale in units.items():
        number = amount / Decimal(scale)
        if number * Decimal(scale) == amount:
            text = f"{format_decimal(number)}{unit}"
            candidates.append((len(text), "." in text, -Decimal(scale), text))
    return min(candidates)[-1]


def format_bandwidth(bits: int) -> str:
    """10_000_000 -> '10mbit', 1_500_000 -> '1.5mbit' (shortest exact form tc accepts)."""
    return _shortest(Decimal(int(bits)), BANDWIDTH_UNITS)


def format_time(seconds: float) -> str:
    """0.5 -> '0.5s', 0.02 -> '20ms', 600 -> '10m'; parse_time(format_time(x)) == x."""
    if seconds == 0:
        return "0s"
    return _shortest(Decimal(repr(float(seconds))), TIME_UNITS)


def format_size(size: int) -> str:
    """512_000_000 -> '512mb', 1_073_741_824 -> '1gib'."""
    return _shortest(Decimal(int(size)), SIZE_UNITS)


def format_percent(percent: float) -> str:
    """0.5 -> '0.5%'."""
    return f"{format_decimal(Decimal(repr(float(percent))))}%"
