"""What tests/integration/test_netem_vm.py runs in the VM (tests/vmguest.py), and how it reads it.

Two network namespaces, h1 and h2, joined by a veth pair (h1-eth0, h2-eth0) as a Mininet link
joins two hosts. Each step shapes that link with the testbed's OWN command builders, issued the
way the testbed issues them, then measures it:

- bring-up: `shaping.link_plan` of both ends (tc: HTB or TBF with netem under it), fed per
  namespace to `tc -batch -` through `network.batch_lines`, as `Network._apply_shaping` does;
- faults: the operations of `faults.ACTIONS["set_delay"|"set_loss"]` (apply, then undo) for a
  `faults.Context` of that link, each run in its namespace, as the fault applier's `node.run` does.

Measured with ping (RTT, loss, spread) and iperf3 -J, read by testbed/net/probes.py's parsers.
Nothing here builds a tc command itself, except the `tc qdisc del` that returns the link to its
unshaped state between steps (what a fresh link of a bring-up is)."""
from __future__ import annotations

import math
import re
import shlex
import statistics
from dataclasses import dataclass

from testbed import shaping
from testbed.net.network import batch_lines
from testbed.net.probes import parse_iperf3, parse_ping
from testbed.run.faults.faults import ACTIONS, Context, link_key, settle
from testbed.spec.models import Fault, LinkParams

HOSTS = ("h1", "h2")
INTFS = ("h1-eth0", "h2-eth0")
ADDRS = ("10.0.0.1", "10.0.0.2")
MACS = ("02:00:00:00:00:01", "02:00:00:00:00:02")
PING_INTERVAL_S = 0.01   # 10 ms, the span of NETEM's jitter (45-55 ms an end): netem with a rate sends no
                         # packet before the one ahead of it, so pings any closer would bunch the delays
IPERF_SECONDS = 6

# The configured links. Values large enough to stand out of TCG's noise (base RTT ~1 ms), small
# enough that the whole job takes about a minute.
NETEM = LinkParams(bw="10mbit", delay="50ms", jitter="5ms", loss="5%")    # every netem knob + a rate
GOODPUT = LinkParams(bw="10mbit", delay="20ms")       # RTT 40 ms: BDP 50 kB, 35 frames << the queue
FAULTED = LinkParams(bw="10mbit", delay="10ms")       # the link the faults change
FAULTS = {"set_delay": Fault(at="step 1", action="set_delay", link=list(HOSTS), delay="40ms"),
          "set_loss": Fault(at="step 1", action="set_loss", link=list(HOSTS), loss="10%")}

# Tolerances (stated in docs/checks-and-shaping.md too)
RTT_REL = 0.03          # mean RTT within 3 % of the configured delays (+ the base RTT), ...
RTT_SLACK_MS = 0.75     # ... plus 0.75 ms per netem qdisc a ping crosses (timer wake-ups under emulation:
                        # 0.15-0.6 ms measured per qdisc)
LOSS_SIGMAS = 4         # ping loss within 4 binomial standard deviations of the round trip's rate
JITTER_RANGE = (0.7, 1.5)   # RTT spread / the spread netem's uniform jitter gives (both ends): the right order
GOODPUT_RANGE = (0.85, 1.01)   # goodput / (TCP's payload ceiling x rate)


@dataclass(frozen=True)
class Step:
    """One step of the job: shaping lines (sh), then a measurement: ping COUNT or iperf3."""
    name: str
    lines: tuple
    ping: int = 0
    iperf: bool = False
    params: LinkParams | None = None      # what the link is configured as during the measurement
    qdisc: str = "htb"


def ends() -> list[shaping.End]:
    return [shaping.End(intf, host, False) for intf, host in zip(INTFS, HOSTS)]


def bring_up_lines(params: LinkParams, qdisc: str) -> list[str]:
    """The link shaped as bring-up shapes it: link_plan, one `tc -batch` per namespace."""
    plan = shaping.link_plan(ends(), params, "tc", qdisc)
    lines = []
    for host, cmds in plan.tc.items():
        lines += batch_lines(f"ip netns exec {host} tc -batch -", [" ".join(args) for args in cmds])
    return lines


def context() -> Context:
    key = link_key(FAULTS["set_delay"])
    return Context(ends={key: list(zip(INTFS, HOSTS))}, params={key: FAULTED}, shaping="tc", qdisc="htb")


def fault_lines(action: str, ctx: Context, undo: bool = False) -> list[str]:
    """A fault's operations (apply or undo) as the applier runs them: each command in its host. `ctx`
    is the run's one Context, as the applier keeps it (it knows what shaping is in force): the
    operations are taken to succeed, as the applier records them once they did (faults.settle)."""
    fault = FAULTS[action]
    op_list = (ACTIONS[action].undo if undo else ACTIONS[action].apply)(ctx, fault)
    settle(ctx, ok=True)
    lines = []
    for op in op_list:
        assert op.kind == "cmd" and op.where in HOSTS, op
        line = f"ip netns exec {op.where} {shlex.join(op.arg)}"
        lines.append(line if op.check else f"{line} || true")
    return lines


def unshaped_lines() -> list[str]:
    return [f"ip netns exec {h} tc qdisc del dev {i} root 2>/dev/null || true" for h, i in zip(HOSTS, INTFS)]


def steps() -> list[Step]:
    faulted_delay = FAULTED.model_copy(update={"delay": FAULTS["set_delay"].delay})
    faulted_loss = FAULTED.model_copy(update={"loss": FAULTS["set_loss"].loss})
    ctx = context()     # one for the faults, in the order the applier would use it
    set_delay, delay_undone = fault_lines("set_delay", ctx), fault_lines("set_delay", ctx, undo=True)
    set_loss, loss_undone = fault_lines("set_loss", ctx), fault_lines("set_loss", ctx, undo=True)
    return [
        Step("base", tuple(unshaped_lines()), ping=100),
        Step("htb_netem", (*unshaped_lines(), *bring_up_lines(NETEM, "htb")), ping=400, params=NETEM),
        Step("tbf_netem", (*unshaped_lines(), *bring_up_lines(NETEM, "tbf")), ping=400, params=NETEM, qdisc="tbf"),
        Step("htb_goodput", (*unshaped_lines(), *bring_up_lines(GOODPUT, "htb")), iperf=True, params=GOODPUT),
        Step("tbf_goodput", (*unshaped_lines(), *bring_up_lines(GOODPUT, "tbf")), iperf=True, params=GOODPUT,
             qdisc="tbf"),
        Step("faulted_link", (*unshaped_lines(), *bring_up_lines(FAULTED, "htb")), ping=100, params=FAULTED),
        Step("set_delay", tuple(set_delay), ping=150, params=faulted_delay),
        Step("set_loss", (*delay_undone, *set_loss), ping=400, params=faulted_loss),
        Step("set_loss_undone", tuple(loss_undone), ping=100, params=FAULTED),
    ]


SETUP = [
    *(f"ip netns add {h}" for h in HOSTS),
    f"ip link add {INTFS[0]} type veth peer name {INTFS[1]}",
    *(line for h, i, a, m in zip(HOSTS, INTFS, ADDRS, MACS) for line in (
        f"ip link set {i} netns {h}",
        f"ip -n {h} link set {i} address {m}",
        f"ip -n {h} addr add {a}/24 dev {i}",
        f"ip -n {h} link set lo up",
        f"ip -n {h} link set {i} up")),
    # fixed neighbours: a lost ARP packet must not count as a lost ping
    f"ip -n {HOSTS[0]} neigh replace {ADDRS[1]} lladdr {MACS[1]} dev {INTFS[0]} nud permanent",
    f"ip -n {HOSTS[1]} neigh replace {ADDRS[0]} lladdr {MACS[0]} dev {INTFS[1]} nud permanent",
    f"ip netns exec {HOSTS[1]} iperf3 -s -D",
    f"ip netns exec {HOSTS[0]} ping -n -c 5 -i 0.2 {ADDRS[1]} >/dev/null",   # warm up
]


# A testbed bring-up in the guest: Mininet and Open vSwitch (kernel datapath) from the image, the
# repository and its venv shared read-only from this machine. The same 2-host star twice: without
# delay (the base RTT across the switch), then with it: the run's own checks, then pings.
BRINGUP_DELAY_S = 0.010      # per link; h1 -> s1 -> h2 crosses two links, each delayed at both ends
BRINGUP_SPEC = """name: netem-vm-bringup
topology:
  template: star
  hosts: 2
  link: {bw: 10mbit, delay: 10ms}
checks: {iperf: true, ping: true, duration: 3s}
"""
BRINGUP_PY = r"""import json, subprocess, sys, time
sys.path.insert(0, "/repo")
from testbed.net.network import Network
from testbed.run.bringup.checks import run_checks
from testbed.spec import build_graph, load_spec

PING = ["ping", "-n", "-c", "100", "-i", "0.02", "-W", "2"]
spec = load_spec(sys.argv[1])
unshaped = spec.topology.model_copy(update={"link": spec.topology.link.model_copy(update={"delay": None})})
with Network(build_graph(unshaped), unshaped) as net:
    base_ping = net.nodes["h1"].run([*PING, net.nodes["h2"].address], timeout=60)
graph = build_graph(spec.topology)
out, t0 = {"base_ping": base_ping}, time.monotonic()
with Network(graph, spec.topology) as net:
    out["up_s"] = time.monotonic() - t0
    out["datapath"], out["notes"] = net.datapath, net.notes
    out["checks"] = run_checks(net, graph, spec.checks, spec.name, "vm")
    h1, h2 = net.nodes["h1"], net.nodes["h2"]
    out["ping"] = h1.run([*PING, h2.address], timeout=60)
    out["qdisc"] = h1.run(["tc", "qdisc", "show"]) + subprocess.run(["tc", "qdisc", "show"], capture_output=True,
                                                                    text=True).stdout
    t1 = time.monotonic()
out["down_s"] = time.monotonic() - t1
json.dump(out, sys.stdout, default=str)
"""
BRINGUP_TIMEOUT_S = 300


def bringup_lines(venv: str) -> list[str]:
    # read-only shares that nothing changes while the guest runs: its page cache may keep what it read
    nine_p = "mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=262144,cache=loose"
    return ["log bringup", f"mkdir -p /repo {venv}", f"{nine_p} repo /repo", f"{nine_p} venv {venv}",
            f"cd /repo && PYTHONDONTWRITEBYTECODE=1 timeout {BRINGUP_TIMEOUT_S} {venv}/bin/python /job/bringup.py "
            f"/job/bringup.yaml > $O/bringup.json 2> $O/bringup.log", "cd /tmp"]


def share_files() -> dict:
    return {"bringup.py": BRINGUP_PY, "bringup.yaml": BRINGUP_SPEC}


def script(step_list: list[Step] | None = None, venv: str | None = None) -> str:
    """The job (POSIX sh, run by the guest's init with out/ in the share). A shaping line that
    fails is written to out/<step>.errors with its output in out/<step>.log. With `venv` (this
    machine's venv, shared with the repository), a testbed bring-up follows (bringup_lines)."""
    out = ["set -u", "O=/job/out", "cd /tmp",
           'log() { echo "== $* at $(cut -d" " -f1 /proc/uptime) s"; }',
           # run STEP LINE: LINE (a shell command) with its output in out/STEP.log; out/STEP.errors if it fails
           'run() { echo "$ $2" >> "$O/$1.log"; sh -c "$2" >> "$O/$1.log" 2>&1 || echo "$2" >> "$O/$1.errors"; }',
           "log setup"]
    out += [f"run setup {shlex.quote(line)}" for line in SETUP]
    for step in step_list or steps():
        n = step.name
        out.append(f"log {n}")
        out += [f"run {n} {shlex.quote(line)}" for line in step.lines]
        for h, i in zip(HOSTS, INTFS):
            out.append(f"ip netns exec {h} tc qdisc show dev {i} >> $O/{n}.qdisc")
        if step.ping:
            out.append(f"ip netns exec {HOSTS[0]} ping -n -c {step.ping} -i {PING_INTERVAL_S} -W 2 {ADDRS[1]} "
                       f"> $O/{n}.ping 2>&1")
        if step.iperf:
            out.append(f"ip netns exec {HOSTS[0]} iperf3 -c {ADDRS[1]} -t {IPERF_SECONDS} -J > $O/{n}.json 2>&1")
    if venv:
        out += bringup_lines(venv)
    out.append("log done")
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------- reading and expecting (pure)

@dataclass(frozen=True)
class PingStats:
    sent: int
    rtt_ms: float         # mean RTT (parse_ping)
    loss_pct: float       # parse_ping
    sd_ms: float          # standard deviation of the RTTs

    @classmethod
    def parse(cls, text: str) -> "PingStats":
        rtt, loss = parse_ping(text)
        times = [float(t) for t in re.findall(r"time=([\d.]+) ms", text)]
        sent = re.search(r"(\d+) packets transmitted", text)
        return cls(int(sent.group(1)) if sent else 0, rtt, loss,
                   statistics.pstdev(times) if len(times) > 1 else math.nan)


def goodput_bps(text: str) -> float:
    return parse_iperf3(text)


def expected_rtt_ms(params: LinkParams, base_ms: float, links: int = 1) -> float:
    """Both ends of each link delay: RTT = 2 x the one-way delay per link crossed + the unshaped RTT."""
    return 2 * links * (params.delay or 0) * 1000 + base_ms


def rtt_tolerance_ms(params: LinkParams, links: int = 1) -> float:
    return RTT_REL * 2 * links * (params.delay or 0) * 1000 + RTT_SLACK_MS * 2 * links


def round_trip_loss(params: LinkParams) -> float:
    """A ping is lost when its request or its reply is: 1 - (1 - p)^2, p per end (fraction)."""
    p = (params.loss or 0) / 100
    return 1 - (1 - p) ** 2


def loss_bounds_pct(params: LinkParams, pings: int, sigmas: float = LOSS_SIGMAS) -> tuple[float, float]:
    """The binomial spread of the loss (%) that `pings` pings see."""
    p = round_trip_loss(params)
    spread = sigmas * math.sqrt(p * (1 - p) / pings)
    return max(0.0, p - spread) * 100, min(1.0, p + spread) * 100


def jitter_sd_ms(params: LinkParams) -> float:
    """netem draws each end's delay uniformly in delay +- jitter (no distribution table given): a
    standard deviation of jitter / sqrt(3) per end, jitter x sqrt(2/3) for a round trip."""
    return (params.jitter or 0) * 1000 * math.sqrt(2 / 3)


def goodput_bounds_bps(params: LinkParams) -> tuple[float, float]:
    """TCP payload per frame caps goodput at TCP_GOODPUT_CEILING x rate; the queue (netem's 1000
    frames) holds the bandwidth-delay product, so the window never limits it below that."""
    ceiling = shaping.TCP_GOODPUT_CEILING * params.bw
    return GOODPUT_RANGE[0] * ceiling, GOODPUT_RANGE[1] * ceiling


def bdp_frames(params: LinkParams) -> float:
    return params.bw / 8 * 2 * (params.delay or 0) / shaping.MTU_FRAME
