"""This machine's switching capacity, measured on real Mininet, Open vSwitch and iperf3 (two TCP pairs at
once through one unshaped switch), cached outside the clone and read back, and the network it used gone.
Replayed runs take their `dilation: auto` and their verdict's switch reason from it."""
import pytest

from testbed.run.point import switch_capacity

pytestmark = pytest.mark.integration


def test_the_switch_carries_a_measured_rate_read_back_from_its_cache_once_measured(root, no_leftovers):
    said = []
    carried = switch_capacity.capacity("ovs", said.append)
    # two TCP pairs through a userspace-datapath bridge on this machine's CPUs: from tens of Mbit/s on a
    # starved VM to tens of Gbit/s on a large machine, never the 0 or the absurd of a broken measurement
    assert carried is not None and 10e6 < carried < 400e9
    assert switch_capacity.cached("ovs") == carried
    again = []
    assert switch_capacity.capacity("ovs", again.append) == carried and again == []     # not measured again
    fresh = switch_capacity.measure_now("ovs", pairs=1, duration=1.0)
    assert 10e6 < fresh < 400e9
