"""Per-node resource sampling while a run trains -> usage rows and per-run summaries.

Counters come from the node interface (`Node.usage`), asked once per kind per sample, so the
monitor works the same for every node kind; CPU % is the change of CPU seconds over wall time: the
monitor's, or the node's own clock where the counters carry it (a remote sampler's latest line is up to
its interval old when taken, so the monitor's time between two lines would be off by as much)."""
from __future__ import annotations

import threading
import time


class Monitor:
    """Samples every node at `interval` seconds in a background thread.

    `nodes` maps node name -> (Node, role label)."""

    def __init__(self, nodes: dict, interval: float, experiment: str, run_id: str):
        self.nodes = nodes
        self.interval = interval
        self.base = dict(experiment=experiment, run_id=run_id)
        self.rows: list[dict] = []
        self.overhead_cpu_s = 0.0
        self.wall_s = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="monitor", daemon=True)
        self._last: dict[str, tuple[float, float]] = {}   # node -> (clock, cpu seconds) of the previous sample

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

    def sample(self) -> None:
        by_kind: dict[type, list] = {}
        for node, _ in self.nodes.values():
            by_kind.setdefault(type(node), []).append(node)
        counters = {}
        for kind, members in by_kind.items():
            counters.update(kind.usage(members))
        # stamped when the counters are in: a slow read (a server over SSH) before them would otherwise be
        # counted in the next interval's CPU and not in its time
        t = time.monotonic() - self._t0
        for name, (node, role) in self.nodes.items():
            if name not in counters:
                continue
            u = counters[name]
            self.rows.append(dict(self.base, node=name, role=role, t=round(t, 3),
                                  cpu_pct=round(self._cpu_pct(name, t if u.clock_s is None else u.clock_s, u.cpu_s), 2),
                                  rss_bytes=int(u.rss_bytes),
                                  tx_bytes=u.tx_bytes, rx_bytes=u.rx_bytes))

    def _cpu_pct(self, name: str, t: float, cpu_s: float) -> float:
        """% of one core since the previous sample, t on the clock the counters were read by (0 for the
        first, and where no new reading came; never negative when a process ended)."""
        last_t, last_cpu = self._last.get(name, (t, cpu_s))
        self._last[name] = (t, cpu_s)
        return max(0.0, 100.0 * (cpu_s - last_cpu) / (t - last_t)) if t > last_t else 0.0

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
