"""fp16: each gradient cast to IEEE half precision for the all-reduce, half the bytes (PyTorch's
fp16_compress_hook; TensorFlow's all-reduce of the cast gradients)."""
from __future__ import annotations

from workloads.communication import tf_step

NAME, TITLE, ORDER = "fp16", "fp16", 10
KEY, CHOOSE = "compression", "compression: fp16"
KEYS: dict = {}
ENGINES = ("tensorflow", "pytorch")
STRATEGIES = ("allreduce",)
WHAT = "gradient compression"
UPDATE_EFFECT = "rounds the gradients"
PREDICT = "fp16"
DOC = "each gradient cast to 16 bits (11 significant bits, range to 65,504) for the all-reduce: half the bytes"


def in_force(c: dict) -> dict:
    return {"compression": NAME}


def torch_setup(model, c: dict):
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

    model.register_comm_hook(None, default_hooks.fp16_compress_hook)
    return None


def tf_setup(model, strategy, c: dict) -> list:
    return tf_step.cast_all_reduce(model, "float16")


def theory(c: dict, full: float, ring: float, shapes) -> tuple[float, int, int]:
    return full / 2, 0, 1
