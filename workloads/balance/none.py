"""No balancing: every worker computes the same batch, and the slowest sets each step's pace."""
from __future__ import annotations

NAME, TITLE, ORDER = "none", "no balancing", 0
VALUE = ""
ENGINES = ("tensorflow", "pytorch")
STRATEGIES = ("single", "allreduce", "ps", "auto", "switch")
REFUSAL = ""
balanced = False
DOC = "every worker computes `batch_per_worker` samples a step; a step waits for the slowest (the default)"


def parse(value) -> dict:
    return {}


def plan(setting: dict, global_batch: int, speeds: dict) -> dict | None:
    return None
