"""Thin readers of the counters the fidelity verdict needs: a cgroup's cpu.stat (v1 or v2), PSI
pressure files (a v2 cgroup's cpu.pressure, or the system's /proc/pressure/cpu), the machine's busy
CPU time, and one process's CPU time (ovs-vswitchd) via psutil. Take one reading before and one
after a run; `delta` gives the difference."""
from __future__ import annotations

import re
from pathlib import Path

import psutil

SYSTEM_PRESSURE = Path("/proc/pressure/cpu")


def stat_fields(path: Path) -> dict[str, int]:
    """A cgroup stat file ('key value' lines, e.g. cpu.stat, memory.stat) as key -> integer."""
    return fields_of(path.read_text())


def fields_of(text: str) -> dict[str, int]:
    out = {}
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if value.strip().isdigit():
            out[key] = int(value)
    return out


COUNTER_FILES = ("cpu.stat", "cpuacct.usage", "cpu.pressure")     # what the verdict reads of a cgroup


def counter_texts(*dirs: Path) -> dict[str, str]:
    """The texts of a cgroup's COUNTER_FILES found in its directories (v1: the cpu and the cpuacct one)."""
    return {f: (Path(d) / f).read_text() for d in dirs if d for f in COUNTER_FILES if (Path(d) / f).exists()}


def read_cpu_stat(cpu_dir: Path, cpuacct_dir: Path | None = None) -> dict[str, float]:
    """A cgroup's CPU counters as {usage_s, nr_periods, nr_throttled, throttled_s}.

    v2: cpu.stat (usage_usec, nr_periods, nr_throttled, throttled_usec) in `cpu_dir`. v1: cpu.stat
    (nr_periods, nr_throttled, throttled_time in ns) in the cpu controller's directory and
    cpuacct.usage (ns) in `cpuacct_dir` (default: `cpu_dir`, as when cpu,cpuacct are co-mounted).
    Counters a kernel lacks read 0; usage_s is None when no usage counter exists."""
    texts = counter_texts(cpuacct_dir or cpu_dir, cpu_dir)
    return cpu_stat_of(texts)


def cpu_stat_of(texts: dict[str, str]) -> dict[str, float]:
    """read_cpu_stat's figures from the texts of the files (counter_texts, here or on a server)."""
    stat = fields_of(texts.get("cpu.stat", ""))
    out = {"nr_periods": stat.get("nr_periods", 0), "nr_throttled": stat.get("nr_throttled", 0)}
    if "usage_usec" in stat:                                                    # v2
        out["usage_s"] = stat["usage_usec"] / 1e6
        out["throttled_s"] = stat.get("throttled_usec", 0) / 1e6
        return out
    out["throttled_s"] = stat.get("throttled_time", 0) / 1e9
    usage = texts.get("cpuacct.usage", "").strip()
    out["usage_s"] = int(usage) / 1e9 if usage.isdigit() else None
    return out


def read_pressure(path: Path) -> dict[str, dict[str, float]]:
    """A PSI file ('some avg10=0.00 avg60=0.41 avg300=0.48 total=7205057', total in us) as
    {'some': {'avg10': .., 'avg60': .., 'avg300': .., 'total_s': ..}, 'full': {...}}."""
    return pressure_of(Path(path).read_text())


def pressure_of(text: str) -> dict[str, dict[str, float]]:
    out = {}
    for line in text.splitlines():
        kind, *pairs = line.split()
        values = dict(pair.split("=", 1) for pair in pairs)
        out[kind] = {k: float(v) for k, v in values.items() if k != "total"}
        out[kind]["total_s"] = int(values.get("total", 0)) / 1e6
    return out


def cgroup_wait_s(cgroup_dir: Path) -> float | None:
    """Seconds some task of the cgroup was runnable but not running (v2 cpu.pressure 'some' total),
    or None where there is no such file (cgroup v1, or a kernel without PSI)."""
    return wait_of(counter_texts(cgroup_dir))


def wait_of(texts: dict[str, str]) -> float | None:
    """cgroup_wait_s from the texts of the files (counter_texts)."""
    try:
        return pressure_of(texts["cpu.pressure"])["some"]["total_s"]
    except (KeyError, ValueError):
        return None


def system_wait_s(path: Path = SYSTEM_PRESSURE) -> float | None:
    """The same for the whole machine (/proc/pressure/cpu), or None without PSI."""
    try:
        return read_pressure(path)["some"]["total_s"]
    except (OSError, KeyError):
        return None


def cpus_busy_s() -> list[float]:
    """CPU seconds each CPU has spent busy since boot, indexed by CPU number; their sum is the machine's
    (steal included: a VM host that takes the CPUs away is as bad for the emulation as a busy neighbour)."""
    return [sum(t) - t.idle - getattr(t, "iowait", 0.0) - getattr(t, "guest", 0.0) - getattr(t, "guest_nice", 0.0)
            for t in psutil.cpu_times(percpu=True)]


def steal_s() -> float:
    """CPU seconds the machine's host has taken from all its CPUs since boot (steal; 0 on bare metal)."""
    return getattr(psutil.cpu_times(), "steal", 0.0)


def process_cpu_s(name: str = "ovs-vswitchd") -> float | None:
    """User + system CPU seconds of the running processes called `name` (None: none running)."""
    total, found = 0.0, False
    for proc in psutil.process_iter(["name"]):
        if proc.info["name"] != name:
            continue
        try:
            times = proc.cpu_times()
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        total, found = total + times.user + times.system, True
    return total if found else None


def datapath_lost(dpctl_show: str) -> int:
    """Packets the OVS datapaths lost (upcalls that found no handler): the sum of every
    'lookups: hit:H missed:M lost:L' line of `ovs-appctl dpctl/show` output."""
    return sum(int(n) for n in re.findall(r"lookups:.*\blost:(\d+)", dpctl_show))


def delta(before: dict, after: dict) -> dict:
    """after - before for every numeric key of both (None where either is None)."""
    return {k: (None if before.get(k) is None or after[k] is None else after[k] - before[k])
            for k in after if k in before}
