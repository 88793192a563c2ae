"""Machines of different speeds (docs/mixed-machines.md): per worker and per steady step, its compute, its wait
for the others and the wire; what the slowest node costs (the time lost waiting, and the samples/s the same
nodes would reach if all were as fast as the fastest); and what each balancing setting (workload.balance,
workloads/balance/) bought on each link against no balancing, by analysis/tables/yardstick.py's yardstick.

A worker's compute per step is runs.csv's worker_compute_s (its compute probe at its own batch, or its replayed
step); the wire is the theory's bytes a worker sends in a steady step, with their headers, at the link's rate
(analysis/model/communication.py); the wait is the rest of the steady step. DDP overlaps part of the wire with
the backward pass, so the wait is a lower bound there."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from analysis.text import mbit
from analysis.model import communication
from analysis.tables import glance, payoff, speedup, spread, tables, trends, yardstick

PLAIN = "none"
WORKER_COLUMNS = ["run_id", "bw", "balance", "host", "cores", "batch", "step_s", "compute_s", "wire_s", "wait_s"]
COST_COLUMNS = ["run_id", "bw", "balance", "workers", "steady_samples_per_s", "step_s", "slowest", "fastest",
                "waiting_share", "if_all_fastest_samples_per_s"]


def _pairs(text) -> dict[str, float]:
    """'h1=1;h2=0.5' -> {'h1': 1.0, 'h2': 0.5} (empty for blanks)."""
    out = {}
    for item in str(text if isinstance(text, str) else "").split(";"):
        name, sep, value = item.partition("=")
        try:
            if sep:
                out[name.strip()] = float(value)
        except ValueError:
            continue
    return out


def balance_labels(runs: pd.DataFrame) -> pd.Series:
    """Each run's workload.balance ('none' where results predate it)."""
    col = runs["balance"] if "balance" in runs else pd.Series(np.nan, index=runs.index)
    return col.astype(object).where(col.notna() & (col.astype(str).str.strip() != ""), PLAIN).astype(str)


def mixed_runs(exp: tables.Experiment) -> pd.DataFrame:
    """The counted ok all-reduce runs of nodes of different speeds (node_cores differ) or with a balancing
    setting, each with its balance label."""
    runs = tables.ok_runs(tables.counted_runs(exp))
    if runs.empty or "worker_compute_s" not in runs:
        return runs.iloc[0:0]
    runs = runs.assign(balance=balance_labels(runs))
    return runs[_mixed(runs) & (runs["strategy"] == "allreduce") & runs["worker_compute_s"].notna()]


def _mixed(runs: pd.DataFrame) -> pd.Series:
    """Which runs had nodes of different speeds (node_cores differ) or a balancing setting."""
    speeds = runs.get("node_cores", pd.Series("", index=runs.index)).map(lambda t: set(_pairs(t).values()))
    return (speeds.map(len) > 1) | (balance_labels(runs) != PLAIN)


def per_worker(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per run and worker: its cores, batch, the steady step, and that step split into compute, wire
    and waiting for the others (seconds)."""
    rows = []
    for _, r in runs.iterrows():
        compute, cores = _pairs(r["worker_compute_s"]), _pairs(r.get("node_cores"))
        batches = [int(b) for b in str(r.get("batches") or "").split("/") if b.strip().isdigit()]
        step = float(r.get("steady_step_s", math.nan))
        wire = _wire_s(r)
        for i, (host, seconds) in enumerate(compute.items()):
            batch = batches[i] if i < len(batches) else r.get("batch_per_worker", math.nan)
            rows.append({"run_id": r["run_id"], "bw": r.get("bw"), "balance": r["balance"], "host": host,
                         "cores": cores.get(host, math.nan), "batch": batch, "step_s": step, "compute_s": seconds,
                         "wire_s": wire, "wait_s": max(0.0, step - seconds - wire) if math.isfinite(step) else math.nan})
    return pd.DataFrame(rows, columns=WORKER_COLUMNS)


def _wire_s(r) -> float:
    theory, bw = r.get("theory_steady_bytes_per_worker_step", math.nan), r.get("bw_bps", math.nan)
    try:
        theory, bw = float(theory), float(bw)
    except (TypeError, ValueError):
        return 0.0
    return communication.on_the_wire(theory) * 8 / bw if math.isfinite(theory) and bw > 0 else 0.0


def slowest_cost(runs: pd.DataFrame, workers: pd.DataFrame) -> pd.DataFrame:
    """Per run: its slowest and fastest worker (compute per sample), the share of the workers' steady step
    spent waiting, and the samples/s the same nodes would reach if every one computed as fast as the fastest
    (each at batch_per_worker, the wire as measured)."""
    rows = []
    for _, r in runs.iterrows():
        w = workers[workers["run_id"] == r["run_id"]]
        if w.empty:
            continue
        per_sample = w["compute_s"] / pd.to_numeric(w["batch"], errors="coerce")
        bpw, n = float(r["global_batch"]) / max(1, len(w)), len(w)
        fast_step = float(per_sample.min()) * bpw + float(w["wire_s"].iloc[0])
        rows.append({"run_id": r["run_id"], "bw": r.get("bw"), "balance": r["balance"], "workers": n,
                     "steady_samples_per_s": r.get("steady_samples_per_s"), "step_s": r.get("steady_step_s"),
                     "slowest": w["host"].iloc[int(np.argmax(per_sample.to_numpy()))],
                     "fastest": w["host"].iloc[int(np.argmin(per_sample.to_numpy()))],
                     "waiting_share": float((w["wait_s"] / w["step_s"]).mean()),
                     "if_all_fastest_samples_per_s": float(r["global_batch"]) / fast_step if fast_step > 0 else math.nan})
    return pd.DataFrame(rows, columns=COST_COLUMNS)


ONE, ASYNC = payoff.ONE, "parameter server"
REFERENCES = {PLAIN: "plain synchronous training", ASYNC: "the asynchronous parameter server", ONE: "one machine"}
JOB_KEYS = ["model", "batch_per_worker", "fixed"]
BALANCE_COLUMNS = ["bw", "bw_bps", "setting", "engine", "hosts", "runs", "yardstick", "time_s", "time_min_s",
                   "time_max_s", *[f"vs_{k}{v}" for k in ("plain", "ps", "one_machine") for v in ("", "_verdict")]]
VS = {PLAIN: "vs_plain", ASYNC: "vs_ps", ONE: "vs_one_machine"}


def compared_runs(exp: tables.Experiment, runs: pd.DataFrame) -> pd.DataFrame:
    """The mixed runs (mixed_runs) with what they are compared with: the counted ok runs of the same model, batch
    per worker and fixed mode under the asynchronous parameter server (strategy ps) and on one machine (one
    node); each with its `setting`: its balance label, ASYNC or ONE."""
    if runs.empty:
        return runs.assign(setting=pd.Series(dtype=str))
    ok = tables.ok_runs(tables.counted_runs(exp))
    jobs = {tuple(tables.text(v) for v in r) for r in runs[JOB_KEYS].itertuples(index=False)}
    ok = ok[[tuple(tables.text(v) for v in r) in jobs for r in ok[JOB_KEYS].itertuples(index=False)]]
    others = ok[((ok["strategy"] == "ps") | (ok["hosts"] == 1)) & ~ok["run_id"].isin(set(runs["run_id"]))]
    others = others.assign(balance=PLAIN, setting=np.where(others["hosts"] == 1, ONE, ASYNC))
    runs = runs.assign(setting=np.where(runs["hosts"] == 1, ONE, runs["balance"]))
    return pd.concat([runs, others], ignore_index=True)


def _job(exp: tables.Experiment, runs: pd.DataFrame, mixed: pd.DataFrame) -> speedup.Job:
    """The job every setting's time is projected to (the answer's: report.job, else the file's own workload at
    its fewest nodes, of the mixed runs' engine), as a number of samples."""
    full = speedup.summary(runs, speedup.training_job(exp))
    mine = full[tables.same_values(full, {k: mixed[k].iloc[0] for k in tables.GROUP_KEYS})]
    samples = mine["job_samples"].dropna()
    return speedup.Job(samples=float(samples.iloc[0])) if len(samples) else speedup.training_job(exp)


def _times(exp: tables.Experiment, runs: pd.DataFrame, stick: yardstick.Yardstick, mixed: pd.DataFrame) -> list[dict]:
    """Per link, setting and engine: runs, the time by the yardstick (mean, min, max over the repeats; NaN where a
    run did not reach the target or none was judged steady) and what the factors are taken of, `_rate` (mean, min,
    max; above: faster): payoff's time to the target and its inverse, else speedup's projected time of the job
    and the steady samples/s (the answer's speedup is their ratio)."""
    rows = []
    if stick.kind == yardstick.TARGET:
        per = payoff.per_run(exp).set_index("run_id")
        runs = runs.assign(_t=runs["run_id"].map(per["time_to_target_s"]))
    else:
        job = _job(exp, runs, mixed)
    for (bw_bps, setting, engine), g in runs.groupby(["bw_bps", "setting", "engine"], sort=False):
        row = {"bw": g["bw"].iloc[0], "bw_bps": bw_bps, "setting": setting, "engine": engine,
               "hosts": int(g["hosts"].iloc[0]), "runs": len(g)}
        if stick.kind == yardstick.TARGET:
            t = g["_t"] if g["_t"].notna().all() else pd.Series([np.nan])
            got = (t.mean(), t.min(), t.max(), 1 / t.mean(), 1 / t.max(), 1 / t.min(), len(g))
        else:
            s = speedup.summary(g.drop(columns=["setting"]), job).iloc[0]
            got = tuple(s[c] if s["n_steady"] else np.nan for c in (
                "projected_time_s", "projected_time_min_s", "projected_time_max_s", "steady_samples_per_s_mean",
                "steady_samples_per_s_min", "steady_samples_per_s_max")) + (int(s["n_steady"]),)
        rows.append(row | dict(zip(["time_s", "time_min_s", "time_max_s", "_rate", "_rate_min", "_rate_max", "_n"],
                                   got)))
    return rows


def _reference(table: pd.DataFrame, row: dict, ref: str) -> pd.DataFrame:
    """The rows `row` is compared with: `ref`'s on the same link (one machine's: else on every link, pooled; it
    sends nothing), by time to the target only of the same engine (each engine's target is its own)."""
    rows = table[table["setting"] == ref]
    if row["yardstick"] == yardstick.TARGET:
        rows = rows[rows["engine"] == row["engine"]]
    here = rows[rows["bw_bps"] == row["bw_bps"]]
    return here if len(here) or ref != ONE else rows


def _factor(row: dict, base: pd.DataFrame) -> tuple[float, str]:
    """`row`'s factor against the rows `base` (pooled over their runs; above 1: faster) as the answer takes it
    (one machine's time to the target over this one's, or the steady samples/s over the reference's), and
    analysis/tables/spread.py's verdict on the two groups of repeats."""
    base = base[np.isfinite(base["_rate"].astype(float))]
    if base.empty or not np.isfinite(row["_rate"]):
        return np.nan, ""
    n = int(base["_n"].sum())
    if row["yardstick"] == yardstick.TARGET:
        rate = 1 / float((base["time_s"] * base["_n"]).sum() / n)
    else:
        rate = float((base["_rate"] * base["_n"]).sum() / n)
    judged = spread.judge((n, base["_rate_min"].min(), base["_rate_max"].max()),
                          (int(row["_n"]), row["_rate_min"], row["_rate_max"]))
    return row["_rate"] / rate, glance.VERDICTS.get(judged.verdict, "")


def bought(exp: tables.Experiment, runs: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """What each balancing setting bought on each link, compared as the answer compares (one yardstick for all the
    runs compared, analysis/tables/yardstick.py: time to the target loss on the same data where every run learns,
    else the projected time of the job at steady samples/s, the factor then the steady samples/s' ratio): each
    setting's time with the spread of its repeats, and its factor (above 1: faster) and spread verdict against
    plain synchronous training (balance none), the asynchronous parameter server and one machine. A table
    (BALANCE_COLUMNS) and the section's sentences."""
    every = compared_runs(exp, runs)
    if every.empty:
        return pd.DataFrame(columns=BALANCE_COLUMNS), []
    stick = yardstick.choose(every, yardstick.learning(exp))
    table = pd.DataFrame(_times(exp, every, stick, runs)).assign(yardstick=stick.kind)
    found = []
    for row in table.to_dict("records"):
        for ref, col in VS.items():
            base = _reference(table, row, ref) if ref != row["setting"] else table.iloc[0:0]
            row[col], row[f"{col}_verdict"] = _factor(row, base)
        found.append(row)
    table = pd.DataFrame(found).sort_values(["bw_bps", "hosts"], kind="stable", ascending=[True, False])
    return table.reset_index(drop=True)[BALANCE_COLUMNS], _words(table, stick, exp, runs)


def _words(table: pd.DataFrame, stick: yardstick.Yardstick, exp: tables.Experiment, runs: pd.DataFrame) -> list[str]:
    """The yardstick said once with why; per link each setting's time against the three others, and what balancing
    bought; the mixed runs left out (degraded)."""
    what = ("time to the target loss" if stick.kind == yardstick.TARGET else
            "the projected time of the job at steady samples/s (the factors: the steady samples/s' ratios)")
    out = [f"Compared as the answer compares, by {what}: {stick.why}."]
    for bw_bps, link in table.groupby("bw_bps", sort=True):
        bw = mbit(bw_bps)
        for r in link[~link["setting"].isin([ASYNC, ONE])].to_dict("records"):
            head = f"At {bw}, {'without balancing' if r['setting'] == PLAIN else 'balance ' + r['setting']}"
            if not np.isfinite(r["time_s"]):
                out.append(f"{head}: no time by this yardstick (a run did not reach the target, or none read a "
                           "steady state).")
                continue
            against = []
            for ref, col in VS.items():
                if ref == r["setting"]:
                    continue
                if not np.isfinite(r[col]):
                    against.append(_none_to_compare(table, r, ref))
                    continue
                verdict, base = r[f"{col}_verdict"], _seconds(_pooled_time(table, r, ref))
                against.append(f"{trends.speed_words(r[col], REFERENCES[ref])} ({base}; "
                               f"{glance.SAID.get(verdict, verdict)})")
            out.append(f"{head}: {_seconds(r['time_s'])} {_spread(r)}, " + ", ".join(against) + ".")
        out.append(_bought_on(link, bw))
    out += _left_out(exp, runs)
    return [x for x in out if x]


def _pooled_time(table: pd.DataFrame, row: dict, ref: str) -> float:
    """The reference's time (its runs' mean) that `row` was compared with."""
    base = _reference(table, row, ref)
    base = base[base["time_s"].notna()]
    return float((base["time_s"] * base["_n"]).sum() / base["_n"].sum())


def _none_to_compare(table: pd.DataFrame, row: dict, ref: str) -> str:
    """Why a setting has no factor against `ref`: no such run with a time, or (by time to the target) only of
    another engine."""
    there = table[(table["setting"] == ref) & table["time_s"].notna()]
    engines = sorted(set(there["engine"].astype(str)) - {str(row["engine"])})
    if len(there) and engines and row["yardstick"] == yardstick.TARGET:
        return (f"not compared with {REFERENCES[ref]} ({', '.join(engines)}: each engine's target loss is its own, "
                "its synthetic task another)")
    return f"no time of {REFERENCES[ref]} to compare with"


def _bought_on(link: pd.DataFrame, bw) -> str:
    """'What balancing bought at 1gbit: balance static made training 1.48× faster than plain synchronous training
    (one run each).' (the setting that bought most)."""
    bal = link[~link["setting"].isin([PLAIN, ASYNC, ONE]) & np.isfinite(link["vs_plain"].astype(float))]
    if bal.empty:
        return ""
    best = bal.loc[bal["vs_plain"].astype(float).idxmax()]
    verdict = best["vs_plain_verdict"]
    return (f"What balancing bought at {bw}: balance {best['setting']} made training "
            f"{trends.speed_words(best['vs_plain'], REFERENCES[PLAIN])} ({glance.SAID.get(verdict, verdict)}).")


def _left_out(exp: tables.Experiment, runs: pd.DataFrame) -> list[str]:
    """The runs the comparison did not count (degraded), per setting and link: the all-reduce runs of mixed speeds,
    and the parameter server's and one machine's of the same model, batch per worker and fixed mode."""
    if exp.include_degraded or "fidelity" not in exp.runs:
        return []
    left = tables.ok_runs(exp.runs[tables.is_degraded(exp.runs)])
    if left.empty:
        return []
    jobs = {tuple(tables.text(v) for v in r) for r in runs[JOB_KEYS].itertuples(index=False)}
    same = np.array([tuple(tables.text(v) for v in r) in jobs for r in left[JOB_KEYS].itertuples(index=False)], bool)
    left = left[(_mixed(left) & (left["strategy"] == "allreduce")) | (same & ((left["strategy"] == "ps")
                                                                              | (left["hosts"] == 1)))]
    if left.empty:
        return []
    balanced = balance_labels(left).map(lambda b: REFERENCES[PLAIN] if b == PLAIN else f"balance {b}")
    named = np.where(left["hosts"] == 1, ONE, np.where(left["strategy"] == "ps", REFERENCES[ASYNC], balanced))
    said = "; ".join(f"{name} at {mbit(bw)} ({len(g)} run{'s' * (len(g) != 1)})"
                     for (name, bw), g in left.assign(_name=named).groupby(["_name", "bw_bps"], sort=False))
    return [f"Not counted (degraded: this machine did not keep their timing faithful, see Degraded runs): {said}."]


def _seconds(value: float) -> str:
    """'2.25 s' (three significant figures, so that factors show), '3.1 min' from two minutes up."""
    return f"{float(value):.3g} s" if float(value) < 120 else glance.duration(float(value))


def _spread(r) -> str:
    if int(r["runs"]) == 1:
        return "(one run)"
    return f"({_seconds(r['time_min_s'])} to {_seconds(r['time_max_s'])} over {int(r['runs'])} runs)"


def section(exp: tables.Experiment) -> dict[str, pd.DataFrame]:
    """mixed_workers, mixed_slowest and mixed_balance, when a run mixed node speeds or balanced."""
    runs = mixed_runs(exp)
    if runs.empty:
        return {}
    workers = per_worker(runs)
    table, _ = bought(exp, runs)
    return {"mixed_balance": table, "mixed_slowest": slowest_cost(runs, workers), "mixed_workers": workers}
