"""The cost model against measurement (analysis/model/costmodel/): its residuals, in sample and held out, its
accuracy, its parameters and the floor repeats set, and strategy auto's choices (analysis/model/advisor.py);
its figures are cost_model.png and prediction.png."""
from __future__ import annotations

import numpy as np
import pandas as pd

from analysis.model import advisor, costmodel
from analysis.tables import tables


def section_tables(exp: tables.Experiment) -> dict[str, pd.DataFrame]:
    """cost_model (the residuals of every run fitted on all, of the held-out runs fitted on the others and of the
    degraded runs, not fitted), cost_model_accuracy, cost_model_params, cost_model_floor (configurations measured
    twice) and advisor (runs with strategy auto)."""
    ev = costmodel.evaluate_cached(exp)
    return {
        "cost_model": pd.concat([f for f in (ev["in_sample"], ev["held_out"], ev["degraded"], ev["not_judged"])
                                 if len(f)], ignore_index=True) if ev else pd.DataFrame(),
        "cost_model_accuracy": ev["accuracy"] if ev else pd.DataFrame(),
        "cost_model_params": model_params(ev["model"]) if ev else pd.DataFrame(),
        **({"cost_model_floor": ev["floor"]} if ev and len(ev["floor"]) else {}),
        **({"advisor": advisor.scorecard(exp.runs)} if "advisor_choice" in exp.runs else {}),
    }


def model_params(model: costmodel.CostModel) -> pd.DataFrame:
    """The fitted parameters per strategy (docs/cost-model.md)."""
    rows = [dict(strategy="all", parameter=k, value=getattr(model, k), fitted_on_runs=np.nan,
                 from_defaults=False) for k in ("cores", "u", "rho", "rtt_s")]
    for name, f in model.fits.items():
        rows += [dict(strategy=name, parameter=k, value=v, fitted_on_runs=f.n_runs,
                      from_defaults=k in f.defaulted) for k, v in f.params.items()]
    return pd.DataFrame(rows)


def accuracy_sentences(t: dict[str, pd.DataFrame]) -> list[str]:
    """The model's accuracy, in sample and on held-out runs, per strategy."""
    acc = t.get("cost_model_accuracy", pd.DataFrame())
    out = []
    score = t.get("advisor", pd.DataFrame())
    judged = score[score["right"].notna()] if len(score) else score
    if len(score):
        out.append(f"strategy auto chose {', '.join(f'{c} {n} time(s)' for c, n in score['advisor_choice'].value_counts().items())}"
                   + (f"; where both strategies were also measured it chose the one with more samples/s in "
                      f"{int(judged['right'].astype(bool).sum())} of {len(judged)} points." if len(judged) else
                      " (no point measured both strategies to judge it)."))
    for strat, rows in acc.groupby("strategy", sort=False) if len(acc) else ():
        parts = []
        for r in rows.itertuples():
            what = ("fitted on every run" if r.split == "in-sample" else
                    "on the runs with the most workers, predicted from a fit on the others")
            parts.append(f"{r.median_abs_rel_error:.1%} {what} (max {r.max_abs_rel_error:.1%}, "
                         f"{int(r.runs)} runs)")
        out.append(f"The cost model ({strat}) predicts the steady step with median |relative "
                   f"error| " + "; ".join(parts) + ".")
    floor = t.get("cost_model_floor", pd.DataFrame())
    for r in floor.itertuples():
        out.append(f"{r.strategy}: {int(r.configurations)} configurations were measured more than once; their "
                   f"runs lie {r.median_abs_rel_error:.1%} (median, max {r.max_abs_rel_error:.1%}) from the "
                   f"geometric mean of their own measurements, an error no model of the configuration can beat.")
    return out


def sentences(exp: tables.Experiment, t: dict[str, pd.DataFrame]) -> list[str]:
    """Strategy auto's choices, the model's accuracy, what the fit left out, and the switches of strategy."""
    return accuracy_sentences(t) + costmodel.fit_notes(exp) + advisor.switch_sentences(exp.runs, exp.steps)
