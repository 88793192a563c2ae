"""The answer at a glance: per job (tables.GROUP_KEYS), setting, bandwidth and node count, the time by the job's one
yardstick (analysis/tables/yardstick.py), its factor against one machine and the verdict on that factor. The
report's first section draws it (a figure and a table: tables/glance.csv) and `run` prints it at its end (lines()),
both from table(), so both give the same factors.

- Time to the target loss (yardstick TARGET): payoff.per_setting's mean time to the target, the factor its
  vs_one_machine (one machine's time over this point's) and its verdict.
- Steady samples/s (THROUGHPUT): speedup.summary's projected time of the job (warm-up + job / steady samples/s),
  the factor its speedup (steady samples/s over one node's) and its verdict.
- A point whose runs were all left out (degraded, unless include_degraded): no time, no factor, the verdict
  NOT_COUNTED. One machine's row (hosts 1) of each bandwidth is the reference (factor 1).
- Where a job's learning rate grew with its global batch (workload.lr_scaling), a column lr_scaling names the rule
  and goal_words says it: a larger global batch then teaches more per step, which decides the time to the target.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from analysis.text import mbit
from analysis.tables import payoff, speedup, spread, tables, trends, yardstick

COLUMNS = [*tables.GROUP_KEYS, "yardstick", "target_loss", "job_samples", "setting", "strategy", "communication",
           "bw_bps", "hosts", "runs", "time_s", "time_min_s", "time_max_s", "factor", "verdict"]
ONE = payoff.ONE
PLAIN = payoff.setting_name("allreduce", "none", 2)
REFERENCE = "reference"
NOT_COUNTED = "not counted (degraded)"
NOT_JUDGED = "not judged"
NO_ONE = "no one-machine run"
VERDICTS = {spread.APART: "beyond the spread", spread.WITHIN: "within the spread", spread.TOO_FEW: "too few repeats",
            spread.NO_SPREAD: "one run"}
SAID = {"one run": "one run each"}         # a verdict in a sentence, where it reads otherwise


def duration(seconds: float) -> str:
    """'45 s', '3.1 min', '2.5 h': two significant figures, whole numbers from 10 up."""
    if not np.isfinite(seconds):
        return "?"
    value, unit = ((seconds, "s") if seconds < 120 else (seconds / 60, "min") if seconds < 7200
                   else (seconds / 3600, "h"))
    return f"{value:.2g} {unit}" if value < 10 else f"{value:.0f} {unit}"


def table(exp: tables.Experiment) -> pd.DataFrame:
    """glance.csv: one row per job, setting, bandwidth and node count (one machine's rows: setting ONE), sorted."""
    counted = tables.counted_runs(exp)
    summary = speedup.summary(counted, speedup.training_job(exp))
    if summary.empty:
        return pd.DataFrame(columns=COLUMNS)
    learned = yardstick.learning(exp)
    reached = payoff.per_setting(learned[payoff.RUN_COLUMNS]) if learned["learns"].any() \
        else pd.DataFrame(columns=payoff.SETTING_COLUMNS)
    ok = tables.ok_runs(counted)
    left = exp.runs.iloc[0:0] if exp.include_degraded else tables.ok_runs(exp.runs[tables.is_degraded(exp.runs)])
    if len(left) and not tables.has_steady_columns(left):
        left = tables.with_steady_columns(left)
    frames = []
    for key, g in summary.groupby(tables.GROUP_KEYS, dropna=False, sort=False):
        group = dict(zip(tables.GROUP_KEYS, key))
        stick = yardstick.choose(ok[tables.same_values(ok, group)], learned)
        goal = {"target_loss": np.nan, "job_samples": float(g["job_samples"].iloc[0])}
        if stick.kind == yardstick.TARGET:
            mine = reached[tables.same_values(reached, {k: group[k] for k in ("engine", "model", "batch_per_worker")})]
            rows = _by_target(mine)
            goal = {"target_loss": float(mine["target_loss"].max()) if len(mine) else np.nan, "job_samples": np.nan}
        else:
            rows = _by_throughput(g, summary)
        rows += _left_out(left[tables.same_values(left, group)] if len(left) else left, rows)
        frames.append(pd.DataFrame(rows).assign(**group, yardstick=stick.kind, **goal,
                                                lr_scaling=lr_rule(ok[tables.same_values(ok, group)])))
    out = pd.concat(frames, ignore_index=True)
    out = out.reindex(columns=COLUMNS + (["lr_scaling"] if (out["lr_scaling"] != "none").any() else []))
    out["_one"] = out["setting"] != ONE
    out = out.sort_values([*tables.GROUP_KEYS, "_one", "setting", "bw_bps", "hosts"], kind="stable")
    return out.drop(columns="_one").reset_index(drop=True)


def lr_rule(runs: pd.DataFrame) -> str:
    """The learning-rate rule (workload.lr_scaling) of a job's runs: 'none' where the column is absent (results made
    before the setting, when the rate was always Adam's 1e-3), several joined with ' and '."""
    rules = sorted(set(runs["lr_scaling"].dropna().astype(str))) if "lr_scaling" in runs else []
    return " and ".join(rules) or "none"


RULE_WORDS = {"linear": "learning rate scaled with the global batch",       # (N machines: N x one machine's)
              "sqrt": "learning rate scaled with √(global batch)"}


def _row(setting, strategy, communication, bw, hosts, runs, time_s, lo, hi, factor, verdict) -> dict:
    return dict(setting=setting, strategy=strategy, communication=communication, bw_bps=bw, hosts=int(hosts),
                runs=int(runs), time_s=time_s, time_min_s=lo, time_max_s=hi, factor=factor, verdict=verdict)


def _by_target(reached: pd.DataFrame) -> list[dict]:
    """Rows by time to the target loss: one machine's per bandwidth (at that bandwidth, else pooled over all: it
    sends nothing), then every other setting's."""
    ones = reached[reached["setting"] == ONE]
    others = reached[reached["setting"] != ONE]
    rows = []
    for bw in sorted(set(reached["bw_bps"].dropna())):
        here = ones[ones["bw_bps"] == bw] if (ones["bw_bps"] == bw).any() else ones
        if here.empty:
            continue
        done = here[here["time_to_target_s"].notna()]
        n = int(here["runs"].sum())
        if len(done) == len(here):
            mean = float((done["time_to_target_s"] * done["runs"]).sum() / n)
            rows.append(_row(ONE, here["strategy"].iloc[0], "none", bw, 1, n, mean, done["time_to_target_min_s"].min(),
                             done["time_to_target_max_s"].max(), 1.0, REFERENCE))
        else:
            rows.append(_row(ONE, here["strategy"].iloc[0], "none", bw, 1, n, np.nan, np.nan, np.nan, np.nan,
                             f"{int(here['reached'].sum())} of {n} runs reached the target"))
    for r in others.itertuples():
        if not np.isfinite(r.time_to_target_s):
            verdict = f"{int(r.reached)} of {int(r.runs)} runs reached the target"
        elif not np.isfinite(r.vs_one_machine):
            verdict = NO_ONE
        else:
            verdict = VERDICTS.get(tables.text(r.vs_one_machine_verdict), NOT_JUDGED)
        rows.append(_row(r.setting, r.strategy, r.communication, r.bw_bps, r.hosts, r.runs, r.time_to_target_s,
                         r.time_to_target_min_s, r.time_to_target_max_s, r.vs_one_machine, verdict))
    return rows


def _by_throughput(g: pd.DataFrame, summary: pd.DataFrame) -> list[dict]:
    """Rows by the projected time of the job at steady samples/s: per setting and bandwidth its one-node
    baseline (speedup.baseline_row) once, then its points with the speedup over it."""
    rows, seen = [], set()
    multi = g[g["hosts"] > 1]
    for r in (multi if len(multi) else g).itertuples():
        base = speedup.baseline_row(summary, r._asdict()) if r.hosts > 1 else pd.Series(r._asdict())
        if base is not None and (base["bw_bps"], base["strategy"]) not in seen:
            seen.add((base["bw_bps"], base["strategy"]))
            judged = bool(base["n_steady"])
            rows.append(_row(ONE, base["strategy"], base["communication"], base["bw_bps"], 1, base["n_runs"],
                             base["projected_time_s"] if judged else np.nan, base["projected_time_min_s"],
                             base["projected_time_max_s"], 1.0 if judged else np.nan,
                             REFERENCE if judged else NOT_JUDGED))
        if r.hosts == 1:
            continue
        judged = bool(r.n_steady)
        verdict = (NO_ONE if base is None else VERDICTS.get(tables.text(r.speedup_verdict), NOT_JUDGED)
                   if judged and np.isfinite(r.speedup) else NOT_JUDGED)
        rows.append(_row(payoff.setting_name(r.strategy, r.communication, r.hosts), r.strategy, r.communication,
                         r.bw_bps, r.hosts, r.n_runs, r.projected_time_s if judged else np.nan,
                         r.projected_time_min_s, r.projected_time_max_s, r.speedup, verdict))
    return rows


def _left_out(left: pd.DataFrame, rows: list[dict]) -> list[dict]:
    """A row NOT_COUNTED for each point of `left` (degraded ok runs of the group) that has no row yet."""
    if left.empty:
        return []
    have = {(r["setting"], r["bw_bps"], r["hosts"]) for r in rows}
    out = []
    for (strategy, communication, bw, hosts), runs in left.groupby(["strategy", "communication", "bw_bps", "hosts"],
                                                                   dropna=False, sort=True):
        setting = payoff.setting_name(strategy, communication, hosts)
        if (setting, bw, int(hosts)) not in have:
            out.append(_row(setting, strategy, communication, bw, hosts, len(runs), np.nan, np.nan, np.nan, np.nan,
                            NOT_COUNTED))
    return out


def common_verdict(glance: pd.DataFrame) -> str:
    """The verdict every factor of the table shares (two or more of them), said once beside the table instead
    of in every cell; '' where they differ."""
    judged = glance[(glance["hosts"] > 1) & np.isfinite(glance["factor"].astype(float))]
    verdicts = set(judged["verdict"])
    return verdicts.pop() if len(judged) > 1 and len(verdicts) == 1 else ""


def cell(row, common: str = "") -> str:
    """One point as the table and the terminal say it: '45 s', '30 s: 1.5× faster (beyond the spread)'; without
    the verdict where it is `common` (common_verdict: said once)."""
    if row["verdict"] == NOT_COUNTED or not np.isfinite(row["time_s"]):
        return row["verdict"]
    if row["verdict"] == REFERENCE:
        return duration(row["time_s"])
    said = "" if row["verdict"] == common else f" ({row['verdict']})"
    if not np.isfinite(row["factor"]):
        return f"{duration(row['time_s'])}{said}"
    return f"{duration(row['time_s'])}: {trends.speed_words(row['factor'])}{said}"


JOB_WORDS = {"model": "{}", "engine": "{}", "batch_per_worker": "batch {:g}", "fixed": "fixed {}"}


def job_labels(glance: pd.DataFrame) -> dict:
    """Per job (its GROUP_KEYS values): '' for the one job of an experiment, else what tells it from the others
    ('pytorch', 'mlp, batch 128')."""
    keys = [k for k in tables.GROUP_KEYS if glance[k].nunique(dropna=False) > 1]
    return {key: ", ".join(JOB_WORDS[k].format(v) for k, v in zip(tables.GROUP_KEYS, key) if k in keys)
            for key, _ in glance.groupby(tables.GROUP_KEYS, dropna=False, sort=False)}


def pivot(glance: pd.DataFrame) -> pd.DataFrame:
    """The table as the report shows it: a row per job (where several), setting (where several) and bandwidth, a
    column per node count, each cell cell()'s text (the common verdict left out); one machine's cell of its
    bandwidth in every row."""
    if glance.empty:
        return pd.DataFrame()
    labels, common = job_labels(glance), common_verdict(glance)
    nodes = sorted(set(glance["hosts"].astype(int)))
    heads = {n: "1 machine" if n == 1 else f"{n} machines" for n in nodes}
    out = []
    for key, g in glance.groupby(tables.GROUP_KEYS, dropna=False, sort=False):
        settings = list(dict.fromkeys(g.loc[g["setting"] != ONE, "setting"])) or [ONE]
        for setting in settings:
            for bw in sorted(set(g["bw_bps"].dropna())):
                mine = g[((g["setting"] == setting) | (g["setting"] == ONE)) & (g["bw_bps"] == bw)]
                if not (mine["setting"] == setting).any():
                    continue
                row = {"job": labels[key]} if len(labels) > 1 else {}
                if len(settings) > 1 or setting not in (ONE, PLAIN):
                    row["setting"] = setting
                row["bandwidth"] = mbit(bw)
                for n in nodes:
                    hit = mine[mine["hosts"] == n]
                    row[heads[n]] = cell(hit.iloc[0], common) if len(hit) else ""
                out.append(row)
    return pd.DataFrame(out).fillna("")


def bandwidth_sentences(glance: pd.DataFrame) -> list[str]:
    """At most one sentence per job and bandwidth: where more machines pay off by the yardstick, and by how much,
    as far as the verdict allows; the points not counted named. Bandwidths where one machine is fastest and the
    same node count comes closest share one sentence."""
    out = []
    labels = job_labels(glance)
    for key, g in glance.groupby(tables.GROUP_KEYS, dropna=False, sort=False):
        settings = len(set(g.loc[g["setting"] != ONE, "setting"])) > 1
        said, closest = [], []      # closest: (bandwidth, who, factor) where one machine is fastest, none left out
        for bw in sorted(set(g["bw_bps"].dropna())):
            here = g[(g["bw_bps"] == bw) & (g["setting"] != ONE)]
            if here.empty:
                continue
            found = _sentence(here, settings)
            if isinstance(found, tuple):
                closest.append((bw, *found))
            else:
                said.append((bw, f"At {mbit(bw)}{f' ({labels[key]})' if labels[key] else ''}, {found}."))
        out += [text for _, text in sorted(said + _closest_sentences(closest, labels[key]), key=lambda x: x[0])]
    return out


def _closest_sentences(closest: list, label: str) -> list[tuple]:
    """(the first bandwidth, 'At 10 and 100 Mbit/s, one machine is fastest; 2 machines came closest, 33.6× and
    9.08× slower.') per node count that came closest."""
    out = []
    for who in dict.fromkeys(w for _, w, _ in closest):
        mine = [(bw, f) for bw, w, f in closest if w == who]
        bws = " and ".join(mbit(bw) for bw, _ in mine)
        factors = " and ".join(trends.speed_words(f).split(" ")[0] for _, f in mine[:-1])
        last = trends.speed_words(mine[-1][1])
        out.append((mine[0][0], f"At {bws}{f' ({label})' if label else ''}, one machine is fastest; {who} came "
                                f"closest, {factors + ' and ' if factors else ''}{last}."))
    return out


def _who(r, settings: bool) -> str:
    return f"{int(r['hosts'])} machines" + (f" ({r['setting']})" if settings else "")


def _sentence(here: pd.DataFrame, settings: bool):
    """One bandwidth's sentence (without its head), or (who came closest, its factor) where one machine is
    fastest and no point was left out."""
    judged = here[np.isfinite(here["factor"].astype(float))]
    gone = here[here["verdict"] == NOT_COUNTED]
    tail = (f"; {' and '.join(_who(r, settings) for _, r in gone.iterrows())} not counted (degraded)"
            if len(gone) else "")
    if judged.empty:
        return f"nothing to compare with one machine{tail}"
    best = judged.loc[judged["factor"].astype(float).idxmax()]
    factor = float(best["factor"])
    if factor > 1.005:
        sure = best["verdict"] == VERDICTS[spread.APART]
        return (f"{_who(best, settings)} pay off: {trends.speed_words(factor)} than one" if sure else
                f"{_who(best, settings)} were {trends.speed_words(factor)} than one, but "
                f"{SAID.get(best['verdict'], best['verdict'])}: no verdict yet") + tail
    if not tail and factor < 0.995:
        return _who(best, settings), factor
    return f"one machine is fastest; {_who(best, settings)} came closest, {trends.speed_words(factor)}{tail}"


def goal_words(g: pd.DataFrame) -> str:
    """What a job's times are: 'time to the target loss 2.19' (with the learning-rate rule where one scaled it: a
    larger global batch teaches more per step then), 'time to train 1M samples at steady samples/s'."""
    first = g.iloc[0]
    if first["yardstick"] == yardstick.TARGET:
        rule = first.get("lr_scaling", "none")
        rule = RULE_WORDS.get(rule, f"learning-rate rules {rule}" if " and " in str(rule) else "")
        return f"time to the target loss {first['target_loss']:.3g}" + (f", {rule}" if rule else "")
    samples = first["job_samples"]
    return f"time to train {speedup.count(samples) + ' samples' if np.isfinite(samples) else 'the job'} at steady " \
           "samples/s"


def lines(glance: pd.DataFrame) -> list[str]:
    """The answer in a few terminal lines: per job a heading with its yardstick, then a line per setting and
    bandwidth with every node count's cell() (the same text and factors as the report's table), and the verdict
    every factor shares, once."""
    if glance.empty:
        return ["answer: no successful run to compare"]
    shown, labels, common = pivot(glance), job_labels(glance), common_verdict(glance)
    out = []
    for key, g in glance.groupby(tables.GROUP_KEYS, dropna=False, sort=False):
        job = labels[key]
        out.append(f"answer{f' ({job})' if job else ''}: {goal_words(g)}, against one machine"
                   + (f"; every factor: {SAID.get(common, common)}" if common else ""))
        rows = shown[shown["job"] == job] if len(labels) > 1 else shown
        width = max(len(_label(r)) for _, r in rows.iterrows()) if len(rows) else 0
        for _, r in rows.iterrows():
            cells = [f"{c}: {r[c]}" for c in r.index if c not in ("job", "setting", "bandwidth") and r[c]]
            out.append(f"  {_label(r):>{width}}  " + "; ".join(cells))
    return out


def _label(r) -> str:
    return ", ".join(str(r[c]) for c in ("setting", "bandwidth") if c in r and r[c])


def answer_lines(exp_dir, include_degraded: bool = False) -> list[str]:
    """lines() of the results in exp_dir: what `run` prints at its end."""
    exp = tables.load_experiment(exp_dir)
    exp.include_degraded = include_degraded
    return lines(table(exp))
