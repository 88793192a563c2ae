"""Static balancing: each worker's batch is proportional to its speed (its node's cores, or under replayed
compute its step time), the global batch kept; each worker's gradient is weighted by its share of the global
batch, so that the all-reduced update is the plain mean over it."""
from __future__ import annotations

from workloads import balance

NAME, TITLE, ORDER = "static", "static balancing", 10
VALUE = ""
ENGINES = ("tensorflow", "pytorch")
STRATEGIES = ("allreduce",)
REFUSAL = ("balance static shares the global batch of a synchronous all-reduce step; strategy {strategy} "
           "has none to share: set strategy allreduce")
balanced = True
DOC = ("each worker's batch proportional to its speed (`cores`, or its replayed step time), the global batch "
       "kept; the gradients weighted by each worker's share, so an update is the plain mean over the global batch")


def parse(value) -> dict:
    return {}


def plan(setting: dict, global_batch: int, speeds: dict) -> dict | None:
    """The job's balance section: each host's batch and loss weight (hosts in the workers' order)."""
    hosts = list(speeds)
    sizes = balance.batches(global_batch, [speeds[h] for h in hosts])
    return {"method": NAME, "batches": dict(zip(hosts, sizes)),
            "weights": dict(zip(hosts, balance.weights(sizes)))}


# -- worker side -------------------------------------------------------------------------------------
def tf_setup(model, weight: float) -> None:
    """A tf_keras model's train step takes the gradients of its loss x `weight` (its share of the global batch x
    N), all-reduced as before: Keras' own step swapped for the same step weighted, a communication method's step
    (workloads/communication/tf_step.py) weighted in place; the loss it reports stays the plain one."""
    import types

    from workloads.communication import tf_step

    model.gradient_weight = float(weight)
    if "train_step" not in vars(model):
        model.train_step = types.MethodType(tf_step.train_step(tf_step.AGGREGATE), model)
