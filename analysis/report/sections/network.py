"""The network as measured: the iperf3 checks against the configured rates (thesis fig. 17) with the machine's
timers, the resources per configuration (fig. 19), and the bytes each worker sent per step against the theory."""
from __future__ import annotations

import pandas as pd

from analysis.tables import tables, trends
from analysis.tables.health import HEALTHY_MAX_MS
from analysis.text import HTB_TCP_CEILING, THESIS_FIG17


def section_tables(exp: tables.Experiment) -> dict[str, pd.DataFrame]:
    """iperf_checks, resources and network (per run: bytes on the wire per step and the theory for it)."""
    runs = tables.counted_runs(exp)
    return {"iperf_checks": tables.iperf_checks(exp.checks), "resources": tables.resource_summary(runs, exp.usage),
            "network": tables.network_per_run(runs, exp.usage)}


def check_sentences(exp: tables.Experiment, t: dict[str, pd.DataFrame]) -> list[str]:
    """What iperf3 measured of the configured rate, against the TCP-over-HTB ceiling, and the machine's timers."""
    out = []
    r = trends.iperf_ratios(t["iperf_checks"])
    if len(r):
        out.append(f"iperf3 measured {r.min():.3f} to {r.max():.3f} of the configured rate "
                   f"(median {r.median():.3f}); TCP over HTB carries about {HTB_TCP_CEILING:.3f} of it at "
                   "most (a receiver's count over a few seconds can read slightly above) "
                   f"(thesis fig. 17: {THESIS_FIG17[1] / 1e6:g} of {THESIS_FIG17[0] / 1e6:g} Mbit/s).")
        out += timer_sentence(exp.runs)
    return out


def timer_sentence(runs: pd.DataFrame) -> list[str]:
    """Say when low iperf ratios come from the machine (late kernel timers), not from the shaper."""
    if "timer_max_ms" not in runs or runs["timer_max_ms"].dropna().empty:
        return []
    worst = runs["timer_max_ms"].max()
    if worst <= HEALTHY_MAX_MS:
        return [f"Kernel timers fired on time during the checks (worst overshoot {worst:.0f} ms)."]
    return [f"This machine's timers overshot by up to {worst:.0f} ms during the checks (median run "
            f"p99 {runs['timer_p99_ms'].median():.0f} ms): its host stalls the VM, so every "
            "timer-driven shaper delivers less than its rate, and effective bandwidths are below the "
            "configured ones; read the training times against the measured bandwidths."]


def wire_sentences(t: dict[str, pd.DataFrame]) -> list[str]:
    """Per strategy but ps, the bytes each worker sent per step against the theoretical minimum."""
    out = []
    net = t["network"]
    net = net[(net["hosts"] > 1) & net["ratio_to_theory"].notna()]
    for strat, rows in net.groupby("strategy"):
        if strat == "ps":       # its steps are the coordinator's, shared unevenly by the workers, and a
            continue            # worker on a parameter server's host sends nothing over the network
        out.append(f"{strat}: bytes sent per worker per step are {rows['ratio_to_theory'].median():.3g}"
                   f"× the theoretical minimum (median over {len(rows)} runs).")
    return out
