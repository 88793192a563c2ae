"""The built-in models (mlp, cnn: both engines; caption: TensorFlow), as a zoo source, so the profiler
and the replay read them as they read any other model."""
from __future__ import annotations

PREFIX = "builtin"
ENGINE = None               # both engines (caption: TensorFlow only)
PACKAGES: tuple[str, ...] = ()
PARAMS: dict = {}               # per model: workloads.models.DEFAULTS


def names() -> list[str]:
    from workloads.models import MODELS

    return list(MODELS)


def defaults(name: str) -> dict:
    from workloads.models import DEFAULTS

    return dict(DEFAULTS[name])


def build(name: str, p: dict):
    from workloads import torch_models

    return torch_models.build(name, p)


def batch(name: str, p: dict, seed: int, batch_id: int, batch_size: int):
    from workloads import torch_models

    return torch_models.synthetic_batch(name, p, seed, batch_id, batch_size)


def loss(net, inputs, targets):
    from workloads.zoo.tasks import classification_loss

    return classification_loss(net, inputs, targets)
