"""python -m workloads.profiling MODEL|SCRIPT --engine pytorch|tensorflow --batch B [--device cpu|cuda]
[--cores N] --out FILE [-- SCRIPT_ARGS]

Measures a training step where the hardware is and writes a profile (docs/profiles.md). Imports the
engine and the standard library only.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from workloads.profiling import fileformat, machine  # noqa: E402
from workloads.profiling.torch_recorder import IDLE_REPEATS  # noqa: E402

WARMUP, STEPS = 5, 20
SCALED = ("step_s", "cycle_s", "input_s", "forward_s", "backward_s", "optimizer_s", "cpu_s")


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="profile", description="measure a model's training step and write a profile",
                                 epilog="after --: the script's own arguments")
    add_arguments(ap)
    return ap


def add_arguments(ap) -> None:
    """The profiler's options (also `run_experiment.py profile`'s)."""
    ap.add_argument("target", metavar="MODEL|SCRIPT", help="a model (cnn, torchvision/resnet50, transformers/gpt2, "
                    "keras/ResNet50) or your torchrun-style training script (.py)")
    ap.add_argument("--engine", required=True, choices=("pytorch", "tensorflow"))
    ap.add_argument("--batch", type=int, required=True, help="samples per step (a script: the batch it uses)")
    ap.add_argument("--device", default="cpu", help="cpu, or cuda (cuda:N)")
    ap.add_argument("--cores", type=float, default=None, help="CPU: the machine's cores the profile stands for "
                    "(the step runs on ceil(N) CPUs, times scaled by ceil(N)/N); default: every CPU it may use")
    ap.add_argument("--dtype", default="float32", choices=("float32", "bfloat16", "float16"),
                    help="bfloat16, float16: mixed precision (autocast)")
    ap.add_argument("--params", default="{}", help="model_params as JSON, e.g. '{\"image_size\": 32}'")
    ap.add_argument("--warmup", type=int, default=WARMUP, help="steps before the measurement")
    ap.add_argument("--steps", type=int, default=STEPS, help="steps measured (PyTorch: of each kind, plain and "
                    "per layer)")
    ap.add_argument("--idle-repeats", type=int, default=IDLE_REPEATS, help="PyTorch: steps timed after each "
                    "pause (0.03 to 1 s) to measure the compute after a wait for the network (0: none)")
    ap.add_argument("--out", required=True, help="the profile file to write (JSON)")


def check_model(model: str, engine: str) -> None:
    """SystemExit with the reason unless the name is a model of the engine whose package loads here."""
    from workloads import zoo

    try:
        zoo.check_name(model)
        source = zoo.split(model)[0]
    except zoo.UnknownModel as err:
        raise SystemExit(f"profile: {err}") from None
    except ImportError as err:
        raise SystemExit(f"profile: {model} needs the Python package {err.name or 'of its source'}, which does not "
                         f"load here ({err}): install it beside the engine") from None
    if source.ENGINE not in (None, engine):
        raise SystemExit(f"profile: {model} is a {source.ENGINE} model: --engine {source.ENGINE}")


def pin(cores: float | None) -> int:
    """Run on ceil(cores) CPUs (the last ones this process may use); the CPUs used."""
    allowed = sorted(os.sched_getaffinity(0))
    if cores is None:
        return len(allowed)
    whole = max(1, math.ceil(cores - 1e-9))
    if whole > len(allowed):
        raise SystemExit(f"profile: --cores {cores:g} needs {whole} CPUs; this process may use {len(allowed)}")
    os.sched_setaffinity(0, allowed[-whole:])
    return whole


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    cut = argv.index("--") if "--" in argv else len(argv)
    args, script_args = parser().parse_args(argv[:cut]), argv[cut + 1:]     # after --: the script's arguments
    if args.batch < 1 or args.steps < 2 or args.warmup < 0 or args.idle_repeats < 0:
        raise SystemExit("profile: --batch must be at least 1, --steps at least 2, --warmup and --idle-repeats "
                         "at least 0")
    if args.cores is not None and not args.cores > 0:
        raise SystemExit("profile: --cores must be positive")
    try:
        params = json.loads(args.params)
        assert isinstance(params, dict)
    except (ValueError, AssertionError):
        raise SystemExit("profile: --params must be a JSON object") from None
    if args.target.endswith(".py") and not os.path.isfile(args.target):
        raise SystemExit(f"profile: {args.target}: no such script")
    if not args.target.endswith(".py"):
        check_model(args.target, args.engine)
    gpu = args.device.startswith("cuda")
    cpus = pin(None if gpu else args.cores)
    threads = str(cpus)
    os.environ.setdefault("OMP_NUM_THREADS", threads)
    if args.engine == "tensorflow":
        os.environ.update(TF_USE_LEGACY_KERAS="1", TF_CPP_MIN_LOG_LEVEL="2")
        if not gpu:
            os.environ.update(CUDA_VISIBLE_DEVICES="", TF_NUM_INTRAOP_THREADS=threads)
        from workloads.profiling import tf_profile as engine
    else:
        import torch
        if not gpu:
            torch.set_num_threads(cpus)
        from workloads.profiling import torch_profile as engine
    print(f"profiling {args.target} ({args.engine}, batch {args.batch}, {args.device}, {args.dtype}): "
          f"{args.warmup} warm-up steps, then {args.steps} ...", file=sys.stderr, flush=True)
    idle = {"idle_repeats": args.idle_repeats} if args.engine == "pytorch" else {}
    measured = engine.profile(args.target, params, args.batch, args.device, args.dtype, args.warmup, args.steps,
                              script_args, **idle)
    cores = float(cpus) if gpu or args.cores is None else args.cores
    scale = cpus / cores if not gpu else 1.0
    for key in SCALED:
        measured[key] *= scale
    measured["step_spread_s"] = [x * scale for x in measured["step_spread_s"]]
    measured["idle"] = [[gap, extra * scale] for gap, extra in measured.get("idle", [])]   # the pause is no compute
    for layer in measured["layers"]:
        for key in ("forward_s", "backward_s", "grad_ready_s"):
            layer[key] *= scale
    device_name, device_count = measured.pop("device_name"), measured.pop("device_count")
    extra = {"cuda": measured.pop("cuda")} if "cuda" in measured else {}
    doc = {"format": fileformat.FORMAT, "version": fileformat.VERSION, "engine": args.engine,
           "model": ("script:" + os.path.basename(args.target)) if args.target.endswith(".py") else args.target,
           "model_params": params, "batch": args.batch, "dtype": args.dtype,
           "device": "cuda" if gpu else "cpu", "cores": cores,
           "machine": machine.describe(device_name, device_count, cpus, {**extra, "time_scale": scale}),
           "versions": machine.versions(), "date": machine.today(), "warmup": args.warmup, "steps": args.steps,
           **measured, "parameters": 0, "gradient_bytes": 0}
    doc["parameters"], doc["gradient_bytes"] = fileformat.parameter_count(doc), fileformat.gradient_bytes(doc)
    fileformat.write(args.out, doc)
    print(f"{args.out}: step {doc['step_s'] * 1e3:.2f} ms (forward {doc['forward_s'] * 1e3:.2f}, backward "
          f"{doc['backward_s'] * 1e3:.2f}, optimizer {doc['optimizer_s'] * 1e3:.2f}; input {doc['input_s'] * 1e3:.2f}), "
          f"{len(doc['layers'])} layers, {doc['parameters']:,} parameters, on {device_name}"
          + "".join(f"; after a {gap:g} s pause +{extra * 1e3:.2f} ms" for gap, extra in doc["idle"][-1:]),
          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
