"""workload.communication inside the built-in training loops (docs/communication.md): the method in force
(workloads/communication/) sets up PyTorch's DDP model or TensorFlow's train step, and the step events count
the bytes the node sent. Engines are imported inside the methods' functions."""
from __future__ import annotations

from workloads import communication as methods


def settings(job: dict) -> dict:
    """The job's communication settings with their defaults (a job without the section: plain all-reduce)."""
    return {**methods.defaults(), **(job.get("communication") or {})}


def in_force(c: dict) -> dict:
    """What the `start` event says: {} for plain all-reduce, else the settings that apply."""
    return methods.method_of(c).in_force(c)


# -- PyTorch --------------------------------------------------------------------------------------
def ddp_options(c: dict, model) -> dict:
    """DistributedDataParallel's options for the setting (the method's own, none by default)."""
    method = methods.method_of(c)
    return method.ddp_options(c, model) if hasattr(method, "ddp_options") else {}


def torch_setup(model, c: dict):
    """Register the setting on a DistributedDataParallel model; returns after_step(step), to call after each
    optimizer step (local SGD's averaging and outer step; nothing otherwise)."""
    after_step = methods.method_of(c).torch_setup(model, c)
    return after_step if after_step is not None else (lambda step: None)


# -- TensorFlow (all-reduce) ----------------------------------------------------------------------
def tf_setup(model, strategy, c: dict) -> list:
    """Apply the setting to a compiled tf_keras model under MultiWorkerMirroredStrategy (a train step that
    all-reduces otherwise, or local steps and a callback that averages the model); returns the callbacks to put
    before the timing callback, so that a step's time holds what they do."""
    return methods.method_of(c).tf_setup(model, strategy, c)


def sent_bytes() -> int | None:
    """Bytes this task's node has sent so far: every interface of its network namespace but lo
    (/proc/net/dev); None where it cannot be read."""
    try:
        with open("/proc/net/dev") as fh:
            lines = fh.read().splitlines()[2:]
    except OSError:
        return None
    total = 0
    for line in lines:
        name, _, counters = line.partition(":")
        fields = counters.split()
        if name.strip() != "lo" and len(fields) >= 9:
            total += int(fields[8])
    return total
