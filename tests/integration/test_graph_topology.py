"""template: graph on this machine: the example WAN (topologies/examples/wan_graph.graphml) with its
distance delays is refused before anything starts where the kernel has no netem, naming the key; the
same file bandwidth-only comes up, every host reaches every other, and a short all-reduce trains."""
import json
from pathlib import Path

import pandas as pd
import pytest

from cli import cli
from testbed.net.network import Network
from testbed.run.bringup.checks import run_checks
from testbed.shaping import kernel_has_qdisc
from testbed.spec import build_graph, load_spec

REPO = Path(__file__).resolve().parents[2]
WAN = REPO / "topologies" / "examples" / "wan.yaml"
pytestmark = pytest.mark.integration


def _line_of(key: str) -> int:
    return next(i for i, line in enumerate(WAN.read_text().splitlines(), 1) if line.strip().startswith(key + ":"))


def test_distance_delays_are_refused_without_netem_naming_the_key(tmp_path, root, no_leftovers):
    if kernel_has_qdisc("netem"):
        pytest.skip("this kernel has netem: the delays would be emulated, not refused")
    out = tmp_path / "wan"
    proc = cli("run", WAN, "--out", out, "--quiet", "--no-report", timeout=120)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    text = proc.stdout + proc.stderr
    assert f"wan.yaml:{_line_of('graph_delay')}: topology.graph_delay:" in text, text[-2000:]
    assert "netem" in text and "graph_delay: none" in text
    assert not (out / "runs.csv").exists()
    proc = cli("validate", WAN, "--set", "topology.graph_delay=none", timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "6 switches" in proc.stdout and "2 dropped to keep a spanning tree" in proc.stdout


def test_bandwidth_only_wan_every_host_reaches_every_other(tmp_path, root, no_leftovers):
    spec = load_spec(WAN, ["topology.graph_delay=none", "checks.iperf=false", "checks.pairs=all"])
    graph = build_graph(spec.topology)
    assert len(graph.switches) == 6 and len(graph.links) == 4 + 5
    with Network(graph, spec.topology) as net:
        rows = run_checks(net, graph, spec.checks, spec.name, "r0")
    pings = [r for r in rows if r["tool"] == "ping"]
    assert len(pings) == 4 * 3
    failed = [(r["src"], r["dst"], r.get("detail")) for r in pings if not r["passed"]]
    assert not failed, failed


def test_bandwidth_only_wan_trains(tmp_path, root, no_leftovers):
    out = tmp_path / "wan"
    proc = cli("run", WAN, "--out", out, "--quiet", "--no-report", "--set", "topology.graph_delay=none",
               "--set", "checks.attempts=1", "--set", "checks.duration=2s", "--set", "checks.fail_run=false",
               timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    row = pd.read_csv(out / "runs.csv").iloc[0]
    assert row["status"] == "ok", row["reason"]
    assert row["hosts"] == 4 and row["workers"] == 4 and row["training_time_s"] > 0
    checks = pd.read_csv(out / "checks.csv")
    pings, iperf = checks[checks["tool"] == "ping"], checks[checks["tool"] == "iperf3"]
    assert len(pings) == 3 and pings["passed"].all()
    # the narrowest link on every path is a host's 100mbit access link (the backbone is 100mbit-2.5gbit)
    assert len(iperf) == 3 and (iperf["configured_bps"] == 100_000_000).all()
    assert ((iperf["ratio"] > 0.10) & (iperf["ratio"] <= 1.0)).all(), iperf[["src", "dst", "ratio", "detail"]]
    topology = json.loads((out / "runs" / row["run_id"] / "topology.json").read_text())
    assert [s["label"] for s in topology["switches"]] == ["London", "Paris", "Amsterdam", "Frankfurt", "Geneva", "Milan"]
    assert len(topology["links"]) == 9 and len(topology["dropped"]) == 2
    assert not any("delay" in link for link in topology["links"])
