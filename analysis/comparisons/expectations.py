"""The experiment file's expectations (`expect:`) judged on its stored tables, each pass, fail or not judged.

An expectation arrives as plain data, the file's item as the spec checked it (testbed/spec/expect.py):
{"metric": "steady_samples_per_s", "min": 100.0, "max": None, "where": {"topology.hosts": 4}},
{"fidelity": "ok", "where": {}} or {"against": "/abs/results/folder", "where": {}}; `where` maps canonical key
paths to values in the spec's JSON form. `points` maps each run id to its point's values at those key paths
(the testbed reads them from the file's run points; tests make them up).

- A runs.csv column or `fidelity` is judged per run point, a checks.csv column (`checks.ratio`, ...) per point
  over every pair checked (the worst pair counts): `point_outcomes`, after each point.
- A column of the report's summary (analysis/tables/speedup.py: `speedup`, `steady_samples_per_s_mean`, ...) is judged
  per configuration (tables.CONFIG_KEYS), degraded runs left out as the report does: `summary_outcomes`.
- `against` judges each configuration's steady samples per second against the stored folder's by
  analysis/tables/spread.py's rule (reference.against): lower beyond the spread fails; ranges apart with too few
  repeats, one run a side, or no steady figure are not judged, never passed: `against_outcomes`.

A figure that is not there (a failed point, no steady state, no check of that kind) is not judged, with the
reason. An expectation that no point or configuration answers gets one not-judged row that says so.
"""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass

import numpy as np
import pandas as pd

from analysis.comparisons import reference
from analysis.tables import speedup, steady, tables

PASS, FAIL, NOT_JUDGED = "pass", "fail", "not judged"
COLUMNS = ["point", "expectation", "measured", "bound", "outcome", "detail"]
CHECKS = "checks."
_TEXT = {"bw", "baseline_strategy", "speedup_verdict", "not_judged"}
SUMMARY_METRICS = tuple(c for c in speedup.SUMMARY_COLUMNS if c not in set(tables.CONFIG_KEYS) | _TEXT)
_STEADY = {"warmup_steps", "warmup_s", "steady_steps", "steady_step_s", "steady_step_q1_s", "steady_step_q3_s",
           "steady_samples_per_s"}


@dataclass(frozen=True)
class Outcome:
    """One expectation judged at one point (a run id), one configuration, or the whole experiment ('')."""
    index: int           # the expectation's place in expect:
    point: str
    expectation: str
    measured: object     # a number, a verdict's text, or None
    bound: str
    outcome: str         # PASS, FAIL or NOT_JUDGED
    detail: str = ""

    def row(self) -> dict:
        return {c: getattr(self, c) for c in COLUMNS}


# ---- what an expectation says ------------------------------------------------------------------------------

def kind(e: dict) -> str:
    """'metric', 'fidelity' or 'against'."""
    return next(k for k in ("metric", "fidelity", "against") if e.get(k) is not None)


def level(e: dict) -> str:
    """'point' (runs.csv, checks.csv, fidelity), 'summary' (a column of the summary) or 'against'."""
    if kind(e) == "against":
        return "against"
    return "summary" if e.get("metric") in SUMMARY_METRICS else "point"


def bound(e: dict) -> str:
    if kind(e) == "fidelity":
        return "ok"
    if kind(e) == "against":
        return "not lower beyond the spread"
    low, high = e.get("min"), e.get("max")
    if low is not None and high is not None:
        return f"between {low:g} and {high:g}"
    return f">= {low:g}" if low is not None else f"<= {high:g}"


def describe(e: dict) -> str:
    """'steady_samples_per_s >= 100 where topology.hosts=4', 'fidelity ok', 'not slower than FOLDER'."""
    what = {"metric": lambda: f"{e.get('metric')} {bound(e)}", "fidelity": lambda: "fidelity ok",
            "against": lambda: f"not slower than {e.get('against')}"}[kind(e)]()
    where = ", ".join(f"{k}={v if isinstance(v, str) else json.dumps(v)}" for k, v in (e.get("where") or {}).items())
    return f"{what} where {where}" if where else what


def matches(e: dict, values: dict | None) -> bool:
    """Whether a point with these key path values is one the expectation's where selects."""
    where = e.get("where") or {}
    return not where or (values is not None and all(k in values and values[k] == v for k, v in where.items()))


def judge_value(e: dict, value: float) -> str:
    """PASS or FAIL of a number against the bounds (both included)."""
    low, high = e.get("min"), e.get("max")
    inside = (low is None or value >= low) and (high is None or value <= high)
    return PASS if inside else FAIL


# ---- per point ---------------------------------------------------------------------------------------------

def point_outcomes(expectations: list[dict], runs: pd.DataFrame, checks: pd.DataFrame, points: dict) -> list[Outcome]:
    """The per-point expectations judged on every recorded point of `points`, in runs.csv's order."""
    runs = runs.drop_duplicates("run_id", keep="last")
    runs = runs[runs["run_id"].astype(str).isin(list(points))]
    by_run = {run_id: rows for run_id, rows in checks.groupby("run_id")} if len(checks) else {}
    out = []
    for index, e in enumerate(expectations):
        if level(e) != "point":
            continue
        for row in runs.to_dict("records"):
            if matches(e, points.get(row["run_id"])):
                out.append(_at_point(index, e, row, by_run.get(row["run_id"])))
    return out


def _at_point(index: int, e: dict, row: dict, checks: pd.DataFrame | None) -> Outcome:
    said = dict(index=index, point=str(row["run_id"]), expectation=describe(e), bound=bound(e))
    if row.get("status") != "ok":
        return Outcome(**said, measured=None, outcome=NOT_JUDGED,
                       detail=f"the point failed: {tables.text(row.get('reason'))}")
    if kind(e) == "fidelity":
        verdict = tables.text(row.get("fidelity")).strip()
        if verdict == "ok" or verdict.startswith("degraded"):
            return Outcome(**said, measured=verdict, outcome=PASS if verdict == "ok" else FAIL)
        return Outcome(**said, measured=None, outcome=NOT_JUDGED, detail="no fidelity verdict recorded")
    metric = e["metric"]
    if metric.startswith(CHECKS):
        return _over_pairs(said, e, checks, metric[len(CHECKS):])
    value = pd.to_numeric(pd.Series([row.get(metric)]), errors="coerce").iloc[0]
    if pd.isna(value):
        said_steady = tables.text(row.get("steady"))
        why = said_steady if metric in _STEADY and said_steady != steady.OK else ""
        return Outcome(**said, measured=None, outcome=NOT_JUDGED,
                       detail=f"no steady figure: {why}" if why else f"no {metric} recorded for this point")
    return Outcome(**said, measured=float(value), outcome=judge_value(e, float(value)))


def _over_pairs(said: dict, e: dict, checks: pd.DataFrame | None, column: str) -> Outcome:
    """A checks.csv column over the point's pairs: the lowest against min, the highest against max."""
    values = pd.to_numeric(checks[column], errors="coerce").dropna() if checks is not None and column in checks \
        else pd.Series(dtype=float)
    if values.empty:
        return Outcome(**said, measured=None, outcome=NOT_JUDGED, detail=f"no check of this point measured {column}")
    low, high, n = float(values.min()), float(values.max()), len(values)
    pairs = f"{n} pair{'s' * (n != 1)}"
    if e.get("min") is not None and low < e["min"]:
        return Outcome(**said, measured=low, outcome=FAIL, detail=f"the lowest of {pairs}")
    if e.get("max") is not None and high > e["max"]:
        return Outcome(**said, measured=high, outcome=FAIL, detail=f"the highest of {pairs}")
    worst, which = (low, "lowest") if e.get("min") is not None else (high, "highest")
    return Outcome(**said, measured=worst, outcome=PASS, detail=f"the {which} of {pairs}")


# ---- per configuration -------------------------------------------------------------------------------------

def configurations(runs: pd.DataFrame) -> list[tuple[dict, list[str]]]:
    """(configuration keys, its ok runs' ids) for each configuration of `runs` (tables.CONFIG_KEYS)."""
    ok = tables.ok_runs(runs)
    if ok.empty:
        return []
    return [(dict(zip(tables.CONFIG_KEYS, key)), list(rows["run_id"].astype(str)))
            for key, rows in ok.groupby(tables.CONFIG_KEYS, dropna=False)]


def label(config: dict, models: int = 1) -> str:
    """'allreduce, 4 nodes, 10mbit' (and the model and engine where the runs have more than one)."""
    hosts = int(config["hosts"]) if pd.notna(config.get("hosts")) else 0
    bw = f"{config['bw_bps'] / 1e6:g}mbit" if pd.notna(config.get("bw_bps")) else "unshaped"
    text = f"{config.get('strategy')}, {hosts} node{'s' * (hosts != 1)}, {bw}"
    return f"{config.get('model')} {config.get('engine')}, {text}" if models > 1 else text


def _runs_of(config: dict, groups: list[tuple[dict, list[str]]]) -> list[str]:
    """The ok runs of `config`'s configuration (none when it has none)."""
    for keys, ids in groups:
        if all(tables.same_value(keys[k], config[k]) for k in tables.CONFIG_KEYS):
            return ids
    return []


def summary_outcomes(expectations: list[dict], runs: pd.DataFrame, points: dict,
                     job: speedup.Job | None = None) -> list[Outcome]:
    """The summary-level expectations judged per configuration whose runs all match the where (`runs`:
    the counted runs of the file's points, as the report counts them)."""
    wanted = [(i, e) for i, e in enumerate(expectations) if level(e) == "summary"]
    if not wanted:
        return []
    table = speedup.summary(runs, job)
    groups, models = configurations(runs), runs["model"].nunique()
    out = []
    for index, e in wanted:
        said = dict(index=index, expectation=describe(e), bound=bound(e))
        found = []
        for row in table.to_dict("records"):
            ids = _runs_of(row, groups)
            if not ids or not all(matches(e, points.get(i)) for i in ids):
                continue
            value = row.get(e["metric"])
            if value is None or pd.isna(value):
                why = tables.text(row.get("not_judged")) or f"no {e['metric']} for this configuration"
                found.append(Outcome(**said, point=label(row, models), measured=None, outcome=NOT_JUDGED, detail=why))
            else:
                found.append(Outcome(**said, point=label(row, models), measured=float(value),
                                     outcome=judge_value(e, float(value)), detail=f"{len(ids)} run(s)"))
        out += found or [Outcome(**said, point="", measured=None, outcome=NOT_JUDGED,
                                 detail="no configuration with an ok run (degraded runs left out) matches")]
    return out


def against_outcomes(expectations: list[dict], yours: tables.Experiment, points: dict,
                     load=tables.load_experiment) -> list[Outcome]:
    """Each `against` expectation: per configuration of yours (all its runs matching the where), its steady
    samples per second against the stored folder's (reference.against)."""
    out = []
    for index, e in enumerate(expectations):
        if level(e) != "against":
            continue
        said = dict(index=index, expectation=describe(e), bound=bound(e))
        try:
            stored = load(e["against"])
        except (FileNotFoundError, tables.ResultsError) as err:
            out.append(Outcome(**said, point="", measured=None, outcome=NOT_JUDGED, detail=f"cannot read it: {err}"))
            continue
        table = reference.against(stored, yours)
        table = table[(table["metric"] == "steady_samples_per_s")
                      & ((table["yours_runs"] > 0) | (table["verdict"] == reference.NOT_JUDGED))]
        groups = configurations(tables.counted_runs(yours))
        models = yours.runs["model"].nunique()
        found = []
        for row in table.to_dict("records"):
            ids = _runs_of(row, groups)
            if ids and all(matches(e, points.get(i)) for i in ids):
                found.append(_against_row(said, row, label(row, models)))
        out += found or [Outcome(**said, point="", measured=None, outcome=NOT_JUDGED,
                                 detail="no configuration with an ok run (degraded runs left out) matches")]
    return out


def _against_row(said: dict, row: dict, point: str) -> Outcome:
    verdict = row["verdict"]
    ref = (f"reference {row['reference_min']:.4g} to {row['reference_max']:.4g} over {row['reference_runs']} run(s)"
           if row["reference_runs"] else "not in the reference")
    mine = f"yours {row['yours_min']:.4g} to {row['yours_max']:.4g} over {row['yours_runs']} run(s)" \
        if row["yours_runs"] else "no steady figure in yours"
    measured = float(row["yours_mean"]) if pd.notna(row["yours_mean"]) else None
    if verdict == "lower beyond the spread":
        outcome = FAIL
    elif verdict in (reference.WITHIN, "higher beyond the spread"):
        outcome = PASS
    else:
        outcome = NOT_JUDGED
    ratio = f", yours / reference {row['ratio']:.2f}" if pd.notna(row.get("ratio")) else ""
    return Outcome(**said, point=point, measured=measured, outcome=outcome, detail=f"{verdict}: {mine}; {ref}{ratio}")


# ---- everything, and the table -----------------------------------------------------------------------------

def evaluate(expectations: list[dict], exp: tables.Experiment, points: dict, job: speedup.Job | None = None,
             load=tables.load_experiment) -> list[Outcome]:
    """Every expectation on a loaded results folder, restricted to the run ids of `points` (the file's own
    points: a folder may also hold runs of an earlier version of the file)."""
    runs = exp.runs[exp.runs["run_id"].astype(str).isin(list(points))]
    mine = dataclasses.replace(exp, runs=runs)
    out = point_outcomes(expectations, runs, exp.checks, points)
    asked = {o.index for o in out}
    out += [Outcome(i, "", describe(e), None, bound(e), NOT_JUDGED, "no recorded run point matches")
            for i, e in enumerate(expectations) if level(e) == "point" and i not in asked]
    out += summary_outcomes(expectations, tables.counted_runs(mine), points, job)
    out += against_outcomes(expectations, mine, points, load)
    return sorted(out, key=lambda o: o.index)


def frame(outcomes: list[Outcome]) -> pd.DataFrame:
    """expectations.csv: point, expectation, measured, bound, outcome, detail."""
    return pd.DataFrame([o.row() for o in outcomes], columns=COLUMNS)


def counts(outcomes: list[Outcome]) -> dict[str, int]:
    return {k: sum(o.outcome == k for o in outcomes) for k in (PASS, FAIL, NOT_JUDGED)}


def shown(value) -> str:
    """A measured value as the tables print it: 4 significant digits, text as it is, '-' for none."""
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return "-"
    return f"{value:.4g}" if isinstance(value, (int, float, np.number)) else str(value)
