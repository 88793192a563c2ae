"""Parameter server against all-reduce on speed and stability: "PS cuts the training time more;
all-reduce converges more stably" (the thesis's companion abstract).

From steps.csv, the lead task's loss after every step (the ps coordinator, or all-reduce's worker 0),
against its training time so far (the sum of its step times, emulated). Per run:
- time to the target loss: the training time at the first step where the mean of the last
  SMOOTH_STEPS losses is at or below it (one noisy dip below it does not count; report.target_loss
  in the experiment file, by default the highest of the runs' lowest such means, which every run
  reached);
- final loss: the mean loss of the last tenth of the steps, and the samples seen (steps x the
  samples per step: under ps each step is one worker's batch, under all-reduce every worker's);
- noise: the standard deviation of the step-to-step change of the loss over the second half of
  training, and that noise x sqrt(samples per step), which takes out the part that comes from
  averaging a smaller batch (a ps step's loss is one worker's batch, all-reduce's the whole global
  batch's: sampling alone makes ps's sqrt(workers) times noisier).
Per strategy and bandwidth: their means and ranges over repeats, the final loss's spread (standard
deviation across repeats), and how many runs reached the target. A claim is supported or not only
where every run reached the target and the two strategies' ranges of repeats lie apart beyond
chance (analysis/tables/spread.py); otherwise the sentence says why there is no verdict."""
from __future__ import annotations

import numpy as np
import pandas as pd

from analysis.tables import spread, tables

STRATEGIES = ("ps", "allreduce")
CURVE_COLUMNS = ["run_id", "engine", "strategy", "bw_bps", "repeat", "samples_per_step", "step", "elapsed_s", "loss"]
SMOOTH_STEPS = 5
ENGINE_NAMES = {"tensorflow": "TensorFlow", "pytorch": "PyTorch"}


def lead_steps(steps: pd.DataFrame) -> pd.DataFrame:
    """Each run's lead task's step rows: the chief where there is one (ps), else worker 0 (or single)."""
    s = steps[(steps["kind"] == "step") & steps["loss"].notna()]
    chief = s[s["role"] == "chief"]
    rest = s[~s["run_id"].isin(set(chief["run_id"])) & (s["task_index"] == 0) & (s["role"].isin(["worker", "single"]))]
    return pd.concat([chief, rest]).sort_values(["run_id", "t"])


def loss_curves(runs: pd.DataFrame, steps: pd.DataFrame) -> pd.DataFrame:
    """Loss against training time so far, per ok run of ps or all-reduce."""
    ok = tables.ok_runs(runs)
    timed = ok["compute"].ne(tables.TIMING_ONLY) if "compute" in ok else True        # replayed: no loss
    plain = ok["communication"].eq("none") if "communication" in ok else True   # settings: analysis/tables/payoff.py
    ok = ok[ok["strategy"].isin(STRATEGIES) & timed & plain]
    lead = lead_steps(steps)
    lead = lead[lead["run_id"].isin(set(ok["run_id"]))].copy()
    if lead.empty:
        return pd.DataFrame(columns=CURVE_COLUMNS)
    lead["elapsed_s"] = lead.groupby("run_id")["time_s"].cumsum()
    ok = ok.assign(samples_per_step=samples_per_step(ok), engine=tables.with_engine(ok))
    lead = lead.drop(columns=["strategy", "engine"], errors="ignore").merge(
        ok[["run_id", "engine", "strategy", "bw_bps", "repeat", "samples_per_step"]], on="run_id")
    return lead[CURVE_COLUMNS].reset_index(drop=True)


def samples_per_step(runs: pd.DataFrame) -> pd.Series:
    """The samples behind one logged loss: one worker's batch under ps, the global batch otherwise."""
    batch = pd.to_numeric(runs["global_batch"], errors="coerce")
    workers = pd.to_numeric(runs["workers"], errors="coerce").where(lambda w: w > 0)
    return batch.where(runs["strategy"] != "ps", batch / workers)


def stated_target(exp: tables.Experiment) -> float | None:
    """report.target_loss of the experiment file, as its runs' spec.yaml keep it (None: not stated)."""
    for spec in tables.run_specs(exp.path, exp.runs["run_id"]).values():     # (read now, and checked)
        value = (spec.get("report") or {}).get("target_loss")
        return float(value) if value is not None else None
    return None


def analyse(exp: tables.Experiment) -> tuple[pd.DataFrame, pd.DataFrame, float] | None:
    """(loss curves, per-run figures, target) of the experiment's ps and all-reduce runs of one engine, or None
    when no engine ran both. The engines are kept apart (each trains its own synthetic task through its own
    collective): the runs compared are those of the first engine that ran both strategies (only TensorFlow runs
    ps)."""
    curves = loss_curves(tables.counted_runs(exp), exp.steps)
    both = [e for e, c in curves.groupby("engine", sort=True) if set(STRATEGIES) <= set(c["strategy"])]
    if not both:
        return None
    curves = curves[curves["engine"] == both[0]].reset_index(drop=True)
    target = stated_target(exp)
    target = default_target(curves) if target is None else target
    return curves, per_run(curves, target), target


def default_target(curves: pd.DataFrame) -> float:
    """A loss every run reached: the highest of the runs' lowest means of SMOOTH_STEPS losses."""
    return float(max(np.nanmin(smoothed(c["loss"].to_numpy(float))) for _, c in curves.groupby("run_id")))


def smoothed(loss: np.ndarray) -> np.ndarray:
    """The mean of each step's and the SMOOTH_STEPS - 1 before it's losses (NaN before that many)."""
    return pd.Series(loss).rolling(min(SMOOTH_STEPS, len(loss))).mean().to_numpy()


def per_run(curves: pd.DataFrame, target: float) -> pd.DataFrame:
    rows = []
    for run_id, c in curves.groupby("run_id", sort=False):
        loss = c["loss"].to_numpy(float)
        reached = np.flatnonzero(smoothed(loss) <= target)
        second_half = loss[len(loss) // 2:]
        noise = float(np.diff(second_half).std()) if len(second_half) > 2 else np.nan
        per_step = float(c["samples_per_step"].iloc[0])
        rows.append({"run_id": run_id, "engine": c["engine"].iloc[0] if "engine" in c else "tensorflow",
                     "strategy": c["strategy"].iloc[0],
                     "bw_bps": c["bw_bps"].iloc[0],
                     "repeat": c["repeat"].iloc[0], "steps": len(loss), "samples_per_step": per_step,
                     "samples": len(loss) * per_step,
                     "training_time_s": float(c["elapsed_s"].iloc[-1]),
                     "time_to_target_s": float(c["elapsed_s"].iloc[reached[0]]) if len(reached) else np.nan,
                     "final_loss": float(loss[-max(1, len(loss) // 10):].mean()),
                     "noise": noise, "noise_per_sample": noise * np.sqrt(per_step)})
    return pd.DataFrame(rows)


def per_strategy(runs_table: pd.DataFrame) -> pd.DataFrame:
    """Means and ranges over repeats per strategy and bandwidth, with the final loss's spread."""
    columns = ["strategy", "bw_bps", "runs", "reached", "time_to_target_s", "time_to_target_min_s",
               "time_to_target_max_s", "samples_per_step", "samples", "final_loss", "final_loss_spread", "noise",
               "noise_per_sample", "noise_per_sample_min", "noise_per_sample_max"]
    if runs_table.empty:
        return pd.DataFrame(columns=columns)
    g = runs_table.groupby(["strategy", "bw_bps"])
    return g.agg(runs=("run_id", "size"), reached=("time_to_target_s", "count"),
                 time_to_target_s=("time_to_target_s", "mean"), time_to_target_min_s=("time_to_target_s", "min"),
                 time_to_target_max_s=("time_to_target_s", "max"), samples_per_step=("samples_per_step", "mean"),
                 samples=("samples", "mean"), final_loss=("final_loss", "mean"),
                 final_loss_spread=("final_loss", "std"), noise=("noise", "mean"),
                 noise_per_sample=("noise_per_sample", "mean"), noise_per_sample_min=("noise_per_sample", "min"),
                 noise_per_sample_max=("noise_per_sample", "max")).reset_index()[columns]


def _judge(ps: pd.Series, ar: pd.Series, low: str, high: str) -> spread.Judged:
    """All-reduce's repeats against ps's on one figure's range (sign +1: all-reduce's higher)."""
    return spread.judge((int(ps["runs"]), ps[low], ps[high]), (int(ar["runs"]), ar[low], ar[high]))


def _verdict(judged: spread.Judged, supporting_sign: int, claim: str, n: int, m: int) -> str:
    if judged.verdict == spread.APART:
        return f"the ranges lie apart, which {'supports' if judged.sign == supporting_sign else 'does not support'} {claim}"
    if judged.verdict == spread.TOO_FEW:
        return f"the ranges lie apart, but at {spread.too_few_text(n, m)}"
    if judged.verdict == spread.NO_SPREAD:
        return f"one run each: no verdict on {claim}"
    return f"the ranges of the repeats overlap: no verdict on {claim}"


def _range(row: pd.Series, low: str, high: str, fmt: str) -> str:
    return f"{row[low]:{fmt}}-{row[high]:{fmt}}" if row[low] != row[high] else f"{row[low]:{fmt}}"


def sentences(table: pd.DataFrame, target: float, mbit, engine: str = "") -> list[str]:
    """What this run says about "PS is faster" and "all-reduce is more stable", per bandwidth where
    both strategies ran; `mbit` formats a rate; `engine`: the engine whose runs these are, said where the
    experiment ran several."""
    out = []
    for bw, rows in table.groupby("bw_bps"):
        by = rows.set_index("strategy")
        if not set(STRATEGIES) <= set(by.index):
            continue
        ps, ar = by.loc["ps"], by.loc["allreduce"]
        n, m = int(ps["runs"]), int(ar["runs"])
        where = f"At {mbit(bw)}" + (f" ({ENGINE_NAMES.get(engine, engine)} runs)" if engine else "")
        faster, stabler = '"PS is faster"', '"all-reduce is more stable"'
        if ps["reached"] == n and ar["reached"] == m:
            span = ("time_to_target_min_s", "time_to_target_max_s")
            out.append(f"{where}, PS reached the target loss {target:.3g} (the mean of {SMOOTH_STEPS} steps' losses) in "
                       f"{ps['time_to_target_s']:.3g} s ({_range(ps, *span, '.3g')} s over {n} runs) and all-reduce in "
                       f"{ar['time_to_target_s']:.3g} s ({_range(ar, *span, '.3g')} s over {m}): all-reduce took "
                       f"{ar['time_to_target_s'] / ps['time_to_target_s']:.2f}× PS's time on average; "
                       f"{_verdict(_judge(ps, ar, *span), 1, faster, n, m)}.")
        else:
            out.append(f"{where}, PS reached the target loss {target:.3g} (the mean of {SMOOTH_STEPS} steps' losses) in "
                       f"{int(ps['reached'])} of {n} runs and all-reduce in {int(ar['reached'])} of {m}: no verdict "
                       f"on {faster}.")
        if pd.notna(ps["noise_per_sample_min"]) and pd.notna(ar["noise_per_sample_min"]) and ar["noise"] > 0:
            span = ("noise_per_sample_min", "noise_per_sample_max")
            out.append(f"{where}, PS's step-to-step loss noise was {ps['noise'] / ar['noise']:.2f}× all-reduce's "
                       f"({ps['noise']:.3g} against {ar['noise']:.3g}); a PS loss is one worker's batch of "
                       f"{ps['samples_per_step']:g} samples and an all-reduce loss the mean over "
                       f"{ar['samples_per_step']:g}, so scaled by the square root of the samples per step PS's noise "
                       f"was {ps['noise_per_sample'] / ar['noise_per_sample']:.2f}× all-reduce's "
                       f"({_range(ps, *span, '.3g')} against {_range(ar, *span, '.3g')} over {n} and {m} runs): "
                       f"{_verdict(_judge(ps, ar, *span), -1, stabler, n, m)}.")
        spread_of = (lambda r: f" ± {r['final_loss_spread']:.2g}" if pd.notna(r["final_loss_spread"]) else "")
        out.append(f"{where}, the final loss was {ps['final_loss']:.3g}{spread_of(ps)} (PS, after {ps['samples']:,.0f} "
                   f"samples) against {ar['final_loss']:.3g}{spread_of(ar)} (all-reduce, after {ar['samples']:,.0f}), "
                   "± the standard deviation over repeats.")
    if out:
        out.append("TensorFlow 2's parameter-server training is asynchronous: each worker applies its "
                   "gradients without waiting for the others, so PS's loss comes from parameters that other "
                   "workers changed in between, while all-reduce's workers step together.")
    return out
