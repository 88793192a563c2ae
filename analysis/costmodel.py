"""Cost model of one training step, fitted per strategy on a sweep, validated on held-out points.

Symbols: N workers, k parameter servers, S = gradient_bytes * 8 (bits), B = the path bandwidth
*as the checks measured it* (the narrowest iperf3 goodput of the run, bit/s; a run without
checks: configured x rho, rho = the median measured/configured ratio of the fitted results, 0.956
by default), r = the ping RTT (s), P = cores of the machine the tasks share, u = cores a lone
worker keeps busy (usage.csv of the 1-worker runs), steps = steps of the run.

Compute. Every worker wants u cores; host i may use at most cpu_i * P (topology.host cpu, a
fraction of the whole machine). On one machine the P cores are shared max-min fairly among the
workers (water-filling), so worker i gets a_i cores and computes ``s_i = u / a_i`` times slower
than a lone worker (s_i >= 1). A synchronous step waits for the slowest worker: s = max_i s_i.
On separate machines (``shared=False``, predictions) a_i = min(u, cpu_i * P). Runs with compute
"budgets" (runs.csv ``compute``: every node held to its ``cores`` by cgroups, issue 19) are separate
machines too: a_i = min(u, cores_i), so their compute term is constant per node and does not grow
with the number of nodes.

Steady step t (runs.csv ``steady_step_s``: the median step of the lead task after its warm-up, under
ps the mean interval; analysis/steady.py):

* all-reduce (ring: reduce-scatter + all-gather, 2(N-1) rounds of S/N each)::

      t = c*s + gamma * 2(N-1)/N * S/(B/m) + 2(N-1) * (alpha + r/2)

  m: the ring's link sharing (ring_share: the most ring hops one link carries one way in the
  run's topology; 1 on a star, and for ps and predictions without a topology)

* parameter server (TF2, asynchronous: a coordinator step is one worker's closure, which pulls
  the S bits of parameters and pushes S bits of gradients; the busiest server link carries S/k'
  of every closure each way, k' = the servers the largest variable is sharded over)::

      tau_j = c*s_j + gamma * 2*S/B + 2*alpha + r        one closure on worker j
      A     = 1 / sum_j(1/tau_j)                         workers in parallel
      C     = gamma * S/(k'*B)                           the busiest server link
      t     = (A^p + C^p + d^p)^(1/p)                    three stages in a pipeline; d = the
                                                         coordinator's own time per step

Warm-up E (runs.csv ``warmup_s``, measured directly: the time of the warm-up steps, the first step
tracing the function and setting up the collective, and the steps after it still over twice the
typical one)::

      E = w*s + v*(N-1) + beta*S/(B/m)        (S/B only where there is traffic: not 1-worker all-reduce)

E is the warm-up steps' own time, not ``training_time - steps x t``: that difference also holds
the steady steps' spread around their median (their mean is above it when a few steps are slow,
and that excess grows with the steps, not once per run) and the time between steps; the spread
is the steady state's (its quartiles), and the time between steps is a few hundredths of a second.

Samples per step: the global batch (batch x N) under all-reduce and ddp, one worker's batch under
ps (a coordinator step is one closure). The steady samples/s is samples per step / t; the speedup
of N nodes is their steady samples/s over one node's (one worker, same engine, model, batch per
worker, bandwidth); a job of S samples takes E + S / (steady samples/s) (``CostModel.rates``).

c is scaled by S x batch per worker relative to the fitted runs' (compute grows with the
parameters times the samples), so a prediction for another size of model scales. The parameters
(c, gamma, alpha, w, v, beta; ps also d, p) are fitted per strategy by Levenberg-Marquardt on
log(predicted/measured) of the steady steps and warm-ups, with a soft-L1 loss (a noisy run counts
less) and a weak pull towards rough defaults, so a parameter the data cannot identify keeps its
default (listed as such). Only runs whose steady state was judged (runs.csv ``steady`` ok: at
least 10 steady steps) are fitted; the others are listed apart (``evaluate``'s ``not_judged``,
``fit_notes``). Accuracy (``comparison``, ``holdout``, ``accuracy``, ``repeat_floor``) is the
relative error of the steady step. ``holdout`` fits on the points with fewer workers and predicts
the largest worker count. Degraded runs (runs.csv ``fidelity`` "degraded: ...") are left out of
every fit unless ``include_degraded``; ``evaluate`` predicts them apart (split "degraded, not
fitted").
"""
from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from analysis import steady, tables
from analysis.tables import ok_runs

TCP_CEILING = 1448 / 1514        # TCP goodput over an HTB-shaped link, of the configured rate
STRATEGIES = ("allreduce", "ps", "ddp")     # ddp: PyTorch's DistributedDataParallel (engine pytorch)
MIN_SHARD_BYTES = 256 << 10      # ps.partition: true shards a variable into pieces of >= 256 KiB
PARAMS = {
    "allreduce": ("c", "gamma", "alpha", "w", "v", "beta"),
    "ps": ("c", "gamma", "alpha", "d", "p", "w", "v", "beta"),
    "ddp": ("c", "gamma", "alpha", "w", "v", "beta"),         # the ring formulas, fitted apart
}
# Rough values: fitted on two default sweeps (all-reduce) and a ps sweep (1-3 workers, 1-2 servers,
# 10/50/200 Mbit/s) on the 2-core development VM, 2026-11-22. A parameter the fitted results
# cannot identify keeps its value from here, and `strategy: auto` without results uses them all.
DEFAULTS = {
    "allreduce": dict(c=0.002, gamma=1.1, alpha=0.0063, w=0.48, v=0.27, beta=4.0),
    "ps": dict(c=0.0056, gamma=1.0, alpha=0.0026, d=0.013, p=2.8, w=0.67, v=0.13, beta=9.5),
}
DEFAULTS["ddp"] = dict(DEFAULTS["allreduce"])   # no PyTorch sweep fitted them yet: TensorFlow's ring
DEFAULT_REFERENCE = dict(cores=2.0, u=1.0, rho=TCP_CEILING, rtt_s=3e-4, steps=20,
                         work=203560 * 8 * 32.0)   # S * batch per worker of the default sweep


# -- terms -----------------------------------------------------------------------------------
def ring_allreduce_time(n, s_bits, b_bps, alpha):
    """2(N-1)/N * S/B + 2(N-1)*alpha; 0 when N <= 1."""
    n = np.asarray(n, dtype=float)
    t = 2 * (n - 1) / n * np.asarray(s_bits, float) / np.asarray(b_bps, float) \
        + 2 * (n - 1) * alpha
    return np.where(n > 1, t, 0.0)


def ps_closure_comm(s_bits, b_bps, alpha):
    """Communication of one parameter-server closure on its worker: pull S, push S, two calls."""
    return 2 * np.asarray(s_bits, float) / np.asarray(b_bps, float) + 2 * alpha


def ps_server_time(k, s_bits, b_bps):
    """Per closure, on the busiest server link (one way): S/(k*B); k < 1 or NaN counts as 1."""
    k = np.maximum(np.nan_to_num(np.asarray(k, dtype=float), nan=1.0), 1.0)
    return np.asarray(s_bits, float) / (k * np.asarray(b_bps, float))


def pnorm(values, p: float) -> float:
    """(sum v^p)^(1/p): the sum for p = 1, the largest for p -> infinity."""
    v = np.asarray(values, dtype=float)
    top = float(v.max())
    if top <= 0:
        return 0.0
    return top * float(np.sum((v / top) ** p)) ** (1.0 / p)


def fair_shares(demands, cores: float) -> np.ndarray:
    """Max-min fair split of `cores` among tasks wanting `demands` cores (water-filling)."""
    d = np.asarray(demands, dtype=float)
    alloc = np.zeros_like(d)
    left, todo = float(cores), list(np.argsort(d, kind="stable"))
    while todo:
        share = left / len(todo)
        i = todo[0]
        if d[i] <= share:
            alloc[i] = d[i]
            left -= d[i]
            todo.pop(0)
        else:
            alloc[todo] = share
            break
    return alloc


def slowdowns(n: int, u: float, cores: float, fractions=None, shared: bool = True) -> np.ndarray:
    """Per worker: how many times slower than a lone worker (u cores) it computes.

    fractions: each worker's host cpu limit as a fraction of a machine of `cores` cores (None or
    NaN: no limit), cycled if shorter than n. shared: every worker on one machine of `cores`."""
    n = max(int(n), 1)
    f = _fractions(fractions, n)
    demand = np.minimum(u, f * cores)
    alloc = fair_shares(demand, cores) if shared else demand
    return u / np.maximum(alloc, 1e-9)


def _fractions(fractions, n: int) -> np.ndarray:
    if fractions is None or (isinstance(fractions, float) and math.isnan(fractions)):
        return np.ones(n)
    f = np.atleast_1d(np.asarray(fractions, dtype=float))
    if f.size == 0:
        return np.ones(n)
    return np.resize(np.where(np.isnan(f), 1.0, f), n)


def ps_shards(servers: int, partition, s_bytes: float) -> int:
    """Servers the largest variable is spread over: none without partitioning (the built-in
    models have one variable holding nearly all parameters); with ``ps.partition: true``
    (TensorFlow's MinSizePartitioner, 256 KiB pieces) min(k, S // 256 KiB); 'fixed': k."""
    k = max(int(servers or 1), 1)
    if partition in (True, "true", "True", "min_size"):
        return int(min(k, max(1, s_bytes // MIN_SHARD_BYTES)))
    if partition == "fixed":
        return k
    return 1


# -- one configuration -----------------------------------------------------------------------
@dataclass
class Point:
    """What the model needs of one configuration."""
    strategy: str          # allreduce | ps (single counts as one all-reduce worker)
    workers: int
    shards: int            # ps: k', servers the largest variable is spread over
    s_bits: float
    bw_bps: float          # path bandwidth at TCP goodput level
    rtt_s: float
    slow: np.ndarray       # per worker compute slowdown (>= 1)
    scale: float = 1.0     # compute per step relative to the fitted runs'
    share: float = 1.0     # all-reduce: ring hops that share the busiest link one way (ring_share)


def steady_time(strategy: str, p: dict, pt: Point) -> float:
    return _steady_parts(strategy, p, pt)["steady_s"]


def _steady_parts(strategy: str, p: dict, pt: Point) -> dict:
    n, s, b, r = pt.workers, pt.s_bits, pt.bw_bps, pt.rtt_s
    if _family(strategy) != "ps":
        compute = p["c"] * pt.scale * float(pt.slow.max())
        comm = p["gamma"] * float(ring_allreduce_time(n, s, b / pt.share, 0.0)) + \
            (2 * (n - 1) * (p["alpha"] + r / 2) if n > 1 else 0.0)
        return dict(steady_s=compute + comm, compute_s=compute, comm_s=comm,
                    bound="compute" if compute >= comm else "network")
    comm = p["gamma"] * 2 * s / b + 2 * p["alpha"] + r
    tau = p["c"] * pt.scale * pt.slow + comm
    workers = 1.0 / float(np.sum(1.0 / tau))
    server = p["gamma"] * float(ps_server_time(pt.shards, s, b))
    parts = {"workers": workers, "servers": server, "coordinator": p["d"]}
    bound = max(parts, key=parts.get)
    if bound == "workers":
        bound = "compute" if p["c"] * pt.scale * float(np.mean(pt.slow)) >= comm else "network"
    return dict(steady_s=pnorm(list(parts.values()), p["p"]), compute_s=p["c"] * pt.scale *
                float(np.mean(pt.slow)), comm_s=comm, bound=bound)


def warmup_time(strategy: str, p: dict, pt: Point) -> float:
    n = pt.workers
    if _family(strategy) != "ps":
        s, traffic = float(pt.slow.max()), n > 1
    else:
        s, traffic = float(n / np.sum(1.0 / pt.slow)), True
    return p["w"] * s + p["v"] * (n - 1) + (p["beta"] * pt.s_bits / (pt.bw_bps / pt.share) if traffic else 0.0)


# -- the model -------------------------------------------------------------------------------
@dataclass
class StrategyFit:
    params: dict
    n_runs: int = 0
    defaulted: list = field(default_factory=list)   # parameters the data could not identify


@dataclass
class CostModel:
    """Fitted parameters per strategy and the reference the fit was made on."""
    fits: dict
    cores: float = DEFAULT_REFERENCE["cores"]     # P of the fitted runs' machine
    u: float = DEFAULT_REFERENCE["u"]             # cores a lone worker keeps busy
    rho: float = DEFAULT_REFERENCE["rho"]         # measured / configured bandwidth
    rtt_s: float = DEFAULT_REFERENCE["rtt_s"]     # ping RTT when none is given
    steps: int = DEFAULT_REFERENCE["steps"]       # steps per run of the fitted results
    work: float = DEFAULT_REFERENCE["work"]       # S * batch per worker of the fitted runs
    source: str = "defaults"
    samples: float = 0.0                          # samples a fitted run trained (median; 0: unknown)

    def point(self, strategy, workers, s_bits, b_bps, servers=1, shards=None, rtt_s=None,
              fractions=None, shared=True, work=None, share=1.0) -> Point:
        """A configuration; b_bps at goodput level (measured, or configured x rho); share: the ring
        hops sharing the busiest link (1 on a star; ring_share of the topology)."""
        n = max(int(workers), 1)
        r = self.rtt_s if rtt_s is None or not np.isfinite(rtt_s) else float(rtt_s)
        return Point(_family(strategy), n, int(shards or servers or 1), float(s_bits), float(b_bps), r,
                     slowdowns(n, self.u, self.cores, fractions, shared),
                     (work / self.work) if work else 1.0, float(share or 1.0))

    def terms(self, strategy, workers, s_bits, b_bps, **kw) -> dict:
        """Steady step, warm-up and their parts for one configuration."""
        pt = self.point(strategy, workers, s_bits, b_bps, **kw)
        p = self.fits[pt.strategy].params
        out = _steady_parts(pt.strategy, p, pt)
        out.update(warmup_s=warmup_time(pt.strategy, p, pt), slowdown=float(pt.slow.max()))
        return out

    def rates(self, strategy, workers, s_bits, b_bps, batch, samples=None, **kw) -> dict:
        """terms() with the samples: samples_per_step (batch x workers, ps: batch), the steady
        samples/s, and for a job of `samples` samples its time, warm-up + samples / steady
        samples/s (job_s; NaN without samples)."""
        t = self.terms(strategy, workers, s_bits, b_bps, **kw)
        per_step = samples_per_step(strategy, workers, batch)
        rate = per_step / t["steady_s"] if t["steady_s"] > 0 else math.nan
        t.update(samples_per_step=per_step, steady_samples_per_s=rate,
                 job_s=t["warmup_s"] + samples / rate if samples and rate > 0 else math.nan)
        return t

    def step(self, strategy, workers, s_bits, b_bps, steps=None, **kw) -> float:
        """Time per step as runs.csv's time_per_step_s records it (steady + warm-up / steps): the
        warm-up spread over the run's steps, for comparison with that column only; speedups and
        the advisor use the steady samples/s and the warm-up apart (``rates``)."""
        t = self.terms(strategy, workers, s_bits, b_bps, **kw)
        return t["steady_s"] + t["warmup_s"] / (steps or self.steps)

    # persistence ------------------------------------------------------------------------
    def to_dict(self) -> dict:
        d = asdict(self)
        d["fits"] = {k: asdict(v) for k, v in self.fits.items()}
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "CostModel":
        fits = {k: StrategyFit(**v) for k, v in d["fits"].items()}
        for name in STRATEGIES:          # a model saved before a family existed: its defaults
            fits.setdefault(name, StrategyFit(dict(DEFAULTS[name]), defaulted=list(DEFAULTS[name])))
        return cls(fits=fits, **{k: v for k, v in d.items() if k != "fits"})

    def save(self, path) -> Path:
        path = Path(path)
        path.write_text(json.dumps(self.to_dict(), indent=2) + "\n")
        return path

    @classmethod
    def load(cls, path) -> "CostModel":
        return cls.from_dict(json.loads(Path(path).read_text()))

    def describe(self) -> str:
        lines = [f"cost model from {self.source}: P = {self.cores:g} cores, u = {self.u:.2f} cores per "
                 f"lone worker, measured/configured bandwidth {self.rho:.3f}, RTT {self.rtt_s * 1e3:.2f} ms"]
        for name, f in self.fits.items():
            lines.append(f"  {name:9s} " + ", ".join(_show(k, v) for k, v in f.params.items())
                         + f" ({f.n_runs} runs" + (f"; defaults: {', '.join(f.defaulted)}"
                                                   if f.defaulted else "") + ")")
        return "\n".join(lines)


def _show(name: str, value: float) -> str:
    if name in ("c", "alpha", "d"):
        return f"{name} = {value * 1e3:.3g} ms"
    if name in ("w", "v"):
        return f"{name} = {value:.3g} s"
    return f"{name} = {value:.3g}"


def default_model() -> CostModel:
    """Rough defaults (docs/cost-model.md, "Formulas"), for `strategy: auto` without results."""
    return CostModel(fits={k: StrategyFit(dict(v), defaulted=list(v)) for k, v in DEFAULTS.items()})


def samples_per_step(strategy, workers, batch) -> float:
    """Samples one step trains: the global batch (batch x workers) under all-reduce, ddp and single;
    one worker's batch under ps (a coordinator step is one worker's closure)."""
    return float(batch) * (1 if _family(strategy) == "ps" else max(int(workers), 1))


def _family(strategy, engine=None) -> str:
    """The fit a run or prediction belongs to: ps; ddp for PyTorch (engine pytorch, or the family
    itself); else allreduce (TensorFlow's; single counts as one worker, compute only)."""
    if str(strategy) in ("ps", "ddp"):
        return str(strategy)
    return "ddp" if engine == "pytorch" else "allreduce"


# -- features of measured runs ---------------------------------------------------------------
FEATURES = ["run_id", "strategy", "family", "engine", "model", "fixed", "hosts", "workers", "servers", "shards",
            "share", "bw_bps", "bw", "s_bits", "batch", "samples_per_step", "steps", "samples_trained",
            "bw_meas_bps", "bw_source", "rtt_s", "fractions", "shared", "degraded", "slowdown", "steady",
            "warmup_steps", "steady_steps", "steady_s", "steady_q1_s", "steady_q3_s", "warmup_s",
            "steady_samples_per_s", "time_per_step_s"]
_STEADY = ["warmup_steps", "warmup_s", "steady_steps", "steady_step_s", "steady_step_q1_s",
                  "steady_step_q3_s", "steady_samples_per_s", "steady"]


def run_samples_per_step(runs: pd.DataFrame) -> pd.Series:
    """Each run's samples per step: runs.csv samples_per_step, else (results recorded before it) the
    global batch, under ps one worker's share of it (a coordinator step is one worker's closure)."""
    def col(name):
        return pd.to_numeric(runs[name], errors="coerce") if name in runs else pd.Series(np.nan, index=runs.index)
    own, batch = col("samples_per_step"), col("global_batch")
    workers = col("workers").where(lambda w: w > 0, col("hosts"))
    ps = runs["strategy"] == "ps" if "strategy" in runs else pd.Series(False, index=runs.index)
    return own.where(own > 0, batch.where(~ps, batch / workers))


def steady_of(runs: pd.DataFrame, steps: pd.DataFrame) -> pd.DataFrame:
    """Per run (runs' index): the warm-up and steady columns of runs.csv (_STEADY), derived
    from steps.csv with analysis.steady for a run recorded before they existed (no ``steady``
    verdict); a run without step rows is 'no step timings'."""
    per_step = run_samples_per_step(runs)
    out = pd.DataFrame(index=runs.index, columns=_STEADY, dtype=object)
    have = runs["steady"].notna() if "steady" in runs else pd.Series(False, index=runs.index)
    for col in _STEADY:
        if col in runs:
            out.loc[have, col] = runs.loc[have, col]
    need = runs.loc[~have]
    if len(need):
        ids = need["run_id"] if "run_id" in need else pd.Series(None, index=need.index)
        times = steady.lead_times(steps[steps["run_id"].isin(set(ids.dropna()))]) if len(steps) else {}
        for i, r in need.iterrows():
            split = steady.split(times.get(ids[i], []), asynchronous=r.get("strategy") == "ps")
            for col, v in split.columns(per_step[i]).items():
                out.at[i, col] = v
    for col in _STEADY[:-1]:
        out[col] = pd.to_numeric(out[col], errors="coerce")
    rate = per_step / out["steady_step_s"]
    out["steady_samples_per_s"] = out["steady_samples_per_s"].where(out["steady_samples_per_s"].notna(), rate)
    out["steady"] = out["steady"].fillna("not recorded").astype(str)
    return out


def judged(feats: pd.DataFrame) -> pd.Series:
    """Feature rows whose steady state was judged (a steady step to fit and to compare with)."""
    st = pd.to_numeric(feats["steady_s"], errors="coerce")
    return st.notna() & (st > 0)


def features(exp, cores: float | None = None) -> pd.DataFrame:
    """One row per ok run with what the model needs, measured: the checks' bandwidth and RTT,
    the workers' CPU limits and ps partitioning (runs/<id>/spec.yaml, roles from topology.json, each
    read once) or, under compute budgets, their cores (runs.csv; then shared is False), the steady
    step, its quartiles and the warm-up (runs.csv's steady columns, else analysis.steady on
    steps.csv), the samples per step and whether the run was degraded. steady_s is NaN where the
    steady state was not judged (``steady`` says why). attrs: cores, u, rho."""
    cores = float(cores or os.cpu_count() or 1)
    ok = ok_runs(tables.with_faithful_defaults(exp.runs))
    ok = ok[ok["gradient_bytes"].notna() & (ok["steps"] > 0)]
    rho = bandwidth_ratio(exp.checks)
    u = lone_worker_cores(exp, cores)
    bw_meas, rtt = _measured_bw(exp.checks), _rtt(exp.checks)
    st = steady_of(ok, exp.steps)
    per_step = run_samples_per_step(ok)
    specs = getattr(exp, "specs", None) or {}       # spec.yaml as load_experiment read it, where it did
    rows = []
    for i, r in zip(ok.index, ok.itertuples(index=False)):
        workers = int(r.workers) if pd.notna(r.workers) and r.workers > 0 else int(r.hosts)
        servers = int(r.servers) if pd.notna(r.servers) else 0
        fam = _family(r.strategy, r.engine)        # ok_runs: tensorflow where results predate PyTorch
        folder = Path(exp.path) / "runs" / str(r.run_id)
        spec = specs[str(r.run_id)] if str(r.run_id) in specs else _run_spec(exp.path, r.run_id)
        topo = _read_json(folder / "topology.json")
        shared = r.compute != "budgets"
        fr = (worker_fractions(spec, exp.path, r.run_id, fam, int(r.hosts), servers, topology=topo) if shared
              else budget_fractions(r, exp.path, fam, workers, servers, cores, topology=topo))
        partition = ((spec.get("workload") or {}).get("ps") or {}).get("partition") if spec else None
        b_meas, src = bw_meas.get(r.run_id, np.nan), "checks"
        if not np.isfinite(b_meas):
            b_meas, src = r.bw_bps * rho, "configured x rho"
        s = st.loc[i]
        ok_steady = s["steady"] == steady.OK and np.isfinite(s["steady_step_s"]) and s["steady_step_s"] > 0
        trained = getattr(r, "samples_trained", np.nan)
        rows.append(dict(
            run_id=r.run_id, strategy=r.strategy, family=fam, engine=r.engine, model=r.model,
            fixed=getattr(r, "fixed", np.nan), hosts=int(r.hosts), workers=workers, servers=servers,
            shards=ps_shards(servers, partition, r.gradient_bytes) if fam == "ps" else 0,
            share=(ring_share(topo, r.engine) if topo else 1) if fam != "ps" else 1,
            bw_bps=r.bw_bps, bw=r.bw, s_bits=float(r.gradient_bytes) * 8,
            batch=float(r.global_batch) / workers, samples_per_step=float(per_step[i]), steps=float(r.steps),
            samples_trained=float(trained) if pd.notna(trained) else float(r.steps) * float(per_step[i]),
            bw_meas_bps=b_meas, bw_source=src, rtt_s=rtt.get(r.run_id, np.nan),
            fractions=json.dumps(fr) if fr else "", shared=shared, degraded=str(r.fidelity).startswith("degraded"),
            slowdown=float(slowdowns(workers, u, cores, fr, shared).max()), steady=s["steady"],
            warmup_steps=s["warmup_steps"], steady_steps=s["steady_steps"],
            steady_s=float(s["steady_step_s"]) if ok_steady else np.nan,
            steady_q1_s=s["steady_step_q1_s"] if ok_steady else np.nan,
            steady_q3_s=s["steady_step_q3_s"] if ok_steady else np.nan,
            warmup_s=s["warmup_s"] if ok_steady else np.nan,
            steady_samples_per_s=s["steady_samples_per_s"] if ok_steady else np.nan,
            time_per_step_s=float(r.time_per_step_s)))
    out = pd.DataFrame(rows, columns=FEATURES)
    out.attrs.update(cores=cores, u=u, rho=rho, u_measured=_has_lone_worker(exp))
    return out


def features_of(folders, cores: float | None = None, include_degraded: bool = False) -> pd.DataFrame:
    """features() of several results folders together (e.g. an all-reduce sweep and a ps sweep),
    the rows a fit may use (``fitted_rows``): u from the folders that measured a lone worker, rho
    the median of theirs; degraded runs left out unless include_degraded, runs whose steady state
    was not judged always."""
    parts = [fitted_rows(features(tables.load_experiment(f), cores), include_degraded) for f in folders]
    parts = [p for p in parts if len(p)] or parts[:1]
    out = pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0].copy()
    us = [p.attrs["u"] for p in parts if p.attrs.get("u_measured")]
    out.attrs.update(cores=parts[0].attrs.get("cores"), u=float(np.median(us)) if us else 1.0,
                     rho=float(np.median([p.attrs.get("rho", TCP_CEILING) for p in parts])))
    return out


def fitted_rows(feats: pd.DataFrame, include_degraded: bool = False) -> pd.DataFrame:
    """The rows a fit may use (attrs kept): those whose steady state was judged, and of them all
    but the degraded runs' unless include_degraded."""
    keep = judged(feats)
    if not include_degraded and "degraded" in feats:
        keep &= feats["degraded"].astype(object) != True   # noqa: E712 (NaN: not degraded)
    out = feats[keep].copy()
    out.attrs.update(feats.attrs)
    return out


def budget_fractions(run, exp_dir, family: str, workers: int, servers: int, cores: float,
                     topology: dict | None = None) -> list:
    """Under compute budgets: each worker's cores (runs.csv cores, else node_cores 'h1=1;h2=0.5'),
    as a fraction of `cores` (the P of slowdowns); [] when the run records neither. topology: the
    run's topology.json when already read (else read here)."""
    if pd.notna(run.cores) and run.cores > 0:
        return [float(run.cores) / cores] * workers
    own = dict(item.split("=", 1) for item in str(run.node_cores).split(";") if "=" in item)
    if not own:
        return []
    names = sorted(own, key=lambda n: (len(n), n))
    if topology is None:
        topology = _read_json(Path(exp_dir) / "runs" / str(run.run_id) / "topology.json")
    hosts = _worker_hosts(topology, names, family, servers)
    return [float(own[h]) / cores if h in own else float("nan") for h in hosts]


def bandwidth_ratio(checks: pd.DataFrame) -> float:
    """Median measured / configured iperf3 rate (TCP_CEILING without checks)."""
    ip = checks[(checks["tool"] == "iperf3") & checks["measured_bps"].notna()
                & (checks["configured_bps"] > 0)]
    if ip.empty:
        return TCP_CEILING
    return float((ip["measured_bps"] / ip["configured_bps"]).median())


def _measured_bw(checks: pd.DataFrame) -> dict:
    """run_id -> narrowest measured iperf3 goodput (the slowest path paces a ring and a server)."""
    ip = checks[(checks["tool"] == "iperf3") & (checks["measured_bps"] > 0)]
    return ip.groupby("run_id")["measured_bps"].min().to_dict()


def _rtt(checks: pd.DataFrame) -> dict:
    ping = checks[(checks["tool"] == "ping") & checks["rtt_ms"].notna()]
    return (ping.groupby("run_id")["rtt_ms"].median() / 1e3).to_dict()


def _lone_worker_runs(exp) -> pd.Series:
    runs = ok_runs(exp.runs)
    return runs.loc[(runs["workers"].fillna(runs["hosts"]) == 1) & (runs["strategy"] != "ps"), "run_id"]


def _has_lone_worker(exp) -> bool:
    return bool(exp.usage["run_id"].isin(_lone_worker_runs(exp)).any())


def lone_worker_cores(exp, cores: float) -> float:
    """u: the 90th percentile of a lone worker's CPU (usage.csv of 1-worker all-reduce or single
    runs), in cores; 1.0 when there is none."""
    u = exp.usage[exp.usage["run_id"].isin(_lone_worker_runs(exp)) & exp.usage["cpu_pct"].notna()]
    if u.empty:
        return 1.0
    return float(np.clip(u["cpu_pct"].quantile(0.9) / 100.0, 0.2, cores))


def _run_spec(exp_dir, run_id) -> dict:
    try:
        spec = yaml.safe_load((Path(exp_dir) / "runs" / str(run_id) / "spec.yaml").read_text())
        return spec if isinstance(spec, dict) else {}
    except (OSError, yaml.YAMLError):
        return {}


def worker_fractions(spec: dict, exp_dir, run_id: str, family: str, hosts: int, servers: int,
                     topology: dict | None = None) -> list:
    """The cpu limit (fraction of the machine, NaN = none) of each worker host of a run, from its
    resolved spec and topology.json (roles; `topology` when already read, else read here); [] when
    nothing limits them or the folder is absent."""
    topo = spec.get("topology") if spec else None
    if not isinstance(topo, dict):
        return []
    default = (topo.get("host") or {}).get("cpu")
    if isinstance(topo.get("hosts"), list):
        names = [h["name"] for h in topo["hosts"]]
        own = {h["name"]: h.get("cpu") for h in topo["hosts"]}
    else:
        names = [f"h{i}" for i in range(1, hosts + 1)]
        own = {n: (o or {}).get("cpu") for n, o in (topo.get("host_overrides") or {}).items()}
    if topology is None:
        topology = _read_json(Path(exp_dir) / "runs" / str(run_id) / "topology.json")
    workers = _worker_hosts(topology, names, family, servers)
    cpu = [own.get(n) if own.get(n) is not None else default for n in workers]
    if all(c is None for c in cpu):
        return []
    return [float("nan") if c is None else float(c) for c in cpu]


def ring_order(workers: int, engine: str | None = "tensorflow") -> list[int]:
    """Worker task indices in the order of the all-reduce ring. TensorFlow joins the tasks in the
    lexicographic order of their names, so task:10 comes before task:2
    (collective_param_resolver_local.cc, EstablishGlobalRank); PyTorch's gloo ring goes by rank."""
    return list(range(workers)) if engine == "pytorch" else sorted(range(workers), key=str)


def ring_share(topology: dict, engine: str | None = "tensorflow") -> int:
    """The most ring hops that cross one link in one direction, in a run's topology document
    (topology.json: hosts with roles, links): those hops share that link, so the ring moves at
    B / share. 1 on a star; on a tree, 2 and more once the ring order jumps between its switches."""
    workers = {int(role[len("worker"):]): h["name"] for h in topology.get("hosts", [])
               for role in str(h.get("role", "")).split("+") if role[len("worker"):].isdigit()
               and role.startswith("worker")}
    if len(workers) < 2:
        return 1
    hosts = [workers[i] for i in ring_order(len(workers), engine) if i in workers]
    near: dict[str, list[str]] = {}
    for link in topology.get("links", []):
        near.setdefault(link["a"], []).append(link["b"])
        near.setdefault(link["b"], []).append(link["a"])
    load: dict[tuple[str, str], int] = {}
    for a, b in zip(hosts, hosts[1:] + hosts[:1]):
        path = _path(near, a, b)
        for hop in zip(path, path[1:]):
            load[hop] = load.get(hop, 0) + 1
    return max(load.values(), default=1)


def _path(near: dict, a: str, b: str) -> list[str]:
    """The nodes of a shortest path from a to b (breadth first; [a] when b is unreachable)."""
    before, frontier = {a: None}, [a]
    while frontier and b not in before:
        reached = []
        for node in frontier:
            for n in near.get(node, []):
                if n not in before:
                    before[n] = node
                    reached.append(n)
        frontier = reached
    if b not in before:
        return [a]
    path = [b]
    while path[-1] != a:
        path.append(before[path[-1]])
    return path[::-1]


def _read_json(path: Path) -> dict:
    """A run folder's JSON document ({} when absent or unreadable)."""
    try:
        doc = json.loads(Path(path).read_text())
        return doc if isinstance(doc, dict) else {}
    except (OSError, ValueError):
        return {}


def _worker_hosts(topology: dict, names: list, family: str, servers: int) -> list:
    """The worker hosts of a run: from its topology.json's roles, else (no document) the hosts in
    order (ps: after the coordinator and the servers)."""
    try:
        found = [h["name"] for h in topology.get("hosts", []) for role in str(h.get("role", "")).split("+")
                 if role.startswith(("worker", "single"))]
        if found:
            return found
    except (KeyError, TypeError, AttributeError):
        pass
    return names if family != "ps" else names[1 + servers:]


# -- fitting ---------------------------------------------------------------------------------
LOSS_SCALE = 0.25      # soft-L1 loss: log errors beyond ~25% count linearly, not squared
PRIOR_WEIGHT = 0.01    # pull (in log units) towards DEFAULTS: decides only what the data cannot


AT_LEAST_ONE = ("p", "gamma")   # p >= 1 (a norm); gamma >= 1 (no faster than the measured goodput)


def _to_theta(family: str, p: dict) -> np.ndarray:
    # start no closer than 0.02 to the bound 1, where the parametrisation would leave no gradient
    return np.array([math.log(max(p[k] - 1.0, 0.02)) if k in AT_LEAST_ONE else math.log(max(p[k], 1e-12))
                     for k in PARAMS[family]])


def _from_theta(family: str, theta) -> dict:
    return {k: (1.0 + math.exp(t)) if k in AT_LEAST_ONE else math.exp(t)
            for k, t in zip(PARAMS[family], np.clip(theta, -30, 30))}


def _equations(rows: pd.DataFrame, u: float, cores: float, work_ref: float) -> list:
    """(kind, Point, measured): per run whose steady state was judged, a steady equation and, when
    its warm-up was measured, a warm-up equation; a run without a judged steady step has none (it
    is left out of the fit: ``fitted_rows``)."""
    eqs = []
    for _, f in rows.iterrows():
        if not (np.isfinite(f["steady_s"]) and f["steady_s"] > 0):
            continue
        fr = json.loads(f["fractions"]) if f["fractions"] else None
        rtt = f["rtt_s"] if np.isfinite(f["rtt_s"]) else 0.0
        pt = Point(f["family"], int(f["workers"]), max(int(f["shards"] or 1), 1), f["s_bits"],
                   f["bw_meas_bps"], rtt, slowdowns(f["workers"], u, cores, fr, _shared(f)),
                   f["s_bits"] * f["batch"] / work_ref, _share(f))
        eqs.append(("steady", pt, f["steady_s"]))
        if np.isfinite(f["warmup_s"]) and f["warmup_s"] > 0:
            eqs.append(("warmup", pt, f["warmup_s"]))
    return eqs


def _share(f) -> float:
    """A feature row's ring share (absent or NaN, as in features of older code: 1)."""
    v = f.get("share", 1.0)
    return 1.0 if v is None or not np.isfinite(v) or v < 1 else float(v)


def _shared(f) -> bool:
    """A feature row's workers shared one machine (absent or NaN: yes, as before budgets)."""
    v = f.get("shared", True)
    return True if v is None or (isinstance(v, float) and math.isnan(v)) else bool(v)


def _predict_eq(family, p, kind, pt) -> float:
    return steady_time(family, p, pt) if kind == "steady" else warmup_time(family, p, pt)


def _residuals(family, theta, eqs) -> np.ndarray:
    p = _from_theta(family, theta)
    return np.array([math.log(max(_predict_eq(family, p, k, pt), 1e-12) / y) for k, pt, y in eqs])


def _soft_l1(r):
    z = (r / LOSS_SCALE) ** 2
    return 2 * LOSS_SCALE ** 2 * (np.sqrt(1 + z) - 1), 1 / np.sqrt(1 + z)


def levenberg_marquardt(fun, theta0, prior, prior_weight=PRIOR_WEIGHT, iters=300):
    """Minimise sum soft_l1(fun(theta)) + prior_weight^2 |theta - prior|^2 (IRLS inside LM).
    Returns (theta, data Jacobian at the optimum)."""
    theta = np.array(theta0, dtype=float)

    def cost(th):
        return float(np.sum(_soft_l1(fun(th))[0]) + prior_weight ** 2 * np.sum((th - prior) ** 2))

    def jac(th, r0):
        j = np.empty((len(r0), len(th)))
        for i in range(len(th)):
            h = np.zeros_like(th)
            h[i] = 1e-6
            j[:, i] = (fun(th + h) - r0) / 1e-6
        return j

    lam, c0 = 1e-2, cost(theta)
    r = fun(theta)
    j = jac(theta, r)
    for _ in range(iters):
        _, wts = _soft_l1(r)
        a = j.T @ (wts[:, None] * j) + prior_weight ** 2 * np.eye(len(theta))
        g = j.T @ (wts * r) + prior_weight ** 2 * (theta - prior)
        step = np.linalg.solve(a + lam * np.diag(np.diag(a) + 1e-12), -g)
        trial = theta + step
        c1 = cost(trial)
        if c1 < c0:
            theta, c0, lam = trial, c1, max(lam / 3, 1e-9)
            r = fun(theta)
            j = jac(theta, r)
            if np.max(np.abs(step)) < 1e-7:
                break
        else:
            lam *= 4
            if lam > 1e9:
                break
    return theta, j


def fit_family(feats: pd.DataFrame, family: str, u: float, cores: float, work_ref: float) -> StrategyFit:
    """Fit one strategy's parameters on its runs in `feats` whose steady state was judged."""
    rows = feats[(feats["family"] == family) & judged(feats)]
    eqs = _equations(rows, u, cores, work_ref)
    prior = _to_theta(family, DEFAULTS[family])
    if not eqs:
        return StrategyFit(dict(DEFAULTS[family]), 0, list(PARAMS[family]))
    theta, j = levenberg_marquardt(lambda th: _residuals(family, th, eqs), prior, prior)
    # a parameter whose change moves no prediction was decided by the defaults alone
    sensitivity = np.abs(j).max(axis=0) * np.maximum(np.abs(theta), 1.0)
    defaulted = [k for k, s in zip(PARAMS[family], sensitivity) if s < 1e-3]
    return StrategyFit(_from_theta(family, theta), len(rows), defaulted)


def fit_features(feats: pd.DataFrame, cores: float | None = None, u: float | None = None,
                 rho: float | None = None, source: str = "") -> CostModel:
    """Fit every strategy present in `feats` (rows of `features`); absent strategies get defaults."""
    cores = float(cores or feats.attrs.get("cores") or os.cpu_count() or 1)
    u = float(u or feats.attrs.get("u") or 1.0)
    work = feats["s_bits"] * feats["batch"]
    work_ref = float(work.median()) if len(feats) else DEFAULT_REFERENCE["work"]
    fits = {fam: fit_family(feats, fam, u, cores, work_ref) for fam in STRATEGIES}
    rtt, steps = feats["rtt_s"].dropna(), feats["steps"].dropna()
    samples = feats["samples_trained"].dropna() if "samples_trained" in feats else pd.Series(dtype=float)
    return CostModel(fits=fits, cores=cores, u=u,
                     rho=float(rho or feats.attrs.get("rho") or TCP_CEILING),
                     rtt_s=float(rtt.median()) if len(rtt) else DEFAULT_REFERENCE["rtt_s"],
                     steps=int(steps.median()) if len(steps) else DEFAULT_REFERENCE["steps"],
                     work=work_ref, source=source, samples=float(samples.median()) if len(samples) else 0.0)


def fit(exp, cores: float | None = None, include_degraded: bool = False) -> CostModel:
    """Fit on every ok run of an experiment (analysis.tables.Experiment) whose steady state was
    judged, degraded runs left out unless include_degraded."""
    return fit_features(fitted_rows(features(exp, cores), include_degraded), source=str(exp.path))


# -- prediction and validation ---------------------------------------------------------------
def predict_features(model: CostModel, feats: pd.DataFrame) -> pd.DataFrame:
    """Predicted steady step, warm-up, steady samples/s (and runs.csv's time per step) of measured
    runs (their own machine: shared, or under compute budgets separate)."""
    out = []
    for _, f in feats.iterrows():
        t = model.terms(f["family"], f["workers"], f["s_bits"], f["bw_meas_bps"],
                        shards=max(int(f["shards"] or 1), 1), rtt_s=f["rtt_s"],
                        fractions=json.loads(f["fractions"]) if f["fractions"] else None,
                        shared=_shared(f), work=f["s_bits"] * f["batch"], share=_share(f))
        per_step = f["samples_per_step"] if "samples_per_step" in f and np.isfinite(f["samples_per_step"]) \
            else samples_per_step(f["family"], f["workers"], f["batch"])
        out.append(dict(predicted_steady_s=t["steady_s"], predicted_warmup_s=t["warmup_s"],
                        predicted_samples_per_s=per_step / t["steady_s"] if t["steady_s"] > 0 else np.nan,
                        predicted_step_s=t["steady_s"] + t["warmup_s"] / f["steps"],
                        predicted_compute_s=t["compute_s"], predicted_comm_s=t["comm_s"],
                        bound=t["bound"]))
    return pd.DataFrame(out, index=feats.index)


# measured_step_s / predicted_step_s: runs.csv's time per step (the warm-up spread over the run's
# steps) and the model's figure for it, for reference; the accuracy is on the steady step.
COMPARISON = ["run_id", "strategy", "family", "model", "fixed", "batch", "hosts", "workers", "servers", "bw",
              "bw_bps", "bw_meas_bps", "steps", "slowdown", "samples_per_step", "steady", "measured_steady_s",
              "predicted_steady_s", "rel_error", "measured_warmup_s", "predicted_warmup_s",
              "measured_samples_per_s", "predicted_samples_per_s", "measured_step_s", "predicted_step_s",
              "split", "bound", "degraded"]


def _compare(model, feats, split) -> pd.DataFrame:
    if feats.empty:
        return pd.DataFrame(columns=COMPARISON)
    out = feats.assign(**predict_features(model, feats))
    out["measured_steady_s"] = feats["steady_s"]
    out["measured_warmup_s"] = feats["warmup_s"]
    out["measured_samples_per_s"] = feats["steady_samples_per_s"]
    out["measured_step_s"] = feats["time_per_step_s"]
    out["rel_error"] = (out["predicted_steady_s"] - out["measured_steady_s"]) / out["measured_steady_s"]
    out["split"] = split
    return out[COMPARISON]


def comparison(feats: pd.DataFrame, model: CostModel | None = None) -> pd.DataFrame:
    """In-sample: measured vs predicted steady step (rel_error) of every run, the model fitted on all."""
    model = model or fit_features(feats)
    return _compare(model, feats, "in-sample").sort_values(
        ["strategy", "bw_bps", "hosts", "run_id"]).reset_index(drop=True)


def holdout(feats: pd.DataFrame, cores: float | None = None) -> pd.DataFrame:
    """Per strategy: fit on the runs with fewer workers than the largest count, predict the steady
    step of the runs with the largest count (they took no part in the fit). Only runs whose steady
    state was judged; empty when a strategy has one worker count."""
    feats_j = feats[judged(feats)]
    parts = []
    for fam in STRATEGIES:
        rows = feats_j[feats_j["family"] == fam]
        if rows["workers"].nunique() < 2:
            continue
        top = rows["workers"].max()
        train = feats_j[(feats_j["family"] == fam) & (feats_j["workers"] < top)].copy()
        train.attrs.update(feats.attrs)
        model = fit_features(train, cores)
        parts.append(_compare(model, rows[rows["workers"] == top], "held-out")
                     .assign(trained_on=f"workers <= {int(train['workers'].max())}"))
    if not parts:
        return pd.DataFrame(columns=COMPARISON + ["trained_on"])
    return pd.concat(parts, ignore_index=True)


ACCURACY = ["strategy", "split", "runs", "median_abs_rel_error", "max_abs_rel_error"]


def accuracy(*tables: pd.DataFrame) -> pd.DataFrame:
    """Median and max |relative error| of the steady step, per strategy and split (runs without a
    judged steady step are not counted)."""
    parts = [t for t in tables if len(t)]
    if not parts:
        return pd.DataFrame(columns=ACCURACY)
    df = pd.concat(parts, ignore_index=True)
    df = df[pd.to_numeric(df["rel_error"], errors="coerce").notna()]
    if df.empty:
        return pd.DataFrame(columns=ACCURACY)
    family = df["family"] if "family" in df else df["strategy"].map(_family)
    df = df.assign(abs_err=df["rel_error"].astype(float).abs(), family=family)
    out = df.groupby(["family", "split"], sort=False).agg(
        runs=("abs_err", "size"), median_abs_rel_error=("abs_err", "median"),
        max_abs_rel_error=("abs_err", "max")).reset_index().rename(columns={"family": "strategy"})
    return out[ACCURACY]


REPEAT_KEY = ["family", "model", "hosts", "workers", "servers", "bw_bps", "batch", "steps"]


def repeat_floor(feats: pd.DataFrame) -> pd.DataFrame:
    """The error no model can beat: per strategy, the |relative error| of predicting the steady
    step of each configuration measured more than once (repeats, or sweeps fitted together) by the
    geometric mean of its own measurements. Empty when no configuration was measured twice."""
    cols = ["strategy", "configurations", "runs", "median_abs_rel_error", "max_abs_rel_error"]
    feats = feats[judged(feats)] if "steady_s" in feats else feats.iloc[:0]
    if feats.empty:
        return pd.DataFrame(columns=cols)
    key = [k for k in REPEAT_KEY if k in feats]
    t = feats["steady_s"].astype(float)
    group = feats.groupby(key, dropna=False)["steady_s"]
    mean = np.exp(np.log(t).groupby([feats[k] for k in key], dropna=False).transform("mean"))
    twice = group.transform("size") > 1
    df = feats[twice].assign(err=(mean[twice] / t[twice] - 1).abs())
    if df.empty:
        return pd.DataFrame(columns=cols)
    out = df.groupby("family").agg(configurations=("err", lambda e: df.loc[e.index, key].drop_duplicates().shape[0]),
                                   runs=("err", "size"), median_abs_rel_error=("err", "median"),
                                   max_abs_rel_error=("err", "max")).reset_index()
    return out.rename(columns={"family": "strategy"})[cols]


DEGRADED_SPLIT = "degraded, not fitted"
NOT_JUDGED_SPLIT = "steady state not judged, not fitted"


def evaluate(exp, cores: float | None = None, include_degraded: bool | None = None) -> dict:
    """The model fitted on an experiment, its features, in-sample and held-out comparisons and
    accuracy (of the steady step); {} when no run can be fitted. Runs whose steady state was not
    judged are left out of the fit and listed in ``not_judged`` (their predictions, nothing measured
    to compare with); degraded runs are left out unless include_degraded (default:
    exp.include_degraded) and predicted apart (``degraded``)."""
    if include_degraded is None:
        include_degraded = getattr(exp, "include_degraded", False)
    every = features(exp, cores)
    feats = fitted_rows(every, include_degraded)
    if feats.empty:
        return {}
    model = fit_features(feats, source=str(exp.path))
    ins = comparison(feats, model)
    held = holdout(feats, cores)
    rest = every.loc[every.index.difference(feats.index)]
    return dict(model=model, features=feats, in_sample=ins, held_out=held,
                degraded=_compare(model, rest[judged(rest)], DEGRADED_SPLIT),
                not_judged=_compare(model, rest[~judged(rest)], NOT_JUDGED_SPLIT),
                accuracy=accuracy(ins, held), floor=repeat_floor(feats))


def fit_notes(exp) -> list[str]:
    """Sentences for the report: the runs left out of the cost model's fit because their steady
    state was not judged, with why (one sentence per reason)."""
    ev = evaluate_cached(exp)
    left = ev["not_judged"] if ev else features(exp)
    left = left[left["steady"] != steady.OK] if len(left) else left
    out = []
    for why, rows in left.groupby("steady", sort=False):
        ids = list(rows["run_id"].astype(str))
        ids = ", ".join(ids[:5]) + (f" and {len(ids) - 5} more" if len(ids) > 5 else "")
        out.append(f"{len(rows)} run(s) left out of the cost model's fit, their steady state not judged "
                   f"({why}): {ids}.")
    if not ev and out:
        out.append("No run's steady state was judged: there is no cost model to fit.")
    return out


def evaluate_cached(exp) -> dict:
    """evaluate(exp), computed once per loaded experiment (the report and two figures use it)."""
    key = (id(exp.runs), len(exp.runs), id(exp.steps), len(exp.steps), getattr(exp, "include_degraded", False))
    cached = exp.__dict__.get("_costmodel")
    if cached is None or cached[0] != key:
        cached = (key, evaluate(exp))
        exp.__dict__["_costmodel"] = cached
    return cached[1]
