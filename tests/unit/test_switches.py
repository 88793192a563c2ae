"""The switch registry: one entry per spec switch kind, each with its port limit, cleanup list and
start-up answers (checked without starting anything)."""
from types import SimpleNamespace
from typing import get_args

import pytest

from testbed.net import switches
from testbed.net.network import port_problems
from testbed.cleanup import State
from testbed.spec.kinds import SWITCH_KINDS
from testbed.spec.models import SwitchConf


def test_every_spec_kind_has_an_entry_whose_bridges_cleanup_knows():
    kinds = get_args(SwitchConf.model_fields["kind"].annotation)
    assert list(kinds) == list(SWITCH_KINDS)
    lists = set(State(0).as_dict())
    for kind in kinds:
        entry = switches.switch_kind(SwitchConf(kind=kind))
        assert isinstance(entry, switches.SwitchKind) and entry.name == kind and entry.records in lists, kind


@pytest.mark.parametrize("datapath,limit", [("user", switches.USERSPACE_MAX_PORTS), ("kernel", None)])
def test_ovs_port_limit_follows_the_datapath(datapath, limit):
    found = switches.switch_kind(SwitchConf(kind="ovs", datapath=datapath)).port_limit()
    assert (found and found[0]) == limit


def test_linux_bridge_port_limit_is_the_kernels():
    assert switches.switch_kind(SwitchConf(kind="linuxbridge")).port_limit()[0] == switches.LINUX_BRIDGE_MAX_PORTS


def test_port_problems_ask_the_entry():
    star = SimpleNamespace(switches=[SimpleNamespace(name="s1")],
                           links=[SimpleNamespace(a=f"h{i}", b="s1") for i in range(60)])
    topo = SimpleNamespace(switch=SwitchConf(kind="ovs", datapath="user"))
    [(key, message)] = port_problems(topo, star)
    assert key == "topology.hosts" and "s1 (60 ports)" in message and "linuxbridge" in message
    assert port_problems(SimpleNamespace(switch=SwitchConf(kind="linuxbridge")), star) == []
    assert port_problems(SimpleNamespace(switch=SwitchConf(kind="ovs", datapath="kernel")), star) == []


def test_tx_offload_goes_off_only_on_a_userspace_datapath_without_tso():
    ovs = switches.switch_kind(SwitchConf(kind="ovs"))
    ovs.datapath, ovs.tso = "user", False
    assert ovs.tx_offload_off
    ovs.tso = True
    assert not ovs.tx_offload_off
    ovs.datapath = "kernel"
    assert not ovs.tx_offload_off
    assert not switches.switch_kind(SwitchConf(kind="linuxbridge")).tx_offload_off


def test_a_switch_not_started_here_reports_no_problem(monkeypatch):
    monkeypatch.setattr(switches, "vswitchd_running", lambda: False)
    ovs = switches.switch_kind(SwitchConf(kind="ovs"))
    assert ovs.problem() is None
    ovs.started = True
    assert "Open vSwitch stopped" in ovs.problem()
