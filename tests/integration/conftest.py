import os

import pytest


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
