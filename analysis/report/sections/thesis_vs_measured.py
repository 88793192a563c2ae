"""The thesis and this experiment, side by side: every thesis figure the data speaks to, the thesis's statement
beside what was measured (analysis/comparisons/thesis.py), and the thesis's one node against two (fig. 19)."""
from __future__ import annotations

import pandas as pd

from analysis.comparisons import thesis
from analysis.report.markup import table_html
from analysis.tables import tables


def section_tables(exp: tables.Experiment, derived: dict[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
    """thesis_vs_measured, from the other sections' tables."""
    return {"thesis_vs_measured": thesis.side_by_side(exp, derived)}


def sentences(t: dict[str, pd.DataFrame]) -> list[str]:
    """The speedup of two nodes over one, against the thesis's figure 19."""
    return thesis.one_against_two(t["summary"], t["resources"])


def parts(t: dict[str, pd.DataFrame]) -> list[str]:
    if not len(t["thesis_vs_measured"]):
        return []
    return ["<h2>The thesis and this experiment, side by side</h2>"
            "<p>Compare shapes and trends, not absolute times: the machines, models and data differ.</p>"
            + table_html("thesis_vs_measured", t["thesis_vs_measured"])]
