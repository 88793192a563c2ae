"""Plain all-reduce: every step's float32 gradients all-reduced, what DDP and MultiWorkerMirroredStrategy
do by default (workload.communication left out, or compression: none)."""
from __future__ import annotations

NAME, TITLE, ORDER = "none", "plain all-reduce", 0
KEY, CHOOSE = "compression", "compression: none"
KEYS: dict = {}
ENGINES = ("tensorflow", "pytorch")
STRATEGIES = ("single", "allreduce", "ps", "auto", "switch")
PREDICT = "none"
DOC = "the float32 gradients all-reduced every step (the default)"


def in_force(c: dict) -> dict:
    return {}


def torch_setup(model, c: dict):
    return None


def tf_setup(model, strategy, c: dict) -> list:
    return []


def theory(c: dict, full: float, ring: float, shapes) -> tuple[float, int, int]:
    return full, 0, 1


def run_label(value: dict) -> str:
    return "plain"
