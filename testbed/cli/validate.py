"""`validate FILE...`: check files without running them; as root, also ask the kernel."""
from __future__ import annotations

import os

from testbed.cli.common import Command, add_set_argument


def add_arguments(p) -> None:
    p.add_argument("files", nargs="+")
    add_set_argument(p)


def run(args) -> int:
    from testbed.spec import validate_file
    bad = 0
    for f in args.files:
        ok, text = validate_file(f, args.overrides)
        if ok:
            ok, text = _probe_kernel(f, args.overrides, text)
        print(text)
        bad += not ok
    return 1 if bad else 0


def _probe_kernel(path, overrides, text: str) -> tuple[bool, str]:
    """As root, also ask the kernel whether it can shape what the file asks (netem, qdiscs); nodes
    (real machines, the Docker engine) are checked by `run`, not here."""
    if os.geteuid() != 0:
        return True, text + "\n  (kernel capability probe skipped: it needs root; run checks it before starting)"
    from testbed.run.bringup.network_up import preflight
    from testbed.run.point.point import machine_cores, resolve_all
    from testbed.spec import SpecError, expand_points, load_spec
    exp = load_spec(path, overrides)
    try:
        preflight(exp, resolve_all(expand_points(exp), machine_cores()), contact_nodes=False)
    except SpecError as err:
        return False, str(err)
    return True, text


COMMAND = Command("validate", "check a file without running it (no root)", add_arguments, run)
