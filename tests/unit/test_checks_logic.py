"""Pure parts of the iperf3/ping checks."""
import json
import math

import pytest

from testbed.emulation import fidelity
from testbed.net.probes import parse_iperf3, parse_ping
from testbed.run.bringup.checks import (check_pairs, failure_reason, judge, path_bandwidth, path_delay,
                                       wall_duration)
from testbed.spec.models import LinkParams
from testbed.spec.graph import Graph, HostNode, LinkEdge, SwitchNode

pytestmark = pytest.mark.timing       # times itself: run with the CPUs to itself (testbed.sh test)


def lp(bw):
    return LinkParams.model_construct(bw=bw, delay=None, jitter=None, loss=None, max_queue=None)


def test_pairs_first_and_all():
    assert check_pairs(["h1", "h2", "h3"], "first") == [("h2", "h1"), ("h3", "h1")]
    assert len(check_pairs(["h1", "h2", "h3"], "all")) == 6
    assert check_pairs(["h1"], "first") == []


def test_path_bandwidth_is_the_narrowest_link_on_the_path():
    g = Graph(hosts=[HostNode("h1", "10.0.0.1"), HostNode("h2", "10.0.0.2")],
              switches=[SwitchNode("s1", 1), SwitchNode("s2", 2)],
              links=[LinkEdge("h1", "s1", lp(100)), LinkEdge("s1", "s2", lp(10)), LinkEdge("s2", "h2", lp(None))])
    assert path_bandwidth(g, "h2", "h1") == 10
    g2 = Graph(hosts=g.hosts, switches=g.switches[:1], links=[LinkEdge("h1", "s1", lp(None)), LinkEdge("h2", "s1", lp(None))])
    assert path_bandwidth(g2, "h1", "h2") is None


def test_parse_iperf3_reads_received_rate_and_raises_on_error():
    assert parse_iperf3(json.dumps({"end": {"sum_received": {"bits_per_second": 9.5e6}}})) == 9.5e6
    with pytest.raises(RuntimeError, match="unable to connect"):
        parse_iperf3(json.dumps({"error": "unable to connect to server"}))


def test_parse_ping_summary():
    text = ("5 packets transmitted, 5 received, 0% packet loss, time 812ms\n"
            "rtt min/avg/max/mdev = 0.051/0.083/0.120/0.020 ms\n")
    assert parse_ping(text) == (0.083, 0.0)
    rtt, loss = parse_ping("5 packets transmitted, 0 received, 100% packet loss")
    assert math.isnan(rtt) and loss == 100.0


def test_judge_tolerance_window_around_tcps_goodput_ceiling():
    assert judge(10_000_000, 9_560_000, 0.10) == (0.956, True)
    assert judge(10_000_000, 8_880_000, 0.10)[1] is True      # 0.929 of the ceiling
    assert judge(10_000_000, 8_500_000, 0.10)[1] is False     # 0.889 of it
    assert judge(10_000_000, 10_600_000, 0.10)[1] is False    # 1.109 of it: the shaper lets too much through
    assert judge(10_000_000, 12_000_000, 0.10)[1] is False    # shaping not applied at all
    ratio, ok = judge(None, 5.0, 0.1)
    assert math.isnan(ratio) and ok


@pytest.mark.parametrize("ratio", [0.80, 0.85, 0.86, 0.87, 0.90, 0.956, 1.0, 1.05, 1.06, 1.2])
def test_the_check_and_the_runs_verdict_judge_a_reading_alike(ratio):
    row = dict(tool="iperf3", src="h2", dst="h1", configured_bps=10_000_000, ratio=ratio)
    complaints = fidelity.shaping(fidelity.RunMeasures(wall_s=1, machine_cpus=2, checks=(row,), tolerance=0.1))
    assert judge(10_000_000, ratio * 10_000_000, 0.1)[1] is (complaints == [])


def test_failure_reason_names_pair_and_figures():
    rows = [dict(tool="iperf3", src="h2", dst="h1", configured_bps=10_000_000, measured_bps=5e6, ratio=0.5,
                 passed=False, detail="tolerance 0.1"),
            dict(tool="ping", src="h2", dst="h1", configured_bps=None, measured_bps=math.nan, ratio=math.nan,
                 passed=True, detail="0% loss")]
    reason = failure_reason(rows)
    assert reason == "check failed: iperf3 h2->h1 measured 5.00 of 10 Mbit/s (ratio 0.500, tolerance 0.1)"
    assert failure_reason(rows[1:]) is None


def test_timer_health_thresholds_and_description():
    from testbed.run.bringup.hosthealth import describe, healthy, timer_overshoot
    assert healthy({"timer_p50_ms": 0.1, "timer_p99_ms": 1.0, "timer_max_ms": 5.0})
    assert not healthy({"timer_p50_ms": 0.1, "timer_p99_ms": 40.0, "timer_max_ms": 5.0})
    assert not healthy({"timer_p50_ms": 0.1, "timer_p99_ms": 1.0, "timer_max_ms": 700.0})
    assert "up to 700 ms" in describe({"timer_p50_ms": 0.1, "timer_p99_ms": 1.0, "timer_max_ms": 700.0})
    measured = timer_overshoot(samples=20)
    assert 0 <= measured["timer_p50_ms"] <= measured["timer_p99_ms"] <= measured["timer_max_ms"]


def test_a_dilated_check_takes_its_length_where_the_round_trip_is_not_dilated():
    # 16 replayed workers at x16 with undelayed links: 3 s a pair, not 48 s
    assert wall_duration(3.0, 16, 0.0) == pytest.approx(3.0)
    assert wall_duration(3.0, 1, 0.2) == 3.0
    # 25 ms a way, x16 on the wall: the round trip, and the time TCP needs to settle, x about 16
    stretched = wall_duration(3.0, 16, 16 * 0.025)
    assert 15 * 3.0 < stretched <= 16 * 3.0
    # a small delay stretches it a little, never beyond duration x K
    assert 3.0 < wall_duration(3.0, 4, 4 * 0.0002) < wall_duration(3.0, 4, 4 * 0.002) < 12.0
    assert wall_duration(2.0, 8, 100.0) == pytest.approx(16.0, rel=1e-3) and wall_duration(2.0, 8, 1e9) <= 16.0


def test_path_delay_adds_the_links_of_the_path():
    def link(a, b, delay):
        return LinkEdge(a, b, LinkParams.model_construct(bw=None, delay=delay, jitter=None, loss=None, max_queue=None))
    g = Graph(hosts=[HostNode("h1", "10.0.0.1"), HostNode("h2", "10.0.0.2"), HostNode("h3", "10.0.0.3")],
              switches=[SwitchNode("s1", 1)],
              links=[link("h1", "s1", 0.01), link("s1", "h2", 0.02), link("s1", "h3", None)])
    assert path_delay(g, "h2", "h1") == pytest.approx(0.03)
    assert path_delay(g, "h3", "h1") == pytest.approx(0.01)
    assert path_delay(g, "h1", "h9") == 0.0


def test_the_pairs_are_pinged_at_once_and_their_rows_keep_the_pairs_order():
    import threading
    import time
    from types import SimpleNamespace
    from testbed.run.bringup.checks import run_checks

    at_once = {"now": 0, "most": 0}
    lock = threading.Lock()

    class Node:
        def __init__(self, name, address):
            self.name, self.address = name, address

        def run(self, argv, timeout=30):
            with lock:
                at_once["now"] += 1
                at_once["most"] = max(at_once["most"], at_once["now"])
            time.sleep(0.2)
            with lock:
                at_once["now"] -= 1
            return ("5 packets transmitted, 5 received, 0% packet loss, time 812ms\n"
                    f"rtt min/avg/max/mdev = 0.05/{argv[-1][-1]}.0/0.1/0.02 ms\n")

    hosts = [HostNode(f"h{i}", f"10.0.0.{i}") for i in range(1, 9)]
    graph = Graph(hosts=hosts, switches=[SwitchNode("s1", 1)], links=[LinkEdge(h.name, "s1", lp(None)) for h in hosts])
    net = SimpleNamespace(nodes={h.name: Node(h.name, h.ip) for h in hosts})
    spec = SimpleNamespace(ping=True, iperf=False, pairs="first")
    t0 = time.monotonic()
    rows = run_checks(net, graph, spec, "e", "r0")
    assert time.monotonic() - t0 < 7 * 2 * 0.2          # 7 pairs, 2 pings each: not one after another
    assert at_once["most"] > 1
    assert [(r["src"], r["dst"]) for r in rows] == [(f"h{i}", "h1") for i in range(2, 9)]
    assert all(r["passed"] and r["rtt_ms"] == 1.0 for r in rows)     # each pair's own reading (h1's address)


def test_a_pair_is_pinged_50_ms_apart_and_at_0_2_s_where_the_node_refuses_that():
    from testbed.nodes.base import NodeError
    from testbed.run.bringup.checks import ping_pair

    class Node:
        def __init__(self, refuses_fast: bool):
            self.address, self.refuses_fast, self.asked = "10.0.0.2", refuses_fast, []

        def run(self, argv, timeout=30):
            self.asked.append(argv)
            interval = argv[argv.index("-i") + 1] if "-i" in argv else None
            if interval == "0.05" and self.refuses_fast:     # old iputils, not root
                raise NodeError("ping: cannot flood; minimal interval allowed for user is 200ms")
            return "5 packets transmitted, 5 received, 0% packet loss\nrtt min/avg/max/mdev = 0.1/0.2/0.3/0.05 ms\n"

    fast = Node(refuses_fast=False)
    assert ping_pair(fast, fast) == (0.2, 0.0)
    assert [a[a.index("-i") + 1] for a in fast.asked if "-i" in a] == ["0.05"]
    slow = Node(refuses_fast=True)
    assert ping_pair(slow, slow) == (0.2, 0.0)
    assert [a[a.index("-i") + 1] for a in slow.asked if "-i" in a] == ["0.05", "0.2"]
