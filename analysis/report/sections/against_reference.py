"""Against the reference results (`report DIR --compare REFERENCE`): each configuration against stored results of
the same set-up, beyond the spread of the repeats or not (analysis/comparisons/reference.py), its table
against_reference.csv and its figure against_reference.png."""
from __future__ import annotations

import html
from pathlib import Path

import pandas as pd

from analysis.comparisons import reference
from analysis.figures import figures, reference_figure
from analysis.tables import tables


def forget(tabdir: Path, figdir: Path) -> None:
    """Remove a previous report's table and figure of this section (a report without --compare has none)."""
    (tabdir / "against_reference.csv").unlink(missing_ok=True)
    (figdir / "against_reference.png").unlink(missing_ok=True)


def parts_and_table(ref_dir, exp: tables.Experiment, figdir: Path) -> tuple[list[str], pd.DataFrame]:
    """The report's section on `exp` against the reference results in `ref_dir`, and its table."""
    e = html.escape
    ref = tables.load_experiment(ref_dir)
    ref.include_degraded = exp.include_degraded
    table = reference.against(ref, exp)
    out = [f"<h2>Against the reference results</h2><p>Reference: <code>{e(str(ref_dir))}</code>. "
           "Each side's spread is the range of its repeats; two configurations differ beyond the spread "
           "when those ranges do not overlap.</p><ul>"
           + "".join(f"<li>{e(x)}</li>" for x in reference.sentences(table, ref, exp)) + "</ul>"]
    try:
        path, _ = reference_figure.figure(table, exp, figdir)
        out.append(f"<figure><img src='{e(path.relative_to(exp.path).as_posix())}' alt='against_reference'>"
                   "<figcaption>Steady samples per second against nodes: the reference dashed over the band "
                   "of its repeats, yours solid from your slowest to your fastest repeat.</figcaption></figure>")
    except figures.FigureSkipped as why:
        out.append(f"<p class='skip'>Figure against_reference skipped: {e(str(why))}.</p>")
    return out, table
