"""analysis/tables/spread.py, the one rule every verdict uses, and the one wording of a speedup
(analysis/tables/trends.py)."""
import math

import pytest

from analysis.tables import spread
from analysis.tables.trends import speed_words, spread_words


def test_the_chance_that_ranges_lie_apart_by_chance_alone():
    assert spread.chance_apart(3, 3) == pytest.approx(2 / 20) and spread.chance_apart(2, 5) == pytest.approx(2 / 21)
    assert spread.chance_apart(1, 2) == pytest.approx(2 / 3) and spread.chance_apart(0, 4) == 1.0


@pytest.mark.parametrize("first, second, verdict, sign", [
    ((1, 5.0, 5.0), (1, 9.0, 9.0), spread.NO_SPREAD, 0),       # one run each: nothing to judge by
    ((3, 1.0, 2.0), (3, 1.5, 3.0), spread.WITHIN, 0),           # ranges overlap
    ((2, 1.0, 2.0), (2, 3.0, 4.0), spread.TOO_FEW, 0),          # apart, but 2 against 2 is apart 1 time in 3
    ((3, 1.0, 2.0), (3, 3.0, 4.0), spread.APART, 1),            # apart, and by chance 1 time in 10
    ((3, 3.0, 4.0), (3, 1.0, 2.0), spread.APART, -1),
])
def test_two_groups_differ_only_apart_and_beyond_chance(first, second, verdict, sign):
    judged = spread.judge(first, second)
    assert (judged.verdict, judged.sign) == (verdict, sign)


def test_a_groups_spread_and_the_too_few_sentence():
    assert spread.of([3, 1, 2]) == (3, 1.0, 3.0)
    n, lo, hi = spread.of([])
    assert n == 0 and math.isnan(lo) and math.isnan(hi)
    assert spread.too_few_text(1, 2) == ("1 run against 2: ranges that far apart come about by chance alone 67% "
                                        "of the time, so no verdict (run more repeats, sweep.repeats)")


def test_a_speedup_is_said_one_way():
    assert speed_words(0.357) == "2.8× slower" and speed_words(1.5, "one") == "1.5× faster than one"
    assert speed_words(1.003) == "as fast" and speed_words(float("nan")) == "not judged"
    assert spread_words(spread.TOO_FEW, 1, 2, short=True) == "the ranges lie apart, but 1 run against 2 are too few to judge"
    assert spread_words(spread.APART, 3, 3) == "beyond the spread of the repeats"
