"""Faults (runs with faults only): each fault's cost, each recovered run's restarts, and whether a straggler made
everyone wait; its figure is timeline.png."""
from __future__ import annotations

import pandas as pd

from analysis.tables import tables


def section_tables(exp: tables.Experiment) -> dict[str, pd.DataFrame]:
    if not len(exp.faults):
        return {}
    return {"faults": tables.fault_costs(exp.faults, exp.runs),
            "fault_windows": tables.fault_windows(exp.faults, exp.steps)}


def sentences(t: dict[str, pd.DataFrame]) -> list[str]:
    """Each fault's cost, each recovered run's restarts, and whether a straggler made everyone wait."""
    f, out = t.get("faults", pd.DataFrame()), []
    if f.empty:
        return out
    for r in f.itertuples():
        what = f"Fault #{r.fault} ({r.action} {r.target} at {r.at}, run {r.run_id})"
        if pd.isna(r.applied_step):
            out.append(f"{what} was not applied: {r.outcome}.")
            continue
        undone = f", undone after step {int(r.undone_step)}" if pd.notna(r.undone_step) else ""
        out.append(f"{what} hit after step {int(r.applied_step)}{undone}: it cost {r.extra_s:.3g} s beyond the "
                   f"median step and {int(r.steps_replayed)} step(s) replayed (outcome: {r.outcome}).")
    for run_id, rows in f[f["restarts"].fillna(0) > 0].groupby("run_id"):
        out.append(f"Run {run_id} restarted {int(rows['restarts'].iloc[0])} time(s) from its last backup and "
                   f"lost {rows['time_lost_s'].iloc[0]:.3g} s to it.")
    w = t["fault_windows"]
    for (run_id, fault), rows in w.groupby(["run_id", "fault"]):
        if len(rows) < 2:
            continue
        each = "; ".join(f"{r.role} {r.task_index} on {r.host} {r.median_before_s:.3g} s → {r.median_during_s:.3g} s"
                         for r in rows.itertuples())
        verdict = ("every task slowed, not only the one the fault hit: in synchronous training everyone waits "
                   "for the slowest" if (rows["slowdown"] > 1.5).all() else "not every task slowed")
        out.append(f"While fault #{fault} ({rows['action'].iloc[0]} {rows['target'].iloc[0]}, run {run_id}) was "
                   f"in force, the median step went from before to during: {each}: {verdict}.")
    return out
