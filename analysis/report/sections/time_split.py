"""Where the steady step went, per point: compute, the wire and the rest (analysis/tables/faithful.py), and what
dominates it, said only from measured compute; its figure is time_split.png (analysis/figures/figures.py)."""
from __future__ import annotations

import pandas as pd

from analysis.tables import faithful, tables


def section_tables(exp: tables.Experiment) -> dict[str, pd.DataFrame]:
    return {"time_split": faithful.time_split(tables.counted_runs(exp), exp.steps, exp.usage)}


def sentences(t: dict[str, pd.DataFrame]) -> list[str]:
    """What dominates the steady step: compute, the wire or the rest (from measured compute only)."""
    return faithful.domination_sentences(t["time_split"])
