"""The docker kind's CPU limit for Docker (testbed/nodes/docker.py), without Docker: a quota over the
short period the budgets use, none for a container pinned to as many whole CPUs of its own."""
import os

from testbed.emulation.budgets import quota
from testbed.nodes.docker import _cpu_limit


def test_a_budget_is_a_short_quota_unless_whole_cpus_of_its_own_hold_it():
    cores = os.cpu_count() or 1
    assert _cpu_limit(0.5 / cores) == quota(0.5).docker() == {"cpu_period": 2000, "cpu_quota": 1000}
    assert _cpu_limit(1 / cores, [0]) == {}                       # pinned to one whole CPU: the cpuset holds it
    assert _cpu_limit(0.5 / cores, [0]) == quota(0.5).docker()    # half of a shared CPU: the quota holds it
