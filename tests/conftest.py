import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from hoststeal import (pytest_fixture_setup, pytest_runtest_call,  # noqa: E402,F401  (a failure under steal)
                       pytest_runtest_makereport, pytest_sessionstart)
from leftovers import new_since, snapshot  # noqa: E402

PLUGIN = "testbed.pytest_plugin"     # also the name `pip install -e .` registers it under (pyproject.toml)


def pytest_addoption(parser, pluginmanager):
    """The testbed's pytest plugin (the testbed_network fixture) for this repository's tests, whether
    `pip install -e .` registered it or not: import_plugin does nothing for a plugin of that name already
    registered, or turned off with `-p no:testbed.pytest_plugin`."""
    pluginmanager.import_plugin(PLUGIN)


@pytest.fixture
def no_leftovers():
    """Fail the test if it leaves namespaces, veths, bridges, QoS rows, cgroups or processes behind."""
    before = snapshot()
    yield
    left = new_since(before)
    if left:                            # removed before the next test, which would otherwise trip over them
        from testbed.cleanup import cleanup
        cleanup()
    assert not left, f"left behind on the machine: {left}"


@pytest.fixture(scope="session")
def root():
    assert os.geteuid() == 0, "integration tests drive Mininet, OVS and tc: run them as root (./testbed.sh test)"


@pytest.fixture(autouse=True)
def reap_stuck_runs(request):
    """After an integration test, a testbed run it started and left alive (a stuck or ignored
    signal), or any process of its that still holds the network lock (a script of the Python API), is
    killed and cleaned up, so it cannot hold the network lock for the tests after it."""
    yield
    if "integration" not in request.keywords:
        return
    import psutil

    from testbed.cleanup import run_lock
    lock = str(run_lock().path)
    stuck = []
    for proc in psutil.Process().children(recursive=True):
        try:
            if "run_experiment.py" in " ".join(proc.cmdline()) or any(f.path == lock for f in proc.open_files()):
                stuck.append(proc)
                proc.kill()
        except psutil.Error:
            pass
    if stuck:
        psutil.wait_procs(stuck, timeout=10)
        from testbed.cleanup import cleanup
        cleanup()
        pytest.fail(f"the test left {len(stuck)} testbed run(s) alive; killed and cleaned up", pytrace=False)
