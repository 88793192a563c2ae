"""When two groups of repeats differ: the rule every verdict of the report uses (reference results,
PS against all-reduce, one node against two, the trends).

Two groups differ beyond the spread when their ranges [min, max] do not overlap. With few repeats
that happens by chance alone: if both groups came from one distribution, the n + m runs fall in
any order with equal probability, and the two ranges are apart in 2 of the C(n + m, n) orders that
keep each group together. A verdict is given only where that chance is at most CHANCE (3 runs
against 3, 2 against 5, ...); otherwise the groups are said to be too few to judge.
"""
from __future__ import annotations

from math import comb
from typing import NamedTuple

CHANCE = 0.10
APART, WITHIN, TOO_FEW, NO_SPREAD = "apart", "within the spread", "too few repeats to judge", "one run each"


def chance_apart(n: int, m: int) -> float:
    """How often the ranges of n and m repeats of the same thing lie apart by chance alone."""
    return min(1.0, 2 / comb(n + m, n)) if n and m else 1.0


class Judged(NamedTuple):
    verdict: str          # APART, WITHIN, TOO_FEW or NO_SPREAD
    sign: int             # +1: the second group higher, -1: lower, 0: not apart
    chance: float         # chance_apart of the two sizes


def judge(first: tuple[int, float, float], second: tuple[int, float, float]) -> Judged:
    """Where the second group lies against the first; each is (runs, min, max)."""
    (n, lo1, hi1), (m, lo2, hi2) = first, second
    chance = chance_apart(n, m)
    sign = 1 if lo2 > hi1 else -1 if hi2 < lo1 else 0
    if n == m == 1:
        return Judged(NO_SPREAD, 0, chance)
    if sign == 0:
        return Judged(WITHIN, 0, chance)
    if chance > CHANCE:
        return Judged(TOO_FEW, 0, chance)
    return Judged(APART, sign, chance)


def of(values) -> tuple[int, float, float]:
    """(runs, min, max) of a group's values."""
    values = [float(v) for v in values]
    return (len(values), min(values), max(values)) if values else (0, float("nan"), float("nan"))


def too_few_text(n: int, m: int) -> str:
    """Why groups of n and m runs whose ranges are apart are not judged."""
    return (f"{n} run{'s' * (n != 1)} against {m}: ranges that far apart come about by chance alone "
            f"{chance_apart(n, m):.0%} of the time, so no verdict (run more repeats, sweep.repeats)")
