"""tc and OVS command builders, checked without root."""
from testbed.shaping import (GSO_MAX, MTU_FRAME, TCP_GOODPUT_CEILING, End, gso_max_size, htb_burst, htb_quantum,
                             link_plan, ovs_qos_command, ovs_root_class_command, tc_commands)
from testbed.spec.models import LinkParams


def params(**kw):
    return LinkParams.model_construct(**{**dict(bw=None, delay=None, jitter=None, loss=None, max_queue=None), **kw})


def test_htb_burst_is_two_frames_at_low_rates_and_one_ms_at_high_rates():
    assert htb_burst(10_000_000) == 2 * MTU_FRAME
    assert htb_burst(100_000_000) == 12_500
    assert htb_burst(10_000_000_000) == 10_000_000_000 // 8 // 1000


def test_segments_are_capped_to_an_eighth_of_the_burst_within_two_frames_and_64k():
    assert gso_max_size(10_000_000) == gso_max_size(100_000_000) == 2 * MTU_FRAME
    assert gso_max_size(1_000_000_000) == 125_000 // 8
    assert gso_max_size(100_000_000_000) == GSO_MAX


def test_a_plan_caps_the_segments_of_every_shaped_end():
    ends = [End("h1-eth0", "h1", False), End("s1-eth1", None, True)]
    tc = link_plan(ends, params(bw=1_000_000_000))
    assert tc.link == {"h1": [["link", "set", "dev", "h1-eth0", "gso_max_size", "15625"]],
                       None: [["link", "set", "dev", "s1-eth1", "gso_max_size", "15625"]]}
    assert link_plan(ends, params(bw=1_000_000_000), mode="ovs").link == tc.link   # OVS QoS too: the hosts' segments
    assert link_plan(ends, params()).link == {}


def test_quantum_stays_within_kernel_friendly_bounds():
    assert htb_quantum(1_000) == MTU_FRAME
    assert htb_quantum(100_000_000) == 200_000
    assert htb_quantum(10_000_000) == 125_000


def test_htb_commands_rate_ceil_burst():
    cmds = tc_commands("h1-eth0", params(bw=10_000_000))
    assert cmds[0] == ["qdisc", "replace", "dev", "h1-eth0", "root", "handle", "1:", "htb", "default", "1"]
    cls = cmds[1]
    assert cls[cls.index("rate") + 1] == "10000000bit" and cls[cls.index("ceil") + 1] == "10000000bit"
    assert cls[cls.index("burst") + 1] == str(htb_burst(10_000_000))
    assert len(cmds) == 2


def test_rates_above_one_gbit_are_passed_through_unchanged():
    cls = tc_commands("x", params(bw=40_000_000_000))[1]
    assert "40000000000bit" in cls


def test_tbf_variant_and_queue_limit():
    cmds = tc_commands("x", params(bw=20_000_000, max_queue=50), qdisc="tbf")
    assert cmds == [["qdisc", "replace", "dev", "x", "root", "handle", "1:", "tbf", "rate", "20000000bit",
                     "burst", str(htb_burst(20_000_000)), "limit", str(50 * MTU_FRAME)]]


def test_max_queue_under_htb_adds_a_pfifo_leaf():
    cmds = tc_commands("x", params(bw=1_000_000, max_queue=30))
    assert cmds[-1] == ["qdisc", "replace", "dev", "x", "parent", "1:1", "handle", "10:", "pfifo", "limit", "30"]


def test_netem_leaf_carries_delay_jitter_loss():
    cmds = tc_commands("x", params(bw=1_000_000, delay=0.005, jitter=0.001, loss=0.5))
    assert cmds[-1] == ["qdisc", "replace", "dev", "x", "parent", "1:1", "handle", "10:", "netem",
                        "delay", "5000us", "1000us", "loss", "0.5%"]


def test_unshaped_link_gets_no_commands():
    assert tc_commands("x", params()) == []


def test_ovs_qos_matches_the_thesis_recipe_and_is_tagged():
    args = ovs_qos_command("s1-eth1", 10_000_000)
    text = " ".join(args)
    assert "set Port s1-eth1 qos=@q" in text
    assert "create qos type=linux-htb other-config:max-rate=10000000 queues:0=@q0" in text
    assert "create queue other-config:min-rate=10000000 other-config:max-rate=10000000" in text
    assert f"other-config:burst={htb_burst(10_000_000) * 8}" in text, "burst in bits, sized as on the tc path"
    assert text.count("external_ids:dltestbed=1") == 2


def test_ovs_root_class_gets_the_same_burst():
    assert ovs_root_class_command("s1-eth1", 1_000_000_000) == [
        "class", "change", "dev", "s1-eth1", "parent", "1:", "classid", "1:fffe", "htb", "rate", "1000000000bit",
        "ceil", "1000000000bit", "burst", "125000", "cburst", "125000"]


def test_tcp_ceiling_is_payload_per_frame():
    assert abs(TCP_GOODPUT_CEILING - 0.9564) < 1e-3


class FakeOvs:
    """ovs-vsctl / ovs-ctl stand-in: the TSO key, the bridges, and what was run."""

    def __init__(self, tso: str = "", bridges: str = ""):
        self.tso, self.bridges, self.calls = tso, bridges, []

    def vsctl(self, *args):
        self.calls.append(args)
        if args[0] == "set":
            self.tso = '"true"'
        return {"list-br": self.bridges}.get(args[0], self.tso)

    def run(self, cmd, **kw):
        import subprocess
        self.calls.append(tuple(cmd))
        return subprocess.CompletedProcess(cmd, 0, "", "")


def test_userspace_tso_set_and_vswitchd_restarted_when_no_bridges(monkeypatch):
    from testbed import shaping
    fake = FakeOvs()
    monkeypatch.setattr(shaping, "_vsctl", fake.vsctl)
    monkeypatch.setattr(shaping.subprocess, "run", fake.run)
    assert shaping.ensure_userspace_tso("ovs-ctl") is True
    assert ("set", "Open_vSwitch", ".", "other_config:userspace-tso-enable=true") in fake.calls
    assert ("ovs-ctl", "restart", "--system-id=random") in fake.calls


def test_userspace_tso_already_on_restarts_nothing(monkeypatch):
    from testbed import shaping
    fake = FakeOvs(tso='"true"', bridges="s1")
    monkeypatch.setattr(shaping, "_vsctl", fake.vsctl)
    monkeypatch.setattr(shaping.subprocess, "run", fake.run)
    assert shaping.ensure_userspace_tso("ovs-ctl") is True
    assert all(c[0] not in ("set", "ovs-ctl") for c in fake.calls)


def test_userspace_tso_never_restarts_a_switch_with_bridges(monkeypatch):
    from testbed import shaping
    fake = FakeOvs(bridges="br-theirs")
    monkeypatch.setattr(shaping, "_vsctl", fake.vsctl)
    monkeypatch.setattr(shaping.subprocess, "run", fake.run)
    assert shaping.ensure_userspace_tso("ovs-ctl") is False
    assert all(c[0] not in ("set", "ovs-ctl") for c in fake.calls)


# ---- the plan builder (bring-up, faults and remote shaping all use it) ----------------------------

from testbed.shaping import End, Plan, link_plan  # noqa: E402

HOST, PORT = End("h2-eth0", "h2", False), End("s1-eth2", None, True)


def test_tc_plan_shapes_every_end_with_its_holders_commands():
    plan = link_plan([HOST, PORT], params(bw=10_000_000), "tc", "htb")
    assert plan.tc == {"h2": tc_commands("h2-eth0", params(bw=10_000_000)),
                       None: tc_commands("s1-eth2", params(bw=10_000_000))}
    assert plan.reset == {} and plan.ovs == [] and plan.root_classes == []


def test_tc_plan_replacing_removes_the_old_root_first_and_unshaped_leaves_only_that():
    plan = link_plan([HOST, PORT], params(), "tc", replace=True)
    assert plan.reset == {"h2": [["qdisc", "del", "dev", "h2-eth0", "root"]],
                          None: [["qdisc", "del", "dev", "s1-eth2", "root"]]}
    assert plan.tc == {}
    assert link_plan([HOST, PORT], params(), "tc") == Plan()


def test_ovs_plan_shapes_switch_ports_only_then_gives_their_root_class_the_burst():
    plan = link_plan([HOST, PORT], params(bw=1_000_000_000), "ovs")
    assert plan.ovs == [ovs_qos_command("s1-eth2", 1_000_000_000)]
    assert plan.root_classes == [ovs_root_class_command("s1-eth2", 1_000_000_000)]
    assert plan.tc == {} and plan.reset == {}


def test_ovs_plan_on_a_running_network_redoes_every_ports_root_class_with_the_rates_in_force():
    """OVS rewrites every QoS port's root class when it reconfigures: a change to one port's QoS
    needs the burst step on all of them, each at the rate it has now."""
    rates = {"s1-eth1": 100_000_000, "s1-eth2": 100_000_000}
    plan = link_plan([HOST, PORT], params(bw=500_000_000), "ovs", replace=True, qos_rates=rates)
    assert plan.ovs == [ovs_qos_command("s1-eth2", 500_000_000)]
    assert rates == {"s1-eth1": 100_000_000, "s1-eth2": 500_000_000}
    assert plan.root_classes == [ovs_root_class_command("s1-eth1", 100_000_000),
                                 ovs_root_class_command("s1-eth2", 500_000_000)]
    cleared = link_plan([HOST, PORT], params(), "ovs", replace=True, qos_rates=rates)
    assert cleared.ovs == [["clear", "Port", "s1-eth2", "qos"]]
    assert cleared.root_classes == [ovs_root_class_command("s1-eth1", 100_000_000)]


def test_plans_add_up_keeping_each_holders_order():
    a = link_plan([HOST], params(bw=1_000_000), "tc")
    b = link_plan([End("h2-eth1", "h2", False)], params(bw=2_000_000), "tc")
    c = link_plan([End("s1-eth1", None, True)], params(bw=3_000_000), "ovs")
    total = Plan().add(a).add(b).add(c)
    assert total.tc == {"h2": a.tc["h2"] + b.tc["h2"]}
    assert total.ovs == c.ovs and total.qos == {"s1-eth1": 3_000_000}


def test_selective_shaping_sends_ssh_and_unlisted_traffic_to_an_unshaped_class():
    from testbed.shaping import UNSHAPED_BPS, selective_tc_commands
    cmds = [" ".join(c) for c in selective_tc_commands("eth0", LinkParams(bw="10mbit", max_queue=50),
                                                      ["10.1.1.2", "10.1.1.3"], 2200)]
    assert cmds[0] == "qdisc replace dev eth0 root handle 1: htb default 2"
    assert cmds[1].startswith("class replace dev eth0 parent 1: classid 1:1 htb rate 10000000bit")
    assert cmds[2] == f"class replace dev eth0 parent 1: classid 1:2 htb rate {UNSHAPED_BPS}bit quantum 200000"
    assert "qdisc replace dev eth0 parent 1:1 handle 10: pfifo limit 50" in cmds
    ssh = [c for c in cmds if "prio 1" in c]
    assert [c.split(" match ")[1] for c in ssh] == ["ip sport 2200 0xffff flowid 1:2", "ip dport 2200 0xffff flowid 1:2"]
    peers = [c.split(" match ")[1] for c in cmds if "prio 2" in c]
    assert peers == ["ip dst 10.1.1.2/32 flowid 1:1", "ip dst 10.1.1.3/32 flowid 1:1"]


def test_selective_shaping_of_delay_alone_puts_netem_under_an_unlimited_class():
    from testbed.shaping import UNSHAPED_BPS, selective_tc_commands
    cmds = [" ".join(c) for c in selective_tc_commands("eth0", LinkParams(delay="5ms"), ["10.1.1.2"], 22)]
    assert cmds[1].startswith(f"class replace dev eth0 parent 1: classid 1:1 htb rate {UNSHAPED_BPS}bit")
    assert "qdisc replace dev eth0 parent 1:1 handle 10: netem delay 5000us" in cmds
