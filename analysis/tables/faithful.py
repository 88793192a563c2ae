"""Faithful compute in the report: what was emulated, where the time went, degraded runs.

runs.csv columns read (absent in older results: dilation 1, compute "shared", no verdict):
``dilation`` K (times are emulated: wall / K), ``compute`` ("budgets": every node held to its
``cores``; "shared": the nodes shared the machine's cores, the thesis's condition), ``cores`` (all
nodes', when equal), ``node_cores`` ("h1=1;h2=0.5"), ``machine_cores``, ``fidelity`` ("ok" or
"degraded: <reason>; <reason>") and ``compute_per_step_s`` (the workload's probe: one worker's
compute per step, without the collective).

Time split of the steady step (runs.csv steady_step_s: the median step after the warm-up, analysis.tables.steady):
compute (the probe), the wire (the measured bytes a worker sent per step, x 8 / the link's rate: the
least time the bandwidth allows them) and the rest = steady step - compute - wire (the collective's own
CPU, latency and waiting, for the slowest worker and the framework). A point is said to be dominated
by whichever part is largest, and only when its compute was measured: by the wire, it is
bandwidth-bound; by the rest, it is bound by the collective's CPU and latency, not by the bandwidth.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from analysis.tables import tables
from analysis.text import mbit, plural

SPLIT_COLUMNS = tables.CONFIG_KEYS + ["bw", "compute", "n_runs", "steady_step_s", "compute_s", "wire_s", "rest_s",
                                      "compute_share", "wire_share", "rest_share", "not_judged"]
PARTS = ("compute", "wire", "rest")


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


def _byte_scale(runs: pd.DataFrame) -> str:
    """Replayed runs' byte scale F, said where some ran with one: their gradients of 1/F the elements went
    over links of 1/F the rate (the same time on the wire; per-message costs and TCP at the rate not scaled)."""
    fs = sorted(f for f in runs["byte_scale"].dropna().unique() if f > 1)
    if not fs:
        return ""
    which = _k(fs[0]) if len(fs) == 1 else f"{_k(fs[0])} to {_k(fs[-1])}"
    return (f", gradients byte-scaled {which} (1/F of the elements over links of 1/F the rate: the same time on "
            "the wire, F times less of this machine's CPU; per-message costs not scaled)")


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
    replayed = runs[runs["compute"] == tables.TIMING_ONLY]
    if len(replayed):
        parts.append(_budgets(replayed) + ", compute replayed (each node waited its calibrated compute time and "
                     "sent real gradients: timing only, no loss)" + _byte_scale(replayed))
    shared = runs[~tables.own_machines(runs)]
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
def time_split(runs: pd.DataFrame, steps: pd.DataFrame | None = None,
               usage: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per point (CONFIG_KEYS; ok runs): the steady step (mean over the repeats judged steady), compute
    per step (the probe, which times steady steps too; NaN when not measured), the wire (measured
    bytes per worker step x 8 / bw_bps: net_bytes_total / steps / workers, filled from usage.csv;
    net_bytes_total counts the warm-up's bytes too), the rest = steady step - compute - wire (may be
    below 0 from noise: kept; when the bytes were not measured, the rest holds the wire too), and
    each part's share of the steady step. not_judged: why a point has no steady step.

    Runs without the steady columns get them from `steps` (tables.with_steady_columns)."""
    runs = tables.with_faithful_defaults(runs)
    runs = runs if tables.has_steady_columns(runs) else tables.with_steady_columns(runs, steps)
    ok = tables.ok_runs(runs)
    if ok.empty:
        return pd.DataFrame(columns=SPLIT_COLUMNS)
    have = {"net_bytes_total", "steps", "gradient_bytes"} <= set(runs)
    net = (tables.network_per_run(runs, usage).set_index("run_id")["bytes_per_worker_step"] if have
           else pd.Series(dtype=float))
    judged = ok["steady"].astype(str).eq("ok") & ok["steady_step_s"].gt(0)
    wire = ok["run_id"].map(net) * 8 / ok["bw_bps"].where(ok["bw_bps"] > 0)
    ok = ok.assign(_step=ok["steady_step_s"].where(judged), _wire=wire.where(judged),
                   _reason=ok["steady"].where(~judged, ""))
    g = ok.groupby(tables.CONFIG_KEYS, dropna=False)
    out = g.agg(bw=("bw", "first"), compute=("compute", lambda c: "/".join(sorted(set(c)))),
                n_runs=("run_id", "size"), steady_step_s=("_step", "mean"),
                compute_s=("compute_per_step_s", "mean"), wire_s=("_wire", "mean")).reset_index()
    out["not_judged"] = ["" if rows["_reason"].eq("").any() else "; ".join(dict.fromkeys(rows["_reason"].astype(str)))
                         for _, rows in g]
    out["rest_s"] = out["steady_step_s"] - out["compute_s"] - out["wire_s"].fillna(0)
    for part in PARTS:
        out[f"{part}_share"] = out[f"{part}_s"] / out["steady_step_s"]
    out = out[SPLIT_COLUMNS].sort_values(["model", "strategy", "bw_bps", "hosts"]).reset_index(drop=True)
    return tables.blank_as_nan(out, ["not_judged"])


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
    """What dominates the steady step (of the multi-node points, if any), from the measured split only:
    compute, the wire (bandwidth-bound) or the rest (the collective's CPU, latency and waiting); under
    shared compute, a warning that the node-count trend includes CPU sharing."""
    out = []
    split = split[split["strategy"] != "single"] if (split["strategy"] != "single").any() else split
    multi = split[split["hosts"] > 1] if (split["hosts"] > 1).any() else split
    measured = multi[multi["compute_s"].notna() & (multi["steady_step_s"] > 0)]
    every = "every multi-node point measured" if (multi["hosts"] > 1).any() else "every point measured"
    if measured.empty:
        out.append("No compute time was measured (compute_per_step_s) at a point with a steady step, so this "
                   "report does not say what dominates the steady step.")
    else:
        parts = measured[["compute_s", "wire_s", "rest_s"]].fillna(-np.inf).to_numpy()
        top = pd.Series(np.array(PARTS)[parts.argmax(axis=1)], index=measured.index)
        shares = {p: _range(measured[f"{p}_share"].dropna().clip(0, 1)) for p in PARTS
                  if measured[f"{p}_share"].notna().any()}
        said = {"compute": "compute dominates (a faster network could not make these steps much faster)",
                "wire": "the wire dominates: bandwidth-bound (the measured bytes at the link's rate take most of "
                        "the step)",
                "rest": "the rest dominates: bound by the collective's own CPU, latency and waiting, not by the "
                        "bandwidth (the measured bytes at the link's rate take less)"}
        groups = [(p, measured[top == p]) for p in PARTS if (top == p).any()]
        if len(groups) == 1:
            text = f"At {every} {said[groups[0][0]]}"
        else:
            text = "; ".join(f"at {_where(rows)} {said[p]}" for p, rows in groups)
            text = text[0].upper() + text[1:]
        of_step = ", ".join(f"{p} {v}" for p, v in shares.items())
        out.append(f"{text[0].upper() + text[1:]} (shares of the steady step: {of_step}).")
        if measured["wire_s"].isna().any():
            out.append(f"{plural(int(measured['wire_s'].isna().sum()), 'point')} had no byte counts, so their rest "
                       "includes the wire.")
        missing = len(multi) - len(measured)
        if missing:
            out.append(f"{plural(missing, 'point')} had no compute measurement or no steady step and "
                       f"{'is' if missing == 1 else 'are'} left out of this.")
    if split["compute"].str.contains("shared").any():
        out.append("The nodes shared the machine's cores without budgets: every node added took CPU from "
                   "the others, so the trend with the number of nodes includes CPU sharing, not "
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


# A degraded run's reasons start with their kind. These kinds mean the emulated machines got less than
# they stand for (CPU below their budgets, a switch that fell behind, CPUs the machine's host took away):
# they could only have run slower, so a speedup measured on such runs against a faithful one-node run is a
# lower bound. Other kinds (shaping off the rate, late timers, replay's unbudgeted communication) could err
# either way.
SLOWER_ONLY_KINDS = ("cpu", "switch", "host")
REASON_KINDS = SLOWER_ONLY_KINDS + ("replay", "shaping", "timers")


def reasons(fidelity) -> list[str]:
    """A fidelity verdict's reasons ('degraded: cpu: ...; switch: ...'): [] for 'ok' or blank. A reason's own
    '; ' (advice after it) stays with it: a new reason starts with a known kind."""
    text = tables.text(fidelity)
    if not text.startswith("degraded"):
        return []
    out: list[str] = []
    for part in text.removeprefix("degraded").lstrip(": ").split("; "):
        if out and not part.startswith(tuple(f"{k}: " for k in REASON_KINDS)):
            out[-1] += "; " + part
        elif part:
            out.append(part)
    return out


def slower_only(fidelity) -> bool:
    """Whether a degraded run's every reason could only have made it slower than the machines it stands
    for (SLOWER_ONLY_KINDS)."""
    found = reasons(fidelity)
    return bool(found) and all(r.split(":", 1)[0] in SLOWER_ONLY_KINDS for r in found)
