"""A run against stored reference results of the same set-up (`report DIR --compare REFERENCE`).

Both experiments' ok runs (degraded ones left out unless asked) are grouped by configuration
(tables.CONFIG_KEYS). The metrics are the steady samples per second (of the runs judged steady), the
speedup (each side's speedup.summary: the same figure its own report states, with its range from the
slowest to the fastest ratio of the repeats) and the final loss; training times are not compared
(they include the warm-up). Per configuration and metric, each side's spread is the range of its
repeats, [min, max]. The two differ beyond the spread when those ranges do not overlap and so few
orders of the runs would put them apart by chance (analysis/tables/spread.py); with one run on each side
there is no spread, and with too few repeats the table says so instead of judging.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from analysis.tables import speedup, spread, tables
from analysis.text import mbit

METRICS = {"steady_samples_per_s": "steady samples per second", "speedup": "speedup", "final_loss": "final loss"}
SIDES = ("reference", "yours")
COLUMNS = [*tables.CONFIG_KEYS, "metric", *(f"{side}_{k}" for side in SIDES for k in ("runs", "mean", "min", "max")),
           "ratio", "verdict"]
# what, beside the configuration, makes two runs' times incomparable
SET_UP = {"compute": "compute", "fixed": "mode (workload.fixed)", "steps": "steps per run",
          "global_batch": "global batch"}
WITHIN, NO_SPREAD, ONLY = "within the spread", "one run each: no spread to judge", "measured on one side only"
NOT_JUDGED = "not judged on one side"
TOO_FEW = "apart, but too few repeats to judge"


def _counted_ok(exp: tables.Experiment) -> pd.DataFrame:
    runs = tables.ok_runs(tables.counted_runs(exp))
    return runs.assign(engine=tables.with_engine(runs))


def verdict(ref: pd.Series, yours: pd.Series) -> str:
    """Where `yours` lies against `ref` (each a side's runs, mean, min, max)."""
    if not (ref["runs"] and yours["runs"]):
        return ONLY
    judged = spread.judge((int(ref["runs"]), ref["min"], ref["max"]), (int(yours["runs"]), yours["min"], yours["max"]))
    if judged.verdict == spread.APART:
        return "higher beyond the spread" if judged.sign > 0 else "lower beyond the spread"
    return {spread.WITHIN: WITHIN, spread.NO_SPREAD: NO_SPREAD, spread.TOO_FEW: TOO_FEW}[judged.verdict]


EMPTY = pd.Series({"runs": 0, "mean": np.nan, "min": np.nan, "max": np.nan})


def _stats(exp: tables.Experiment, metric: str) -> pd.DataFrame:
    """Per configuration: runs, mean, min, max of `metric` on one side."""
    if metric == "speedup":
        s = speedup.summary(tables.counted_runs(exp))
        s = s[s["speedup"].notna() & (s["hosts"] > 1)]
        return s.set_index(tables.CONFIG_KEYS)[["n_steady", "speedup", "speedup_min", "speedup_max"]].set_axis(
            ["runs", "mean", "min", "max"], axis=1)
    runs = _counted_ok(exp)
    if metric == "steady_samples_per_s":
        runs = runs[runs["steady"].astype(str).eq("ok")]
    return runs.dropna(subset=[metric]).groupby(tables.CONFIG_KEYS, dropna=False)[metric] \
        .agg(runs="size", mean="mean", min="min", max="max")


def against(reference: tables.Experiment, yours: tables.Experiment) -> pd.DataFrame:
    """One row per configuration measured on either side and metric: each side's runs, mean, min
    and max, yours / the reference's mean, and the verdict (not judged on one side: a side ran the
    configuration but has no steady figure or speedup for it)."""
    exps = dict(zip(SIDES, (reference, yours)))
    ran = {side: set(_counted_ok(exp).set_index(tables.CONFIG_KEYS).index) for side, exp in exps.items()}
    rows = []
    for metric in METRICS:
        stats = {side: _stats(exp, metric) for side, exp in exps.items()}
        keys = stats["reference"].index.union(stats["yours"].index)
        if metric != "speedup":
            keys = keys.union(pd.MultiIndex.from_tuples(sorted(ran["reference"] | ran["yours"], key=str),
                                                        names=tables.CONFIG_KEYS)) if ran["reference"] | ran["yours"] \
                else keys
        for key in keys:
            got = {side: (stats[side].loc[key] if key in stats[side].index else EMPTY) for side in SIDES}
            row = dict(zip(tables.CONFIG_KEYS, key), metric=metric)
            for side in SIDES:
                row.update({f"{side}_{k}": got[side][k] for k in ("runs", "mean", "min", "max")})
            ref_mean = got["reference"]["mean"]
            row["ratio"] = got["yours"]["mean"] / ref_mean if ref_mean else np.nan
            row["verdict"] = verdict(got["reference"], got["yours"])
            if row["verdict"] == ONLY and all(key in ran[side] for side in SIDES):
                row["verdict"] = NOT_JUDGED
            rows.append(row)
    table = pd.DataFrame(rows, columns=COLUMNS)
    for side in SIDES:
        table[f"{side}_runs"] = table[f"{side}_runs"].astype(int)
    return table.sort_values(["metric", "model", "engine", "strategy", "bw_bps", "hosts"]).reset_index(drop=True)


def slower(table: pd.DataFrame, faster_too: bool = False) -> tuple[pd.DataFrame, pd.DataFrame]:
    """From `against`'s table: the configurations whose steady samples per second are lower than the
    reference's beyond the spread (faster_too: or higher), and those whose ranges lie apart but with too few
    repeats to judge."""
    rate = table[table["metric"] == "steady_samples_per_s"]
    verdicts = ["lower beyond the spread"] + (["higher beyond the spread"] if faster_too else [])
    return rate[rate["verdict"].isin(verdicts)], rate[rate["verdict"] == TOO_FEW]


def point_text(row) -> str:
    """'10 Mbit/s, allreduce, 4 nodes' of one of `against`'s rows."""
    return _point(row)


def _values(runs: pd.DataFrame, column: str) -> list[str]:
    """The values a column took over the runs, as text (numbers without a trailing .0)."""
    found = runs[column].dropna().unique() if column in runs else []
    return sorted(f"{v:g}" if isinstance(v, (int, float, np.number)) else str(v) for v in found)


def _point(row) -> str:
    return f"{mbit(row.bw_bps)}, {row.strategy}, {int(row.hosts)} node{'s' * (int(row.hosts) != 1)}"


def sentences(table: pd.DataFrame, reference: tables.Experiment, yours: tables.Experiment) -> list[str]:
    """Where the two differ beyond the spread, and what could not be judged."""
    out = []
    if reference.name != yours.name:
        out.append(f"The reference is experiment {reference.name!r} and yours is {yours.name!r}: compare them only "
                   "if they ran the same set-up.")
    for column, what in SET_UP.items():
        ran = {side: _values(_counted_ok(exp), column) for side, exp in zip(SIDES, (reference, yours))}
        if ran["reference"] and ran["yours"] and ran["reference"] != ran["yours"]:
            out.append(f"The reference ran with {what} {', '.join(ran['reference'])} and yours with "
                       f"{', '.join(ran['yours'])}: their throughput and losses may differ for that reason alone.")
    both = table[~table["verdict"].isin([ONLY, NOT_JUDGED])]
    for metric, label in METRICS.items():
        rows = both[both["metric"] == metric]
        if rows.empty:
            continue
        beyond = rows[rows["verdict"].str.endswith("beyond the spread")]
        judged = rows[~rows["verdict"].isin([NO_SPREAD, TOO_FEW])]
        sizes = ", ".join(sorted({f"{r.yours_runs} of yours against {r.reference_runs}" for r in rows.itertuples()}))
        head = (f"{label.capitalize()}: {len(judged)} of {len(rows)} configurations measured on both sides could be "
                f"judged (runs: {sizes}; the others had one run each, or too few repeats for ranges apart to "
                f"mean more than chance)" if len(judged) < len(rows) else
                f"{label.capitalize()}: {len(rows)} configurations measured on both sides (runs: {sizes})")
        if beyond.empty:
            out.append(f"{head}; none differs from the reference beyond the spread of the repeats where it could be "
                       "judged"
                       + (f" (yours / reference: {rows['ratio'].min():.2f} to {rows['ratio'].max():.2f})."
                          if rows["ratio"].notna().any() else "."))
        else:
            each = "; ".join(f"{_point(r)}: {r.yours_mean:.3g} against {r.reference_mean:.3g} "
                             f"(yours / reference {r.ratio:.2f}, {r.verdict.split(' beyond')[0]})"
                             for r in beyond.itertuples())
            out.append(f"{head}; {len(beyond)} differ{'s' * (len(beyond) == 1)} beyond the spread of the repeats: {each}.")
        few = rows[rows["verdict"] == TOO_FEW]
        if len(few):
            r = next(few.itertuples())
            out.append(f"{label.capitalize()}: the ranges lie apart at {len(few)} configuration"
                       f"{'s' * (len(few) != 1)} ({'; '.join(_point(q) for q in few.itertuples())}), but at "
                       f"{spread.too_few_text(r.yours_runs, r.reference_runs)}.")
    unjudged = table[(table["verdict"] == NOT_JUDGED) & (table["metric"] == "steady_samples_per_s")]
    if len(unjudged):
        out.append("Not judged steady on one side (no steady throughput to compare; summary.csv's not_judged says "
                   "why): " + "; ".join(_point(r) for r in unjudged.itertuples()) + ".")
    only = table[(table["verdict"] == ONLY) & (table["metric"] == "final_loss")]
    for side in SIDES:
        missing = only[only[f"{side}_runs"] == 0]
        if len(missing):
            other = "yours" if side == "reference" else "the reference"
            out.append(f"Measured in {other} only (no ok run in {side}): "
                       + "; ".join(_point(r) for r in missing.itertuples()) + ".")
    return out
