"""Backup workers (Chen et al. 2016): each step aggregates the first N-k gradients to arrive and drops the
rest. Neither engine's synchronous all-reduce can drop a worker's gradient from a step (DDP's and
MultiWorkerMirroredStrategy's collectives wait for every rank), and TensorFlow's parameter servers apply each
worker's gradients alone (asynchronous), so it is refused at validate."""
from __future__ import annotations

NAME, TITLE, ORDER = "backup", "backup workers", 30
VALUE = "k"
ENGINES: tuple = ()
STRATEGIES: tuple = ()
REFUSAL = ("balance {{backup: k}} is not built for engine {engine}, strategy {strategy}: it needs a step that "
           "aggregates the first N-k gradients and drops the rest, and neither engine's all-reduce (DDP, "
           "MultiWorkerMirroredStrategy) can drop a worker from a step, while TensorFlow's parameter servers apply "
           "each worker's gradients alone; use balance: static, or strategy ps (asynchronous: no worker waits)")
balanced = True
DOC = ("each step aggregates the first N-k gradients to arrive and drops the rest; refused at validate: "
       "neither engine's all-reduce can drop a worker, and TensorFlow's parameter servers are asynchronous")


def parse(value) -> dict:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"balance backup takes a whole number of workers to drop, at least 1, not {value!r}")
    return {"k": value}


def label(setting: dict) -> str:
    return f"backup{setting.get('k', '')}"


def plan(setting: dict, global_batch: int, speeds: dict) -> dict | None:
    return None
