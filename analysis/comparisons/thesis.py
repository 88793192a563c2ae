"""The thesis's findings beside what an experiment measured: one row per thesis figure the
experiment's data can speak to (thesis_vs_measured.csv and its section in the report).

What the thesis shows is its own words (the virtualised prototype: four containers on one OVS
switch of a 2-core laptop; figure 19 on two physical PCs). What was measured is computed from the
experiment's tables, never copied from a run.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from analysis.tables import faithful, stability, tables, trends
from analysis.text import HTB_TCP_CEILING, THESIS_FIG14, THESIS_FIG17, mbit, plural

COLUMNS = ["figure", "thesis", "measured"]
THESIS_ONE_FASTER = 0.55     # thesis fig. 19: one PC trained about 55 % faster than two (1 Gbit/s LAN)
THESIS = {
    "set-up": "Every node a container on one 2-core laptop: nodes shared its CPU, so adding nodes split the "
              "same compute (figures 15-18).",
    "15, 18": "Training time grew with every node added and fell as bandwidth rose (figure 15, home and office "
              "rates); at much higher rates the same trend with a much smaller gap between one node and "
              "several (figure 18), from which the thesis concluded that the network decided the training time.",
    "17": f"iperf (version 2) measured {THESIS_FIG17[1] / 1e6:g} of {THESIS_FIG17[0] / 1e6:g} Mbit/s through the "
          "OVS QoS limit.",
    "19": f"On two PCs on a 1 Gbit/s LAN, one node trained about {THESIS_ONE_FASTER:.0%} faster than two; CPU and "
          "memory load spread over the nodes; network use rose sharply with two nodes yet stayed far below "
          "the link.",
    "14": f"Best BLEU-1 on the test split {THESIS_FIG14[1]:g}, after epoch {THESIS_FIG14[0]} of 20 (full Flickr8k).",
    "abstract": "Parameter server reduces training time more; all-reduce converges more stably.",
}


def one_against_two(summary: pd.DataFrame, resources: pd.DataFrame) -> list[str]:
    """Thesis fig. 19, where a sweep ran exactly 1 and 2 nodes at a bandwidth: the summary's steady
    speedup of two nodes over one (the means over repeats, their ranges and whether they lie apart beyond
    chance), next to the thesis's 55 %, with each point's mean CPU, peak memory and mean network
    throughput per node."""
    out = []
    keys = [k for k in ("model", "engine", "batch_per_worker", "fixed") if k in summary]
    summary = summary[summary["communication"] == "none"] if "communication" in summary else summary
    for group, rows in summary.groupby(keys + ["bw_bps"], dropna=False):
        if set(rows["hosts"]) != {1, 2}:
            continue
        group = dict(zip(keys + ["bw_bps"], group))
        for two in rows[rows["hosts"] == 2].itertuples():
            one = rows[(rows["hosts"] == 1) & (rows["strategy"] == two.baseline_strategy)]
            if one.empty:
                continue
            one = next(one.itertuples())
            points = resources[(resources["bw_bps"] == group["bw_bps"])
                               & (resources["engine"] == group.get("engine", "tensorflow"))]
            for k in ("model", "batch_per_worker", "fixed"):
                if k in points and k in group:
                    points = points[[tables.same_value(v, group[k]) for v in points[k]]]
            res = {1: points[(points["hosts"] == 1) & (points["strategy"] == one.strategy)],
                   2: points[(points["hosts"] == 2) & (points["strategy"] == two.strategy)]}
            res = {n: r.mean(numeric_only=True) for n, r in res.items()}
            out.append(_one_against_two_sentence(group, one, two, res))
    return out


def _span(row) -> str:
    lo, hi = row.steady_samples_per_s_min, row.steady_samples_per_s_max
    return f"{lo:.4g}-{hi:.4g}" if row.n_steady > 1 else f"{lo:.4g}"


def _one_against_two_sentence(group, one, two, res) -> str:
    head = (f"One node against two at {mbit(group['bw_bps'])} ({two.strategy}, {group.get('engine', 'tensorflow')}"
            f"{', ' + tables.MODE_TEXT.get(group.get('fixed'), '') if group.get('fixed') else ''})")
    thesis = f"Thesis fig. 19: one PC about {THESIS_ONE_FASTER:.0%} faster than two on a 1 Gbit/s LAN."
    per_node = ""
    if all(res[n].notna().any() for n in (1, 2)):
        per_node = " Per node, 1 → 2 nodes: " + "; ".join(
            f"{what} {fmt(res[1][col])} → {fmt(res[2][col])}" for what, col, fmt in (
                ("CPU", "cpu_mean_pct", lambda v: f"{v:.0f} %"),
                ("peak memory", "mem_peak_bytes", lambda v: f"{v / 2**20:.0f} MiB"),
                ("network", "net_throughput_mean_bps", lambda v: f"{v / 1e6:.3g} Mbit/s"))) + "."
    if not np.isfinite(two.speedup):
        return f"{head}: not judged ({tables.text(two.not_judged)}). {thesis}{per_node}"
    how = trends.spread_words(tables.text(two.speedup_verdict), one.n_steady, two.n_steady)
    return (f"{head}: two nodes were {trends.speed_words(two.speedup, 'one')} in steady samples per second "
            f"({one.steady_samples_per_s_mean:.4g} against {two.steady_samples_per_s_mean:.4g}, means of "
            f"{one.n_steady} and {two.n_steady} runs; {_span(one)} and {_span(two)}): {how}. {thesis}{per_node}")


def nodes_and_bandwidth(summary: pd.DataFrame) -> str:
    """Figures 15/18 measured: per strategy and bandwidth, the steady speedup of the most nodes over one
    and whether training time grew with every node, and whether it fell as bandwidth rose at every node
    count above one."""
    s = summary[summary["strategy"] != "single"]
    parts, nodes = [], trends.node_trends(s)
    modes = {n.fixed for n in nodes}
    for n in nodes:
        grows = "training time grew with every node" if n.shape == "grows" else \
            "training time did not grow with every node"
        mode = f", {tables.MODE_TEXT.get(n.fixed, n.fixed)}" if len(modes) > 1 else ""
        span = (f"{n.most[0]} nodes {trends.speed_words(n.speedup, 'one')} in steady throughput"
                if n.speedup is not None else
                f"training time {n.times_s[0]:.3g} s to {n.times_s[-1]:.3g} s from {n.hosts[0]} to {n.hosts[-1]} "
                "nodes (no steady speedup)")
        parts.append(f"{mbit(n.bw_bps)} ({n.strategy}{mode}): {span}, {grows}")
    if not parts:
        return ""
    bandwidth = trends.bandwidth_trends(s)
    falls = [b.falls for b in bandwidth]
    tail = ("" if not falls else "; training time fell as bandwidth rose at every node count above one"
            if all(falls) else "; training time did not fall as bandwidth rose at every node count above one")
    overlaps = sum(len(n.overlaps) for n in nodes) + sum(len(b.overlaps) for b in bandwidth)
    noise = (f"; at {overlaps} of these steps the repeats' ranges of training time overlap, so those steps are "
             "within the noise" if overlaps else "")
    mode = f" ({tables.MODE_TEXT[modes.pop()]})" if len(modes) == 1 and next(iter(modes)) in tables.MODE_TEXT else ""
    faster = [n for n in nodes if n.speedup is not None and n.speedup > 1]
    plainly = (" The thesis's \"more nodes, more time\" does not hold here at " + ", ".join(
        f"{mbit(n.bw_bps)} ({n.strategy}: {n.most[0]} nodes {trends.speed_words(n.speedup, 'one')})" for n in faster)
        + "." if faster else "")
    return "; ".join(parts) + tail + f" (means over repeats{noise}){mode}." + plainly


def iperf_measured(checks: pd.DataFrame) -> str:
    r = trends.iperf_ratios(checks)
    if r.empty:
        return ""
    thesis = THESIS_FIG17[1] / THESIS_FIG17[0]
    said = (f"iperf3 receivers measured {r.median():.3f} of the configured rate (median; {r.min():.3f} to "
            f"{r.max():.3f} over {len(r)} checks); TCP over an HTB limit carries about {HTB_TCP_CEILING:.3f} of it "
            "at most.")
    if r.max() < thesis:
        said += (f" The thesis's {thesis:.3f} is above every receiver's count here, so it is most likely a sender's "
                 "count of a short test, which includes bytes still in the socket's buffers at the end "
                 "(docs/checks-and-shaping.md).")
    return said


def bleu_measured(bleu: pd.DataFrame) -> str:
    parts = [f"{plural(b.hosts, 'node')}: best BLEU-1 {b.value:.3f} after epoch {b.epoch} of {b.last_epoch}"
             for b in trends.best_bleu(bleu)]
    return "; ".join(parts) + "." if parts else ""


def side_by_side(exp: tables.Experiment, derived: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """The rows of thesis_vs_measured: every thesis figure this experiment's data speaks to, with
    what the thesis shows and what was measured here. `derived` is the report's tables."""
    measured = {
        "15, 18": nodes_and_bandwidth(derived["summary"]),
        "17": iperf_measured(derived["iperf_checks"]),
        "19": " ".join(one_against_two(derived["summary"], derived["resources"])),
        "14": bleu_measured(derived.get("bleu", pd.DataFrame())),
        "abstract": " ".join(stability.sentences(derived["stability"], float(derived["stability_runs"]["target_loss"].iloc[0]),
                                                 mbit)) if "stability" in derived else "",
    }
    rows = [(figure, THESIS[figure], text) for figure, text in measured.items() if text]
    if rows:
        rows.insert(0, ("set-up", THESIS["set-up"], faithful.setup_sentence(exp.runs)))
    return pd.DataFrame(rows, columns=COLUMNS)
