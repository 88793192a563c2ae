"""What an experiment's summary tables show, computed once: the facts the report's sentences and
the thesis-beside-measured table are both written from. A trend compares the points of one group
(model, engine, batch per worker and fixed mode: tables.GROUP_KEYS) and strategy; its ratio between
node counts is always the summary's steady speedup, never a ratio of training times."""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pandas as pd

from analysis.tables import spread


class NodeTrend(NamedTuple):
    """Mean training time against nodes at one group, strategy and bandwidth (figures 15/18), with the
    steady speedup of every point (NaN where not judged or without a one-node run)."""
    strategy: str
    bw_bps: float
    hosts: tuple[int, ...]
    times_s: tuple[float, ...]
    shape: str              # "grows" or "falls" with every node added, else "mixed" (of the means)
    overlaps: tuple = ()    # (nodes, nodes) of neighbouring points whose repeats' ranges of time overlap
    fixed: str = "steps"    # the group's mode (tables.MODE_TEXT)
    speedups: tuple = ()    # the summary's speedup at each node count
    group: tuple = ()       # (model, engine, batch per worker)

    @property
    def most(self) -> tuple[int, float] | None:
        """(nodes, steady speedup) of the most nodes judged (over one node), when any was."""
        judged = [(h, float(v)) for h, v in zip(self.hosts, self.speedups) if h > 1 and np.isfinite(v)]
        return judged[-1] if judged else None

    @property
    def speedup(self) -> float | None:
        """The steady speedup of the most nodes judged (over one node), when any was."""
        return self.most[1] if self.most else None


class BandwidthTrend(NamedTuple):
    """Mean training time against bandwidth at one group, strategy and node count above one."""
    strategy: str
    hosts: int
    bws_bps: tuple[float, ...]
    times_s: tuple[float, ...]
    falls: bool             # the mean fell at every bandwidth step up
    overlaps: tuple = ()    # (bw, bw) of neighbouring points whose repeats' ranges of time overlap
    fixed: str = "steps"
    group: tuple = ()


def speed_words(speedup: float, than: str = "") -> str:
    """A steady speedup as the report says it everywhere: '2.8× slower' (1 / speedup), '1.5× faster', or
    'as fast' (within half a percent); `than`: what it is compared with ('2.8× slower than one')."""
    if not np.isfinite(speedup) or speedup <= 0:
        return "not judged"
    if abs(speedup - 1) < 0.005:
        return "as fast" + (f" as {than}" if than else "")
    said = f"{speedup:.3g}× faster" if speedup > 1 else f"{1 / speedup:.3g}× slower"
    return said + (f" than {than}" if than else "")


VERDICT_WORDS = {"apart": "beyond the spread of the repeats",
                 "within the spread": "within the spread of the repeats (their ranges overlap)",
                 "one run each": "one run each, so no spread to judge the difference by"}


def spread_words(verdict: str, n: int, m: int, short: bool = False) -> str:
    """analysis.tables.spread's verdict on a speedup's two groups of repeats (n runs at one node, m here); short:
    without the chance and the advice (said once elsewhere)."""
    if verdict == spread.TOO_FEW:
        if short:
            return f"the ranges lie apart, but {int(n)} run{'s' * (int(n) != 1)} against {int(m)} are too few to judge"
        return f"the two ranges lie apart, but at {spread.too_few_text(int(n), int(m))}"
    return VERDICT_WORDS.get(verdict, "")


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


GROUP = ["model", "engine", "batch_per_worker", "fixed"]       # tables.GROUP_KEYS


def _grouped(summary: pd.DataFrame, by: list[str]):
    """(keys, rows) per group, `by` and communication setting; a summary without the group columns is one
    group. The strategy of a setting other than the usual all-reduce reads 'allreduce, fp16'."""
    keys = [k for k in GROUP if k in summary] + (["communication"] if "communication" in summary else [])
    for values, rows in summary.groupby(keys + by, dropna=False, sort=True):
        key = dict(zip(keys + by, values))
        setting = key.get("communication")
        if "strategy" in key and isinstance(setting, str) and setting != "none":
            key["strategy"] = f"{key['strategy']}, {setting}"
        yield key, rows


def _group(key: dict) -> tuple:
    return tuple(key.get(k) for k in ("model", "engine", "batch_per_worker"))


def node_trends(summary: pd.DataFrame) -> list[NodeTrend]:
    """One trend per group, strategy and bandwidth measured at two node counts or more."""
    out = []
    for key, rows in _grouped(summary, ["strategy", "bw_bps"]):
        rows = rows.sort_values("hosts")
        if len(rows) >= 2:
            t = rows["time_mean_s"].to_numpy(float)
            speedups = tuple(rows["speedup"].to_numpy(float)) if "speedup" in rows else ()
            out.append(NodeTrend(key["strategy"], key["bw_bps"], tuple(int(h) for h in rows["hosts"]), tuple(t),
                                 _shape(t), tuple((int(a), int(b)) for a, b in _overlaps(rows, "hosts")),
                                 key.get("fixed", "steps"), speedups, _group(key)))
    return out


def bandwidth_trends(summary: pd.DataFrame) -> list[BandwidthTrend]:
    """One trend per group, strategy and node count above one measured at two bandwidths or more."""
    out = []
    for key, rows in _grouped(summary[summary["hosts"] > 1], ["strategy", "hosts"]):
        rows = rows.sort_values("bw_bps")
        if len(rows) >= 2:
            t = rows["time_mean_s"].to_numpy(float)
            out.append(BandwidthTrend(key["strategy"], int(key["hosts"]), tuple(rows["bw_bps"]), tuple(t),
                                      bool((np.diff(t) < 0).all()), _overlaps(rows, "bw_bps"),
                                      key.get("fixed", "steps"), _group(key)))
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
