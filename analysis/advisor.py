"""`strategy: auto`: choose parameter server or all-reduce before training.

After the checks and before training, the runner asks ``decide``: from the checks' measured
bandwidth and RTT, the job's gradient size, batch and steps, the hosts' CPU limits and the cost
model (fitted on ``workload.advisor.results``, or the rough defaults of analysis/costmodel.py),
it predicts the time per step of both strategies on these hosts and picks the one with more
samples per second (all-reduce: batch x workers per step; ps: batch per step, asynchronous).
ps needs a coordinator and ``ps.servers`` servers besides its workers (or ``ps.placement``); when
the hosts cannot hold them, all-reduce is chosen.

``strategy: switch`` asks again at every epoch's end (testbed/run/switching.py): ``switch_verdict``
compares the epoch's measured samples/s with the prediction for the other strategy over the
steps left (its warm-up and the measured start-up of new processes included). Pure: no network,
no root.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from analysis import costmodel

COLUMNS = ["advisor_choice", "predicted_step_s_allreduce", "predicted_step_s_ps"]


@dataclass
class Advice:
    strategy: str                       # allreduce | ps
    predicted_step_s_allreduce: float
    predicted_step_s_ps: float          # NaN when ps cannot be placed on these hosts
    samples_per_s_allreduce: float
    samples_per_s_ps: float
    reason: str
    model_source: str

    def columns(self) -> dict:
        """The runs.csv columns of the decision."""
        return dict(advisor_choice=self.strategy,
                    predicted_step_s_allreduce=round(self.predicted_step_s_allreduce, 6),
                    predicted_step_s_ps=(round(self.predicted_step_s_ps, 6)
                                         if np.isfinite(self.predicted_step_s_ps) else None))


def load_model(results) -> costmodel.CostModel:
    """The model fitted on one results folder or several (a list); the rough defaults for none."""
    if not results:
        return costmodel.default_model()
    folders = [results] if isinstance(results, (str, Path)) else list(results)
    feats = costmodel.features_of(folders)
    if feats.empty:
        raise ValueError(f"{', '.join(map(str, folders))}: no successful run to fit the cost model on")
    return costmodel.fit_features(feats, source=" + ".join(map(str, folders)))


def advise(model: costmodel.CostModel, hosts: list[str], gradient_bytes: float, batch_per_worker: float,
           steps: int, bw_bps: float | None, configured_bps: float | None, rtt_s: float | None = None,
           cpu: dict | None = None, ps_servers: int = 1, ps_partition=False, ps_placement: dict | None = None,
           shared: bool = True) -> Advice:
    """Predict both strategies on `hosts` and choose. bw_bps: the narrowest measured goodput
    (None: configured x the model's measured/configured ratio); cpu: host -> fraction or None."""
    cpu = cpu or {}
    if bw_bps is None or not np.isfinite(bw_bps) or bw_bps <= 0:
        if not configured_bps:
            raise ValueError("strategy auto needs a bandwidth: the checks measured none and no link is shaped")
        bw_bps = configured_bps * model.rho
    s_bits = float(gradient_bytes) * 8
    work = s_bits * batch_per_worker
    common = dict(rtt_s=rtt_s, shared=shared, work=work)
    ar = model.step("allreduce", len(hosts), s_bits, bw_bps, steps=steps,
                    fractions=[cpu.get(h) or math.nan for h in hosts], **common)
    ar_rate = batch_per_worker * len(hosts) / ar
    workers, servers = _ps_roles(hosts, ps_servers, ps_placement)
    if workers:
        shards = costmodel.ps_shards(len(servers), ps_partition, gradient_bytes)
        ps = model.step("ps", len(workers), s_bits, bw_bps, steps=steps, servers=len(servers), shards=shards,
                        fractions=[cpu.get(h) or math.nan for h in workers], **common)
        ps_rate = batch_per_worker / ps
    else:
        ps, ps_rate = math.nan, math.nan
    if not workers:
        choice = "allreduce"
        why = (f"ps needs {ps_servers + 2} hosts (coordinator, {ps_servers} server(s), a worker), "
               f"this topology has {len(hosts)}")
    else:
        choice = "ps" if ps_rate > ar_rate else "allreduce"
        why = (f"predicted {ar_rate:.4g} samples/s with all-reduce ({len(hosts)} workers, {ar:.4g} s/step) "
               f"vs {ps_rate:.4g} with ps ({len(workers)} workers, {len(servers)} server(s), {ps:.4g} s/step)")
    reason = (f"strategy auto chose {choice}: {why}; measured {bw_bps / 1e6:.4g} Mbit/s, gradient "
              f"{gradient_bytes / 1e6:.3g} MB, cost model from {model.source}")
    return Advice(choice, ar, ps, ar_rate, ps_rate, reason, model.source)


def _ps_roles(hosts: list[str], servers: int, placement: dict | None) -> tuple[list, list]:
    """(worker hosts, server hosts) of the ps strategy; ([], []) when it cannot be placed."""
    if placement:
        return list(placement.get("worker") or []), list(placement.get("ps") or [])
    if len(hosts) < servers + 2:
        return [], []
    return hosts[1 + servers:], hosts[1:1 + servers]


# -- glue for the runner ---------------------------------------------------------------------
def provisional(workload):
    """The workload with a concrete strategy for placement before the decision (auto: all-reduce,
    every host trains; switch: its start strategy); unchanged otherwise."""
    if workload.strategy == "switch":
        return workload.model_copy(update={"strategy": workload.switch.start})
    if workload.strategy != "auto":
        return workload
    return workload.model_copy(update={"strategy": "allreduce"})


def job_gradient_bytes(workload) -> float:
    """The job's gradient size: advisor.gradient_size, else the built-in model's parameters x 4."""
    if workload.advisor.gradient_size:
        return float(workload.advisor.gradient_size)
    if workload.script:
        raise ValueError("strategy auto with workload.script needs workload.advisor.gradient_size")
    from workloads.models import gradient_bytes
    return float(gradient_bytes(workload.model, dict(workload.model_params)))


def decide(exp, graph, check_rows: list[dict], results: list[str], shared: bool = True) -> Advice:
    """The decision for one run point: its spec, its graph (hosts, CPU limits, links), the rows
    of its checks (narrowest measured iperf3 goodput, median ping RTT) and the results folders to
    fit the cost model on (workload.advisor.results as paths)."""
    w = exp.workload
    return advise(**advise_inputs(exp, graph, check_rows, results, shared), steps=w.epochs * w.steps_per_epoch)


def advise_inputs(exp, graph, check_rows: list[dict], results: list[str], shared: bool = True) -> dict:
    """`advise`'s arguments but `steps` for one run point (`decide`; strategy switch asks again at
    every epoch's end with the bandwidth of the moment)."""
    w = exp.workload
    measured = [r["measured_bps"] for r in check_rows
                if r.get("tool") == "iperf3" and r.get("measured_bps") and r["measured_bps"] > 0]
    rtts = [r["rtt_ms"] for r in check_rows if r.get("tool") == "ping" and r.get("rtt_ms") is not None
            and np.isfinite(r["rtt_ms"])]
    rates = [e.params.bw for e in graph.links if e.params.bw]
    return dict(model=load_model(results), hosts=[h.name for h in graph.hosts],
                gradient_bytes=job_gradient_bytes(w), batch_per_worker=w.batch_per_worker,
                bw_bps=min(measured) if measured else None, configured_bps=min(rates) if rates else None,
                rtt_s=float(np.median(rtts)) / 1e3 if rtts else None, cpu={h.name: h.cpu for h in graph.hosts},
                ps_servers=w.ps.servers, ps_partition=w.ps.partition, ps_placement=w.ps.placement, shared=shared)


# -- strategy switch -------------------------------------------------------------------------
OTHER = {"allreduce": "ps", "ps": "allreduce"}


@dataclass
class Verdict:
    """One epoch end's comparison: the measured rate of the running strategy against the predicted
    rate of the other; `switch` when the prediction beats the measurement by more than the margin."""
    epoch: int
    current: str
    to: str
    measured_samples_per_s: float
    predicted_samples_per_s: float
    switch: bool
    reason: str


def switch_verdict(epoch: int, current: str, measured_step_s: float, samples_per_step: float,
                   advice: Advice, margin: float, restart_s: float = 0.0, steps_left: int = 0) -> Verdict:
    """Switch when the other strategy's predicted samples/s over the steps left, with the
    `restart_s` a switch costs (new processes: TensorFlow's start and the cluster's set-up) spread
    over them, exceed the measured ones x (1 + margin); never when the other cannot be placed
    (NaN) or nothing was measured."""
    other = OTHER[current]
    measured = samples_per_step / measured_step_s if measured_step_s and measured_step_s > 0 else math.nan
    step = advice.predicted_step_s_ps if other == "ps" else advice.predicted_step_s_allreduce
    rate = advice.samples_per_s_ps if other == "ps" else advice.samples_per_s_allreduce
    predicted = rate * step / (step + restart_s / steps_left) if restart_s and steps_left else rate
    go = bool(np.isfinite(measured) and np.isfinite(predicted) and predicted > measured * (1 + margin))
    gain = predicted / measured - 1 if np.isfinite(measured) and np.isfinite(predicted) else math.nan
    cost = f", {restart_s:.3g} s to restart over {steps_left} steps left" if restart_s and steps_left else ""
    reason = (f"epoch {epoch}: measured {measured:.4g} samples/s with {current}, the cost model predicts "
              f"{predicted:.4g} with {other}{cost} ({gain:+.0%}; margin {margin:.0%})")
    return Verdict(epoch, current, other, measured, predicted, go, reason)


# -- was it right? ---------------------------------------------------------------------------
SCORE = ["model", "hosts", "bw", "bw_bps", "advisor_choice", "predicted_step_s_allreduce",
         "predicted_step_s_ps", "measured_samples_per_s_allreduce", "measured_samples_per_s_ps",
         "measured_better", "right"]


def scorecard(runs) -> "pd.DataFrame":
    """Per `strategy: auto` run: its choice against the measured samples/s of all-reduce and ps
    runs at the same model, nodes and bandwidth in the same results (a sweep over
    workload.strategy: [allreduce, ps, auto]); right is empty when one of them was not measured."""
    import pandas as pd
    from analysis.tables import ok_runs
    if "advisor_choice" not in runs or runs["advisor_choice"].isna().all():
        return pd.DataFrame(columns=SCORE)
    ok = ok_runs(runs)
    auto = ok[ok["advisor_choice"].notna()]
    fixed = ok[ok["advisor_choice"].isna() & ok["strategy"].isin(["allreduce", "ps"])]
    rate = fixed.groupby(["model", "hosts", "bw_bps", "strategy"])["samples_per_s"].mean()
    rows = []
    for r in auto.itertuples(index=False):
        got = {s: rate.get((r.model, r.hosts, r.bw_bps, s), np.nan) for s in ("allreduce", "ps")}
        have = all(np.isfinite(v) for v in got.values())
        better = max(got, key=got.get) if have else ""
        rows.append(dict(model=r.model, hosts=r.hosts, bw=r.bw, bw_bps=r.bw_bps, advisor_choice=r.advisor_choice,
                         predicted_step_s_allreduce=r.predicted_step_s_allreduce,
                         predicted_step_s_ps=r.predicted_step_s_ps,
                         measured_samples_per_s_allreduce=got["allreduce"], measured_samples_per_s_ps=got["ps"],
                         measured_better=better, right=(better == r.advisor_choice) if have else None))
    return pd.DataFrame(rows, columns=SCORE)


def switch_sentences(runs, steps) -> list[str]:
    """The report's sentence per run that switched strategy: the order of its strategies and the
    median samples/s of the lead task's epochs under each (steps.csv), and the time the switch lost."""
    if "switches" not in runs or "strategy" not in steps:
        return []
    out = []
    for r in runs[(runs["switches"].fillna(0) > 0) & (runs["status"] == "ok")].itertuples(index=False):
        ep = steps[(steps["run_id"] == r.run_id) & (steps["kind"] == "epoch")]
        lead = ep[(ep["role"] == "chief") | ((ep["role"] == "worker") & (ep["task_index"] == 0))]
        lead = lead[(lead["role"] == "chief") == (lead["strategy"] == "ps")].sort_values("t")
        order = list(dict.fromkeys(lead["strategy"]))
        rates = ", ".join(f"{s} {lead[lead['strategy'] == s]['samples_per_s'].median():.4g}" for s in order)
        out.append(f"Run {r.run_id} switched strategy {int(r.switches)} time(s) ({' -> '.join(order)}); median "
                   f"samples/s per epoch: {rates}; time lost to stopping and starting: {r.time_lost_s:.3g} s.")
    return out
