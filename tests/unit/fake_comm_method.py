"""A communication method declared outside workloads/communication/, for test_communication_registry.py:
`compression: eighth` sends an eighth of the gradient's bytes, under PyTorch's all-reduce only. Everything
a method declares is here; the test registers it."""
from __future__ import annotations

NAME, TITLE, ORDER = "eighth", "an eighth", 90
KEY, CHOOSE = "compression", "compression: eighth"
KEYS: dict = {}
ENGINES = ("pytorch",)
STRATEGIES = ("allreduce",)
WHAT = "gradient compression"
PREDICT = "eighth"
DOC = "a test's method: an eighth of the bytes"


def in_force(c: dict) -> dict:
    return {"compression": NAME}


def torch_setup(model, c: dict):
    return None


def tf_setup(model, strategy, c: dict) -> list:
    return []


def theory(c: dict, full: float, ring: float, shapes) -> tuple[float, int, int]:
    return full / 8, 0, 1
