"""The share of this machine's CPU time its host took (steal: a virtual machine's CPUs given to others) while
a test measured. What a test that measures time (a step, a rate, a verdict on the CPUs a run was given, an
answer time) ran on CPUs that were partly not there: beyond STEAL_MAX, its failure says nothing about the
testbed. Such tests: the unit tests marked `timing` and the integration tests not marked `behaviour`.

A test that compares two runs (real and replayed compute) is as good as its worst stretch: the host's steal
comes in bursts of tens of seconds, and one run under a burst against one without reads as an error of the
testbed. So a test's call is judged by the worst WINDOW_S of it, read every PERIOD_S by a sampler thread."""
from __future__ import annotations

import threading
import time

import psutil
import pytest

# Here the host took 1-2 % of an idle machine's time, 6-7 % of a busy one's in a calm hour, and 21-25 % in a
# busy one, when 2 replay tests that pass in a calm hour failed on the verdict (CPU wait, timers).
STEAL_MAX = 0.10
WINDOW_S = 20.0
PERIOD_S = 2.0
CALL = pytest.StashKey[float]()
SETUPS: dict = {}      # fixture definition -> (steal, all) CPU seconds of its last set-up
SAMPLES: list = []     # (monotonic time, cpu_times()) every PERIOD_S once the session started


def cpu_times():
    return psutil.cpu_times()


def spent(before, after) -> tuple[float, float]:
    """(steal, all CPU time) between two psutil.cpu_times() readings."""
    return getattr(after, "steal", 0.0) - getattr(before, "steal", 0.0), sum(after) - sum(before)


def _share(steal: float, total: float) -> float:
    return steal / total if total > 0 else 0.0


def steal_share(before, after) -> float:
    """Steal over all CPU time between two psutil.cpu_times() readings (0 where nothing passed)."""
    return _share(*spent(before, after))


def worst_share(readings: list, window_s: float = WINDOW_S) -> float:
    """The highest steal share over any stretch of at least window_s among (time, cpu_times) readings in time
    order; over all of them where they span less."""
    worst = steal_share(readings[0][1], readings[-1][1]) if len(readings) > 1 else 0.0
    end = 0
    for t0, first in readings:
        while end < len(readings) and readings[end][0] - t0 < window_s:
            end += 1
        if end == len(readings):
            break
        worst = max(worst, steal_share(first, readings[end][1]))
    return worst


def _sample_forever():
    while True:
        SAMPLES.append((time.monotonic(), cpu_times()))
        time.sleep(PERIOD_S)


def pytest_sessionstart(session):
    threading.Thread(target=_sample_forever, name="hoststeal", daemon=True).start()


def measures_time(item) -> bool:
    return "timing" in item.keywords or ("integration" in item.keywords and "behaviour" not in item.keywords)


def share_of(item) -> float:
    """Steal over the worst stretch of the test's call, or over the set-ups of the fixtures it uses, whenever
    they ran, if higher: a module's fixture may have measured what its tests only read (the netem VM's guest
    run). A set-up counts as a whole: a burst while a session's image was built says nothing of later tests."""
    setups = [SETUPS[defs[-1]] for defs in item._fixtureinfo.name2fixturedefs.values()
              if defs and defs[-1] in SETUPS]
    return max(item.stash.get(CALL, 0.0), _share(*(sum(column) for column in zip(*setups))) if setups else 0.0)


@pytest.hookimpl(hookwrapper=True)
def pytest_fixture_setup(fixturedef, request):
    before = cpu_times()
    yield
    SETUPS[fixturedef] = spent(before, cpu_times())


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    start = (time.monotonic(), cpu_times())
    yield
    end = (time.monotonic(), cpu_times())
    item.stash[CALL] = worst_share([start] + [s for s in list(SAMPLES) if start[0] < s[0] < end[0]] + [end])


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A test that measures time and failed while the machine's host took over STEAL_MAX of its CPU time is
    skipped, naming that share: what it timed ran on CPUs that were not there (tests/hoststeal.py)."""
    outcome = yield
    report = outcome.get_result()
    if call.when != "call" or not report.failed or not measures_time(item):
        return
    share = share_of(item)
    if share > STEAL_MAX:
        first = (str(call.excinfo.value).strip().splitlines() or [call.excinfo.typename])[0][:300]
        report.outcome = "skipped"
        report.longrepr = (str(item.path), item.location[1] or 0,
                           f"Skipped: the host took {share:.0%} of this machine's CPU time (steal) during the "
                           f"test (its worst {WINDOW_S:.0f} s), over {STEAL_MAX:.0%}: what it measures needs the "
                           f"CPUs it was given (it failed: {first})")
