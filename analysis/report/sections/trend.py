"""What the trend says: training time against nodes and bandwidth, the speedups, whether that matches the thesis
(figs. 15 and 18), then each section's findings in turn (the time split, the thesis's one against two, the
checks, the cost model, the wire, stability, BLEU, faults)."""
from __future__ import annotations

import html

import pandas as pd

from analysis.report.sections import bleu, cost_model, faults, network, stability, thesis_vs_measured, time_split
from analysis.tables import tables, trends
from analysis.text import mbit


def _qualifier(trend, many_groups: bool, many_modes: bool) -> str:
    """', mlp, tensorflow, batch 32' and the mode, where the report has several of them."""
    model, engine, batch = (trend.group + (None, None, None))[:3]
    out = f", {model}, {engine}, batch {batch:g}" if many_groups and model is not None else ""
    return out + (f"; {tables.MODE_TEXT.get(trend.fixed, trend.fixed)}" if many_modes else "")


def _trend_nodes(found: list[trends.NodeTrend], many_groups: bool = False, many_modes: bool = False) -> list[str]:
    """Sentences on training time vs nodes per group, strategy and bandwidth."""
    how = {"grows": "grows with every node added", "falls": "falls with every node added",
           "mixed": "does not change monotonically with the number of nodes"}
    return [f"At {mbit(n.bw_bps)} ({n.strategy}{_qualifier(n, many_groups, many_modes)}) training time "
            f"{how[n.shape]}: " + " → ".join(f"{v:.3g} s ({h})" for h, v in zip(n.hosts, n.times_s))
            + " [mean over repeats, (nodes)]"
            + _overlap_note([f"{a} and {b} nodes" for a, b in n.overlaps]) + "." for n in found]


def _trend_speedups(found: list[trends.NodeTrend], many_groups: bool, many_modes: bool) -> list[str]:
    """Per group and strategy measured at two bandwidths or more: the steady speedup of the most nodes
    over one at each bandwidth, and whether the gap to one node narrows as bandwidth rises (thesis fig. 18)."""
    out = []
    by = {}
    for n in found:
        if n.speedup is not None:
            by.setdefault((n.group, n.fixed, n.strategy), []).append(n)
    for (_, _, strategy), rows in by.items():
        if len(rows) < 2:
            continue
        rows = sorted(rows, key=lambda n: n.bw_bps)
        rising = all(b.speedup > a.speedup for a, b in zip(rows, rows[1:]))
        out.append(f"In steady throughput ({strategy}{_qualifier(rows[0], many_groups, many_modes)}), the most nodes "
                   "against one: " + ", ".join(f"{n.most[0]} nodes {trends.speed_words(n.speedup)} at "
                                               f"{mbit(n.bw_bps)}" for n in rows)
                   + (": the gap to one node narrows as bandwidth rises (as in thesis fig. 18)." if rising
                      else ": the gap to one node does not narrow steadily as bandwidth rises."))
    return out


def _overlap_note(pairs: list[str]) -> str:
    """Where neighbouring points' repeats overlap, so that the step between their means is within the noise."""
    return (f"; the repeats' ranges overlap between {', '.join(pairs)}, so that step is within the noise"
            if pairs else "")


def _trend_bw(found: list[trends.BandwidthTrend], many_groups: bool = False, many_modes: bool = False) -> list[str]:
    """Sentences on training time vs bandwidth at each node count > 1."""
    return [f"With {b.hosts} nodes ({b.strategy}{_qualifier(b, many_groups, many_modes)}) training time "
            f"{'falls' if b.falls else 'does not fall steadily'} as bandwidth rises "
            f"({mbit(b.bws_bps[0])}: {b.times_s[0]:.3g} s, "
            f"{mbit(b.bws_bps[-1])}: {b.times_s[-1]:.3g} s, means over repeats)"
            + _overlap_note([f"{mbit(x)} and {mbit(y)}" for x, y in b.overlaps]) + "."
            for b in found]


def _modes_sentence(s: pd.DataFrame) -> list[str]:
    """Which mode the comparisons below are of (one sentence; each comparison stays within one mode)."""
    modes = [m for m in dict.fromkeys(s["fixed"]) if isinstance(m, str)] if "fixed" in s else []
    if len(modes) == 1:
        return [f"Every comparison below is between points of one mode: {tables.MODE_TEXT.get(modes[0], modes[0])} "
                f"(workload.fixed: {modes[0]})" + (", so training times of different node counts are of different "
                                                   "work; the steady speedup is the ratio to read." if modes[0] == "steps"
                                                   else ".")]
    if len(modes) > 1:
        return ["This experiment ran several modes (workload.fixed: " + ", ".join(modes) + "): each comparison "
                "below stays within one and names it."]
    return []


def trend_text(exp: tables.Experiment, t: dict[str, pd.DataFrame]) -> list[str]:
    """Sentences computed from the data, compared with the thesis's findings."""
    s = t["summary"]
    s = s[s["strategy"] != "single"]
    if s.empty:
        return bleu.sentences(t) + faults.sentences(t) or ["No successful runs, so no trend can be stated."]
    found, bandwidth = trends.node_trends(s), trends.bandwidth_trends(s)
    many_groups = len({n.group for n in found} | {b.group for b in bandwidth}) > 1
    many_modes = len({n.fixed for n in found} | {b.fixed for b in bandwidth}) > 1
    falls_all = all(b.falls for b in bandwidth) if bandwidth else None
    out = (_modes_sentence(s) + _trend_nodes(found, many_groups, many_modes)
           + _trend_bw(bandwidth, many_groups, many_modes) + _trend_speedups(found, many_groups, many_modes))
    grows_all = bool(found) and all(n.shape == "grows" for n in found)
    noisy = any(n.overlaps for n in found) or any(b.overlaps for b in bandwidth)
    if grows_all and falls_all:
        out.append("This matches the thesis (figs. 15 and 18): training time grew with every node added and fell "
                   "as bandwidth rose" + (" on the means; where the repeats' ranges overlap (above) the step is "
                                          "within the noise." if noisy else "."))
    elif grows_all and falls_all is None:
        out.append("Training time grew with every node added, as in the thesis (figs. 15/18); no node count was "
                   "measured at two bandwidths, so whether more bandwidth is faster is not tested here.")
    elif found:
        out.append("This does NOT fully match the thesis (figs. 15/18: training time grew with every "
                   "node and fell as bandwidth rose); see the sentences above for where.")
    out += time_split.sentences(t)
    out += thesis_vs_measured.sentences(t)
    out += network.check_sentences(exp, t)
    out += cost_model.sentences(exp, t)
    out += network.wire_sentences(t)
    return out + stability.sentences(t) + bleu.sentences(t) + faults.sentences(t)


def parts(exp: tables.Experiment, t: dict[str, pd.DataFrame]) -> list[str]:
    e = html.escape
    return ["<h2>What the trend says</h2><ul>" + "".join(f"<li>{e(x)}</li>" for x in trend_text(exp, t)) + "</ul>"]
