"""What the switch carries, without a network: the links' demand by strategy, the dilation auto raises for
it, the verdict's switch reason (in both directions), a replayed point resolved against a capacity, and the
measurement's cache."""
import json

import pytest

from testbed.emulation import fidelity
from testbed.emulation import replayed_compute as replay
from testbed.run.point import point as rp
from testbed.run.point import switch_capacity
from spec_helpers import load
from testbed.spec import expand_points

CAL = {"real_step_s": 0.020, "real_cpu_s": 0.021, "stand_in_step_s": 0.002, "stand_in_cpu_s": 0.002,
       "overshoot_s": 0.0, "layers": [[0.004, 0.006], [0.002, 0.008]]}
MBIT = 1_000_000


def test_the_links_that_send_at_once_are_every_ring_worker_or_the_servers_links_both_ways():
    assert replay.switch_demand_bps("allreduce", 16, 1, 100 * MBIT) == 1600 * MBIT
    assert replay.switch_demand_bps("allreduce", 1, 1, 100 * MBIT) == 0         # one node sends nothing
    assert replay.switch_demand_bps("ps", 16, 2, 100 * MBIT) == 400 * MBIT
    assert replay.switch_demand_bps("allreduce", 4, 1, None) == 0               # unshaped links: no figure


def test_auto_slows_the_world_until_the_links_fit_what_the_switch_carried():
    assert replay.switch_factor(1600 * MBIT, None) == 1.0                       # not measured: no term
    k = replay.switch_factor(1600 * MBIT, 800 * MBIT)
    assert k % replay.AUTO_STEP == 0 and 1600 / k <= 800 * replay.SWITCH_UTILISATION
    assert 1600 / (k - replay.AUTO_STEP) > 800 * replay.SWITCH_UTILISATION     # the smallest such K
    assert replay.switch_factor(40 * MBIT, 800 * MBIT) == 1.0
    assert replay.switch_factor(400_000 * MBIT, 800 * MBIT) == replay.AUTO_MAX


def test_the_verdict_flags_links_that_asked_more_than_the_switch_carried_and_only_those():
    nodes = tuple(fidelity.NodeCpu(f"h{i}", cores=1.0, used_s=5.0) for i in range(16))
    calm = tuple(replay.NodeReplay(n.name, 0.02, 0.01) for n in nodes)

    def said(demand, k):
        return fidelity.verdict(fidelity.RunMeasures(wall_s=60, machine_cpus=2, dilation=k, nodes=nodes,
                                                     replay=calm, switch_demand=(demand, 800 * MBIT)))
    over = said(16 * 25_000 * MBIT, 16)
    assert over.startswith("degraded: switch:") and "25000 Mbit/s" in over and "800 Mbit/s" in over
    assert said(16 * 100 * MBIT, 4) == "ok"                    # 400 Mbit/s of 800 on the wall clock
    assert said(16 * 100 * MBIT, 1.5) != "ok"                  # 1067 of 800
    unknown = fidelity.RunMeasures(wall_s=60, machine_cpus=2, dilation=1, nodes=nodes, replay=calm,
                                   switch_demand=(16 * 25_000 * MBIT, None))
    assert fidelity.verdict(unknown) == "ok"


FAST = """
name: r
topology: {hosts: 4, link: {bw: 1gbit}, host: {cores: 1}}
emulation: {dilation: auto, compute: replay}
workload: {engine: pytorch, model: mlp, model_params: {width: 8, depth: 1}, batch_per_worker: 32}
checks: {iperf: false, ping: false}
"""


def resolved(tmp_path, text, switch):
    (point,) = rp.resolve_all(expand_points(load(tmp_path, text)), 2, calibrate=lambda *a: CAL, switch=switch)
    return point


def test_a_replayed_point_of_fast_links_takes_the_switchs_factor_and_carries_its_figures(tmp_path):
    asked = []

    def switch(kind):
        asked.append(kind)
        return 800 * MBIT
    fast, unknown = resolved(tmp_path, FAST, switch), resolved(tmp_path, FAST, lambda kind: None)
    assert asked == ["ovs"] and fast.switch == (4000 * MBIT, 800 * MBIT) and unknown.switch == (4000 * MBIT, None)
    # a small gradient: its CPU alone lets 4 nodes run at x4; their 4 Gbit/s need x6.25 of 800 Mbit/s at 80 %
    assert unknown.k < fast.k == replay.switch_factor(4000 * MBIT, 800 * MBIT) == 6.25
    slow = resolved(tmp_path, FAST.replace("1gbit", "100mbit"), switch)
    assert slow.switch == (400 * MBIT, 800 * MBIT)
    assert slow.k == resolved(tmp_path, FAST.replace("1gbit", "100mbit"), lambda kind: None).k
    many = resolved(tmp_path, FAST.replace("hosts: 4", "hosts: 64").replace("1gbit", "25gbit"), switch)
    assert many.k == replay.AUTO_MAX                  # 1.6 Tbit/s would need x2500: auto stops at x16
    assert replay.switch_reasons(*many.switch, many.k)[0].startswith("switch: the links that send at once ask")


def test_the_capacity_is_measured_once_per_switch_kind_and_a_bad_cache_file_is_measured_again(tmp_path, monkeypatch):
    monkeypatch.setattr(switch_capacity, "CACHE", tmp_path)
    monkeypatch.setattr(switch_capacity.os, "geteuid", lambda: 0)
    measured, said = [], []

    def measure(kind):
        measured.append(kind)
        return 640e6
    assert switch_capacity.cached("ovs") is None
    assert switch_capacity.capacity("ovs", said.append, measure) == 640e6
    assert switch_capacity.capacity("ovs", said.append, measure) == 640e6 and measured == ["ovs"]
    assert "640 Mbit/s" in said[-1] and switch_capacity.cached("ovs") == 640e6
    (cached,) = tmp_path.glob("*.json")
    assert json.loads(cached.read_text())["inputs"]["kind"] == "ovs"
    for planted in ('{"bps": "fast"}', '{"bps": -1}', '[1]', '{"bp'):
        cached.write_text(planted)
        assert switch_capacity.cached("ovs") is None
        assert switch_capacity.capacity("ovs", said.append, measure) == 640e6
    assert measured == ["ovs"] * 5
    switch_capacity.capacity("linuxbridge", said.append, measure)
    assert measured[-1] == "linuxbridge" and len(list(tmp_path.glob("*.json"))) == 2


def test_without_root_nothing_is_measured(tmp_path, monkeypatch):
    monkeypatch.setattr(switch_capacity, "CACHE", tmp_path)
    monkeypatch.setattr(switch_capacity.os, "geteuid", lambda: 1000)
    assert switch_capacity.capacity("ovs", measure=lambda kind: pytest.fail("measured without root")) is None
