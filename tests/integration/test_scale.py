"""1000 hosts on one machine: a tree of OVS userspace bridges (fanout 32: 33 bridges, none
past the 57 ports one forwards for) and a star on one Linux bridge, every host reachable from the first,
addresses beyond one /24, and nothing left behind. Each takes about 1-3 minutes here; the times print."""
import time

import pytest

from testbed.run.bringup.checks import unreachable
from testbed.net.network import Network
from testbed.spec import build_graph, load_spec

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("topology", [
    "{template: tree, fanout: 32, hosts: 1000, link: {bw: 100mbit}}",
    "{template: star, hosts: 1000, link: {bw: 100mbit}, switch: {kind: linuxbridge}}",
])
def test_a_thousand_hosts_come_up_all_reachable_and_tear_down_clean(tmp_path, root, no_leftovers, topology):
    path = tmp_path / "big.yaml"
    path.write_text(f"name: big\ntopology: {topology}\n")
    spec = load_spec(path)
    graph = build_graph(spec.topology)
    assert len(graph.hosts) == 1000 and graph.hosts[-1].cidr == "10.0.3.232/22"
    started = time.monotonic()
    with Network(graph, spec.topology) as net:
        up = time.monotonic() - started
        first = net.nodes["h1"]
        assert first.run(["tc", "class", "show", "dev", "h1-eth0"]).count("rate 100Mbit") == 1
        checked = time.monotonic()
        lost = unreachable(first, [net.nodes[h.name] for h in graph.hosts[1:]])
        reach = time.monotonic() - checked
        stopping = time.monotonic()
    down = time.monotonic() - stopping
    print(f"{topology}: {len(graph.switches)} switches, up {up:.1f} s, every host pinged from h1 in "
          f"{reach:.1f} s, down {down:.1f} s")
    assert lost == [], f"{len(lost)} hosts did not answer h1: {lost[:20]}"
