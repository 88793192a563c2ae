"""`strategy: auto`: choose parameter server or all-reduce before training.

After the checks and before training, the runner asks ``decide``: from the checks' measured
bandwidth and RTT, the job's gradient size, batch and length, the hosts' CPU limits and the cost
model (fitted on ``workload.advisor.results``, or the rough defaults of analysis/model/costmodel/formulas.py),
it predicts both strategies' steady step and warm-up on these hosts and picks the one that trains
more samples per second over the job: samples / (warm-up + samples / steady samples/s), where a
step trains the global batch (batch x workers) under all-reduce and one worker's batch under ps.
Under ``fixed: data`` both train the same samples (ps then runs more, smaller steps); under
``fixed: steps`` each runs the same steps. For a long job this is the steady samples/s; in a short
one the warm-up counts. ps needs a coordinator and ``ps.servers`` servers besides its workers (or
``ps.placement``); when the hosts cannot hold them, all-reduce is chosen.

``strategy: switch`` asks again at every epoch's end (testbed/run/training/strategy_switch.py): ``switch_verdict``
compares the epoch's measured samples/s with the other strategy's predicted samples/s over the
work left (its warm-up and the measured start-up of new processes included). Pure: no network,
no root.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from analysis.model import costmodel

COLUMNS = ["advisor_choice", "predicted_step_s_allreduce", "predicted_step_s_ps"]


@dataclass
class Advice:
    """A decision: per strategy the predicted steady step (``predicted_step_s_*``, runs.csv's columns),
    the steady samples/s (``samples_per_s_*``), the warm-up, and the samples/s over the job the
    choice compared (``job_samples_per_s_*``: NaN without a job, then the steady samples/s decide)."""
    strategy: str                       # allreduce | ps
    predicted_step_s_allreduce: float   # steady step
    predicted_step_s_ps: float          # NaN when ps cannot be placed on these hosts
    samples_per_s_allreduce: float      # steady samples/s
    samples_per_s_ps: float
    reason: str
    model_source: str
    warmup_s_allreduce: float = 0.0
    warmup_s_ps: float = 0.0
    job_samples_per_s_allreduce: float = math.nan
    job_samples_per_s_ps: float = math.nan

    def columns(self) -> dict:
        """The runs.csv columns of the decision (the predicted steady steps)."""
        return dict(advisor_choice=self.strategy,
                    predicted_step_s_allreduce=round(self.predicted_step_s_allreduce, 6),
                    predicted_step_s_ps=(round(self.predicted_step_s_ps, 6)
                                         if np.isfinite(self.predicted_step_s_ps) else None))

    def deciding(self, strategy: str) -> float:
        """The samples/s the choice compared for `strategy`: over the job, else steady."""
        job = self.job_samples_per_s_ps if strategy == "ps" else self.job_samples_per_s_allreduce
        steady = self.samples_per_s_ps if strategy == "ps" else self.samples_per_s_allreduce
        return job if np.isfinite(job) else steady


def load_model(results) -> costmodel.CostModel:
    """The model fitted on one results folder or several (a list); the rough defaults for none."""
    if not results:
        return costmodel.default_model()
    folders = [results] if isinstance(results, (str, Path)) else list(results)
    feats = costmodel.features_of(folders)
    if feats.empty:
        raise ValueError(f"{', '.join(map(str, folders))}: no successful run whose steady state was judged "
                         "to fit the cost model on")
    return costmodel.fit_features(feats, source=" + ".join(map(str, folders)))


def advise(model: costmodel.CostModel, hosts: list[str], gradient_bytes: float, batch_per_worker: float,
           steps: int | None, bw_bps: float | None, configured_bps: float | None, rtt_s: float | None = None,
           cpu: dict | None = None, ps_servers: int = 1, ps_partition=False, ps_placement: dict | None = None,
           shared: bool = True, samples: float | None = None) -> Advice:
    """Predict both strategies on `hosts` and choose by samples/s over the job: `samples` samples
    (fixed data: the same for both), else `steps` steps of each (fixed steps), else the steady
    samples/s alone. bw_bps: the narrowest measured goodput (None: configured x the model's
    measured/configured ratio); cpu: host -> fraction or None."""
    cpu = cpu or {}
    if bw_bps is None or not np.isfinite(bw_bps) or bw_bps <= 0:
        if not configured_bps:
            raise ValueError("strategy auto needs a bandwidth: the checks measured none and no link is shaped")
        bw_bps = configured_bps * model.rho
    s_bits = float(gradient_bytes) * 8
    common = dict(rtt_s=rtt_s, shared=shared, work=s_bits * batch_per_worker)
    ar = model.rates("allreduce", len(hosts), s_bits, bw_bps, batch_per_worker,
                     fractions=[cpu.get(h) or math.nan for h in hosts], **common)
    ar_job = _job_rate(ar, steps, samples)
    workers, servers = _ps_roles(hosts, ps_servers, ps_placement)
    if workers:
        shards = costmodel.ps_shards(len(servers), ps_partition, gradient_bytes)
        ps = model.rates("ps", len(workers), s_bits, bw_bps, batch_per_worker, servers=len(servers), shards=shards,
                         fractions=[cpu.get(h) or math.nan for h in workers], **common)
        ps_job = _job_rate(ps, steps, samples)
    else:
        ps = dict(steady_s=math.nan, steady_samples_per_s=math.nan, warmup_s=math.nan)
        ps_job = math.nan
    advice = Advice("allreduce", ar["steady_s"], ps["steady_s"], ar["steady_samples_per_s"],
                    ps["steady_samples_per_s"], "", model.source, ar["warmup_s"], ps["warmup_s"], ar_job, ps_job)
    if not workers:
        why = (f"ps needs {ps_servers + 2} hosts (coordinator, {ps_servers} server(s), a worker), "
               f"this topology has {len(hosts)}; all-reduce: {_describe(advice, 'allreduce', len(hosts))}")
    else:
        advice.strategy = "ps" if advice.deciding("ps") > advice.deciding("allreduce") else "allreduce"
        why = (f"predicted {_describe(advice, 'allreduce', len(hosts))} with all-reduce vs "
               f"{_describe(advice, 'ps', len(workers), len(servers))} with ps")
    job = (f"a job of {samples:.6g} samples" if samples else f"a job of {steps} steps each" if steps else "")
    advice.reason = (f"strategy auto chose {advice.strategy}: {why}" + (f" (over {job})" if job else "")
                     + f"; measured {bw_bps / 1e6:.4g} Mbit/s, gradient {gradient_bytes / 1e6:.3g} MB, cost model "
                     f"from {model.source}")
    return advice


def _job_rate(t: dict, steps, samples) -> float:
    """Samples/s over a job of `samples` samples (else `steps` steps): samples over warm-up plus the
    samples at the steady rate; NaN without a job."""
    rate = t["steady_samples_per_s"]
    if samples:
        work = float(samples)
    elif steps:
        work = float(steps) * t["samples_per_step"]
    else:
        return math.nan
    return work / (t["warmup_s"] + work / rate) if rate > 0 else math.nan


def _describe(advice: Advice, strategy: str, workers: int, servers: int | None = None) -> str:
    """'280.3 samples/s over the job (steady 320.1 samples/s: 4 workers, 0.4 s/step; warm-up 3.2 s)'."""
    steady = advice.samples_per_s_ps if strategy == "ps" else advice.samples_per_s_allreduce
    step = advice.predicted_step_s_ps if strategy == "ps" else advice.predicted_step_s_allreduce
    warm = advice.warmup_s_ps if strategy == "ps" else advice.warmup_s_allreduce
    job = advice.job_samples_per_s_ps if strategy == "ps" else advice.job_samples_per_s_allreduce
    who = _workers(workers) + (f", {servers} server(s)" if servers is not None else "")
    inner = f"{who}, steady step {step:.4g} s, warm-up {warm:.3g} s"
    if np.isfinite(job):
        return f"{job:.4g} samples/s over the job (steady {steady:.4g} samples/s; {inner})"
    return f"{steady:.4g} steady samples/s ({inner})"


def _workers(n: int) -> str:
    return f"{n} worker{'s' if n != 1 else ''}"


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
    return advise(**advise_inputs(exp, graph, check_rows, results, shared), **job_of(exp.workload))


def job_of(workload) -> dict:
    """`advise`'s job for a workload: under fixed data (the built-in workload's default) the samples
    of all its epochs, which either strategy trains (ps in more steps); under fixed steps, or for a
    script, its epochs x steps_per_epoch steps."""
    if getattr(workload, "fixed", "steps") == "data" and not workload.script:
        return {"steps": None, "samples": float(workload.epochs * workload.epoch_samples())}
    return {"steps": workload.epochs * workload.steps_per_epoch}


def advise_inputs(exp, graph, check_rows: list[dict], results: list[str], shared: bool = True) -> dict:
    """`advise`'s arguments but the job (`steps` or `samples`: ``job_of``) for one run point
    (`decide`; strategy switch asks again at every epoch's end with the bandwidth of the moment)."""
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
                   advice: Advice, margin: float, restart_s: float = 0.0, steps_left: int = 0,
                   samples_left: float | None = None) -> Verdict:
    """Switch when the other strategy's predicted samples/s over the work left exceed the measured
    ones x (1 + margin); never when the other cannot be placed (NaN) or nothing was measured.

    The work left is `samples_left` samples (fixed data: the other strategy trains the same samples,
    in its own number of steps), else `steps_left` of the other's steps (fixed steps); over it the
    other pays its warm-up and the `restart_s` a switch costs (new processes: TensorFlow's start and
    the cluster's set-up) besides its steady steps. With neither, its steady samples/s."""
    other = OTHER[current]
    measured = samples_per_step / measured_step_s if measured_step_s and measured_step_s > 0 else math.nan
    step = advice.predicted_step_s_ps if other == "ps" else advice.predicted_step_s_allreduce
    rate = advice.samples_per_s_ps if other == "ps" else advice.samples_per_s_allreduce
    warm = advice.warmup_s_ps if other == "ps" else advice.warmup_s_allreduce
    warm = warm if np.isfinite(warm) else 0.0
    if samples_left:
        work, left = float(samples_left), f"{samples_left:.6g} samples left"
    elif steps_left:
        work, left = steps_left * step * rate, f"{steps_left} steps left"      # step x rate: its samples per step
    else:
        work, left = 0.0, ""
    predicted = work / (warm + restart_s + work / rate) if work and rate > 0 else rate
    go = bool(np.isfinite(measured) and np.isfinite(predicted) and predicted > measured * (1 + margin))
    gain = predicted / measured - 1 if np.isfinite(measured) and np.isfinite(predicted) else math.nan
    cost = f", {warm:.3g} s of warm-up and {restart_s:.3g} s to restart over {left}" if work else ""
    reason = (f"epoch {epoch}: measured {measured:.4g} samples/s with {current}, the cost model predicts "
              f"{predicted:.4g} with {other}{cost} ({gain:+.0%}; margin {margin:.0%})")
    return Verdict(epoch, current, other, measured, predicted, go, reason)


# -- was it right? ---------------------------------------------------------------------------
SCORE = ["model", "hosts", "bw", "bw_bps", "advisor_choice", "predicted_step_s_allreduce",
         "predicted_step_s_ps", "measured_samples_per_s_allreduce", "measured_samples_per_s_ps",
         "measured_better", "right"]


def scorecard(runs, steps=None):
    """Per `strategy: auto` run: its choice against the measured steady samples/s (runs.csv
    steady_samples_per_s of runs whose steady state was judged; derived from `steps` for results
    recorded before those columns) of all-reduce and ps runs at the same model, nodes and bandwidth
    in the same results (a sweep over workload.strategy: [allreduce, ps, auto]); right is empty when
    one of them was not measured. predicted_step_s_*: the predicted steady steps."""
    import pandas as pd
    from analysis.tables.tables import STEPS_COLUMNS, ok_runs
    if "advisor_choice" not in runs or runs["advisor_choice"].isna().all():
        return pd.DataFrame(columns=SCORE)
    ok = ok_runs(runs)
    st = costmodel.steady_of(ok, steps if steps is not None else pd.DataFrame(columns=STEPS_COLUMNS))
    ok = ok.assign(steady_rate=st["steady_samples_per_s"].where(st["steady"] == "ok"))
    auto = ok[ok["advisor_choice"].notna()]
    fixed = ok[ok["advisor_choice"].isna() & ok["strategy"].isin(["allreduce", "ps"])]
    rate = fixed.groupby(["model", "hosts", "bw_bps", "strategy"])["steady_rate"].mean()
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
