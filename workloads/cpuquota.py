"""The compute probe's reference: this process's own testbed CPU quota, lifted for a moment.

A budget under a core is held as 1 ms slices of CPU with pauses between them, and code run that
way can cost more CPU than the same code run at once (cold caches after each pause). The probe
measures that cost after training: CPU time per step under the budget, then with the quota
lifted, and the ratio of the two. Only a quota the testbed set (a cgroup under /dltestbed/) is
touched, it is put back at once, and where the cgroup files cannot be written (a Docker
container) nothing is lifted."""
from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")
SUBTREE = "/dltestbed/"


def quota_file(proc_cgroup: str, root: Path = ROOT) -> tuple[Path, str] | None:
    """This process's quota file and the text that lifts it, from /proc/self/cgroup's text, or None
    when its CPU group is not the testbed's. v1: 'N:cpu,cpuacct:/dltestbed/h1'; v2: '0::/dltestbed/h1'."""
    for line in proc_cgroup.splitlines():
        _, controllers, path = line.split(":", 2)
        if not path.startswith(SUBTREE):
            continue
        if controllers == "":
            return root / path.lstrip("/") / "cpu.max", "max"
        if "cpu" in controllers.split(","):
            return root / "cpu" / path.lstrip("/") / "cpu.cfs_quota_us", "-1"
    return None


@contextmanager
def lifted(root: Path = ROOT, proc_cgroup: Path = Path("/proc/self/cgroup")):
    """Run the block with this process's testbed CPU quota lifted; yields whether it was."""
    found = quota_file(proc_cgroup.read_text(), root) if proc_cgroup.exists() else None
    before = None
    if found is not None:
        path, free = found
        try:
            before = path.read_text().strip()
            if path.name == "cpu.max":          # 'QUOTA PERIOD': keep the period
                free = f"max {before.split()[1]}"
            path.write_text(free)
        except OSError:                         # read-only cgroupfs (Docker), or no such file
            before = None
    try:
        yield before is not None and before.split()[0] not in ("max", "-1")
    finally:
        if before is not None:
            found[0].write_text(before)
