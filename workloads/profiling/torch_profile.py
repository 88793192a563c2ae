"""Profiles a PyTorch training step: a zoo or built-in model's loop, or a user's unmodified torchrun
script, under the recorder's hooks (torch_recorder.py)."""
from __future__ import annotations

import os
import resource
import runpy
import socket
import sys

from workloads import zoo
from workloads.profiling.torch_recorder import IDLE_REPEATS, EnoughSteps, Recorder

AUTOCAST = {"bfloat16", "float16"}


def model_loop(model: str, params: dict, batch: int, device: str, dtype: str, seed: int = 0):
    """A training loop of the named model (Adam, as the testbed's own workload), forever: the
    recorder's optimizer hook ends it. Returns the module (for the layers' names) through `built`."""
    import torch

    torch.manual_seed(seed)
    p = zoo.resolve_params(model, params)
    source, name = zoo.split(model)
    net = source.build(name, p).to(device)
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-3)
    kind = getattr(torch, dtype) if dtype in AUTOCAST else None
    cached = getattr(source, "config", None)
    if cached is not None:              # transformers: the configuration once, not at every batch
        p = {**p, "vocab_size": p.get("vocab_size") or cached(name, p).vocab_size}

    def loop():
        batch_id = 0
        while True:
            x, y = source.batch(name, p, seed, batch_id, batch)
            batch_id += 1
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            optimizer.zero_grad(set_to_none=True)
            with torch.autocast(device.split(":")[0], dtype=kind, enabled=kind is not None):
                loss = source.loss(net, x, y)
            loss.backward()
            optimizer.step()
    return net, loop


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def script_loop(script: str, args: list[str]):
    """The user's script as `python SCRIPT ARGS` would run it, as rank 0 of a world of one (torchrun's
    environment), with its own folder first on sys.path."""
    env = {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1", "GROUP_RANK": "0",
           "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(_free_port())}

    def loop():
        os.environ.update(env)
        sys.argv = [script, *args]
        sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
        runpy.run_path(script, run_name="__main__")
        raise RuntimeError(f"{script} ended before the profiler measured enough optimizer steps")
    return loop


def profile(target: str, params: dict, batch: int, device: str, dtype: str, warmup: int, steps: int,
            script_args: list[str], idle_repeats: int = IDLE_REPEATS) -> dict:
    """The measured figures of a profile (__main__ adds what it ran on)."""
    import torch

    recorder = Recorder(device, warmup, steps, idle_repeats=idle_repeats)
    root = None
    if target.endswith(".py"):
        loop = script_loop(target, script_args)
    else:
        root, loop = model_loop(target, params, batch, device, dtype)
    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    recorder.install()
    try:
        loop()
    except EnoughSteps:
        pass
    finally:
        recorder.remove()
    if root is not None:
        recorder.name_layers(root)
    out = recorder.result()
    out["peak_memory_bytes"] = int(torch.cuda.max_memory_allocated() if device.startswith("cuda")
                                   else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
    if device.startswith("cuda"):
        out["device_name"], out["device_count"] = torch.cuda.get_device_name(), torch.cuda.device_count()
        out["cuda"] = torch.version.cuda
    else:
        out["device_name"], out["device_count"] = "cpu", 0
    return out
