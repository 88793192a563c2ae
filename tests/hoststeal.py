"""The share of this machine's CPU time its host took (steal: a virtual machine's CPUs given to others) while
a test measured. What a test that measures time (a step, a rate, a verdict on the CPUs a run was given, an
answer time) ran on CPUs that were partly not there: beyond STEAL_MAX, its failure says nothing about the
testbed. Such tests: the unit tests marked `timing` and the integration tests not marked `behaviour`."""
from __future__ import annotations

import psutil
import pytest

# Here the host took 1-2 % of an idle machine's time, 6-7 % of a busy one's in a calm hour, and 21-25 % in a
# busy one, when 2 replay tests that pass in a calm hour failed on the verdict (CPU wait, timers).
STEAL_MAX = 0.10
CALL = pytest.StashKey[tuple]()
SETUPS: dict = {}      # fixture definition -> (steal, all) CPU seconds of its last set-up


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


def measures_time(item) -> bool:
    return "timing" in item.keywords or ("integration" in item.keywords and "behaviour" not in item.keywords)


def share_of(item) -> float:
    """Steal over the test's call and the set-ups of the fixtures it uses, whenever they ran: a module's
    fixture may have measured what its tests only read (the netem VM's guest run)."""
    parts = [item.stash.get(CALL, (0.0, 0.0))]
    parts += [SETUPS[defs[-1]] for defs in item._fixtureinfo.name2fixturedefs.values() if defs and defs[-1] in SETUPS]
    return _share(*(sum(column) for column in zip(*parts)))


@pytest.hookimpl(hookwrapper=True)
def pytest_fixture_setup(fixturedef, request):
    before = cpu_times()
    yield
    SETUPS[fixturedef] = spent(before, cpu_times())


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    before = cpu_times()
    yield
    item.stash[CALL] = spent(before, cpu_times())


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
                           f"test, over {STEAL_MAX:.0%}: what it measures needs the CPUs it was given "
                           f"(it failed: {first})")
