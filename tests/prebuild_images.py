"""Build the images the integration tests need (the worker and cluster server images, the netem
VM's image) while the unit tests run, so that no integration test waits minutes in its set-up.

`./testbed.sh test` starts this in the background and waits for it before the integration tests.
Each build is cached and keyed by its inputs, and takes its own lock: a test that needs an image
still present or built meanwhile finds it or waits for it. A build that fails here is only
reported: the test that needs the image builds it again and fails with the reason.

    .venv/bin/python tests/prebuild_images.py [--log FILE]
"""
from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests")]


def server_images(say) -> str:
    from testbed.cluster import servers
    return servers.build_server_image(progress=say)      # the worker image first, then FROM it


def netem_vm_image(say) -> str:
    import vmguest
    problems = vmguest.build_problems()
    if problems:
        return "not built here: " + "; ".join(problems)
    return str(vmguest.ensure_image(progress=say).folder)


BUILDS = {"server-image": server_images, "netem-vm": netem_vm_image}   # the server image builds the worker image first


def build_one(name: str, say) -> int:
    """One build in this process; SIGTERM ends it as Ctrl-C would, so its clean-up runs."""
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    t0 = time.monotonic()
    try:
        made = BUILDS[name](lambda msg: say(f"{name}: {msg}"))
    except Exception as err:            # reported; the test that needs the image says why again
        say(f"{name}: FAILED after {time.monotonic() - t0:.0f} s: {err}")
        return 1
    except KeyboardInterrupt:
        say(f"{name}: stopped after {time.monotonic() - t0:.0f} s")
        return 130
    say(f"{name}: {made} ({time.monotonic() - t0:.0f} s)")
    return 0


def build_all(log: Path | None) -> int:
    """Every build at once, each in a process of its own; a SIGTERM here is passed on to them."""
    extra = ["--log", str(log)] if log else []
    children = [subprocess.Popen([sys.executable, __file__, "--only", name, *extra]) for name in BUILDS]

    def stop(signum, frame):
        for child in children:
            child.terminate()
    signal.signal(signal.SIGTERM, stop)
    return max(child.wait() for child in children)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--log", type=Path, help="append progress here instead of printing it")
    parser.add_argument("--only", choices=sorted(BUILDS), help="this build alone, in this process")
    args = parser.parse_args(argv)
    if not args.only:
        return build_all(args.log)
    out = open(args.log, "a", buffering=1) if args.log else sys.stdout

    def say(msg: str) -> None:
        print(time.strftime("%H:%M:%S"), msg, file=out, flush=True)
    return build_one(args.only, say)


if __name__ == "__main__":
    sys.exit(main())
