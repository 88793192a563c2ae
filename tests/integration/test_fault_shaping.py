"""A set_bw fault under shaping: ovs on real Open vSwitch QoS: the re-made QoS keeps the burst that
bring-up gives (the queue's and the root class 1:fffe's), read back from OVS's rows and tc."""
import re
import subprocess
import time

import pytest

from testbed.net.network import Network
from testbed.shaping import htb_burst
from testbed.run.faults.faults import Applier
from testbed.spec import build_graph, load_spec

pytestmark = pytest.mark.integration

SPEC = """
name: fault-ovs
topology: {{template: star, hosts: 2, link: {{bw: {bw}}}, shaping: ovs}}
faults:
  - {{at: step 1, action: set_bw, link: [h2, s1], bw: {new}}}
"""


def root_class_burst(port: str) -> int:
    """The burst (bytes) of the linux-htb root class 1:fffe that OVS made on `port`."""
    out = subprocess.run(["tc", "class", "show", "dev", port], capture_output=True, text=True, check=True).stdout
    line = next(line for line in out.splitlines() if line.startswith("class htb 1:fffe root"))
    return int(re.search(r" burst (\d+)b", line).group(1))


def queue_burst(port: str) -> int:
    """other-config:burst (bits) of queue 0 of the port's QoS row."""
    def vsctl(*args):
        return subprocess.run(["ovs-vsctl", *args], capture_output=True, text=True, check=True).stdout.strip()
    queue = re.search(r"0=([0-9a-f-]+)", vsctl("get", "QoS", vsctl("get", "Port", port, "qos"), "queues")).group(1)
    return int(vsctl("get", "Queue", queue, "other_config:burst").strip('"'))


def test_set_bw_under_ovs_shaping_keeps_the_bring_up_burst(tmp_path, root, no_leftovers):
    old, new = 100_000_000, 500_000_000
    path = tmp_path / "f.yaml"
    path.write_text(SPEC.format(bw="100mbit", new="500mbit"))
    spec = load_spec(path)
    graph = build_graph(spec.topology)
    with Network(graph, spec.topology) as net:
        port = next(intf for intf, node in net.link_ends("h2", "s1") if node is None)
        other = next(intf for intf, node in net.link_ends("h1", "s1") if node is None)
        assert root_class_burst(port) == htb_burst(old), "bring-up gives the root class the queue's burst"
        applier = Applier(spec.faults, net, [], 10, tmp_path / "faults.json")
        assert applier.tick(None, [{"event": "start", "t": time.time()}, {"event": "step", "step": 1}]) is None
        assert applier.records[0].outcome == "ok"
        assert queue_burst(port) == htb_burst(new) * 8
        assert root_class_burst(port) == htb_burst(new), "the fault's QoS lost bring-up's root-class burst"
        assert root_class_burst(other) == htb_burst(old), "the other port keeps its burst"
        applier.close(None)
        assert queue_burst(port) == htb_burst(old) * 8
        assert root_class_burst(port) == htb_burst(old)
