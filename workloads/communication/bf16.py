"""bf16: each gradient cast to bfloat16 for the all-reduce, half the bytes with float32's range (a twin of
PyTorch's fp16_compress_hook for gloo; TensorFlow's all-reduce of the cast gradients)."""
from __future__ import annotations

from workloads.communication import tf_step

NAME, TITLE, ORDER = "bf16", "bf16", 20
KEY, CHOOSE = "compression", "compression: bf16"
KEYS: dict = {}
ENGINES = ("tensorflow", "pytorch")
STRATEGIES = ("allreduce",)
WHAT = "gradient compression"
UPDATE_EFFECT = "rounds the gradients"
PREDICT = "bf16"
DOC = "each gradient cast to bfloat16 (8 significant bits, float32's range) for the all-reduce: half the bytes"


def in_force(c: dict) -> dict:
    return {"compression": NAME}


def hook(process_group, bucket):
    """fp16_compress_hook's twin in bfloat16 for gloo (PyTorch's own bf16 hook asks for NCCL)."""
    import torch
    import torch.distributed as dist

    group = process_group if process_group is not None else dist.group.WORLD
    buffer = bucket.buffer()
    compressed = buffer.to(torch.bfloat16).div_(group.size())
    fut = dist.all_reduce(compressed, group=group, async_op=True).get_future()

    def decompress(f):
        buffer.copy_(f.value()[0])
        return buffer
    return fut.then(decompress)


def torch_setup(model, c: dict):
    model.register_comm_hook(None, hook)
    return None


def tf_setup(model, strategy, c: dict) -> list:
    return tf_step.cast_all_reduce(model, "bfloat16")


def theory(c: dict, full: float, ring: float, shapes) -> tuple[float, int, int]:
    return full / 2, 0, 1
