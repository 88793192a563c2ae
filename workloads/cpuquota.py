"""The compute probe's reference: this process's own testbed CPU quota, lifted for a moment, and the
node computing alone.

A budget under a core is held as 1 ms slices of CPU with pauses between them, and code run that
way can cost more CPU than the same code run at once (cold caches after each pause). Nodes that
compute at once on this machine's CPUs also slow each other (shared caches and memory bandwidth),
which separate machines would not. The probe measures both costs after training: CPU time per step
under the budget, with the other nodes probing at once as they trained, then on the lead task's
node with the quota lifted and the node alone, and the ratio of the two. Only a quota the testbed
set (a cgroup under /dltestbed/) is touched, it is put back at once, and where the cgroup files
cannot be written (a Docker container) nothing is lifted. The nodes take turns through a lock on
the job file they share (`alone`); nodes that do not share it (containers, other machines) do not
wait for each other."""
from __future__ import annotations

import fcntl
import importlib
import os
import time
from contextlib import contextmanager, suppress
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")
SUBTREE = "/dltestbed/"
ALONE_WAIT_S = 300          # at most this long for the other nodes' turns; then it measures anyway
shared_file: str | None = None      # the file this run's tasks share on this machine (task_main: the job)


@contextmanager
def turn(exclusive: bool, path: str | None = None, wait_s: float = ALONE_WAIT_S):
    """Hold a lock on `path` (default `shared_file`): shared while the nodes probe under their budgets
    together, exclusive while one probes alone. Yields whether it holds it (False: no such file, or
    the wait ran out)."""
    path = path or shared_file
    try:
        fd = os.open(path, os.O_RDONLY) if path else None
    except OSError:
        fd = None
    held, deadline = False, time.monotonic() + wait_s
    try:
        while fd is not None and not held:
            try:
                fcntl.flock(fd, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
                held = True
            except BlockingIOError:
                if time.monotonic() > deadline:
                    break
                time.sleep(0.02)
        yield held
    finally:
        if fd is not None:
            os.close(fd)            # closing releases the lock


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
def lifted(root: Path = ROOT, proc_cgroup: Path = Path("/proc/self/cgroup"), record_dir: str | None = None):
    """Run the block with this process's testbed CPU quota lifted; yields whether it was.

    The quota is written down first, next to the job (`record_dir`, default the folder of
    `shared_file`), and put back from there by whoever finds it lifted: a task killed inside the
    block, then started again, or a second task of the same host, never runs on without it. Where
    nothing can be written down, nothing is lifted."""
    found = quota_file(proc_cgroup.read_text(), root) if proc_cgroup.exists() else None
    folder = record_dir or (os.path.dirname(os.path.abspath(shared_file)) if shared_file else None)
    path, before, record = None, None, None
    if found is not None and folder is not None:
        path, free = found
        record = Path(folder) / (".quota" + str(path).replace("/", "_"))
        try:
            before = path.read_text().strip()
            if before.split()[0] in ("max", "-1"):      # no quota, or one lifted by a task before this
                before = record.read_text().strip() if record.exists() else None
            if before is not None:
                record.write_text(before)
                path.write_text(f"max {before.split()[1]}" if path.name == "cpu.max" else free)  # v2 keeps its period
        except OSError:                         # read-only cgroupfs (Docker), no such file, nowhere to write
            with suppress(OSError):
                if before is not None and path.read_text().strip() == before:
                    record.unlink(missing_ok=True)      # not lifted: nothing to put back
            before = None
    try:
        yield before is not None
    finally:
        if before is not None:
            path.write_text(before)
            record.unlink(missing_ok=True)


def load_engine(*modules: str, **where) -> None:
    """Import the engine's modules with this process's quota lifted: loading them is no part of the
    steps a budget stands for, and under a budget of a fraction of a core it took several seconds.
    `where`: lifted()'s arguments."""
    with lifted(**where):
        for name in modules:
            importlib.import_module(name)


def compute_probe(setup, steps: int, emit, lead: bool = True) -> None:
    """The `compute` event of both engines' probes: setup() makes the probe's model and batches and
    returns timed(), which runs the probe's steps and returns (wall, CPU) seconds per step. setup() runs
    with the quota lifted: nothing times it, and TensorFlow's trace of the step there took 4-8 s of a
    2-node run's wall time under budgets of 2/3 core (2-3 s lifted). The steps run
    under the node's budget, the nodes together, then on the lead task's node (`lead`: the run's first
    final task, whose figures judge what the quota's slices cost) again with its quota lifted, the node
    alone (`alone`: whether it was); the other nodes' figures under the budget are all a run reads of
    them. A failure is reported in the event (error) and never fails the task, whose training is done."""
    try:
        with lifted():      # the probe's model, batches and traced first step: nothing times them
            timed = setup()
        with turn(exclusive=False):
            wall, cpu = timed()
        wall_free = cpu_free = None
        alone = False
        if lead:
            with turn(exclusive=True) as alone, lifted() as free:
                wall_free, cpu_free = timed() if free else (None, None)
        emit("compute", time_per_step_s=wall, cpu_per_step_s=cpu, time_per_step_free_s=wall_free,
             cpu_per_step_free_s=cpu_free, steps=steps, alone=alone)
    except Exception as exc:  # noqa: BLE001 - the probe is a measurement, not the task's work
        emit("compute", time_per_step_s=None, steps=0, error=f"{type(exc).__name__}: {exc}")
