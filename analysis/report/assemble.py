"""Build exp_dir/report.html (+ figures/*.png, tables/*.csv) from stored result tables.

Usage: ``run_experiment.py report RESULTS/EXPERIMENT`` (testbed/cli/results/report.py) or ``build_report(exp_dir)``.
Every HTML table is ``DataFrame.to_html`` of the frame written to ``tables/<name>.csv``. Each section is a module
of analysis/report/sections/ (its wording, its tables, its figure); this puts them together, in the page's order,
then the missing data, the figures and the tables.
"""
from __future__ import annotations

import html
from pathlib import Path

import pandas as pd

from analysis import outputs
from analysis.figures import figures
from analysis.report.markup import CSS, table_html
from analysis.report.sections import (against_reference, answer, bleu, cost_model, faults, network, runs, stability,
                                      thesis_vs_measured, time_split, trend)
from analysis.report.sections.settings import communication, mixed_machines
from analysis.tables import faithful, tables

MISSING_MEANS = {
    "checks.csv": "no iperf3/ping checks, so no bandwidth-check figure (thesis fig. 17)",
    "steps.csv": "no per-step timings",
    "usage.csv": "no per-node samples; resource figures use runs.csv summary columns only",
}


def derived_tables(exp: tables.Experiment) -> dict[str, pd.DataFrame]:
    """The tables the report shows, by name (also the CSV file stem), each section's in the page's order.
    Degraded runs are left out of them (and listed in degraded_runs) unless exp.include_degraded."""
    derived = {**answer.section_tables(exp), **runs.section_tables(exp), **time_split.section_tables(exp),
               **network.section_tables(exp), **cost_model.section_tables(exp), **bleu.section_tables(exp),
               **stability.section_tables(exp), **communication.section_tables(exp), **mixed_machines.section_tables(exp),
               **faults.section_tables(exp)}
    return {**derived, **thesis_vs_measured.section_tables(exp, derived)}


def draw_figures(exp: tables.Experiment, figdir: Path) -> tuple[dict, dict[str, str]]:
    """Every figure of figures.FIGURES: ({name: (path, caption)} drawn, {name: why} skipped)."""
    made, skipped = {}, {}
    for name, (func, caption) in figures.FIGURES.items():
        try:
            made[name] = (func(exp, figdir)[0], caption)
        except figures.FigureSkipped as e:
            skipped[name] = str(e)
    return made, skipped


def closing_parts(exp: tables.Experiment, t: dict[str, pd.DataFrame], made: dict,
                  skipped: dict[str, str]) -> list[str]:
    """The missing data (absent tables, skipped figures), every figure drawn and every table."""
    e = html.escape
    parts = []
    if exp.missing or skipped:
        parts.append("<h2>Missing data</h2><ul>")
        parts += [f"<li class='skip'>{e(m)} is missing: {e(MISSING_MEANS[m])}.</li>"
                  for m in exp.missing]
        parts += [f"<li class='skip'>Figure <b>{e(n)}</b> skipped: {e(why)}.</li>"
                  for n, why in skipped.items()]
        parts.append("</ul>")
    parts.append("<h2>Figures</h2>")
    for name, (path, caption) in made.items():
        rel = path.relative_to(exp.path).as_posix()
        parts.append(f"<figure><img src='{e(rel)}' alt='{e(name)}'>"
                     f"<figcaption>{e(caption)}</figcaption></figure>")
    parts.append("<h2>Tables</h2>")
    for name, df in t.items():
        if name in ("failed_runs", "thesis_vs_measured"):
            continue
        parts.append(f"<h3>{e(name)} <small>(tables/{e(name)}.csv)</small></h3>")
        parts.append(table_html(name, df))
    return parts


def build_report(exp_dir, include_degraded: bool = False, reference_dir=None) -> Path:
    """Write exp_dir/report.html, exp_dir/figures/*.png and exp_dir/tables/*.csv. Degraded runs
    (fidelity 'degraded: ...') are marked in the figures and left out of the trends, tables and
    cost model fit unless include_degraded. reference_dir: stored results of the same set-up to
    draw these over and compare with (a section, figures/against_reference.png and
    tables/against_reference.csv)."""
    exp_dir = Path(exp_dir)
    exp = tables.load_experiment(exp_dir)
    exp.include_degraded = include_degraded
    figdir, tabdir = exp_dir / "figures", exp_dir / "tables"
    tabdir.mkdir(parents=True, exist_ok=True)
    t = derived_tables(exp)
    against_parts = []
    against_reference.forget(tabdir, figdir)
    if reference_dir is not None:
        against_parts, t["against_reference"] = against_reference.parts_and_table(Path(reference_dir), exp, figdir)
    for name, df in t.items():
        outputs.write_text(tabdir / f"{name}.csv", tables.csv_text(df))
    made, skipped = draw_figures(exp, figdir)
    e = html.escape
    setup = f"{faithful.setup_sentence(exp.runs)} {faithful.dilation_note(exp.runs)}".strip()
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>{e(exp.name)}</title>"
             f"<style>{CSS}</style></head><body>",
             f"<h1>Experiment {e(exp.name)}</h1>",
             f"<p class='setup'>{e(setup)}</p>",
             *answer.parts(exp, t, figdir, exp_dir), *runs.parts(exp, t), *trend.parts(exp, t),
             *communication.parts(t, figdir, exp_dir), *mixed_machines.parts(exp, t), *thesis_vs_measured.parts(t),
             *against_parts,
             *closing_parts(exp, t, made, skipped), "</body></html>"]
    out = exp_dir / "report.html"
    outputs.write_text(out, "\n".join(parts))
    return out
