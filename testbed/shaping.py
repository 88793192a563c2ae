"""Link shaping: tc (HTB or TBF, netem for delay/loss) or OVS QoS queues, and a probe of
what the kernel can do. Command builders are pure so they can be checked without root."""
from __future__ import annotations

import functools
import subprocess
from dataclasses import dataclass, field
from typing import NamedTuple

from testbed.spec.rules.capabilities import NO_NETEM, SHAPERS, needs_netem, rate_problem

MTU_FRAME = 1514            # bytes of a full Ethernet frame on the wire (MTU 1500 + header)
TCP_GOODPUT_CEILING = 1448 / 1514   # payload per full frame with TCP timestamps
QOS_TAG = "external_ids:dltestbed=1"


def goodput_within(ratio: float, tolerance: float) -> bool:
    """Whether a TCP reading of `ratio` x the configured rate is the shaper's rate within `tolerance`.
    A shaper counts whole frames and TCP delivers only their payload, so a perfect one reads
    TCP_GOODPUT_CEILING, not 1: the check and the run's verdict both judge against that."""
    return abs(ratio / TCP_GOODPUT_CEILING - 1) <= tolerance


BURST_S = 0.001             # the shaper's burst in time at the rate: what may pass at once after an idle moment


def htb_burst(rate_bps: int) -> int:
    """Burst (bytes) of a shaped link: 1 ms of traffic, at least 2 frames.

    A burst is what the shaper lets through at once after an idle moment, which a real link of that
    rate never does: training's exchanges are bursts after the compute's idle time, so each of them
    would take up to the burst's time too little. iproute2's default burst is rounded from the timer
    resolution and comes out too small at high rates, which caps throughput below the limit; 1 ms
    of traffic reaches the rate here at 10 Mbit/s to 1 Gbit/s (iperf3 at 0.93-0.96 of it) while a
    113 kB message takes its time at the rate within a few per cent (bench/burst_shaping.py)."""
    return max(2 * MTU_FRAME, int(rate_bps / 8 * BURST_S))


GSO_MAX = 65536


def gso_max_size(rate_bps: int) -> int:
    """The largest segment a shaped interface may hand its qdisc (`ip link set ... gso_max_size`): an
    eighth of the burst, at least 2 frames. HTB charges a segment of up to 64 kB only after sending it
    whole, so without this limit each burst after an idle moment passed up to 64 kB more at once (a
    113 kB exchange at 100 Mbit/s took 4.2 ms instead of 9.5)."""
    return min(GSO_MAX, max(2 * MTU_FRAME, htb_burst(rate_bps) // 8))


def htb_quantum(rate_bps: int) -> int:
    """Quantum in bytes, set explicitly so the kernel never warns that r2q gives a silly value."""
    return min(max(rate_bps // 8 // 10, MTU_FRAME), 200_000)


def netem_args(params) -> list[str]:
    args = []
    if params.delay is not None:
        args += ["delay", f"{params.delay * 1e6:.0f}us"]
        if params.jitter is not None:
            args += [f"{params.jitter * 1e6:.0f}us"]
    if params.loss is not None:
        args += ["loss", f"{params.loss}%"]
    if params.max_queue is not None:
        args += ["limit", str(params.max_queue)]
    return args


def tc_commands(intf: str, params, qdisc: str = "htb") -> list[list[str]]:
    """tc argument lists (without the leading 'tc') that shape egress of `intf`."""
    cmds: list[list[str]] = []
    if params.bw is None and not needs_netem(params):
        if params.max_queue is not None:
            cmds.append(["qdisc", "replace", "dev", intf, "root", "pfifo", "limit", str(params.max_queue)])
        return cmds
    parent = ["root"]
    if params.bw is not None:
        rate = f"{params.bw}bit"
        burst = htb_burst(params.bw)
        if qdisc == "tbf":
            limit = (params.max_queue or 1000) * MTU_FRAME
            cmds.append(["qdisc", "replace", "dev", intf, "root", "handle", "1:", "tbf", "rate", rate,
                         "burst", str(burst), "limit", str(limit)])
            parent = ["parent", "1:"]
        else:
            cmds.append(["qdisc", "replace", "dev", intf, "root", "handle", "1:", "htb", "default", "1"])
            cmds.append(["class", "replace", "dev", intf, "parent", "1:", "classid", "1:1", "htb",
                         "rate", rate, "ceil", rate, "burst", str(burst), "cburst", str(burst),
                         "quantum", str(htb_quantum(params.bw))])
            parent = ["parent", "1:1"]
    if needs_netem(params):
        cmds.append(["qdisc", "replace", "dev", intf, *parent, "handle", "10:", "netem", *netem_args(params)])
    elif params.max_queue is not None and qdisc == "htb":
        cmds.append(["qdisc", "replace", "dev", intf, *parent, "handle", "10:", "pfifo",
                     "limit", str(params.max_queue)])
    return cmds


UNSHAPED_BPS = 100 * 10**9    # the class of traffic a selective shaper lets pass


def selective_tc_commands(intf: str, params, peers: list[str], spared_port: int) -> list[list[str]]:
    """HTB on `intf` that shapes, as `params` say, only IPv4 traffic to `peers`, and never TCP
    `spared_port` either way (SSH: the machine must stay reachable to undo the shaping). The rest
    goes to an unshaped class."""
    shaped = params if params.bw is not None else params.model_copy(update={"bw": UNSHAPED_BPS})
    cmds = tc_commands(intf, shaped, "htb")
    cmds[0] = [*cmds[0][:-1], "2"]           # root htb: unclassified traffic to 1:2
    cmds.insert(2, ["class", "replace", "dev", intf, "parent", "1:", "classid", "1:2", "htb", "rate",
                    f"{UNSHAPED_BPS}bit", "quantum", str(htb_quantum(UNSHAPED_BPS))])
    filters = [["filter", "add", "dev", intf, "parent", "1:", "protocol", "ip", "prio", "1", "u32",
                "match", "ip", way, str(spared_port), "0xffff", "flowid", "1:2"] for way in ("sport", "dport")]
    filters += [["filter", "add", "dev", intf, "parent", "1:", "protocol", "ip", "prio", "2", "u32",
                 "match", "ip", "dst", f"{peer}/32", "flowid", "1:1"] for peer in peers]
    return cmds + filters


def ovs_qos_command(port: str, rate_bps: int) -> list[str]:
    """ovs-vsctl arguments for the thesis's per-port linux-htb QoS with one queue (figure 16).

    The queue's burst (bits) is set for the rate as on the tc path: OVS's default is one timer
    tick plus one frame (about 1.5 kB), which held 1 Gbit/s to about half its rate here."""
    r = str(rate_bps)
    return ["--", "set", "Port", port, "qos=@q",
            "--", "--id=@q", "create", "qos", "type=linux-htb", f"other-config:max-rate={r}",
            "queues:0=@q0", QOS_TAG,
            "--", "--id=@q0", "create", "queue", f"other-config:min-rate={r}", f"other-config:max-rate={r}",
            f"other-config:burst={htb_burst(rate_bps) * 8}", QOS_TAG]


def ovs_root_class_command(port: str, rate_bps: int) -> list[str]:
    """tc arguments that give OVS's linux-htb root class (1:fffe, whose burst OVS does not expose)
    the same burst as its queue, so it does not cap the queue either."""
    rate, burst = f"{rate_bps}bit", str(htb_burst(rate_bps))
    return ["class", "change", "dev", port, "parent", "1:", "classid", "1:fffe", "htb", "rate", rate,
            "ceil", rate, "burst", burst, "cburst", burst]


class End(NamedTuple):
    """One end of a link as shaping sees it: its interface, who runs commands for it (a Mininet
    node, a host's name, a Node; None: this machine's root namespace) and whether it is a switch's
    port (OVS QoS shapes only those)."""
    intf: str
    holder: object
    switch_port: bool


@dataclass
class Plan:
    """What shapes some links, in the order it must run: `reset` (tc, failure expected: nothing may be
    there) then `tc` per holder; then every `ovs` (ovs-vsctl arguments) in this machine's root
    namespace, and only then `root_classes` for every port in `qos`, since OVS rewrites a port's
    classes whenever it reconfigures its bridges."""
    reset: dict = field(default_factory=dict)         # holder -> [tc arguments]
    tc: dict = field(default_factory=dict)            # holder -> [tc arguments]
    link: dict = field(default_factory=dict)          # holder -> [ip arguments]: segment sizes (gso_max_size)
    ovs: list = field(default_factory=list)           # [ovs-vsctl arguments]
    qos: dict = field(default_factory=dict)           # OVS QoS port -> its rate: its root class's step

    @property
    def root_classes(self) -> list[list[str]]:
        """tc arguments giving each QoS port's root class its queue's burst (ovs_root_class_command)."""
        return [ovs_root_class_command(port, rate) for port, rate in self.qos.items()]

    def add(self, other: "Plan") -> "Plan":
        for mine, theirs in ((self.reset, other.reset), (self.tc, other.tc), (self.link, other.link)):
            for holder, cmds in theirs.items():
                mine.setdefault(holder, []).extend(cmds)
        self.ovs += other.ovs
        self.qos.update(other.qos)
        return self


def gso_command(intf: str, rate_bps: int) -> list[str]:
    """ip arguments that cap the segments `intf` hands its shaper (gso_max_size)."""
    return ["link", "set", "dev", intf, "gso_max_size", str(gso_max_size(rate_bps))]


def tc_tree(params, qdisc: str = "htb") -> tuple:
    """Which qdiscs and classes tc_commands builds for `params`, whatever their values. Two parameter
    sets of the same tree differ only in values, which tc's `replace` commands change in place."""
    return (params.bw is not None and qdisc, needs_netem(params), params.max_queue is not None)


def link_plan(ends, params, mode: str = "tc", qdisc: str = "htb", replace: bool = False,
              qos_rates: dict | None = None, in_force=None) -> Plan:
    """The plan that shapes one link's ends as `params` say: with mode tc, tc on every end; with mode
    ovs, an OVS QoS queue on each switch port, then the root classes' burst (OVS QoS shapes
    bandwidth only). replace: the link is shaped already (a fault, a trace): where `in_force` (the
    parameters shaping it now) builds the same tc tree, its values are changed in place; otherwise,
    or when in_force is None (not known, e.g. after a failed change), what is there is removed
    first (then packets queued on it are dropped and, until the new tree is in, the link is unshaped).

    qos_rates (port -> rate), for a running network: its OVS QoS ports in force, updated here with
    this link's. OVS rewrites every port's root class whenever it reconfigures its bridges, so after a
    change each of them needs its step again."""
    plan = Plan()
    rates = plan.qos if qos_rates is None else qos_rates
    for end in ends:
        if params.bw is not None:     # both ends, also under OVS QoS: the hosts' segments cross the switch whole
            plan.link.setdefault(end.holder, []).append(gso_command(end.intf, params.bw))
        if mode == "ovs":
            if end.switch_port and params.bw is not None:
                plan.ovs.append(ovs_qos_command(end.intf, params.bw))
                rates[end.intf] = params.bw
            elif end.switch_port and replace:
                plan.ovs.append(["clear", "Port", end.intf, "qos"])
                rates.pop(end.intf, None)
            continue
        in_place = replace and in_force is not None and tc_tree(in_force, qdisc) == tc_tree(params, qdisc)
        if replace and not in_place:
            plan.reset.setdefault(end.holder, []).append(["qdisc", "del", "dev", end.intf, "root"])
        cmds = tc_commands(end.intf, params, qdisc)
        if in_place:    # an HTB qdisc has no values to change (its class has) and refuses a change
            cmds = [c for c in cmds if c[:2] != ["qdisc", "replace"] or "htb" not in c]
        if cmds:
            plan.tc.setdefault(end.holder, []).extend(cmds)
    if plan.ovs:
        plan.qos = dict(rates)
    return plan


TSO_KEY = "other_config:userspace-tso-enable"


def ensure_userspace_tso(ovs_ctl: str) -> bool:
    """Turn on OVS's userspace TCP segmentation offload; True when ovs-vswitchd runs with it.

    Without it the userspace datapath needs TX checksum offload off on the links (TCP hangs
    otherwise), so every MTU frame crosses ovs-vswitchd alone: about 0.85-0.95 Gbit/s unshaped on
    2 cores, too little for 1 Gbit/s shaping. With it, 64 kB TCP segments cross whole (4-5 Gbit/s).
    The setting is read when ovs-vswitchd starts, so it is restarted, but only with no bridges."""
    if _vsctl("--if-exists", "get", "Open_vSwitch", ".", TSO_KEY) == '"true"':
        return True
    if _vsctl("list-br"):
        return False   # someone's bridges: never restart their switch
    _vsctl("set", "Open_vSwitch", ".", f"{TSO_KEY}=true")
    proc = subprocess.run([ovs_ctl, "restart", "--system-id=random"], capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"restarting Open vSwitch for userspace TSO failed: {proc.stderr.strip() or proc.stdout.strip()}")
    return _vsctl("--if-exists", "get", "Open_vSwitch", ".", TSO_KEY) == '"true"'


def _vsctl(*args: str) -> str:
    return subprocess.run(["ovs-vsctl", *args], capture_output=True, text=True, timeout=30).stdout.strip()


@functools.lru_cache(maxsize=None)
def kernel_has_qdisc(kind: str) -> bool:
    """Try the qdisc on loopback inside a throwaway network namespace (nothing is left behind)."""
    trial = {
        "htb": "htb default 1",
        "tbf": "tbf rate 1mbit burst 15140 limit 15140",
        "netem": "netem delay 1ms",
        "pfifo": "pfifo limit 10",
    }[kind]
    proc = subprocess.run(["unshare", "-n", "sh", "-c", f"tc qdisc add dev lo root {trial}"],
                          capture_output=True, text=True)
    return proc.returncode == 0


def capability_problems(topology, graph) -> list[tuple[str, str]]:
    """(key path, message) for every shaping request this kernel or tool cannot honour."""
    problems: list[tuple[str, str]] = []
    wants_netem = [e for e in graph.links if needs_netem(e.params)]
    if wants_netem:
        if not SHAPERS[topology.shaping].netem:
            problems.append(("topology.shaping", f"{SHAPERS[topology.shaping].what}; delay, jitter and loss "
                             "need shaping: tc"))
        elif not kernel_has_qdisc("netem"):
            key = _first_set_key(wants_netem[0].params)
            if getattr(topology, "graph", None) and topology.graph_delay == "distance" \
                    and key == "topology.link.delay" and topology.link.delay is None:   # the graph's distances
                problems.append(("topology.graph_delay", f"the graph's links get delays from their distances; "
                                 f"they {NO_NETEM}. Set topology.graph_delay: none to run bandwidth only, or run "
                                 "on a kernel with netem"))
            else:
                problems.append((key, f"{NO_NETEM}. Remove them or run on a kernel with netem"))
    for edge in graph.links:
        why = rate_problem(edge.params.bw, topology.shaping) if edge.params.bw is not None else None
        if why:
            problems.append(("topology.link.bw", f"link {edge.a}-{edge.b}: {why}"))
            break
    if any(e.params.bw is not None for e in graph.links) and topology.shaping == "tc":
        qdisc = topology.qdisc
        if not kernel_has_qdisc(qdisc):
            problems.append(("topology.qdisc", f"this kernel lacks the {qdisc} qdisc"))
    return problems


def _first_set_key(params) -> str:
    for name in ("delay", "jitter", "loss"):
        if getattr(params, name) is not None:
            return f"topology.link.{name}"
    return "topology.link"
