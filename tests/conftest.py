import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from leftovers import new_since, snapshot  # noqa: E402


@pytest.fixture
def no_leftovers():
    """Fail the test if it leaves namespaces, veths, bridges, QoS rows, cgroups or processes behind."""
    before = snapshot()
    yield
    left = new_since(before)
    assert not left, f"left behind on the machine: {left}"


@pytest.fixture(scope="session")
def root():
    assert os.geteuid() == 0, "integration tests drive Mininet, OVS and tc: run them as root (./testbed.sh test)"
