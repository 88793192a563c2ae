"""Parameter server against all-reduce on speed and stability: each run's time to the target loss and how
steadily it got there (analysis/tables/stability.py), the runs of one engine (named where the experiment ran
several); its figure is convergence.png."""
from __future__ import annotations

import pandas as pd

from analysis.tables import stability, tables
from analysis.text import mbit


def section_tables(exp: tables.Experiment) -> dict[str, pd.DataFrame]:
    """stability_runs and stability, for ps and all-reduce runs with per-step losses."""
    found = stability.analyse(exp)
    if found is None:
        return {}
    _, runs, target = found
    return {"stability_runs": runs.assign(target_loss=target), "stability": stability.per_strategy(runs)}


def sentences(t: dict[str, pd.DataFrame]) -> list[str]:
    if "stability" not in t:
        return []
    engines = set(t["summary"]["engine"]) if "summary" in t and "engine" in t["summary"] else set()
    runs = t["stability_runs"]
    engine = str(runs["engine"].iloc[0]) if len(engines) > 1 and "engine" in runs else ""
    return stability.sentences(t["stability"], float(runs["target_loss"].iloc[0]), mbit, engine)
