"""What an experiment's summary tables show, computed once: the facts the report's sentences and
the thesis-beside-measured table are both written from."""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pandas as pd


class NodeTrend(NamedTuple):
    """Mean training time against nodes at one strategy and bandwidth (figures 15/18)."""
    strategy: str
    bw_bps: float
    hosts: tuple[int, ...]
    times_s: tuple[float, ...]
    shape: str              # "grows" or "falls" with every node added, else "mixed" (of the means)
    overlaps: tuple = ()    # (nodes, nodes) of neighbouring points whose repeats' ranges of time overlap

    @property
    def gap(self) -> float | None:
        """Time with the most nodes over time with one node, when one node was measured."""
        return self.times_s[-1] / self.times_s[0] if self.hosts[0] == 1 else None


class BandwidthTrend(NamedTuple):
    """Mean training time against bandwidth at one strategy and node count above one."""
    strategy: str
    hosts: int
    bws_bps: tuple[float, ...]
    times_s: tuple[float, ...]
    falls: bool             # the mean fell at every bandwidth step up
    overlaps: tuple = ()    # (bw, bw) of neighbouring points whose repeats' ranges of time overlap


class BestBleu(NamedTuple):
    hosts: int
    value: float
    epoch: int
    last_epoch: int


def _shape(times: np.ndarray) -> str:
    d = np.diff(times)
    return "grows" if (d > 0).all() else "falls" if (d < 0).all() else "mixed"


def _overlaps(rows: pd.DataFrame, key: str) -> tuple:
    """(a, b) of neighbouring rows (by `key`) whose ranges of training time overlap; none where the
    summary has no ranges."""
    if not {"time_min_s", "time_max_s"} <= set(rows):
        return ()
    pairs = zip(rows.iloc[:-1].itertuples(), rows.iloc[1:].itertuples())
    return tuple((getattr(a, key), getattr(b, key)) for a, b in pairs
                 if a.time_min_s <= b.time_max_s and b.time_min_s <= a.time_max_s)


def node_trends(summary: pd.DataFrame) -> list[NodeTrend]:
    """One trend per (strategy, bandwidth) measured at two node counts or more."""
    out = []
    for (strategy, bw), rows in summary.groupby(["strategy", "bw_bps"]):
        rows = rows.sort_values("hosts")
        if len(rows) >= 2:
            t = rows["time_mean_s"].to_numpy(float)
            out.append(NodeTrend(strategy, bw, tuple(int(h) for h in rows["hosts"]), tuple(t), _shape(t),
                                 tuple((int(a), int(b)) for a, b in _overlaps(rows, "hosts"))))
    return out


def bandwidth_trends(summary: pd.DataFrame) -> list[BandwidthTrend]:
    """One trend per (strategy, node count above one) measured at two bandwidths or more."""
    out = []
    for (strategy, hosts), rows in summary[summary["hosts"] > 1].groupby(["strategy", "hosts"]):
        rows = rows.sort_values("bw_bps")
        if len(rows) >= 2:
            t = rows["time_mean_s"].to_numpy(float)
            out.append(BandwidthTrend(strategy, int(hosts), tuple(rows["bw_bps"]), tuple(t),
                                      bool((np.diff(t) < 0).all()), _overlaps(rows, "bw_bps")))
    return out


def iperf_ratios(checks: pd.DataFrame) -> pd.Series:
    """Each iperf3 check's measured over configured rate."""
    return checks["measured_bps"] / checks["configured_bps"] if len(checks) else pd.Series(dtype=float)


def best_bleu(bleu: pd.DataFrame) -> list[BestBleu]:
    """Per node count, the epoch with the best mean BLEU-1 and the last epoch evaluated."""
    if bleu.empty:
        return []
    out = []
    for hosts, rows in bleu[bleu["metric"] == "bleu1"].groupby("hosts"):
        best = rows.loc[rows["value_mean"].idxmax()]
        out.append(BestBleu(int(hosts), float(best["value_mean"]), int(best["epoch"]), int(rows["epoch"].max())))
    return out
