"""Time-varying links: the trace files a link follows while training runs (`trace:` on topology.link,
topology.bottleneck or a custom link), read and checked here, and where in a trace a link is at
a given time (pure). Which links follow which trace is testbed/spec/faults/traces.py's; applying the
changes to a running network, testbed/run/faults/traces.py's.

Two formats (`trace_format`):

- csv: a header naming the columns with their units in brackets, then one row per change, e.g.

      # comment lines start with #
      t[s],bw[mbit],delay[ms],loss[%]
      0,50
      5,5,20,0.1
      10,50

  `t` (time since the trace started) and `bw` are required, `delay` and `loss` optional (an empty
  cell: the link's own value). The first row is at t 0; times rise. The last row's time is where the
  trace ends: with trace_mode hold its values stay from then on, with loop the trace starts over
  there (so under loop the last row's values are never used: it only closes the period).
- mahimahi: Mahimahi's packet-delivery trace, one line per delivery opportunity of one 1500-byte
  packet, at the end of that millisecond since the start (lines repeat for several packets in the
  same ms). It is turned
  into rate steps of `trace_granularity` (packets in each step x 1500 bytes x 8 / its width); a
  step without any opportunity gets the slowest rate tc paces (8 kbit/s on this machine's clock,
  so K x 8 kbit/s in emulated time under dilation K). It ends, and loops, at its last timestamp, as
  in Mahimahi.
"""
from __future__ import annotations

import bisect
import functools
import math
import os
import re
from dataclasses import dataclass, replace
from typing import NamedTuple

import testbed.units as units
import testbed.limits as limits

COLUMNS = {"t": "time", "bw": "bandwidth", "delay": "time", "loss": "percent"}
MAHIMAHI_PACKET_BYTES = 1500
DEFAULT_GRANULARITY = 1.0
EPSILON_S = 1e-9         # times are kept to the microsecond: less than this apart is the same time
_HEADER = re.compile(r"^\s*([a-z]+)\s*\[\s*([a-z%]+)\s*\]\s*$", re.I)


class TraceError(ValueError):
    """A trace file that cannot be followed: str() is 'FILE:LINE: message' (LINE 0: the whole file)."""

    def __init__(self, path: str, line: int, message: str):
        self.path, self.line, self.message = path, line, message
        super().__init__(f"{path}:{line}: {message}" if line else f"{path}: {message}")


class Row(NamedTuple):
    """One step of a trace: from `t` s on, `bw` bits/s, `delay` s and `loss` % (None: the link's own)."""
    t: float
    bw: int
    delay: float | None = None
    loss: float | None = None


@dataclass(frozen=True)
class Trace:
    """A trace's rows, in the spec's units; the trace ends (and a loop starts over) at the last row's t."""
    rows: tuple[Row, ...]
    source: str = ""

    @property
    def period(self) -> float:
        return self.rows[-1].t

    @property
    def needs_netem(self) -> bool:
        return any(r.delay is not None or r.loss is not None for r in self.rows)

    def scaled(self, k: float) -> "Trace":
        """The trace on a clock K times slower (emulation.dilation): times x K, rates / K."""
        if k == 1:
            return self
        return replace(self, rows=tuple(Row(round(r.t * k, 6), max(1, round(r.bw / k)),
                                            None if r.delay is None else r.delay * k, r.loss) for r in self.rows))

    def position(self, elapsed: float, mode: str) -> tuple[int, int]:
        """(loop, row index) in force `elapsed` s after the trace started. hold: the last row from its
        time on (loop 0); loop: row i of the n-th pass, the last row only closing the period."""
        times = [r.t for r in self.rows]
        elapsed = max(elapsed, 0.0) + EPSILON_S     # a row due at exactly this time is in force
        if mode != "loop" or len(self.rows) < 2:
            return 0, max(0, bisect.bisect_right(times, elapsed) - 1)
        n = math.floor(elapsed / self.period)
        into = elapsed - n * self.period
        return n, min(len(times) - 2, max(0, bisect.bisect_right(times, into) - 1))

    def planned(self, loop: int, index: int) -> float:
        """When row `index` of pass `loop` begins, in s since the trace started."""
        return loop * self.period + self.rows[index].t


# ---- reading ------------------------------------------------------------------------------------

def parse_csv(text: str, path: str = "<trace>") -> Trace:
    """A csv trace (module docstring); TraceError names the file and line of the first problem."""
    header, rows = None, []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        cells = [c.strip() for c in line.split(",")]
        if header is None:
            header = _header(cells, path, number)
            continue
        if len(rows) >= limits.MAX_TRACE_ROWS:
            raise TraceError(path, number, f"more than {limits.MAX_TRACE_ROWS:,} rows")
        if len(cells) > len(header):
            raise TraceError(path, number, f"{len(cells)} cells, but the header names {len(header)} columns")
        values = dict(zip([name for name, _ in header], cells))
        row = Row(**{name: _cell(values.get(name, ""), name, unit, path, number) for name, unit in header})
        if not rows and row.t != 0:
            raise TraceError(path, number, f"the first row must be at t 0 (it is at {units.format_time(row.t)}): "
                             "it is the link's value when the trace starts")
        if rows and row.t <= rows[-1].t:
            raise TraceError(path, number, f"t {units.format_time(row.t)} is not after the row before "
                             f"({units.format_time(rows[-1].t)}): times must rise")
        rows.append(row)
    if header is None or not rows:
        raise TraceError(path, 0, "no rows: write a header such as t[s],bw[mbit] and one row per change")
    return Trace(tuple(rows), path)


def _header(cells: list[str], path: str, number: int) -> list[tuple[str, str]]:
    """[(column, unit)] of a header such as t[s],bw[mbit],delay[ms],loss[%]."""
    out = []
    for cell in cells:
        match = _HEADER.match(cell)
        name, unit = (match.group(1).lower(), match.group(2).lower()) if match else (cell, "")
        if name not in COLUMNS:
            raise TraceError(path, number, f"unknown column {cell!r}: the header names t, bw and optionally delay "
                             "and loss, each with its unit in brackets, e.g. t[s],bw[mbit],delay[ms],loss[%]")
        if not match:
            raise TraceError(path, number, f"column {cell!r} needs its unit in brackets, e.g. "
                             f"{name}[{ {'time': 's', 'bandwidth': 'mbit', 'percent': '%'}[COLUMNS[name]] }]")
        if any(name == seen for seen, _ in out):
            raise TraceError(path, number, f"column {name} appears twice")
        out.append((name, unit))
    if [n for n, _ in out[:2]] != ["t", "bw"]:
        raise TraceError(path, number, "the first two columns are t and bw, e.g. t[s],bw[mbit]")
    for name, unit in out:     # the unit checked once, here, on a sample value
        try:
            _parse(name, f"1{unit}", bounded=False)
        except ValueError as err:
            raise TraceError(path, number, f"column {name}: {err}") from None
    return out


def _parse(name: str, text: str, bounded: bool = True):
    kind = COLUMNS[name]
    if kind == "bandwidth":
        return units.parse_bandwidth(text, *((limits.MIN_BANDWIDTH, limits.MAX_BANDWIDTH) if bounded else ()))
    if kind == "percent":
        return units.parse_percent(text)
    return units.parse_time(text, limits.MAX_TIME if bounded else None)


def _cell(cell: str, name: str, unit: str, path: str, number: int):
    if cell == "":
        if name in ("t", "bw"):
            raise TraceError(path, number, f"no {name}: t and bw are required in every row")
        return None
    try:
        float(cell)
    except ValueError:
        raise TraceError(path, number, f"{name}: {cell!r} is not a number (the unit, {unit}, is the "
                         "header's)") from None
    try:
        return _parse(name, f"{cell}{unit}")
    except ValueError as err:
        raise TraceError(path, number, f"{name}: {err}") from None


def parse_mahimahi(text: str, granularity: float = DEFAULT_GRANULARITY, path: str = "<trace>",
                   floor_bps: int = limits.MIN_BANDWIDTH) -> Trace:
    """A Mahimahi packet-delivery trace as rate steps `granularity` s wide (module docstring); a step
    without any delivery gets `floor_bps`. Counted in whole microseconds, so that a granularity such
    as 0.3 s / 3 makes steps of exactly 100 ms."""
    stamps, last = [], 0
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        if not (line.isascii() and line.isdigit()) or len(line) > 12:
            raise TraceError(path, number, f"{line[:40]!r} is not a delivery time: Mahimahi traces have one "
                             "whole number of milliseconds per line")
        ms = int(line)
        if ms < last:
            raise TraceError(path, number, f"{ms} ms is before the line above ({last} ms): times must not fall")
        stamps.append(ms)
        last = ms
    if not stamps or last == 0:
        raise TraceError(path, 0, "no delivery after 0 ms: a Mahimahi trace ends, and loops, at its last line")
    width, end = max(1, round(granularity * 1e6)), last * 1000         # microseconds
    count = -(-end // width)
    if count > limits.MAX_TRACE_ROWS:
        raise TraceError(path, 0, f"{count:,} steps of {units.format_time(granularity)}; at most "
                         f"{limits.MAX_TRACE_ROWS:,}: use a larger trace_granularity")
    packets = [0] * count
    for ms in stamps:       # a delivery at m ms falls in the millisecond (m - 1, m], so in step ceil(m / width) - 1
        packets[min(max(0, -(-ms * 1000 // width) - 1), count - 1)] += 1
    rows: list[Row] = []
    for i, n in enumerate(packets):
        span = min(width, end - i * width) / 1e6
        bw = max(floor_bps, min(limits.MAX_BANDWIDTH, round(n * MAHIMAHI_PACKET_BYTES * 8 / span)))
        if not rows or rows[-1].bw != bw:
            rows.append(Row(i * width / 1e6, bw))
    rows.append(Row(end / 1e6, rows[-1].bw))
    return Trace(tuple(rows), path)


@functools.lru_cache(maxsize=64)
def _load(path: str, fmt: str, granularity: float, floor_bps: int, stamp: tuple) -> Trace:
    size = stamp[1]
    if size > limits.MAX_TRACE_BYTES:
        raise TraceError(path, 0, f"{size:,} bytes; a trace file may have at most {limits.MAX_TRACE_BYTES:,}")
    try:
        with open(path, encoding="utf-8-sig") as fh:     # -sig: a spreadsheet's byte-order mark is not a column
            text = fh.read()
    except UnicodeDecodeError:
        raise TraceError(path, 0, "not UTF-8 text") from None
    return parse_mahimahi(text, granularity, path, floor_bps) if fmt == "mahimahi" else parse_csv(text, path)


def load(path: str, fmt: str | None = None, granularity: float | None = None,
         floor_bps: int = limits.MIN_BANDWIDTH) -> Trace:
    """The trace file at `path` (TraceError when it is missing or wrong); read once per change of the
    file. `floor_bps`: a Mahimahi step without deliveries."""
    try:
        st = os.stat(path)
    except OSError as err:
        raise TraceError(path, 0, f"cannot be read: {err.strerror}") from None
    if not os.path.isfile(path):
        raise TraceError(path, 0, "is not a file")
    return _load(path, fmt or "csv", granularity or DEFAULT_GRANULARITY, floor_bps, (st.st_mtime_ns, st.st_size))
