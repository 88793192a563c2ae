"""The calibration of replayed compute: the built-in model's local step timed on this machine, on idle
CPUs, for a node of a given size (workloads/replay.py measures; testbed/emulation/replayed_compute.py has the
rules). It runs before a point's network exists, in a process of its own pinned to as many CPUs as the
node has cores (rounded up), and is cached outside the clone ($DLTB_CACHE/replay), keyed by everything
that went into it: engine and its version, model and parameters, batch, CPUs and threads, this
machine's CPU model, and the code that builds and times the step."""
from __future__ import annotations

import hashlib
import json
import math
import os
import platform
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from testbed.nodes.base import REPO
from testbed.nodes.image import CACHE_DIR
from testbed.run import results

CACHE = CACHE_DIR / "replay"
CODE = ("workloads/replay.py", "workloads/models.py", "workloads/torch_models.py", "workloads/data.py",
        "workloads/profiling/fileformat.py")
FIGURES = ("real_step_s", "real_cpu_s", "stand_in_step_s", "stand_in_cpu_s", "layers")
ENGINE_PACKAGES = {"tensorflow": ("tensorflow", "tf_keras"), "pytorch": ("torch",)}
TIMEOUT_S = 600


class CalibrationError(RuntimeError):
    pass


def cpu_model() -> str:
    """This machine's CPU model name (/proc/cpuinfo), else the platform's processor string."""
    try:
        for line in open("/proc/cpuinfo", encoding="utf-8", errors="replace"):
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "absent"


def inputs(engine: str, model: str, params: dict, batch: int, cores: float) -> dict:
    """What a calibration depends on: its cache key."""
    whole = max(1, math.ceil(cores - 1e-9))
    code = hashlib.sha256(b"".join((REPO / path).read_bytes() for path in CODE)).hexdigest()[:16]
    return {"engine": engine, "versions": {p: _version(p) for p in ENGINE_PACKAGES[engine]}, "model": model,
            "params": params, "batch": batch, "cpus": whole, "threads": whole, "cpu_model": cpu_model(),
            "code": code}


def calibrate(engine: str, model: str, params: dict, batch: int, cores: float, progress=lambda msg: None) -> dict:
    """The calibration of a node of `cores` cores (workloads/replay.py's figures), from the cache or
    measured now; CalibrationError when it cannot be measured here."""
    key = inputs(engine, model, params, batch, cores)
    return _cached(key, ["--engine", engine, "--model", model, "--params", json.dumps(params), "--batch", str(batch)],
                   f"{engine} {model}, batch {batch}", progress)


def calibrate_profile(engine: str, path: str, progress=lambda msg: None, byte_scale: int = 1,
                      ddp: bool = False) -> dict:
    """A profile's replay figures (workloads/replay.py calibrate_profile): its own step and layers, and the
    stand-in's step measured here on one CPU (of tensors of 1/`byte_scale` the elements; with `ddp`, in
    DistributedDataParallel, whose own work a step then counts as the stand-in's), cached by the profile's
    content, the scale and `ddp`."""
    from workloads.profiling import fileformat

    try:
        doc = fileformat.load(path)
    except fileformat.ProfileError as err:
        raise CalibrationError(str(err)) from err
    key = inputs(engine, doc["model"], doc["model_params"], doc["batch"], 1.0)
    key["profile"] = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    scaled = ["--byte-scale", str(byte_scale)] if byte_scale > 1 else []
    if scaled:
        key["byte_scale"] = byte_scale
    if ddp:
        key["ddp"] = True
    return _cached(key, ["--engine", engine, "--model", doc["model"], "--batch", str(doc["batch"]), "--profile",
                         str(path), *scaled, *(["--ddp"] if ddp else [])], f"the stand-in of {Path(path).name}"
                   + (f" at byte scale {byte_scale}" if scaled else "") + (" in DDP" if ddp else ""), progress)


def _cached(key: dict, args: list[str], what: str, progress) -> dict:
    """The calibration `key` names, from the cache (a wrong-shaped cache file is measured again) or
    measured now by workloads/replay.py with `args`."""
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:20]
    path = CACHE / f"{digest}.json"
    try:
        result = json.loads(path.read_text())["result"]
        if isinstance(result, dict) and set(FIGURES) <= set(result):
            return result
    except (OSError, ValueError, KeyError, TypeError):
        pass
    allowed = sorted(os.sched_getaffinity(0))
    if key["cpus"] > len(allowed):
        raise CalibrationError(f"a machine of {key['cpus']} cores is calibrated on {key['cpus']} CPUs; this "
                               f"process may use {len(allowed)}")
    cpus = allowed[-key["cpus"]:]        # the last CPUs: the first takes more of the machine's interrupts
    progress(f"calibrating replayed compute: {what}, on {key['cpus']} CPU(s) ...")
    cmd = [sys.executable, str(REPO / "workloads/replay.py"), *args, "--threads", str(key["threads"])]
    engine, model = key["engine"], key["model"]
    env = {k: v for k, v in os.environ.items() if k not in ("TF_CONFIG", "CUDA_VISIBLE_DEVICES")}
    env.update(PYTHONPATH=str(REPO), CUDA_VISIBLE_DEVICES="")
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S, env=env, cwd=REPO,
                              preexec_fn=lambda: os.sched_setaffinity(0, cpus))
    except subprocess.TimeoutExpired as err:
        raise CalibrationError(f"the calibration of {model} took over {TIMEOUT_S} s") from err
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise CalibrationError(f"the calibration of {engine} {model} failed: {tail[:300]}")
    result = json.loads(lines[-1])
    CACHE.mkdir(parents=True, exist_ok=True)
    results.write_json(path, {"inputs": key, "result": result})
    return result
