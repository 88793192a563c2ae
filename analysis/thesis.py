"""The thesis's findings beside what an experiment measured: one row per thesis figure the
experiment's data can speak to (thesis_vs_measured.csv and its section in the report).

What the thesis shows is its own words (the virtualised prototype: four containers on one OVS
switch of a 2-core laptop; figure 19 on two physical PCs). What was measured is computed from the
experiment's tables, never copied from a run.
"""
from __future__ import annotations

import pandas as pd

from analysis import faithful, spread, stability, tables, trends
from analysis.plotstyle import HTB_TCP_CEILING, THESIS_FIG14, THESIS_FIG17, mbit, plural

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


def one_against_two(runs: pd.DataFrame, resources: pd.DataFrame) -> list[str]:
    """Thesis fig. 19, where a sweep ran exactly 1 and 2 nodes at a bandwidth: how many more samples
    per second one node trained than two (means over repeats, with their ranges and whether they lie
    apart beyond chance), next to the thesis's 55 %, with each point's mean CPU, peak memory and mean
    network throughput per node."""
    ok = tables.ok_runs(runs)
    out = []
    for (engine, bw), rows in ok.groupby(["engine", "bw_bps"]):
        if set(rows["hosts"]) != {1, 2}:
            continue
        one = rows[rows["hosts"] == 1]
        points = resources[(resources["bw_bps"] == bw) & (resources["engine"] == engine)]
        for strategy, two in rows[rows["hosts"] == 2].groupby("strategy"):
            base = one[one["strategy"] == strategy]
            base = base if len(base) else one            # else the 1-node run of whatever strategy ran
            rate = {1: base["samples_per_s"].dropna(), 2: two["samples_per_s"].dropna()}
            res = {1: points[(points["hosts"] == 1) & points["strategy"].isin(set(base["strategy"]))],
                   2: points[(points["hosts"] == 2) & (points["strategy"] == strategy)]}
            res = {n: r.mean(numeric_only=True) for n, r in res.items()}
            out.append(_one_against_two_sentence(engine, strategy, bw, rate, res))
    return out


def _one_against_two_sentence(engine, strategy, bw, rate, res) -> str:
    mean = {n: r.mean() for n, r in rate.items()}
    faster = mean[1] / mean[2] - 1
    per_node = ""
    if all(res[n].notna().any() for n in (1, 2)):
        per_node = " Per node, 1 → 2 nodes: " + "; ".join(
            f"{what} {fmt(res[1][col])} → {fmt(res[2][col])}" for what, col, fmt in (
                ("CPU", "cpu_mean_pct", lambda v: f"{v:.0f} %"),
                ("peak memory", "mem_peak_bytes", lambda v: f"{v / 2**20:.0f} MiB"),
                ("network", "net_throughput_mean_bps", lambda v: f"{v / 1e6:.3g} Mbit/s"))) + "."
    n, m = len(rate[1]), len(rate[2])
    judged = spread.judge(spread.of(rate[2]), spread.of(rate[1]))
    how = {spread.APART: "the two ranges lie apart",
           spread.WITHIN: "the two ranges overlap, so the difference is within the spread of the repeats",
           spread.NO_SPREAD: "one run each, so no spread to judge the difference by",
           spread.TOO_FEW: f"the two ranges lie apart, but at {spread.too_few_text(n, m)}"}[judged.verdict]
    span = {k: f"{r.min():.4g}-{r.max():.4g}" if len(r) > 1 else f"{r.iloc[0]:.4g}" for k, r in rate.items()}
    return (f"One node against two at {mbit(bw)} ({strategy}, {engine}): one node trained "
            f"{abs(faster):.0%} {'more' if faster >= 0 else 'fewer'} samples per second than two ({mean[1]:.4g} "
            f"against {mean[2]:.4g}, means of {n} and {m} runs; {span[1]} and {span[2]}): {how}. Thesis fig. 19: one "
            f"PC about {THESIS_ONE_FASTER:.0%} faster than two on a 1 Gbit/s LAN.{per_node}")


def nodes_and_bandwidth(summary: pd.DataFrame) -> str:
    """Figures 15/18 measured: per strategy and bandwidth, time from one node to the most, whether
    it grew with every node, and whether it fell as bandwidth rose at every node count above one."""
    s = summary[summary["strategy"] != "single"]
    parts, nodes = [], trends.node_trends(s)
    for n in nodes:
        grows = "grew with every node" if n.shape == "grows" else "did not grow with every node"
        span = (f"×{n.gap:.3g} from 1 to {n.hosts[-1]} nodes" if n.gap is not None
                else f"{n.times_s[0]:.3g} s to {n.times_s[-1]:.3g} s from {n.hosts[0]} to {n.hosts[-1]} nodes")
        parts.append(f"{mbit(n.bw_bps)} ({n.strategy}): {span}, {grows}")
    if not parts:
        return ""
    bandwidth = trends.bandwidth_trends(s)
    falls = [b.falls for b in bandwidth]
    tail = ("" if not falls else "; time fell as bandwidth rose at every node count above one" if all(falls)
            else "; time did not fall as bandwidth rose at every node count above one")
    overlaps = sum(len(n.overlaps) for n in nodes) + sum(len(b.overlaps) for b in bandwidth)
    noise = (f"; at {overlaps} of these steps the repeats' ranges overlap, so those steps are within the noise"
             if overlaps else "")
    return "Training time " + "; ".join(parts) + tail + " (means over repeats" + noise + ")."


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
        "19": " ".join(one_against_two(tables.counted_runs(exp), derived["resources"])),
        "14": bleu_measured(derived.get("bleu", pd.DataFrame())),
        "abstract": " ".join(stability.sentences(derived["stability"], float(derived["stability_runs"]["target_loss"].iloc[0]),
                                                 mbit)) if "stability" in derived else "",
    }
    rows = [(figure, THESIS[figure], text) for figure, text in measured.items() if text]
    if rows:
        rows.insert(0, ("set-up", THESIS["set-up"], faithful.setup_sentence(exp.runs)))
    return pd.DataFrame(rows, columns=COLUMNS)
