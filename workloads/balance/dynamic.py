"""Dynamic balancing (LB-BSP, Chen et al. 2020): the batches re-sized every few steps from the workers'
measured step times, each worker's new batch proportional to its measured samples/s, within bounds."""
from __future__ import annotations

NAME, TITLE, ORDER = "dynamic", "dynamic balancing", 20
VALUE = ""
ENGINES: tuple = ()
STRATEGIES = ("allreduce",)
REFUSAL = ("balance dynamic is not built in this testbed yet (its batches re-sized at run time, each change "
           "recorded per step): use balance: static, which sizes the batches from the nodes' cores")
balanced = True
DOC = ("the batches re-sized every few steps from the measured step times (LB-BSP's rule), within bounds; "
       "not built yet: refused at validate")


def parse(value) -> dict:
    return {}


def plan(setting: dict, global_batch: int, speeds: dict) -> dict | None:
    return None
