"""`image build | name`: the worker image that docker nodes run."""
from __future__ import annotations

import sys
import time

from testbed.cli.common import Command, main_of, need_root


def add_arguments(p) -> None:
    p.add_argument("action", choices=["build", "name"], help="build (or reuse) it; or print its name")
    p.add_argument("--base", metavar="IMAGE", help="build FROM this local image instead of a debootstrap-made Debian")
    p.add_argument("--force", action="store_true", help="rebuild even when the image exists")


def run(args) -> int:
    from testbed.nodes import image
    if args.action == "name":
        print(image.default_image())
        return 0
    need_root("image build")
    from testbed.nodes import docker_engine

    def say(msg: str) -> None:
        print(f"[image] {msg}", file=sys.stderr, flush=True)

    t0 = time.monotonic()
    try:
        tag = image.build_image(args.base, progress=say, force=args.force)
        cli = docker_engine.client()
        try:
            built = cli.images.get(tag)
        finally:
            cli.close()
    except (docker_engine.DockerUnavailable, ValueError) as exc:
        say(str(exc))
        return 1
    except KeyboardInterrupt:
        say("interrupted")
        return 130
    print(tag)
    say(f"{tag}: {time.monotonic() - t0:.0f} s, {image._size_mb(built):.0f} MB, python {image.IMAGE_PYTHON}")
    return 0


COMMAND = Command("image", "the worker image that docker nodes run (build: root)", add_arguments, run)


def main(argv=None) -> int:
    return main_of(COMMAND, argv)
