#!/usr/bin/env python3
"""The readers' property-based tests (tests/unit/test_fuzz.py) run far longer than in the suite: every
experiment-file, trace, graph-file and results-folder property with N examples each (default 5000), a
fresh random seed, and how long each took.

    .venv/bin/python bench/fuzz.py [--examples 5000]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--examples", type=int, default=5000, help="examples per property (default 5000)")
    args = ap.parse_args(argv)
    env = {**os.environ, "DLTB_FUZZ_EXAMPLES": str(args.examples)}
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--durations=0",
                           "-p", "no:randomly", "tests/unit/test_fuzz.py", "--hypothesis-seed", str(int(t0))],
                          cwd=REPO, env=env)
    print(f"{args.examples} examples per property in {time.monotonic() - t0:.0f} s (exit {proc.returncode})")
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
