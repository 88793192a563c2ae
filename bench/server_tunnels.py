"""Raw capacity, RTT and MTU between two local servers: root namespaces, an SSH tunnel, VXLAN.

What a link between servers can carry before any shaping, for the cluster edition's choice of
tunnel: iperf3 (TCP, one stream) and ping between srv1 and srv2 of `run_experiment.py cluster up 2`
over (a) their docker network directly, (b) cluster.py's SSH tunnel (`ssh -o Tunnel=Ethernet -w`,
a tap pair; ssh's default cipher, and AES-GCM), (c) a VXLAN pair on the same interfaces, at the
MTU the kernel gives it: the underlay's less 50 (`DLTB_CLUSTER_MTU=1500`, after `cluster down`,
shows the 1450 case; above that it is refused). The plain tool in the same run: iperf3 over
loopback inside srv1 (the CPU ceiling) and the root namespaces; every path is given as a ratio to
the root namespaces.
Also the largest ping that passes with DF set (the path MTU) on each.

Uses the servers that run (starts two if none; removes only what it started). Its tunnel, VXLAN
device, addresses and iperf3 port are its own (tap7, dltbvx7, 10.254.7.0/24, port 5299), so it
leaves a cluster run using the same servers alone. Run as root, under the dev lock:

    flock /tmp/dltb-devlock .venv/bin/python bench/server_tunnels.py [--duration 5] [--repeats 3]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from testbed.run.bringup import hosthealth  # noqa: E402
from testbed.cluster import servers  # noqa: E402
from testbed.nodes import docker_engine  # noqa: E402

PORT = 5299
TAP, VX, VNI, VX_PORT = "tap7", "dltbvx7", 4207, 4799
AES = "aes128-gcm@openssh.com"    # ssh's default is chacha20-poly1305; AES-GCM uses the CPU's AES instructions
NET = "10.254.7"      # inside the two servers' own namespaces only


def sh(c, script: str, check: bool = True) -> str:
    code, out = c.exec_run(["sh", "-c", script])
    text = out.decode(errors="replace")
    if check and code != 0:
        raise RuntimeError(f"{c.name}: `{script}` exited {code}: {text.strip()}")
    return text


def iperf(client, server, address: str, seconds: float) -> tuple[float, int]:
    """(Mbit/s received, retransmits) of one TCP stream client -> address."""
    sh(server, f"iperf3 -s -1 -D -p {PORT} -B {address}")
    time.sleep(0.5)
    out = json.loads(sh(client, f"iperf3 -J -p {PORT} -t {seconds} -c {address}"))
    end = out["end"]
    return end["sum_received"]["bits_per_second"] / 1e6, int(end["sum_sent"].get("retransmits", 0))


def rtt_ms(client, address: str) -> float:
    out = sh(client, f"ping -q -n -c 20 -i 0.05 {address}")
    return float(out.rsplit("=", 1)[1].split("/")[1])     # rtt min/avg/max/mdev = a/b/c/d ms


def path_mtu(client, address: str) -> int:
    """Largest IP packet that crosses with DF set (ping payload + 28)."""
    lo, hi = 0, 8972
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if sh(client, f"ping -q -n -M do -c 1 -W 1 -s {mid} {address} >/dev/null 2>&1 && echo ok", check=False).strip():
            lo = mid
        else:
            hi = mid - 1
    return lo + 28


def measure(name: str, a, b, address: str, args, rows: list) -> None:
    runs = [iperf(a, b, address, args.duration) for _ in range(args.repeats)]
    mbps = statistics.median(r[0] for r in runs)
    rows.append({"path": name, "mbps": mbps, "runs": [round(r[0]) for r in runs],
                 "retransmits": sum(r[1] for r in runs), "rtt_ms": rtt_ms(a, address),
                 "mtu": path_mtu(a, address)})
    print(f"  {name:<28} {mbps:8.0f} Mbit/s (runs {', '.join(str(round(r[0])) for r in runs)}; "
          f"{rows[-1]['retransmits']} retransmits)  rtt {rows[-1]['rtt_ms']:.3f} ms  path MTU {rows[-1]['mtu']}",
          flush=True)


def ssh_tunnel(a, b, addr_b: str, cipher: str | None = None):
    """cluster.py's makeTunnel on tap7 (ssh's default cipher, or `cipher`): returns the pid (in server a)
    of the ssh that carries it."""
    for c in (a, b):
        sh(c, f"ip tuntap add dev {TAP} mode tap user root")
    flags = f"-c {cipher} " if cipher else ""
    exe = a.client.api.exec_create(a.id, ["sh", "-c", f"echo $$ > /tmp/{TAP}.pid; exec ssh -n {flags}-o Tunnel=Ethernet "
                                           f"-w 7:7 root@{addr_b} 'echo @; sleep 100000' >/tmp/{TAP}.out 2>&1"])
    a.client.api.exec_start(exe["Id"], detach=True)
    deadline = time.monotonic() + 20
    while "@" not in sh(a, f"cat /tmp/{TAP}.out 2>/dev/null", check=False):
        if time.monotonic() > deadline:
            raise RuntimeError(f"the SSH tunnel did not come up: {sh(a, f'cat /tmp/{TAP}.out', check=False)}")
        time.sleep(0.1)
    for i, c in enumerate((a, b), 1):
        sh(c, f"ip addr add {NET}.{i}/30 dev {TAP} && ip link set {TAP} up")
    return sh(a, f"cat /tmp/{TAP}.pid").strip()


def vxlan(a, b, addr: dict) -> None:
    """A VXLAN pair at the MTU the kernel gives it (the underlay's less 50)."""
    for i, (c, other) in enumerate(((a, b), (b, a)), 1):
        sh(c, f"ip link add {VX} type vxlan id {VNI} remote {addr[other.name]} dstport {VX_PORT} dev eth0"
              f" && ip addr add {NET}.{4 + i}/30 dev {VX} && ip link set {VX} up")


def undo(a, b, pid: str | None) -> None:
    if pid:
        sh(a, f"kill {pid}", check=False)
    for c in (a, b):
        sh(c, f"ip link del {TAP} 2>/dev/null; ip link del {VX} 2>/dev/null; rm -f /tmp/{TAP}.pid /tmp/{TAP}.out", check=False)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--duration", type=float, default=5.0, help="seconds per iperf3 run")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    started = not [s for s in servers.status() if s.state == "running"]
    found = servers.up(2, progress=lambda m: print(f"[cluster] {m}", file=sys.stderr))
    cli = docker_engine.client()
    a, b = (cli.containers.get(s.container) for s in found[:2])
    addr = {a.name: found[0].address, b.name: found[1].address}
    health = hosthealth.timer_overshoot()
    print(f"{time.strftime('%Y-%m-%d %H:%M')}  load {os.getloadavg()[0]:.2f}  timer overshoot p99 "
          f"{health['timer_p99_ms']} ms (max {health['timer_max_ms']} ms)  {args.repeats} x {args.duration:g} s")
    print(f"srv1 -> srv2, one TCP stream (iperf3), underlay MTU {servers.MTU}")
    rows: list[dict] = []
    pid = None
    try:
        measure("loopback in srv1 (CPU)", a, a, "127.0.0.1", args, rows)
        measure("root ns (docker bridge)", a, b, addr[b.name], args, rows)
        pid = ssh_tunnel(a, b, addr[b.name])
        measure(f"SSH tunnel ({TAP}, MTU 1500)", a, b, f"{NET}.2", args, rows)
        undo(a, b, pid)
        pid = ssh_tunnel(a, b, addr[b.name], AES)
        measure("SSH tunnel, aes128-gcm", a, b, f"{NET}.2", args, rows)
        undo(a, b, pid)
        pid = None
        vxlan(a, b, addr)
        mtu = sh(a, f"cat /sys/class/net/{VX}/mtu").strip()
        measure(f"VXLAN (kernel MTU {mtu})", a, b, f"{NET}.6", args, rows)
    finally:
        undo(a, b, pid)
        cli.close()
        if started:
            servers.down()
    base = rows[1]["mbps"]
    print("ratio to the root namespaces: " + ", ".join(f"{r['path']} {r['mbps'] / base:.2f}" for r in rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
