"""The testbed's command line as the integration tests call it."""
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def cli(*args, **kwargs) -> subprocess.CompletedProcess:
    """`run_experiment.py ARGS` with this interpreter, to completion, output captured (a wide console,
    so that messages are not wrapped)."""
    return subprocess.run([sys.executable, str(REPO / "run_experiment.py"), *map(str, args)], cwd=REPO,
                          capture_output=True, text=True, env={**os.environ, "COLUMNS": "1000"}, **kwargs)
