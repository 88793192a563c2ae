"""CPU and memory limits in the testbed's own cgroup subtree, on cgroup v1 or v2, and the counters
of any process's cgroups. `root` is a parameter so the writes can be checked against a made-up tree.

v1 (Debian 12 here): /sys/fs/cgroup/{cpu,memory}/dltestbed/<host>/ with cpu.cfs_quota_us and
memory.limit_in_bytes. v2 (Ubuntu 22.04+): /sys/fs/cgroup/dltestbed/<host>/ with cpu.max and
memory.max, the controllers enabled in the parents' cgroup.subtree_control. A host pinned to CPUs
(budgets.cpusets) gets a cpuset group too: cpuset/dltestbed/<host>/cpuset.cpus on v1, cpuset.cpus in
its one directory on v2."""
from __future__ import annotations

import os
from pathlib import Path

from testbed.emulation.budgets import UNLIMITED, Quota, cpuset_text, held_by, quota as cpu_quota
from testbed.emulation import readers
from testbed.emulation.readers import stat_fields

ROOT = Path("/sys/fs/cgroup")
SUBTREE = "dltestbed"


def version(root: Path = ROOT) -> int:
    return 2 if (root / "cgroup.controllers").exists() else 1


def limit_dirs(name: str, cpu, memory: int | None, root: Path = ROOT, cpus: list[int] | None = None,
               v: int | None = None) -> list[Path]:
    """The directories `apply_limits` creates for one host (to record before creating them); `cpu`
    and `memory` count only as set or not. On v1 a CPU limit comes with a cpuacct group too: its
    usage counter outlives the host's processes (the fidelity verdict reads it after training).
    `v`: the cgroup version where they are made (default: this machine's)."""
    if (v or version(root)) == 2:
        return [root / SUBTREE / name]
    wanted = (("cpu", cpu), ("cpuacct", cpu), ("memory", memory), ("cpuset", cpus))
    return [root / ctl / SUBTREE / name for ctl, value in wanted if value is not None]


def limit_plan(name: str, limit: Quota | None, memory: int | None, v: int, root: Path = ROOT,
               cpus: list[int] | None = None) -> list[tuple[str, list[tuple[str, str]]]]:
    """What a host's CPU quota, memory limit and (v2) cpuset take, in order: (directory, [(file,
    text)]), each directory made with its parents and then its files written. Pure, so that a
    cluster server carries out the same plan (remote_agent's `cgroup`) as this machine does
    (`carry_out`). A v1 cpuset group is only made here: `_pin_v1` fills it from its parents."""
    dirs = [str(d) for d in limit_dirs(name, limit, memory, root, cpus, v=v)]
    if v == 2:
        wanted = " ".join(f"+{c}" for c, value in (("cpu", limit), ("memory", memory), ("cpuset", cpus))
                          if value is not None)
        files = [("cpu.max", limit.v2())] if limit is not None else []
        files += [("memory.max", str(memory))] if memory is not None else []
        files += [("cpuset.cpus", cpuset_text(cpus))] if cpus is not None else []
        return [(str(root), [("cgroup.subtree_control", wanted)]),
                (str(root / SUBTREE), [("cgroup.subtree_control", wanted)]), (dirs[0], files)]
    files = {"cpu": list(limit.v1().items()) if limit is not None else [], "cpuacct": [],
             "memory": [("memory.limit_in_bytes", str(memory))], "cpuset": []}
    return [(d, files[Path(d).parts[-3]]) for d in dirs]


def carry_out(plan) -> None:
    for directory, files in plan:
        Path(directory).mkdir(parents=True, exist_ok=True)
        for file, text in files:
            (Path(directory) / file).write_text(text)


def apply_limits(name: str, cpu: float | None, memory: int | None, root: Path = ROOT,
                 cores: int | None = None, cpus: list[int] | None = None) -> list[Path]:
    """Create the host's cgroup(s) with its limits; cpu is a fraction of the whole machine (of its
    `cores`), cpus the CPUs it is pinned to (None: every CPU)."""
    v = version(root)
    limit = held_by(cpu * (cores or os.cpu_count() or 1), cpus) if cpu is not None else None
    carry_out(limit_plan(name, limit, memory, v, root, cpus))
    if cpus is not None and v == 1:
        _pin_v1(root / "cpuset" / SUBTREE / name, cpus)
    return limit_dirs(name, cpu, memory, root, cpus)


def _pin_v1(d: Path, cpus: list[int]) -> None:
    """A v1 cpuset group starts with no CPU and no memory node, and so does its parent: each gets
    its parent's before the host's CPUs are written (a task cannot join an empty cpuset)."""
    for group in (d.parent, d):
        for field in ("cpuset.mems", "cpuset.cpus"):
            if not _text(group / field):
                (group / field).write_text((group.parent / field).read_text().strip())
    (d / "cpuset.cpus").write_text(cpuset_text(cpus))


def _text(path: Path) -> str:
    return path.read_text().strip() if path.exists() else ""


def cpu_dir(name: str, root: Path = ROOT) -> Path:
    """The directory holding a host's CPU limit."""
    return root / SUBTREE / name if version(root) == 2 else root / "cpu" / SUBTREE / name


def set_cpu(name: str, cpu: float | None, root: Path = ROOT, cores: int | None = None) -> Path:
    """Set the host's CPU limit now through its limit plan, creating its group(s) if need be (None: lift
    the quota); the directory holding the limit. `cpu` is a fraction of the machine's `cores`, held by a
    quota over a short period (budgets.quota)."""
    limit = cpu_quota(cpu * (cores or os.cpu_count() or 1)) if cpu is not None else UNLIMITED
    carry_out(limit_plan(name, limit, None, version(root), root))
    return cpu_dir(name, root)


def join(path: Path, pids) -> None:
    """Move running processes into a cgroup (their threads go with them); gone ones are skipped."""
    for pid in pids:
        try:
            (Path(path) / "cgroup.procs").write_text(str(pid))
        except ProcessLookupError:
            pass


def remove(path: Path) -> bool:
    """Remove a cgroup directory after killing what is still in it; True when it is gone."""
    path = Path(path)
    if not path.exists():
        return True
    try:
        for pid in (path / "cgroup.procs").read_text().split():
            try:
                os.kill(int(pid), 9)
            except ProcessLookupError:
                pass
        path.rmdir()
    except OSError:
        return False
    return True


def process_dirs(pid: int, root: Path = ROOT, controllers=("cpu", "cpuacct", "memory", "pids", "cpuset")) -> list[Path]:
    """The cgroup directories of a process for the given controllers (v1), or its one v2 directory."""
    dirs = []
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, names, rel = line.split(":", 2)
        rel = rel.lstrip("/")
        if names == "" and version(root) == 2:
            return [root / rel]
        if set(names.split(",")) & set(controllers):
            d = root / names / rel
            if d.exists() and d not in dirs:
                dirs.append(d)
    return dirs


def counters(dirs: list[Path]) -> tuple[float, int]:
    """(CPU seconds, resident bytes) of a cgroup given by its directories. Resident = anonymous plus
    mapped file pages, close to the summed RSS of its processes (shared pages counted once)."""
    cpu_s, rss = 0.0, 0
    for d in dirs:
        if (d / "cpu.stat").exists() and (d / "cgroup.controllers").exists():      # v2
            stat = stat_fields(d / "cpu.stat")
            cpu_s = stat.get("usage_usec", 0) / 1e6
            mem = stat_fields(d / "memory.stat") if (d / "memory.stat").exists() else {}
            rss = mem.get("anon", 0) + mem.get("file_mapped", 0)
        elif (d / "cpuacct.usage").exists():
            cpu_s = int((d / "cpuacct.usage").read_text()) / 1e9
        elif (d / "memory.stat").exists():
            mem = stat_fields(d / "memory.stat")
            rss = mem.get("total_rss", 0) + mem.get("total_mapped_file", 0)
    return cpu_s, rss


def cpu_counters(dirs) -> tuple[dict, float | None]:
    """A cgroup's CPU counters (readers.cpu_stat_of) and CPU wait (readers.wait_of) from its
    directories; {} and None when none of them is a cpu controller's (no quota file)."""
    dirs = [Path(d) for d in dirs]
    if not any((d / f).exists() for d in dirs for f in ("cpu.max", "cpu.cfs_quota_us")):
        return {}, None
    texts = readers.counter_texts(*dirs)
    return readers.cpu_stat_of(texts), readers.wait_of(texts)
