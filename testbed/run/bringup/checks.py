"""iperf3 and ping checks between host pairs -> one row per check. Runs through the node interface."""
from __future__ import annotations

import math
import subprocess
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor

from testbed.net.probes import parse_iperf3, parse_ping
from testbed.nodes.base import NodeError
from testbed.shaping import goodput_within

IPERF_PORT = 5201
# the round trip of an undelayed path here (veth pairs and the switch), as a check sees it; larger than
# measured (0.1-0.3 ms) so that a delayed path's check is never cut short
BASE_RTT_S = 0.001


def check_pairs(host_names: list[str], mode: str) -> list[tuple[str, str]]:
    """(client, server) pairs: every other host to the first ('first'), or every ordered pair ('all')."""
    if mode == "all":
        return [(a, b) for a in host_names for b in host_names if a != b]
    return [(h, host_names[0]) for h in host_names[1:]]


def path_links(graph, src: str, dst: str) -> list | None:
    """The links of the shortest path src -> dst (None when there is none)."""
    adjacent: dict[str, list] = {}
    for e in graph.links:
        adjacent.setdefault(e.a, []).append((e.b, e))
        adjacent.setdefault(e.b, []).append((e.a, e))
    previous = {src: None}
    queue = deque([src])
    while queue:
        node = queue.popleft()
        for nxt, edge in adjacent.get(node, []):
            if nxt not in previous:
                previous[nxt] = (node, edge)
                queue.append(nxt)
    if dst not in previous:
        return None
    links, node = [], dst
    while previous[node] is not None:
        node, edge = previous[node]
        links.append(edge)
    return links


def path_bandwidth(graph, src: str, dst: str) -> int | None:
    """Narrowest configured bandwidth on the shortest path src -> dst (None when unshaped)."""
    rates = [e.params.bw for e in path_links(graph, src, dst) or [] if e.params.bw is not None]
    return min(rates) if rates else None


def path_delay(graph, src: str, dst: str) -> float:
    """The configured one-way delay of the shortest path src -> dst, in seconds."""
    return sum(e.params.delay or 0.0 for e in path_links(graph, src, dst) or [])


def wall_duration(duration_s: float, k: float, delay_s: float) -> float:
    """How long an iperf3 check runs on the wall clock at dilation `k`, for `duration_s` as configured and
    a path of one-way delay `delay_s` on the wall clock (the configured delay x K).

    The link runs at bw / K, and what a TCP measurement needs to settle is round trips and bytes, not
    seconds. With no delay the round trip is not dilated and the shaper's burst scales with its rate:
    the check takes its configured length at any K. A delay stretches the round trip by K, and the
    check with it, at most to duration x K."""
    if k <= 1:
        return duration_s
    rtt_wall = BASE_RTT_S + 2 * delay_s
    rtt_undilated = BASE_RTT_S + 2 * delay_s / k
    return duration_s * min(k, rtt_wall / rtt_undilated)


def judge(configured: int | None, measured: float, tolerance: float) -> tuple[float, bool]:
    """Ratio measured/configured and whether it is TCP's goodput over the shaper within the tolerance."""
    if configured is None:
        return math.nan, measured > 0
    ratio = measured / configured
    return ratio, goodput_within(ratio, tolerance)


def wait_listening(node, port: int, tries: int = 50) -> bool:
    """Whether a TCP server listens on `port` in the node, asked every 0.1 s up to `tries` times."""
    for _ in range(tries):
        if f":{port}" in node.run(["ss", "-Hltn", f"sport = :{port}"], timeout=10):
            return True
        time.sleep(0.1)
    return False


def iperf3_json(client, server, duration: float, spare_s: float = 30) -> str:
    """The JSON report (iperf3 -J) of one TCP test from node `client` to a one-off iperf3 server in
    node `server`; the client is given `duration` + `spare_s` seconds."""
    srv = server.popen(["iperf3", "-s", "-1", "-p", str(IPERF_PORT)], env=server.env({}),
                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_listening(server, IPERF_PORT)     # if it never does, the client says so
        out = client.run(["iperf3", "-c", server.address, "-p", str(IPERF_PORT), "-t", f"{duration:g}", "-J"],
                         timeout=duration + spare_s)
        return out[out.find("{"):]
    finally:
        srv.kill()
        srv.wait()


def run_iperf(client, server, duration: float) -> float:
    """TCP goodput (bits/s) from node `client` to node `server`, measured by iperf3 -J."""
    return parse_iperf3(iperf3_json(client, server, duration))


# Pings the address given as $1 (never pasted into the line) every 0.2 s until it answers or $0 s
# pass, and prints the ones that answered.
_PING_ONE = 'ping -c 1 -i 0.2 -w "$0" -q "$1" >/dev/null 2>&1 && echo "ok $1"'


def unreachable(first, others, parallel: int = 32, wait_s: float = 5.0, tries: int = 2) -> list[str]:
    """Names of the nodes in `others` that do not answer a ping from node `first`: up to `parallel`
    pings at once (xargs -P in the node, one process however many hosts), each repeated every 0.2 s
    until an answer or `wait_s`; a node missed is pinged once more (`tries`).

    Every first ping floods an ARP request to every port: 128 at once across a 1000-host tree of
    OVS userspace bridges saturated ovs-vswitchd and lost 130-600 first pings, 32 lost none and
    finished sooner."""
    missing = {n.address: n.name for n in others}
    for _ in range(tries):
        if not missing:
            break
        script = f"xargs -P {int(parallel)} -n 1 sh -c '{_PING_ONE}' {wait_s:g}"
        out = first.run(["sh", "-c", f'printf "%s\\n" "$@" | {script}', "sh", *missing],
                        timeout=wait_s * (len(missing) / parallel + 2) + 60)
        for line in out.splitlines():
            missing.pop(line[3:].strip() if line.startswith("ok ") else None, None)
    return sorted(missing.values(), key=lambda name: (len(name), name))


PING_INTERVALS_S = (0.05, 0.2)     # the checks' pings: 50 ms apart, else 0.2 s (see ping_pair)


def ping_pair(src, dst) -> tuple[float, float]:
    """(RTT ms, loss %) of 5 pings src -> dst, 50 ms apart, after one that lets ARP and the switches learn;
    (nan, 100) when the node cannot ping. 0.2 s apart took 0.6 s more of every run's checks for the same
    figures (each round trip is on its own); a node whose ping refuses 50 ms to a user (older iputils:
    200 ms at least; 20221126 here allows it) is asked again at 0.2 s."""
    try:
        src.run(["ping", "-c", "1", "-W", "2", "-q", dst.address])   # ARP and switch learning first
    except NodeError:
        return math.nan, 100.0
    for interval in PING_INTERVALS_S:
        try:
            return parse_ping(src.run(["ping", "-c", "5", "-i", f"{interval:g}", "-W", "2", "-q", dst.address]))
        except NodeError:
            pass
    return math.nan, 100.0


PARALLEL_PINGS = 16     # pairs pinged at once: a ping's few packets disturb no other pair's


def run_checks(net, graph, checks_spec, experiment: str, run_id: str, progress=lambda msg: None,
               k: float = 1.0) -> list[dict]:
    """Measure every pair of `graph` (on the wall clock, at dilation `k`); rows follow the checks.csv contract.
    The pairs' pings run at once; their iperf3 tests one after another (pairs may share a link)."""
    rows = []
    names = [h.name for h in graph.hosts]
    pairs = check_pairs(names, checks_spec.pairs)
    pings = {}
    if checks_spec.ping and pairs:
        with ThreadPoolExecutor(max_workers=min(PARALLEL_PINGS, len(pairs))) as pool:
            pings = dict(zip(pairs, pool.map(lambda pair: ping_pair(net.nodes[pair[0]], net.nodes[pair[1]]), pairs)))
    for client, server in pairs:
        configured = path_bandwidth(graph, client, server)
        base = dict(experiment=experiment, run_id=run_id, src=client, dst=server, configured_bps=configured)
        src, dst = net.nodes[client], net.nodes[server]
        if checks_spec.ping:
            rtt, loss = pings[(client, server)]
            # Reachability is what must hold; loss is recorded (a stalling VM or netem loss causes it).
            rows.append(dict(base, tool="ping", measured_bps=math.nan, ratio=math.nan, rtt_ms=rtt,
                             passed=loss < 100, detail=f"{loss:g}% loss"))
            progress(f"ping {client}->{server}: {rtt:.2f} ms, {loss:g}% loss")
        if checks_spec.iperf:
            try:
                readings = []
                duration = wall_duration(checks_spec.duration, k, path_delay(graph, client, server))
                for _ in range(checks_spec.attempts):
                    readings.append(run_iperf(src, dst, duration))
                    ratio, passed = judge(configured, max(readings), checks_spec.tolerance)
                    if passed:
                        break
                measured = max(readings)
                detail = (f"tolerance {checks_spec.tolerance:g}, {duration:.3g} s" + (f" at x{k:g}" if k > 1 else "")
                          + ", best of "
                          + ", ".join(f"{r / 1e6:.2f}" for r in readings) + " Mbit/s")
            except (RuntimeError, ValueError, KeyError) as err:   # NodeError is a RuntimeError
                measured, ratio, passed, detail = math.nan, math.nan, False, str(err)[:200]
            rows.append(dict(base, tool="iperf3", measured_bps=measured, ratio=ratio, rtt_ms=math.nan,
                             passed=passed, detail=detail))
            progress(f"iperf3 {client}->{server}: {measured / 1e6:.2f} Mbit/s"
                     + (f" of {configured / 1e6:g} (ratio {ratio:.3f})" if configured else ""))
    return rows


def failure_reason(rows: list[dict]) -> str | None:
    """One sentence naming every failed check, or None when all passed."""
    failed = [r for r in rows if not r["passed"]]
    if not failed:
        return None
    parts = []
    for r in failed:
        if r["tool"] == "iperf3" and r["configured_bps"] and not math.isnan(r["measured_bps"]):
            parts.append(f"iperf3 {r['src']}->{r['dst']} measured {r['measured_bps'] / 1e6:.2f} of "
                         f"{r['configured_bps'] / 1e6:g} Mbit/s (ratio {r['ratio']:.3f}, {r['detail']})")
        else:
            parts.append(f"{r['tool']} {r['src']}->{r['dst']} failed ({r['detail']})")
    return "check failed: " + "; ".join(parts)
