"""Runs a user's unmodified training script as one task of the testbed.

    python workloads/script_launcher.py [--engine tensorflow|pytorch] --task-type worker --task-index 0 --host h1 -- SCRIPT [ARGS...]

The testbed sets TF_CONFIG (TensorFlow) or what torchrun would set (PyTorch: MASTER_ADDR, RANK,
WORLD_SIZE, ...). The launcher imports the engine first, so its start-up is timed apart, then
runs the script as `__main__` (as `python SCRIPT ARGS` would) and prints the events of
docs/developer/contracts.md: `script_start` (tf_import_s or torch_import_s), `script_done` (run_s: the
script's own time after the import) or `error` (its exception or exit code)."""
from __future__ import annotations

import argparse
import os
import runpy
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from workloads.events import Emitter, exit_task, private_tmp  # noqa: E402  (standard library only)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--engine", choices=("tensorflow", "pytorch"), default="tensorflow")
    parser.add_argument("--task-type", required=True)
    parser.add_argument("--task-index", type=int, required=True)
    parser.add_argument("--host", required=True)
    parser.add_argument("script")
    parser.add_argument("args", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    emit = Emitter(args.task_type, args.task_index, args.host)
    private_tmp()
    t0 = time.time()
    if args.engine == "pytorch":
        import torch  # noqa: F401  - timed apart from the script's own work
    else:
        import tensorflow  # noqa: F401
    imported = {"pytorch": "torch_import_s", "tensorflow": "tf_import_s"}[args.engine]
    emit("script_start", script=os.path.basename(args.script), **{imported: round(time.time() - t0, 3)})
    sys.argv = [args.script, *args.args]
    sys.path.insert(0, os.path.dirname(os.path.abspath(args.script)))
    started = time.time()
    code = 0
    try:
        runpy.run_path(args.script, run_name="__main__")
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if code:
            emit("error", message=f"the script exited with code {code}" + (f": {exc.code}" if not isinstance(exc.code, int) else ""))
    except BaseException as exc:  # noqa: BLE001 - every failure becomes an event with the script's last words
        traceback.print_exc(file=sys.stderr)
        emit("error", message=f"{type(exc).__name__}: {exc}")
        code = 1
    if code == 0:
        emit("script_done", run_s=round(time.time() - started, 3))
    exit_task(code)  # without gRPC's and the collectives' teardown, which can hang


if __name__ == "__main__":
    main()
