"""The synthetic tasks zoo models train on, with a learnable teacher as the built-in models have:

- image classification: inputs uniform in [0, 1], labels the argmax of a fixed random projection of
  the image average-pooled to TEACHER_GRID x TEACHER_GRID per channel (a teacher the size of the
  pooled image, not of the full one);
- causal language modelling: every sequence follows a fixed random next-token table from a random
  first token, so the next token is learnable.

Inputs are keyed by (seed, batch id) and the teacher by the seed alone; worker i of n reads batch
ids i, i + n, ...: disjoint shards. numpy and torch are imported when a batch is made.
"""
from __future__ import annotations

TEACHER_GRID = 4
IMAGE_PARAMS = {"image_size": 224, "channels": 3, "classes": 1000}


def image_batch(p: dict, seed: int, batch_id: int, batch_size: int, channels_last: bool = False):
    """(x, y) as numpy arrays: x of batch x channels x size x size (or channels last), y int64 labels."""
    import numpy as np

    rng = np.random.default_rng([seed, batch_id])
    teacher = np.random.default_rng([seed, 2**32 - 1])
    c, s = p["channels"], p["image_size"]
    x = rng.random((batch_size, c, s, s), dtype=np.float32)
    g = min(TEACHER_GRID, s)
    cut = s - s % g
    pooled = x[:, :, :cut, :cut].reshape(batch_size, c, g, cut // g, g, cut // g).mean(axis=(3, 5))
    w = teacher.standard_normal((c * g * g, p["classes"]), dtype=np.float32)
    y = np.argmax((pooled.reshape(batch_size, -1) - 0.5) @ w, axis=1).astype(np.int64)
    return (x.transpose(0, 2, 3, 1).copy() if channels_last else x), y


def token_batch(p: dict, seed: int, batch_id: int, batch_size: int):
    """Token ids (numpy int64, batch x seq_len) that follow a fixed random next-token table."""
    import numpy as np

    rng = np.random.default_rng([seed, batch_id])
    table = np.random.default_rng([seed, 2**32 - 1]).integers(0, p["vocab_size"], p["vocab_size"])
    tokens = np.empty((batch_size, p["seq_len"]), dtype=np.int64)
    tokens[:, 0] = rng.integers(0, p["vocab_size"], batch_size)
    for t in range(1, p["seq_len"]):
        tokens[:, t] = table[tokens[:, t - 1]]
    return tokens


def torch_image_batch(p: dict, seed: int, batch_id: int, batch_size: int):
    import torch

    x, y = image_batch(p, seed, batch_id, batch_size)
    return torch.from_numpy(x), torch.from_numpy(y)


def torch_token_batch(p: dict, seed: int, batch_id: int, batch_size: int):
    import torch

    tokens = torch.from_numpy(token_batch(p, seed, batch_id, batch_size))
    return tokens, tokens


def classification_loss(net, inputs, targets):
    from torch.nn import functional

    return functional.cross_entropy(net(inputs), targets)


def causal_lm_loss(net, inputs, targets):
    """The model's own next-token loss (transformers shifts the labels)."""
    return net(input_ids=inputs, labels=targets).loss
