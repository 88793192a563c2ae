"""Parameter server against all-reduce on speed and stability: "PS cuts the training time more;
all-reduce converges more stably" (the thesis's companion abstract).

From steps.csv, the lead task's loss after every step (the ps coordinator, or all-reduce's worker 0),
against its training time so far (the sum of its step times, emulated). Per run:
- time to the target loss: the training time at the first step whose loss is at or below it
  (report.target_loss in the experiment file; by default the highest final loss of the runs
  compared, so that every run reaches it);
- final loss: the mean loss of the last tenth of the steps;
- noise: the standard deviation of the step-to-step change of the loss over the second half of
  training (how much the loss jumps from one step to the next once past the first descent).
Per strategy and bandwidth: their means over repeats, the final loss's spread (standard deviation
across repeats), and how many runs reached the target."""
from __future__ import annotations

import numpy as np
import pandas as pd
import yaml

from analysis import tables

STRATEGIES = ("ps", "allreduce")
CURVE_COLUMNS = ["run_id", "strategy", "bw_bps", "repeat", "step", "elapsed_s", "loss"]


def lead_steps(steps: pd.DataFrame) -> pd.DataFrame:
    """Each run's lead task's step rows: the chief where there is one (ps), else worker 0 (or single)."""
    s = steps[(steps["kind"] == "step") & steps["loss"].notna()]
    chief = s[s["role"] == "chief"]
    rest = s[~s["run_id"].isin(set(chief["run_id"])) & (s["task_index"] == 0) & (s["role"].isin(["worker", "single"]))]
    return pd.concat([chief, rest]).sort_values(["run_id", "t"])


def loss_curves(runs: pd.DataFrame, steps: pd.DataFrame) -> pd.DataFrame:
    """Loss against training time so far, per ok run of ps or all-reduce."""
    ok = tables.ok_runs(runs)
    ok = ok[ok["strategy"].isin(STRATEGIES)]
    lead = lead_steps(steps)
    lead = lead[lead["run_id"].isin(set(ok["run_id"]))].copy()
    if lead.empty:
        return pd.DataFrame(columns=CURVE_COLUMNS)
    lead["elapsed_s"] = lead.groupby("run_id")["time_s"].cumsum()
    lead = lead.drop(columns=["strategy"], errors="ignore").merge(ok[["run_id", "strategy", "bw_bps", "repeat"]], on="run_id")
    return lead[CURVE_COLUMNS].reset_index(drop=True)


def stated_target(exp: tables.Experiment) -> float | None:
    """report.target_loss of the experiment file, as its runs' spec.yaml keep it (None: not stated)."""
    for run_id in exp.runs["run_id"]:
        spec = exp.path / "runs" / str(run_id) / "spec.yaml"
        if spec.is_file():
            value = ((yaml.safe_load(spec.read_text()) or {}).get("report") or {}).get("target_loss")
            return float(value) if value is not None else None
    return None


def analyse(exp: tables.Experiment) -> tuple[pd.DataFrame, pd.DataFrame, float] | None:
    """(loss curves, per-run figures, target) of the experiment's ps and all-reduce runs, or None
    when it did not run both."""
    curves = loss_curves(tables.counted_runs(exp), exp.steps)
    if not set(STRATEGIES) <= set(curves["strategy"]):
        return None
    target = stated_target(exp)
    target = default_target(curves) if target is None else target
    return curves, per_run(curves, target), target


def default_target(curves: pd.DataFrame) -> float:
    """The highest final loss of the runs: a loss every run reached."""
    return float(per_run(curves, np.inf)["final_loss"].max())


def per_run(curves: pd.DataFrame, target: float) -> pd.DataFrame:
    rows = []
    for run_id, c in curves.groupby("run_id", sort=False):
        loss = c["loss"].to_numpy(float)
        reached = np.flatnonzero(loss <= target)
        second_half = loss[len(loss) // 2:]
        rows.append({"run_id": run_id, "strategy": c["strategy"].iloc[0], "bw_bps": c["bw_bps"].iloc[0],
                     "repeat": c["repeat"].iloc[0], "steps": len(loss),
                     "training_time_s": float(c["elapsed_s"].iloc[-1]),
                     "time_to_target_s": float(c["elapsed_s"].iloc[reached[0]]) if len(reached) else np.nan,
                     "final_loss": float(loss[-max(1, len(loss) // 10):].mean()),
                     "noise": float(np.diff(second_half).std()) if len(second_half) > 2 else np.nan})
    return pd.DataFrame(rows)


def per_strategy(runs_table: pd.DataFrame) -> pd.DataFrame:
    """Means over repeats per strategy and bandwidth, with the final loss's spread."""
    if runs_table.empty:
        return pd.DataFrame(columns=["strategy", "bw_bps", "runs", "reached", "time_to_target_s", "final_loss",
                                     "final_loss_spread", "noise"])
    g = runs_table.groupby(["strategy", "bw_bps"])
    return g.agg(runs=("run_id", "size"), reached=("time_to_target_s", "count"),
                 time_to_target_s=("time_to_target_s", "mean"), final_loss=("final_loss", "mean"),
                 final_loss_spread=("final_loss", "std"), noise=("noise", "mean")).reset_index()


def sentences(table: pd.DataFrame, target: float, mbit) -> list[str]:
    """What this run says about "PS is faster" and "all-reduce is more stable", per bandwidth where
    both strategies ran; `mbit` formats a rate."""
    out = []
    for bw, rows in table.groupby("bw_bps"):
        by = rows.set_index("strategy")
        if not set(STRATEGIES) <= set(by.index):
            continue
        ps, ar = by.loc["ps"], by.loc["allreduce"]
        where = f"At {mbit(bw)}"
        if ps["reached"] and ar["reached"]:
            ratio = ar["time_to_target_s"] / ps["time_to_target_s"]
            verdict = ("supports" if ratio > 1 else "does not support")
            out.append(f"{where}, PS reached the target loss {target:.3g} in {ps['time_to_target_s']:.3g} s and "
                       f"all-reduce in {ar['time_to_target_s']:.3g} s (mean over repeats): all-reduce took "
                       f"{ratio:.2f}× PS's time, which {verdict} \"PS is faster\".")
        else:
            out.append(f"{where}, PS reached the target loss {target:.3g} in {int(ps['reached'])} of {int(ps['runs'])} "
                       f"runs and all-reduce in {int(ar['reached'])} of {int(ar['runs'])}: no time to compare.")
        noisier = ps["noise"] / ar["noise"] if ar["noise"] > 0 else np.nan
        spread = (f"final loss {ps['final_loss']:.3g} ± {ps['final_loss_spread']:.2g} (PS) against "
                  f"{ar['final_loss']:.3g} ± {ar['final_loss_spread']:.2g} (all-reduce) across repeats"
                  if pd.notna(ps["final_loss_spread"]) and pd.notna(ar["final_loss_spread"]) else
                  f"final loss {ps['final_loss']:.3g} (PS) against {ar['final_loss']:.3g} (all-reduce), one run each")
        stable = ("supports" if noisier > 1 else "does not support") if pd.notna(noisier) else "cannot test"
        out.append(f"{where}, PS's step-to-step loss noise was {noisier:.2f}× all-reduce's ({ps['noise']:.3g} "
                   f"against {ar['noise']:.3g}), {spread}: this {stable} \"all-reduce is more stable\".")
    if out:
        out.append("TensorFlow 2's parameter-server training is asynchronous: each worker applies its "
                   "gradients without waiting for the others, so PS's loss comes from parameters that other "
                   "workers changed in between, while all-reduce's workers step together.")
    return out
