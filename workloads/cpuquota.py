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
    path, before = None, None
    if found is not None:
        path, free = found
        try:
            before = path.read_text().strip()
            if before.split()[0] in ("max", "-1"):      # no quota: nothing to lift
                before = None
            else:
                path.write_text(f"max {before.split()[1]}" if path.name == "cpu.max" else free)  # v2 keeps its period
        except OSError:                         # read-only cgroupfs (Docker), or no such file
            before = None
    try:
        yield before is not None
    finally:
        if before is not None:
            path.write_text(before)


def compute_probe(setup, steps: int, emit) -> None:
    """The `compute` event of both engines' probes: setup() makes the probe's model and batches and
    returns timed(), which runs the probe's steps and returns (wall, CPU) seconds per step. They run
    under the node's budget, then again with its quota lifted. A failure is reported in the event
    (error) and never fails the task, whose training is done."""
    try:
        timed = setup()
        wall, cpu = timed()
        with lifted() as free:
            cpu_free = timed()[1] if free else None
        emit("compute", time_per_step_s=wall, cpu_per_step_s=cpu, cpu_per_step_free_s=cpu_free, steps=steps)
    except Exception as exc:  # noqa: BLE001 - the probe is a measurement, not the task's work
        emit("compute", time_per_step_s=None, steps=0, error=f"{type(exc).__name__}: {exc}")
