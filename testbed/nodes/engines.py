"""Whether a python can run an engine's tasks: the one check for this machine's venv, a remote
machine's interpreter and a cluster server's, asked through `run(argv) -> (status, output)`."""
from __future__ import annotations

import functools
import subprocess
import sys

ENGINES = {"tensorflow": (("tensorflow", "tf_keras"), "tensorflow-cpu tf_keras"),   # modules, pip install
           "pytorch": (("torch",), "torch (its CPU build)")}

# the modules named in argv that this python cannot find, without importing them (fast: TensorFlow's
# import alone takes seconds)
FIND_MODULES = ("import importlib.util, sys; missing = [m for m in sys.argv[1:] if importlib.util.find_spec(m) is None]; "
                "print(' '.join(missing)); sys.exit(1 if missing else 0)")


def engine_problem(run, python: str, engine: str) -> str | None:
    """Why `python` cannot run `engine`'s tasks (what it lacks and what to install), or None."""
    modules, package = ENGINES[engine]
    status, out = run([python, "-c", FIND_MODULES, *modules])
    if status == 0:
        return None
    missing = out.strip().splitlines()[-1] if out.strip() else "it did not answer"
    return f"{python} cannot import {', '.join(missing.split()) or missing}: pip install {package} into it"


def _run_here(argv: list[str]) -> tuple[int, str]:
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    return proc.returncode, proc.stdout + proc.stderr


@functools.lru_cache(maxsize=None)
def local_engine_problem(engine: str) -> str | None:
    """engine_problem of this machine's venv (the python of its hosts), asked once per process."""
    return engine_problem(_run_here, sys.executable, engine)
