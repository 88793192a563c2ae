"""Communication settings (runs with workload.communication only): compared by time to a target loss on the same
work, the bytes each worker sent against the theory (communication_wire.png), and what would make it pay off
(analysis/tables/payoff.py)."""
from __future__ import annotations

import html
from pathlib import Path

import pandas as pd

from analysis.figures import communication_figure, figures
from analysis.tables import payoff, tables


def section_tables(exp: tables.Experiment) -> dict[str, pd.DataFrame]:
    """communication_runs, communication and communication_left_out, when a run used a setting."""
    return payoff.section(exp)


def parts(t: dict, figdir: Path, exp_dir: Path) -> list[str]:
    """The communication settings compared by time to target, the wire against theory, and the pay-off
    (analysis/tables/payoff.py)."""
    if "communication" not in t:
        return []
    e = html.escape
    compare, wire, pays = payoff.sentences(t)
    out = ["<h2>Communication settings</h2><p>Time to the target loss on the same work (each setting's mean and the "
           "range of its repeats; two settings differ beyond the spread when those ranges lie apart with enough "
           "repeats), and the bytes each worker sent against the theory.</p><ul>"
           + "".join(f"<li>{e(x)}</li>" for x in compare + wire) + "</ul>"]
    try:
        path = communication_figure.wire_figure(t["network"], figdir)
        out.append(f"<figure><img src='{e(path.relative_to(exp_dir).as_posix())}' alt='communication_wire'>"
                   "<figcaption>Bytes each worker sent per step against the theory of its setting (tables/network.csv"
                   ").</figcaption></figure>")
    except figures.FigureSkipped as why:
        out.append(f"<p class='skip'>Figure communication_wire skipped: {e(str(why))}.</p>")
    out.append("<h2>What would make it pay off here</h2><ul class='payoff'>"
               + "".join(f"<li>{e(x)}</li>" for x in pays or ["Nothing to rank: no setting reached the target "
                                                             "in every run."]) + "</ul>")
    return out
