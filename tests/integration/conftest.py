import os

import psutil
import pytest

from hoststeal import cpu_times, steal_share
from testbed.run.point.calibration import cpu_model

_AT_START = cpu_times()


@pytest.fixture(scope="session", autouse=True)
def no_leftovers_from_a_crash():
    """Before the first integration test: what a crashed or killed testbed run left on this machine (a
    switch, namespaces, cgroups, QoS rows) is removed by the testbed's own cleanup, which leaves a live
    run's alone; otherwise every test that brings up a network would trip over it."""
    if os.geteuid() == 0:
        from testbed.cleanup import cleanup
        for action in cleanup():
            print(f"before the integration tests: {action}")
    yield


# Modules whose tests judge behaviour (clean-up, signals, stored files, images, scripts, a thousand hosts
# reachable), not time: marked `behaviour`, so that `./testbed.sh test` runs them while the unit tests take
# the CPUs' idle cycles beside them, and the tests that measure after the unit tests have ended (idle cycles
# still delay a woken task until the next tick and share the caches: beside them, tests took 16 % longer and
# a replay's tasks waited for a CPU 14 % of the step).
BEHAVIOUR = ("test_api_network", "test_cluster_servers", "test_no_dead_ends", "test_sweep", "test_up_exec",
             "test_worker_image", "test_user_script", "test_ci_docs", "test_zoo_run", "test_workload_local",
             "test_end_to_end", "test_scale")


def pytest_collection_modifyitems(items):
    for item in items:
        if item.module.__name__.rpartition(".")[2] in BEHAVIOUR:
            item.add_marker(pytest.mark.behaviour)


@pytest.hookimpl(trylast=True)
def pytest_terminal_summary(terminalreporter):
    """The machine the tests measured on, last: its CPU, and the share of the CPUs' time its host took
    (steal) while they ran. A test that measures time reads differently on a slower or a stolen machine."""
    share = steal_share(_AT_START, cpu_times())
    terminalreporter.write_line(f"this machine: {cpu_model()}, {psutil.cpu_count()} CPUs; "
                                f"the host took {share:.1%} of their time (steal) during these tests")
