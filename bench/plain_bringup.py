"""The plain-Mininet side of bench/bringup.py: the same network written the way Mininet's own examples
do it (mininet/examples/tree1024.py, treeping64.py), with nothing of the testbed.

Star or tree of N hosts (hosts on the leaves in order, `fanout` per leaf switch, as the testbed's
template tree), OVSBridge on the userspace datapath or LinuxBridge, TCLink shaping both ends of every
link with HTB at --bw Mbit/s, TX checksum offload off on the host ends with --tx-off (as the testbed
does on the OVS userspace datapath when OVS's userspace TSO is off). Prints one JSON line: up and down
seconds, hosts reachable from h1.

Run as root:  .venv/bin/python bench/plain_bringup.py --hosts 64 --template tree --fanout 32
"""
from __future__ import annotations

import argparse
import json
import tempfile
import time
from functools import partial
from pathlib import Path

from mininet.link import TCLink
from mininet.log import setLogLevel
from mininet.net import Mininet
from mininet.node import OVSBridge
from mininet.nodelib import LinuxBridge
from mininet.topo import Topo


class Tree(Topo):
    """`hosts` hosts on a tree of switches, `fanout` children each (a star: one switch)."""

    def build(self, hosts=8, fanout=8, star=False):
        depth = 1
        while not star and fanout ** depth < hosts:
            depth += 1
        self.wanted, self.switches_made, self.hosts_made = hosts, 0, 0
        self._switch(depth if not star else 1, hosts if star else fanout)

    def _switch(self, depth, fanout):
        self.switches_made += 1
        switch = self.addSwitch(f"s{self.switches_made}")
        for _ in range(fanout):
            if depth == 1 and self.hosts_made < self.wanted:
                self.hosts_made += 1
                self.addLink(self.addHost(f"h{self.hosts_made}"), switch)
            elif depth > 1:
                self.addLink(self._switch(depth - 1, fanout), switch)
        return switch


def reachable_from_first(net: Mininet) -> int:
    """Hosts answering a ping from h1, 128 pings at once (as testbed.run.bringup.checks.unreachable does)."""
    first, others = net.hosts[0], net.hosts[1:]
    with tempfile.NamedTemporaryFile("w", suffix=".txt") as addresses:   # a node's command line is short
        addresses.write("".join(f"{h.IP()}\n" for h in others))
        addresses.flush()
        out = first.cmd(f"xargs -P 128 -n 1 sh -c 'ping -c 1 -i 0.2 -w 5 -q \"$0\" >/dev/null 2>&1 && echo ok' "
                        f"< {addresses.name}")
    return 1 + out.count("ok")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hosts", type=int, default=8)
    ap.add_argument("--template", choices=("star", "tree"), default="star")
    ap.add_argument("--fanout", type=int, default=8)
    ap.add_argument("--switch", choices=("ovs", "linuxbridge"), default="ovs")
    ap.add_argument("--bw", type=float, default=100, help="Mbit/s")
    ap.add_argument("--tx-off", action="store_true", help="ethtool -K tx off on every host end (the testbed "
                    "does it on the OVS userspace datapath unless OVS's userspace TSO is on)")
    args = ap.parse_args()
    setLogLevel("error")
    topo = Tree(hosts=args.hosts, fanout=args.fanout, star=args.template == "star")
    switch = partial(OVSBridge, datapath="user") if args.switch == "ovs" else LinuxBridge
    nf = Path("/proc/sys/net/bridge/bridge-nf-call-iptables")   # dockerd's FORWARD DROP would stop bridged pings
    nf_was = nf.read_text() if args.switch == "linuxbridge" and nf.exists() else None
    if nf_was is not None:
        nf.write_text("0")
    t0 = time.monotonic()
    net = Mininet(topo=topo, switch=switch, link=partial(TCLink, bw=args.bw), controller=None,
                  autoSetMacs=True, waitConnected=False)
    net.start()
    if args.tx_off:
        for host in net.hosts:
            host.cmd(f"ethtool -K {host.defaultIntf()} tx off")
    up = time.monotonic() - t0
    reachable = reachable_from_first(net)
    t1 = time.monotonic()
    net.stop()
    if nf_was is not None:
        nf.write_text(nf_was)
    print(json.dumps({"up_s": up, "down_s": time.monotonic() - t1, "reachable": reachable, "hosts": args.hosts}))


if __name__ == "__main__":
    main()
