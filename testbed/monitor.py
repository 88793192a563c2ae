"""Per-node resource sampling while a run trains -> usage rows and per-run summaries.

A node is a network namespace: its processes are those whose /proc/PID/ns/net is the node's,
and its traffic is the interface counters of that namespace (/proc/<node pid>/net/dev)."""
from __future__ import annotations

import os
import threading
import time

import psutil


def netns_inode(pid: int) -> int:
    return os.stat(f"/proc/{pid}/ns/net").st_ino


def namespace_counters(pid: int) -> tuple[int, int]:
    """(tx_bytes, rx_bytes) summed over the namespace's interfaces except loopback."""
    tx = rx = 0
    with open(f"/proc/{pid}/net/dev") as fh:
        for line in fh.readlines()[2:]:
            name, data = line.split(":", 1)
            if name.strip() == "lo":
                continue
            fields = data.split()
            rx += int(fields[0])
            tx += int(fields[8])
    return tx, rx


class Monitor:
    """Samples every node at `interval` seconds in a background thread.

    `nodes` maps node name -> (pid of a process in its namespace, role label)."""

    def __init__(self, nodes: dict[str, tuple[int, str]], interval: float, experiment: str, run_id: str):
        self.nodes = nodes
        self.interval = interval
        self.base = dict(experiment=experiment, run_id=run_id)
        self.rows: list[dict] = []
        self.overhead_cpu_s = 0.0
        self.wall_s = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="monitor", daemon=True)
        self._procs: dict[int, psutil.Process] = {}
        self._inodes = {name: netns_inode(pid) for name, (pid, _) in nodes.items()}

    def __enter__(self) -> "Monitor":
        self._t0 = time.monotonic()
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.wall_s = time.monotonic() - self._t0

    def _loop(self) -> None:
        while True:
            start_cpu = time.thread_time()
            self.sample()
            self.overhead_cpu_s += time.thread_time() - start_cpu
            if self._stop.wait(self.interval):
                self.sample()
                return

    def _members(self) -> dict[int, list[psutil.Process]]:
        """Processes grouped by network-namespace inode (cached so cpu_percent has a baseline)."""
        groups: dict[int, list[psutil.Process]] = {}
        wanted = set(self._inodes.values())
        for pid in psutil.pids():
            try:
                inode = netns_inode(pid)
            except OSError:
                continue
            if inode in wanted:
                proc = self._procs.get(pid)
                if proc is None:
                    proc = self._procs[pid] = psutil.Process(pid)
                    proc.cpu_percent(None)
                groups.setdefault(inode, []).append(proc)
        return groups

    def sample(self) -> None:
        t = time.monotonic() - self._t0
        groups = self._members()
        for name, (pid, role) in self.nodes.items():
            cpu = rss = 0.0
            for proc in groups.get(self._inodes[name], []):
                try:
                    cpu += proc.cpu_percent(None)
                    rss += proc.memory_info().rss
                except psutil.Error:
                    continue
            try:
                tx, rx = namespace_counters(pid)
            except OSError:
                continue
            self.rows.append(dict(self.base, node=name, role=role, t=round(t, 3), cpu_pct=round(cpu, 2),
                                  rss_bytes=int(rss), tx_bytes=tx, rx_bytes=rx))

    @property
    def overhead_pct(self) -> float:
        """CPU the sampler itself used, as % of one core over the monitored wall time."""
        return 100.0 * self.overhead_cpu_s / self.wall_s if self.wall_s else 0.0


def summarize(rows: list[dict]) -> dict:
    """Per-run figures: mean CPU over nodes, peak memory, bytes sent in total, mean throughput per node."""
    if not rows:
        return {}
    by_node: dict[str, list[dict]] = {}
    for r in rows:
        by_node.setdefault(r["node"], []).append(r)
    cpu_means, peaks, sent, throughputs = [], [], 0, []
    for samples in by_node.values():
        cpu_means.append(sum(s["cpu_pct"] for s in samples) / len(samples))
        peaks.append(max(s["rss_bytes"] for s in samples))
        first, last = samples[0], samples[-1]
        moved = (last["tx_bytes"] - first["tx_bytes"]) + (last["rx_bytes"] - first["rx_bytes"])
        sent += last["tx_bytes"] - first["tx_bytes"]
        span = last["t"] - first["t"]
        throughputs.append(moved * 8 / span if span > 0 else 0.0)
    return {
        "cpu_mean_pct": round(sum(cpu_means) / len(cpu_means), 2),
        "mem_peak_bytes": int(max(peaks)),
        "net_bytes_total": int(sent),
        "net_throughput_mean_bps": round(sum(throughputs) / len(throughputs), 1),
    }
