#!/usr/bin/env python3
"""Write the example link traces (docs/changing-links.md) into topologies/traces/, made up, seeded,
the same bytes on every run (tests/unit/test_traces.py checks that the committed files are this
script's output); nothing is downloaded.

- lte.csv: an LTE-like downlink for 5 minutes, one row a second: a rate that wanders between 2 and
  40 Mbit/s (a mean-reverting random walk of its logarithm) with dips to 1-3 Mbit/s of 1-4 s (cell
  edge, handover) about once a minute.
- diurnal_wan.csv: a WAN link over one day compressed into 240 s (10 s an hour, one row every 2 s):
  100 Mbit/s at night, down to about 20 Mbit/s in the evening busy hour, with a little noise.

Both end with a row at their end time equal to their first, so that `trace_mode: loop` is seamless.

    .venv/bin/python scripts/make_traces.py [--out topologies/traces]
"""
from __future__ import annotations

import argparse
import math
import random
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SEED = 23


def lte(seed: int = SEED, seconds: int = 300) -> list[float]:
    """Mbit/s per second: exp of a mean-reverting walk around log 12, clipped to 2-40, with dips."""
    rng = random.Random(seed)
    level, rates, dip = math.log(12.0), [], 0
    for _ in range(seconds):
        level += 0.25 * (math.log(12.0) - level) + rng.gauss(0, 0.35)
        rate = min(40.0, max(2.0, math.exp(level)))
        if dip == 0 and rng.random() < 1 / 60:
            dip = rng.randint(1, 4)
        if dip:
            rate, dip = rng.uniform(1.0, 3.0), dip - 1
        rates.append(round(rate, 1))
    return rates


def diurnal(seed: int = SEED, hours: int = 24, per_hour: int = 5, hour_s: float = 10.0) -> list[tuple[float, float]]:
    """(t s, Mbit/s): 100 at night, a cosine dip to about 20 centred on 20:00, noise of +-3%."""
    rng = random.Random(seed + 1)
    out = []
    for i in range(hours * per_hour):
        hour = i / per_hour
        load = max(0.0, math.cos((hour - 20) / 24 * 2 * math.pi)) ** 2     # 1 at 20:00, 0 from 14:00 to 02:00
        day = 0.5 + 0.5 * math.cos((hour - 14) / 24 * 2 * math.pi)           # the working day's traffic
        rate = 100 - 45 * day * (1 - load) - 80 * load
        out.append((round(hour * hour_s, 3), round(rate * (1 + rng.uniform(-0.03, 0.03)), 1)))
    return out


def csv(rows: list[tuple[float, float]], about: str) -> str:
    lines = [f"# {line}" for line in about.splitlines()]
    lines += ["# made by scripts/make_traces.py: edit the script, not this file", "t[s],bw[mbit]"]
    lines += [f"{t:g},{bw:g}" for t, bw in rows]
    return "\n".join(lines) + "\n"


def traces(seed: int = SEED) -> dict[str, str]:
    """File name -> contents."""
    rates = lte(seed)
    lte_rows = [(float(t), r) for t, r in enumerate(rates)] + [(float(len(rates)), rates[0])]
    day = diurnal(seed)
    day_rows = day + [(240.0, day[0][1])]
    return {
        "lte.csv": csv(lte_rows, "Made-up LTE-like downlink: 2-40 Mbit/s, changing every second, with dips; "
                       "5 minutes."),
        "diurnal_wan.csv": csv(day_rows, "Made-up diurnal WAN link: one day in 240 s (10 s an hour), 100 Mbit/s "
                               "at night,\nabout 20 Mbit/s in the evening busy hour."),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "topologies" / "traces")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for name, text in traces().items():
        (args.out / name).write_text(text)
        print(args.out / name)


if __name__ == "__main__":
    main()
