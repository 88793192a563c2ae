"""Faithful compute (issue 19) in the report: what was emulated, where the time went, degraded runs.

runs.csv columns read (absent in older results: dilation 1, compute "shared", no verdict):
``dilation`` K (times are emulated: wall / K), ``compute`` ("budgets": every node held to its
``cores``; "shared": the nodes shared the machine's cores, the thesis's condition), ``cores`` (all
nodes', when equal), ``node_cores`` ("h1=1;h2=0.5"), ``machine_cores``, ``fidelity`` ("ok" or
"degraded: <reason>; <reason>") and ``compute_per_step_s`` (the workload's probe: one worker's
compute per step, without the collective).

Time split: time per step = compute + the rest, the rest being communication and waiting (for the
network, for the slowest worker, for the framework). A point is said to be dominated by whichever
part is larger, and only when its compute was measured.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from analysis import tables
from analysis.plotstyle import mbit, plural

SPLIT_COLUMNS = tables.CONFIG_KEYS + ["bw", "compute", "n_runs", "time_per_step_s", "compute_s", "rest_s",
                                      "compute_share"]


def _k(x: float) -> str:
    return f"×{x:g}"


def _cores(x: float) -> str:
    return f"{x:g} core{'' if x == 1 else 's'}"


def _listing(values) -> str:
    values = [str(v) for v in values]
    return values[0] if len(values) == 1 else ", ".join(values[:-1]) + " and " + values[-1]


def _dilation(runs: pd.DataFrame) -> str:
    ks = sorted(runs["dilation"].dropna().unique())
    if not ks or ks == [1.0]:
        return "in real time (dilation ×1)"
    if len(ks) == 1:
        return f"dilation {_k(ks[0])}"
    return f"dilation {_k(ks[0])} to {_k(ks[-1])}"


def _budgets(runs: pd.DataFrame) -> str:
    equal = runs[runs["cores"].notna()]
    parts = []
    if len(equal):
        hosts = sorted(int(h) for h in equal["hosts"].dropna().unique())
        cs = sorted(equal["cores"].unique())
        sizes = _cores(cs[0]) if len(cs) == 1 else f"{' or '.join(f'{c:g}' for c in cs)} cores"
        if len(hosts) == 1:
            parts.append(f"{plural(hosts[0], 'machine')} of {sizes} each")
        else:
            parts.append(f"machines of {sizes} each ({_listing(hosts)} nodes)")
    mixed = runs[runs["cores"].isna() & (runs["node_cores"] != "")]
    if len(mixed):
        sizes = "; ".join(", ".join(text.split(";")) for text in mixed["node_cores"].unique())
        parts.append(f"nodes of different sizes ({sizes} cores)")
    if not parts:
        parts.append("nodes held to their core budgets (sizes not recorded)")
    return f"{' and '.join(parts)}, {_dilation(runs)}"


def _shared(runs: pd.DataFrame) -> str:
    machine = sorted(runs["machine_cores"].dropna().unique())
    where = (f"this machine's {_listing([f'{m:g}' for m in machine])} cores" if machine else
             "the machine's cores")
    text = f"the nodes shared {where} without budgets (the thesis's condition"
    text += ")" if machine else "; the results do not record how many cores)"
    if (runs["dilation"] > 1).any():
        text += f", {_dilation(runs)}"
    return text


def setup_sentence(runs: pd.DataFrame) -> str:
    """What was emulated, e.g. 'What was emulated: 4 machines of 1 core each, dilation ×2.5.', from
    the ok runs (all runs when none is ok: a run that never started may not record its set-up)."""
    runs = tables.with_faithful_defaults(runs)
    if "status" in runs and (runs["status"] == "ok").any():
        runs = runs[runs["status"] == "ok"]
    parts = []
    budgets = runs[runs["compute"] == "budgets"]
    if len(budgets):
        parts.append(_budgets(budgets))
    shared = runs[runs["compute"] != "budgets"]
    if len(shared):
        parts.append(_shared(shared))
    if not parts:
        return "No runs, so nothing was emulated."
    return "What was emulated: " + "; ".join(parts) + "."


def dilation_note(runs: pd.DataFrame) -> str:
    """Under dilation, that every time shown is emulated; '' in real time."""
    if not (tables.with_faithful_defaults(runs)["dilation"] > 1).any():
        return ""
    return ("Every time in this report is emulated time (wall clock / K); runs.csv keeps the wall clock in "
            "training_time_wall_s and time_per_step_wall_s.")


# -- where the time went -------------------------------------------------------------------------
def time_split(runs: pd.DataFrame, steps: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per point (model, strategy, nodes, bandwidth; ok runs): mean time per step, mean compute per
    step (the probe; NaN when not measured), the rest (communication and waiting) = time per step -
    compute, and compute's share of the step.

    Like is compared with like: the probe times steady steps (after its warm-up), so a run's step is
    its steady step too, the median after the first (which builds the training function), where
    steps.csv has it; else runs.csv's time_per_step_s, which includes that first step."""
    ok = tables.ok_runs(tables.with_faithful_defaults(runs))
    if steps is not None and len(steps):
        steady = tables.steady_steps(steps)
        ok = ok.assign(time_per_step_s=[steady.get(r, t) for r, t in zip(ok["run_id"], ok["time_per_step_s"])])
    ok = ok[ok["time_per_step_s"].notna()]
    if ok.empty:
        return pd.DataFrame(columns=SPLIT_COLUMNS)
    out = ok.groupby(tables.CONFIG_KEYS, dropna=False).agg(
        bw=("bw", "first"), compute=("compute", lambda c: "/".join(sorted(set(c)))),
        n_runs=("run_id", "size"), time_per_step_s=("time_per_step_s", "mean"),
        compute_s=("compute_per_step_s", "mean")).reset_index()
    out["rest_s"] = out["time_per_step_s"] - out["compute_s"]
    out["compute_share"] = out["compute_s"] / out["time_per_step_s"]
    return out[SPLIT_COLUMNS].sort_values(["model", "strategy", "bw_bps", "hosts"]).reset_index(drop=True)


def _where(points: pd.DataFrame) -> str:
    """'10 Mbit/s (allreduce, 2 and 4 nodes) and 1 Gbit/s (allreduce, 4 nodes)'."""
    parts = []
    for (strat, bw), rows in points.groupby(["strategy", "bw_bps"]):
        hosts = sorted(int(h) for h in rows["hosts"].unique())
        parts.append(f"{mbit(bw)} ({strat}, {_listing(hosts)} node{'' if hosts == [1] else 's'})")
    return _listing(parts)


def _range(shares) -> str:
    lo, hi = float(np.min(shares)), float(np.max(shares))
    return f"{lo:.0%}" if round(lo, 2) == round(hi, 2) else f"{lo:.0%} to {hi:.0%}"


def domination_sentences(split: pd.DataFrame) -> list[str]:
    """What dominates the time per step (of the multi-node points, if any), from the measured split
    only; under shared compute, a warning that the node-count trend includes CPU sharing."""
    out = []
    split = split[split["strategy"] != "single"] if (split["strategy"] != "single").any() else split
    multi = split[split["hosts"] > 1] if (split["hosts"] > 1).any() else split
    measured = multi[multi["compute_s"].notna() & (multi["time_per_step_s"] > 0)]
    every = "every multi-node point measured" if (multi["hosts"] > 1).any() else "every point measured"
    if measured.empty:
        out.append("No compute time was measured (compute_per_step_s), so this report does not say "
                   "whether compute or communication dominates the time per step.")
    else:
        compute = measured[measured["compute_share"] >= 0.5]
        rest = measured[measured["compute_share"] < 0.5]
        shares = _range(measured["compute_share"].clip(upper=1))
        if rest.empty:
            out.append(f"Compute dominates the time per step at {every} (compute is {shares} of the step): "
                       "a faster network could not make these steps much faster.")
        elif compute.empty:
            out.append(f"Communication and waiting (the step beyond one worker's compute) dominate the time "
                       f"per step at {every}: compute is only {shares} of the step.")
        else:
            out.append(f"Compute dominates the time per step at {_where(compute)}; communication and waiting "
                       f"dominate at {_where(rest)} (compute is {shares} of the step).")
        missing = len(multi) - len(measured)
        if missing:
            out.append(f"{plural(missing, 'point')} had no compute measurement and "
                       f"{'is' if missing == 1 else 'are'} left out of this.")
    if split["compute"].str.contains("shared").any():
        out.append("The nodes shared the machine's cores without budgets: every node added took CPU from "
                   "the others, so the trend of time with the number of nodes includes CPU sharing, not "
                   "the network alone.")
    return out


def degraded_note(runs: pd.DataFrame, counted: bool) -> str | None:
    """What the report did with the degraded runs (None without any); tables.degraded_runs lists them."""
    n = int(tables.is_degraded(runs).sum())
    if not n:
        return None
    what = ("they are counted in the trends, the tables and the cost model fit, as asked (include_degraded)"
            if counted else "they are marked in the figures and left out of the trends, the tables and the "
            "cost model fit (include_degraded counts them)")
    return f"{plural(n, 'run')} did not get the emulation asked for (fidelity degraded): {what}."
