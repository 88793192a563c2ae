"""powersgd: each weight matrix sent as a rank-`rank` approximation P Q^T (PyTorch's powerSGD_hook, with
error feedback), after start_step steps of plain all-reduce. PyTorch only.

Its theory: each weight of shape (n, ...) is an n x m matrix (m: the rest of its shape) sent as P (n x r)
and Q (m x r), r(n + m) floats, where that is under half the matrix (min_compression_rate 2); biases and
small matrices go uncompressed; plain all-reduce for the first start_step steps."""
from __future__ import annotations

import math

from workloads.communication import START_STEP, Key

NAME, TITLE, ORDER = "powersgd", "PowerSGD", 30
KEY, CHOOSE = "compression", "compression: powersgd"
KEYS = {"rank": Key(4, "the rank of the low-rank approximation of each weight matrix", ge=1, le=1024,
                    orphan="{key} is {owners}'s: set {choose}, or remove {key}"),
        "start_step": START_STEP}
ENGINES = ("pytorch",)
STRATEGIES = ("allreduce",)
WHAT = "gradient compression"
UPDATE_EFFECT = "compresses the gradients to low rank"
MODELS = ("mlp", "cnn")            # the models whose tensor shapes its theory reads
PREDICT, PREDICT_HELP = "powersgd:R", "the results' built-in model at rank R"
DOC = ("each weight matrix sent as a rank-`rank` approximation after `start_step` plain steps (PyTorch only; "
       "2 plain steps or more)")
FLOAT32 = 4
MIN_COMPRESSION_RATE = 2       # PowerSGDState's default: compress a matrix only where it saves over half


def engine_refusal(engine: str) -> str:
    from workloads.communication import METHODS, PLAIN

    others = [m.NAME for m in METHODS.values() if m.KEY == KEY and m.NAME != PLAIN and engine in m.ENGINES]
    return (f"PowerSGD is PyTorch's DDP communication hook: set engine: pytorch, or compression {' or '.join(others)} "
            "(TensorFlow casts the gradients for its all-reduce)")


def problems(c: dict) -> list[tuple]:
    if c["start_step"] < 2:
        return [("start_step", "PyTorch's PowerSGD starts after at least 2 steps of plain all-reduce (its error "
                 "feedback needs DDP's buckets settled): set start_step 2 or more", ())]
    return []


def in_force(c: dict) -> dict:
    return {"compression": NAME, "rank": c["rank"], "start_step": c["start_step"]}


# -- PyTorch --------------------------------------------------------------------------------------
def ddp_options(c: dict, model) -> dict:
    """The whole model in one bucket: with several, PowerSGD's per-bucket collectives reach gloo in a different
    order on each worker, which aborts ("Received data size doesn't match expected size", torch 2.13, a model
    over DDP's 1 MiB first bucket)."""
    size = sum(p.numel() * p.element_size() for p in model.parameters())
    return {"bucket_cap_mb": size / 2**20 + 1}


def torch_setup(model, c: dict):
    from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook

    state = powerSGD_hook.PowerSGDState(process_group=None, matrix_approximation_rank=int(c["rank"]),
                                        start_powerSGD_iter=int(c["start_step"]))
    model.register_comm_hook(state, powerSGD_hook.powerSGD_hook)
    return None


# -- theory, names --------------------------------------------------------------------------------
def floats(shapes, rank: int, min_rate: float = MIN_COMPRESSION_RATE) -> int:
    """Floats one PowerSGD step all-reduces: r'(n + m) per n x m matrix worth compressing (r' =
    min(n, m, rank); worth it when r'(n + m) x min_rate < n m), every other tensor whole."""
    total = 0
    for shape in shapes:
        n = shape[0]
        m = math.prod(shape[1:]) if len(shape) > 1 else 1
        r = min(n, m, rank)
        total += (n + m) * r if (n + m) * r * min_rate < n * m else n * m
    return total


def theory(c: dict, full: float, ring: float, shapes) -> tuple[float, int, int]:
    return ring * FLOAT32 * floats(shapes(), int(c["rank"])), int(c["start_step"]), 1


def label(c: dict) -> str:
    from workloads.communication import text

    r = text(c.get("rank"))
    return f"powersgd rank {int(float(r))}" if r else "powersgd"


def run_label(value: dict) -> str:
    return f"{NAME}{value.get('rank', '')}"


def predict_settings(arg: str) -> dict | None:
    if arg.isdigit() and int(arg) >= 1:
        return {"compression": NAME, "rank": int(arg)}
    return None
