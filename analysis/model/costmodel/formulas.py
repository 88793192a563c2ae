"""The cost model's formulas (the package docstring says them): its terms, one configuration's steady
step and warm-up, the fitted model (CostModel) and its rough defaults."""
from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from analysis import outputs


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
    bytes_factor: float = 1.0   # all-reduce: bytes per step against plain all-reduce (fp16 0.5; workload.communication)
    sync_every: float = 1.0     # all-reduce: steps per all-reduce (local SGD: the model every H steps)


def steady_time(strategy: str, p: dict, pt: Point) -> float:
    return _steady_parts(strategy, p, pt)["steady_s"]


def _steady_parts(strategy: str, p: dict, pt: Point) -> dict:
    n, s, b, r = pt.workers, pt.s_bits, pt.bw_bps, pt.rtt_s
    if _family(strategy) != "ps":
        compute = p["c"] * pt.scale * float(pt.slow.max())
        comm = (p["gamma"] * float(ring_allreduce_time(n, s * pt.bytes_factor, b / pt.share, 0.0))
                + (2 * (n - 1) * (p["alpha"] + r / 2) if n > 1 else 0.0)) / max(pt.sync_every, 1.0)
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
              fractions=None, shared=True, work=None, share=1.0, bytes_factor=1.0, sync_every=1,
              balanced=False) -> Point:
        """A configuration; b_bps at goodput level (measured, or configured x rho); share: the ring
        hops sharing the busiest link (1 on a star; ring_share of the topology); bytes_factor, sync_every:
        a workload.communication setting's (analysis.model.communication.factor), all-reduce only; balanced:
        workload.balance static or dynamic, all-reduce only: each worker's batch proportional to its speed, so
        every worker computes as long as the mean speed's (N / sum of 1/slowdown), not the slowest's."""
        n = max(int(workers), 1)
        r = self.rtt_s if rtt_s is None or not np.isfinite(rtt_s) else float(rtt_s)
        slow = slowdowns(n, self.u, self.cores, fractions, shared)
        if balanced and _family(strategy) != "ps":
            slow = np.full(n, n / float(np.sum(1.0 / slow)))
        return Point(_family(strategy), n, int(shards or servers or 1), float(s_bits), float(b_bps), r,
                     slow,
                     (work / self.work) if work else 1.0, float(share or 1.0), float(bytes_factor or 1.0),
                     float(sync_every or 1))

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
        outputs.write_text(path, json.dumps(self.to_dict(), indent=2) + "\n")
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
