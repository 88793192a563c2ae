"""The share of CPU time a virtual machine's host took, read from two psutil.cpu_times() readings."""
from collections import namedtuple
from pathlib import Path

import pytest

from hoststeal import STEAL_MAX, cpu_times, steal_share, worst_share

pytest_plugins = "pytester"
Times = namedtuple("Times", "user system idle steal")


def test_steal_is_counted_against_all_the_cpu_time_that_passed():
    assert steal_share(Times(10, 5, 100, 1), Times(40, 15, 140, 16)) == pytest.approx(15 / 95)
    assert steal_share(Times(10, 5, 100, 1), Times(10, 5, 100, 1)) == 0.0      # nothing passed


def test_a_machine_without_a_steal_figure_reads_none_taken():
    Plain = namedtuple("Plain", "user system idle")
    assert steal_share(Plain(1, 1, 1), Plain(2, 2, 2)) == 0.0


def readings(stolen_per_second: list[float]) -> list:
    """One reading a second, each second 100 ticks of which the given share went to the host."""
    out, user, steal = [(0.0, Times(0, 0, 0, 0))], 0.0, 0.0
    for second, share in enumerate(stolen_per_second, 1):
        user, steal = user + 100 * (1 - share), steal + 100 * share
        out.append((float(second), Times(user, 0, 0, steal)))
    return out


def test_a_burst_in_a_long_test_is_judged_by_its_worst_window():
    calm_burst_calm = [0.02] * 60 + [0.5] * 20 + [0.02] * 60      # 140 s: 9 % over all of it
    assert steal_share(readings(calm_burst_calm)[0][1], readings(calm_burst_calm)[-1][1]) < STEAL_MAX
    assert worst_share(readings(calm_burst_calm), window_s=20) == pytest.approx(0.5)
    assert worst_share(readings(calm_burst_calm), window_s=40) == pytest.approx(0.26)


def test_a_test_shorter_than_the_window_is_judged_over_all_of_it():
    assert worst_share(readings([0.3, 0.1, 0.2]), window_s=20) == pytest.approx(0.2)
    assert worst_share(readings([0.04] * 100), window_s=20) == pytest.approx(0.04)
    assert worst_share(readings([])) == 0.0


def test_this_machines_reading_is_a_share():
    before = cpu_times()
    sum(range(200_000))
    assert 0.0 <= steal_share(before, cpu_times()) <= 1.0 and 0 < STEAL_MAX < 1


CONFTEST = '''
from collections import namedtuple

import pytest

import hoststeal
from hoststeal import pytest_fixture_setup, pytest_runtest_call, pytest_runtest_makereport

Times = namedtuple("Times", "user idle steal")
now = dict(user=0.0, steal=0.0, stolen=STOLEN)


def fake_cpu_times():       # 100 ticks since the last reading, the share `stolen` of them taken by the host
    now["user"] += 100 * (1 - now["stolen"])
    now["steal"] += 100 * now["stolen"]
    return Times(user=now["user"], idle=0, steal=now["steal"])


hoststeal.cpu_times = fake_cpu_times


@pytest.fixture(scope="module")
def guest():                # measures under a 90 % steal, for its tests to read
    now["stolen"] = 0.9
    hoststeal.cpu_times()
    now["stolen"] = STOLEN
    return "a guest's figures"


def pytest_configure(config):
    for marker in ("integration", "behaviour", "timing"):
        config.addinivalue_line("markers", marker)
'''

TESTS = '''
import pytest


@pytest.mark.integration
def test_measures():
    assert 0.7 >= 0.9, "the steady step read 0.7 of real compute"


@pytest.mark.timing
def test_times_an_answer():
    assert 2.5 <= 1.0, "refused after 2.5 s"


@pytest.mark.integration
def test_reads_what_its_fixture_measured(guest):
    assert guest == "the configured jitter", "the spread read 3.1 ms"


@pytest.mark.integration
def test_passes():
    pass


@pytest.mark.integration
@pytest.mark.behaviour
def test_judges_behaviour():
    assert False, "left a namespace behind"


def test_of_pure_logic():
    assert [1] == [], "a unit test that times nothing"
'''


@pytest.mark.parametrize("stolen,outcomes", [(0.4, dict(skipped=3, passed=1, failed=2)),
                                             (0.02, dict(skipped=1, passed=1, failed=4))])
def test_a_timing_failure_while_the_host_stole_is_skipped_naming_the_share(pytester, monkeypatch, stolen,
                                                                              outcomes):
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).resolve().parents[1]))    # tests/, where hoststeal is
    pytester.makeconftest(f"STOLEN = {stolen}\n" + CONFTEST)
    pytester.makepyfile(test_measuring=TESTS)
    result = pytester.runpytest_subprocess("-rs", "-p", "no:cacheprovider")
    result.assert_outcomes(**outcomes)
    result.stdout.fnmatch_lines(["*the host took *% of this machine's CPU time*it failed: the spread read 3.1 ms*"])
    if stolen > STEAL_MAX:
        result.stdout.fnmatch_lines(["*the host took 40% of this machine's CPU time (steal)*"
                                     "*it failed: the steady step read 0.7 of real compute*",
                                     "*the host took 40%*it failed: refused after 2.5 s*"])
