"""The built-in mlp and cnn models in PyTorch, layer for layer the tf_keras ones of models.py, so
both engines train the same parameter count (models.param_count) on the same synthetic data.

The output layer gives logits: torch's cross-entropy applies the softmax that the Keras models end
with, which has no parameters. Imports torch only when a model or a batch is built.
"""
from __future__ import annotations

import numpy as np

from workloads.models import _cnn_shapes, resolve_params

ENGINE_MODELS = ("mlp", "cnn")      # the caption model is TensorFlow's only


def build(name: str, params: dict | None = None):
    """The named model as a torch.nn.Module (float32, CPU)."""
    from torch import nn

    p = resolve_params(name, params)
    if "/" in name:
        from workloads import zoo
        return zoo.build(name, p)
    if name == "mlp":
        dims = [p["input_dim"]] + [p["width"]] * p["depth"]
        layers = [m for a, b in zip(dims, dims[1:]) for m in (nn.Linear(a, b), nn.ReLU())]
        return nn.Sequential(*layers, nn.Linear(dims[-1], p["classes"]))
    if name == "cnn":
        h, w = _cnn_shapes(p)
        f, k = p["filters"], p["kernel"]
        return nn.Sequential(
            nn.Conv2d(p["channels"], f, k), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(f, 2 * f, k), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
            nn.Linear(h * w * 2 * f, p["dense"]), nn.ReLU(), nn.Linear(p["dense"], p["classes"]))
    raise ValueError(f"model {name!r} has no PyTorch version; engine pytorch trains {', '.join(ENGINE_MODELS)}")


def synthetic_batch(name: str, p: dict, seed: int, batch_id: int, batch_size: int):
    """One deterministic batch (x, y) as torch tensors: inputs keyed by (seed, batch id), labels
    from a fixed random "teacher", as workloads/data.py makes them for TensorFlow (not bit for bit:
    a different generator, the same distribution and the same learnable task). Worker i of n reads
    batch ids i, i + n, ...: disjoint shards."""
    import torch

    if "/" in name:
        from workloads import zoo
        return zoo.batch(name, p, seed, batch_id, batch_size)
    rng = np.random.default_rng([seed, batch_id])
    teacher = np.random.default_rng([seed, 2**32 - 1])
    if name == "mlp":
        x = rng.standard_normal((batch_size, p["input_dim"]), dtype=np.float32)
        flat = x
    elif name == "cnn":
        x = rng.random((batch_size, p["channels"], p["height"], p["width"]), dtype=np.float32)
        flat = x.reshape(batch_size, -1) - 0.5
    else:
        raise ValueError(f"model {name!r} has no PyTorch version")
    w = teacher.standard_normal((flat.shape[1], p["classes"]), dtype=np.float32)
    y = np.argmax(flat @ w, axis=1)
    return torch.from_numpy(x), torch.from_numpy(y.astype(np.int64))


def trainable_count(model) -> int:
    return sum(t.numel() for t in model.parameters() if t.requires_grad)
