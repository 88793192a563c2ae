"""The runs: how many ran ok, failed or were skipped, the degraded ones (this machine could not emulate them
faithfully: analysis/tables/faithful.py) with their reasons, and the failed ones with theirs."""
from __future__ import annotations

import html

import pandas as pd

from analysis.report.markup import table_html
from analysis.tables import faithful, tables


def section_tables(exp: tables.Experiment) -> dict[str, pd.DataFrame]:
    """failed_runs, and degraded_runs when there are any."""
    degraded = tables.degraded_runs(exp.runs)
    return {"failed_runs": tables.failed_runs(exp.runs), **({"degraded_runs": degraded} if len(degraded) else {})}


def parts(exp: tables.Experiment, t: dict[str, pd.DataFrame]) -> list[str]:
    """The count of runs and the source folder, then the degraded runs and the failed runs where there are any."""
    e = html.escape
    n_ok = int((exp.runs["status"] == "ok").sum())
    n_bad = len(exp.runs) - n_ok
    out = [f"<p>{len(exp.runs)} runs: <b>{n_ok} ok</b>, <b>{n_bad} failed or skipped</b>. "
           f"Source: <code>{e(str(exp.path))}</code>.</p>"]
    note = faithful.degraded_note(exp.runs, exp.include_degraded)
    if note:
        out.append(f"<h2>Degraded runs</h2><p>{e(note)}</p><ul>" + "".join(
            f"<li><code>{e(str(r.run_id))}</code>: {e(str(r.reasons))}</li>"
            for r in tables.degraded_runs(exp.runs).itertuples()) + "</ul>")
    if n_bad:
        out.append("<h2>Failed runs</h2><ul>" + "".join(
            f"<li><code>{e(str(r.run_id))}</code> ({e(str(r.status))}): {e(str(r.reason))}</li>"
            for r in t["failed_runs"].itertuples()) + "</ul>")
        out.append(table_html("failed_runs", t["failed_runs"]))
    return out
