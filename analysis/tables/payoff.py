"""What would make distributed training pay off here: the runs' communication settings (workload.communication)
compared by time to a target loss on the same work, their wire bytes against theory, and per bandwidth the
fastest way to the target against one machine and against plain all-reduce (docs/communication.md).

Time to target, per run: the lead task's training time (the sum of its step times) at the first step where
the mean of the last SMOOTH_STEPS losses is at or below the target (analysis/tables/stability.py's rule). The same
work: runs of one engine, model (parameters), batch per worker, samples per epoch and epochs under fixed
data (the engines' synthetic tasks differ, so each engine is compared apart). The target: report.target_loss,
else per work the highest of its runs' lowest smoothed losses, a loss every run reached. Two settings are
told apart by analysis/tables/spread.py's rule on their repeats' ranges; one machine sends nothing, so its runs at
any bandwidth stand for one machine where none ran at that bandwidth.
"""
from __future__ import annotations


import numpy as np
import pandas as pd

from analysis.tables import spread, stability, tables, trends
from analysis.text import mbit

WORK = ["engine", "model", "params", "batch_per_worker", "samples_per_epoch", "epochs"]
RUN_COLUMNS = [*WORK, "target_loss", "run_id", "bw_bps", "hosts", "cores", "strategy", "communication", "setting",
               "repeat", "steps", "reached", "time_to_target_s", "final_loss"]
SETTING_COLUMNS = [*WORK, "target_loss", "bw_bps", "hosts", "strategy", "communication", "setting", "runs", "reached",
                   "time_to_target_s", "time_to_target_min_s", "time_to_target_max_s", "final_loss",
                   "one_machine_s", "vs_one_machine", "vs_one_machine_verdict", "plain_s", "vs_plain",
                   "vs_plain_verdict"]
LEFT_OUT_COLUMNS = [*WORK, "bw_bps", "hosts", "setting", "runs"]
ONE = "one machine"
STRATEGY_NAMES = {"allreduce": "all-reduce", "ps": "parameter server"}


def applies(runs: pd.DataFrame) -> bool:
    """Whether the runs hold any communication setting other than the usual all-reduce (ok runs; a balancing
    setting alone is the Mixed machines section's, analysis/tables/mixed.py)."""
    ok = tables.ok_runs(runs.drop(columns="balance", errors="ignore"))
    return bool(len(ok)) and bool((ok["communication"] != "none").any())


def setting_name(strategy: str, communication: str, hosts) -> str:
    """'one machine', 'all-reduce, plain', 'all-reduce, local SGD every 8', 'parameter server'."""
    if strategy == "single" or hosts == 1:
        return ONE
    name = STRATEGY_NAMES.get(strategy, strategy)
    return name if strategy == "ps" else f"{name}, {'plain' if communication == 'none' else communication}"


def _comparable(runs: pd.DataFrame) -> pd.DataFrame:
    """The ok runs a comparison by time to target can read: fixed data, computed (not replayed), a known strategy."""
    ok = tables.ok_runs(runs)
    return ok[(ok["compute"] != tables.TIMING_ONLY) & (ok["fixed"] == "data")
              & ok["strategy"].isin(["single", "allreduce", "ps"])]


def left_out(exp: tables.Experiment) -> pd.DataFrame:
    """Per work, bandwidth and setting: the comparable runs the comparison does not count (degraded)."""
    runs = _comparable(exp.runs)
    runs = runs[~runs["run_id"].isin(set(tables.counted_runs(exp)["run_id"]))]
    if runs.empty:
        return pd.DataFrame(columns=LEFT_OUT_COLUMNS)
    runs = runs.assign(setting=[setting_name(r.strategy, r.communication, r.hosts) for r in runs.itertuples()])
    return (runs.groupby([*WORK, "bw_bps", "hosts", "setting"], dropna=False).size().rename("runs").reset_index()
            [LEFT_OUT_COLUMNS])


def per_run(exp: tables.Experiment) -> pd.DataFrame:
    """One row per ok run under fixed data with per-step losses (not replayed): its work, setting, target,
    whether it reached it and when (time_to_target_s), and its final loss (the mean of its last tenth)."""
    ok = _comparable(tables.counted_runs(exp))
    lead = stability.lead_steps(exp.steps)
    lead = lead[lead["run_id"].isin(set(ok["run_id"]))]
    if ok.empty or lead.empty:
        return pd.DataFrame(columns=RUN_COLUMNS)
    info = ok.set_index("run_id")
    rows = []
    for run_id, c in lead.groupby("run_id", sort=False):
        r = info.loc[run_id]
        loss = c["loss"].to_numpy(float)
        rows.append({**{k: r.get(k, np.nan) for k in WORK}, "run_id": run_id, "bw_bps": r["bw_bps"],
                     "hosts": r["hosts"], "cores": r.get("cores", np.nan), "strategy": r["strategy"],
                     "communication": r["communication"], "setting": setting_name(r["strategy"], r["communication"],
                                                                                  r["hosts"]),
                     "repeat": r["repeat"], "steps": len(loss), "_smooth": stability.smoothed(loss),
                     "_elapsed": c["time_s"].cumsum().to_numpy(float),
                     "final_loss": float(loss[-max(1, len(loss) // 10):].mean())})
    out = pd.DataFrame(rows)
    stated = stability.stated_target(exp)
    key = out[WORK].astype(str).agg("|".join, axis=1)
    lowest = out["_smooth"].map(lambda s: float(np.nanmin(s)) if np.isfinite(s).any() else np.nan)
    out["target_loss"] = stated if stated is not None else lowest.groupby(key).transform("max")
    hit = [np.flatnonzero(s <= t) for s, t in zip(out["_smooth"], out["target_loss"])]
    out["reached"] = [len(h) > 0 for h in hit]
    out["time_to_target_s"] = [float(e[h[0]]) if len(h) else np.nan for e, h in zip(out["_elapsed"], hit)]
    return out[RUN_COLUMNS].reset_index(drop=True)


def per_setting(runs: pd.DataFrame) -> pd.DataFrame:
    """Per work, bandwidth and setting: the repeats' time to target (mean, range; NaN unless every run
    reached it) against one machine's (same work; its runs at this bandwidth, else at any) and plain
    all-reduce's on the same nodes, each as a ratio (above 1: this setting faster) and analysis/tables/spread.py's
    verdict on the two ranges."""
    if runs.empty:
        return pd.DataFrame(columns=SETTING_COLUMNS)
    keys = [*WORK, "target_loss", "bw_bps", "hosts", "strategy", "communication", "setting"]
    g = runs.groupby(keys, dropna=False)
    out = g.agg(runs=("run_id", "size"), reached=("reached", "sum"), time_to_target_s=("time_to_target_s", "mean"),
                time_to_target_min_s=("time_to_target_s", "min"), time_to_target_max_s=("time_to_target_s", "max"),
                final_loss=("final_loss", "mean")).reset_index()
    for col in ("time_to_target_s", "time_to_target_min_s", "time_to_target_max_s"):
        out[col] = out[col].where(out["reached"] == out["runs"])
    found = [_against(out, r) for _, r in out.iterrows()]
    for col in ("one_machine_s", "vs_one_machine", "vs_one_machine_verdict", "plain_s", "vs_plain", "vs_plain_verdict"):
        out[col] = [f[col] for f in found]
    return out[SETTING_COLUMNS].sort_values([*WORK, "bw_bps", "time_to_target_s"]).reset_index(drop=True)


def _same_work(table: pd.DataFrame, row) -> np.ndarray:
    return tables.same_values(table, {k: row[k] for k in WORK})


def _one_machine(table: pd.DataFrame, row) -> pd.DataFrame:
    """One machine's settings rows of the same work: at this bandwidth, else at every bandwidth pooled."""
    ones = table[_same_work(table, row) & (table["setting"] == ONE)]
    here = ones[ones["bw_bps"] == row["bw_bps"]]
    return here if len(here) else ones


def _against(table: pd.DataFrame, row) -> dict:
    out = dict(one_machine_s=np.nan, vs_one_machine=np.nan, vs_one_machine_verdict="", plain_s=np.nan,
               vs_plain=np.nan, vs_plain_verdict="")
    if not np.isfinite(row["time_to_target_s"]):
        return out
    others = {"one_machine": _one_machine(table, row) if row["setting"] != ONE else table.iloc[0:0],
              "plain": table[_same_work(table, row) & (table["bw_bps"] == row["bw_bps"])
                             & (table["hosts"] == row["hosts"]) & (table["strategy"] == "allreduce")
                             & (table["communication"] == "none") & (table["setting"] != row["setting"])]}
    for name, rows in others.items():
        rows = rows[rows["time_to_target_s"].notna()]
        if rows.empty:
            continue
        n = int(rows["runs"].sum())
        mean = float((rows["time_to_target_s"] * rows["runs"]).sum() / n)
        lo, hi = float(rows["time_to_target_min_s"].min()), float(rows["time_to_target_max_s"].max())
        judged = spread.judge((n, lo, hi), (int(row["runs"]), row["time_to_target_min_s"], row["time_to_target_max_s"]))
        col = "vs_one_machine" if name == "one_machine" else "vs_plain"
        out.update({f"{name}_s": mean, col: mean / row["time_to_target_s"], f"{col}_verdict": judged.verdict})
    return out


def _span(lo, hi) -> str:
    return f"{lo:.3g} s" if f"{lo:.3g}" == f"{hi:.3g}" else f"{lo:.3g}-{hi:.3g} s"


def _work_label(r) -> str:
    size = f" ({int(r['params']):,} parameters)" if pd.notna(r["params"]) else ""
    return (f"{r['engine']}, {r['model']}{size}, batch {r['batch_per_worker']:g} per worker, "
            f"{r['epochs']:g} epoch(s) of {r['samples_per_epoch']:,.0f} samples")


def comparison_sentences(settings: pd.DataFrame) -> list[str]:
    """Per work and bandwidth: each setting's time to target, against plain all-reduce on the same nodes."""
    out = []
    for _, work in settings.groupby(WORK, dropna=False, sort=False):
        first = work.iloc[0]
        out.append(f"The same work ({_work_label(first)}), to the target loss {first['target_loss']:.3g} (the mean of "
                   f"{stability.SMOOTH_STEPS} steps' losses):")
        for bw, rows in work.groupby("bw_bps", sort=True):
            parts = []
            for r in rows.itertuples():
                who = f"{r.setting} ({_machines(r.hosts)})"
                if not np.isfinite(r.time_to_target_s):
                    parts.append(f"{who}: {int(r.reached)} of {int(r.runs)} runs reached it")
                    continue
                text = f"{who} {r.time_to_target_s:.3g} s ({_span(r.time_to_target_min_s, r.time_to_target_max_s)} " \
                       f"over {int(r.runs)} run{'s' * (r.runs != 1)})"
                if np.isfinite(r.vs_plain):
                    text += (f", {trends.speed_words(r.vs_plain, 'plain all-reduce')}, "
                             f"{_verdict_words(r.vs_plain_verdict, r.runs)}")
                parts.append(text)
            out.append(f"At {mbit(bw)}: " + "; ".join(parts) + ".")
    return out


def _machines(hosts) -> str:
    return "1 node" if hosts == 1 else f"{int(hosts)} nodes"


def _verdict_words(verdict: str, runs) -> str:
    if verdict == spread.TOO_FEW:
        return "the ranges lie apart but the repeats are too few to judge"
    return trends.VERDICT_WORDS.get(verdict, verdict or "not judged")


def _left_out_sentence(head: str, left: pd.DataFrame) -> str:
    said = "; ".join(f"{r.setting} ({_machines(r.hosts)}, {int(r.runs)} run{'s' * (r.runs != 1)})"
                     for r in left.itertuples())
    return (f"{head}, not counted above: {said}, whose timing this machine did not keep faithful (see Degraded "
            "runs); the ranking is among the rest.")


def payoff_sentences(settings: pd.DataFrame, left: pd.DataFrame | None = None) -> list[str]:
    """Per work and bandwidth: the fastest way to the target (every run reached it) and by how much against
    one machine and against plain all-reduce, stated as far as the repeats allow; then the settings whose
    runs there were left out (degraded)."""
    left = pd.DataFrame(columns=LEFT_OUT_COLUMNS) if left is None else left
    out = []
    for _, work in settings.groupby(WORK, dropna=False, sort=False):
        label = f" ({work.iloc[0]['engine']})" if settings["engine"].nunique() > 1 else ""
        ones = work[work["setting"] == ONE]
        gone = left[tables.same_values(left, {k: work.iloc[0][k] for k in WORK})]
        for bw in sorted(work["bw_bps"].dropna().unique()):
            here = work[(work["bw_bps"] == bw) & (work["setting"] != ONE)]
            gone_here = gone[gone["bw_bps"] == bw]
            one = ones[ones["bw_bps"] == bw] if (ones["bw_bps"] == bw).any() else ones
            fastest_one = one[one["time_to_target_s"].notna()].nsmallest(1, "time_to_target_s")
            done = pd.concat([here[here["time_to_target_s"].notna()], fastest_one])
            head = f"At {mbit(bw)}{label}"
            if done.empty:
                out.append(f"{head}, no setting reached the target in every run: nothing to rank.")
                continue
            best = done.loc[done["time_to_target_s"].idxmin()]
            out.append(head + ", " + _best_sentence(best, here, one))
            few = [v for v in (best["vs_one_machine_verdict"], best["vs_plain_verdict"]) if v == spread.TOO_FEW]
            if few or (int(best["runs"]) < 3):
                out.append(f"{head}: with {int(best['runs'])} run(s) of the fastest, ranges apart come about by chance "
                           f"too often to rank it for sure: run more repeats (sweep.repeats) to decide.")
            if len(gone_here):
                out.append(_left_out_sentence(head, gone_here))
    return out


def _best_sentence(best, here: pd.DataFrame, one: pd.DataFrame) -> str:
    said = f"the fastest way to the target was {best['setting']}"
    said += "" if best["setting"] == ONE else f" on {_machines(best['hosts'])}"
    said += f": {best['time_to_target_s']:.3g} s"
    if best["setting"] == ONE:
        rest = here[here["time_to_target_s"].notna()]
        if rest.empty:
            return said + "; no distributed setting reached the target in every run."
        nxt = rest.loc[rest["time_to_target_s"].idxmin()]
        return (said + "; distributed training did not pay off: the fastest distributed setting, "
                f"{nxt['setting']}, was {trends.speed_words(nxt['vs_one_machine'], 'one machine')} "
                f"({_verdict_words(nxt['vs_one_machine_verdict'], nxt['runs'])}).")
    parts = []
    if np.isfinite(best["vs_one_machine"]):
        parts.append(f"{trends.speed_words(best['vs_one_machine'], 'one machine')} "
                     f"({_verdict_words(best['vs_one_machine_verdict'], best['runs'])})")
    elif len(one):
        parts.append("one machine did not reach the target in every run")
    else:
        parts.append("no counted one-machine run of the same work to compare with")
    if best["communication"] == "none" and best["strategy"] == "allreduce":
        parts.append("no setting beat plain all-reduce")
    elif np.isfinite(best["vs_plain"]):
        parts.append(f"{trends.speed_words(best['vs_plain'], 'plain all-reduce')} on the same nodes "
                     f"({_verdict_words(best['vs_plain_verdict'], best['runs'])})")
    else:
        parts.append("no plain all-reduce on the same nodes reached the target in every run to compare with")
    return said + ", " + "; ".join(parts) + "."


def wire_sentences(net: pd.DataFrame) -> list[str]:
    """Per setting: the lead worker's node's bytes per steady step against the theory (median ratio)."""
    rows = net[net["steady_ratio_to_theory"].notna() & (net["strategy"] != "ps")]
    out, engines = [], rows["engine"].nunique() > 1
    for (engine, setting), r in rows.groupby(["engine", "communication"], sort=True):
        measured, theory = r["steady_bytes_per_worker_step"].median(), r["theory_steady_bytes_per_worker_step"].median()
        out.append(f"{'plain all-reduce' if setting == 'none' else setting}{f' ({engine})' if engines else ''}: "
                   "the wire carried "
                   f"{r['steady_ratio_to_theory'].median():.3g}× the theory's gradient bytes per steady step (median "
                   f"over {len(r)} run{'s' * (len(r) != 1)}; {measured / 1e3:,.4g} kB against {theory / 1e3:,.4g} kB).")
    return out


def section(exp: tables.Experiment) -> dict:
    """The report's tables of this section (communication_runs, communication), empty when no run used a
    communication setting."""
    if not applies(tables.counted_runs(exp)):
        return {}
    runs = per_run(exp)
    return {"communication_runs": runs, "communication": per_setting(runs), "communication_left_out": left_out(exp)}


def sentences(t: dict[str, pd.DataFrame]) -> tuple[list[str], list[str], list[str]]:
    """(the comparison, the wire against theory, the pay-off) sentences from the report's tables."""
    settings = t.get("communication", pd.DataFrame(columns=SETTING_COLUMNS))
    if settings.empty:
        compare = ["No run trained under fixed data with per-step losses, so no setting is compared by time to "
                   "a target loss."]
        return compare, wire_sentences(t["network"]), []
    return (comparison_sentences(settings), wire_sentences(t["network"]),
            payoff_sentences(settings, t.get("communication_left_out")))
