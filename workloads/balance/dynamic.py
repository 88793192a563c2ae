"""Dynamic balancing (LB-BSP, Chen et al. 2020): the batches re-sized every `every` steps from the workers'
measured compute, each worker's new batch proportional to its measured samples per second of compute (its
data, forward and backward passes: the loop takes the gradients without DDP's collective and averages them in one
all-reduce after, so that a step's compute is timed apart from its wait), the global batch kept and every batch at least `min_batch`;
each worker's gradient weighted by its share, as under static balancing. It starts from static's batches (the
nodes' cores). PyTorch only: the built-in loop draws a new batch each step; TensorFlow's Keras fit draws every
worker's batches from a dataset made once."""
from __future__ import annotations

from workloads import balance

NAME, TITLE, ORDER = "dynamic", "dynamic balancing", 20
VALUE, OPTIONAL = "H", True
EVERY = 10
ENGINES = ("pytorch",)
STRATEGIES = ("allreduce",)
REFUSAL = ("balance dynamic re-sizes each worker's batch while it trains, which engine {engine}, strategy {strategy} "
           "cannot: it runs under engine pytorch, strategy allreduce (TensorFlow's Keras fit draws every worker's "
           "batches from a dataset made once; use balance: static there)")
balanced = True
DOC = ("the batches re-sized every H steps (`{dynamic: H}`, 10 by default) from each worker's measured compute "
       "(LB-BSP's rule: batch proportional to measured samples/s), the global batch kept, each batch at least an "
       "eighth of `batch_per_worker`; each change in steps.csv's `batch`")


def parse(value) -> dict:
    if value is None:
        return {"every": EVERY}
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 100_000:
        raise ValueError(f"balance dynamic takes the steps between re-sizings, a whole number from 1, not {value!r}")
    return {"every": value}


def label(setting: dict) -> str:
    every = setting.get("every", EVERY)
    return NAME if every == EVERY else f"{NAME}{every}"


def run_problems(setting: dict, run: dict) -> list[tuple]:
    if run.get("communication", "none") != "none":
        return [(f"balance dynamic averages the gradients itself (one all-reduce after the timed backward pass), "
                 f"without DDP's communication hook: remove workload.communication", ("workload.communication",))]
    if run["compute"] == "replay":
        return [("balance dynamic measures each worker's compute while it trains; replayed compute waits times "
                 "known in advance: use balance: static, which sizes the batches from them", ("emulation.compute",))]
    return []


def plan(setting: dict, global_batch: int, speeds: dict) -> dict | None:
    """Static's batches to start from, with the period and the smallest batch."""
    hosts = list(speeds)
    start = balance.batches(global_batch, [speeds[h] for h in hosts])
    return {"method": NAME, "batches": dict(zip(hosts, start)), "weights": dict(zip(hosts, balance.weights(start))),
            "every": int(setting.get("every", EVERY)), "min_batch": max(1, global_batch // len(hosts) // 8)}


class Resizer:
    """A worker's side of the rule: `timed(seconds)` after each step's compute (data and forward pass), then
    `after_step(step, gather)`, gather(speed) -> every worker's speed in rank order (a small all-gather); True
    when the batches changed (then `batch` and `weight` are this worker's new ones)."""

    def __init__(self, section: dict, rank: int):
        self.sizes = list(section["batches"].values())      # in the workers' (ranks') order
        self.rank, self.every = rank, int(section.get("every", EVERY))
        self.total, self.minimum = sum(self.sizes), int(section.get("min_batch", 1))
        self.samples, self.seconds = 0, 0.0

    @property
    def batch(self) -> int:
        return self.sizes[self.rank]

    @property
    def weight(self) -> float:
        return balance.weights(self.sizes)[self.rank]

    def timed(self, seconds: float) -> None:
        self.samples += self.batch
        self.seconds += seconds

    def after_step(self, step: int, gather) -> bool:
        if step % self.every:
            return False
        speeds = gather(self.samples / self.seconds if self.seconds > 0 else 0.0)
        self.samples, self.seconds = 0, 0.0
        new = balance.batches(self.total, speeds, self.minimum)
        changed, self.sizes = new != self.sizes, new
        return changed
