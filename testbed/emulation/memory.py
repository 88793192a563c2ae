"""Memory of a worker as PSS and USS, not RSS: RSS counts the shared library pages (TensorFlow's
are hundreds of MB) once in every process, so N workers seem to need N times what they do.
PSS shares each page among the processes that map it (sums to the real total); USS is what only
that process holds (what ending it would free)."""
from __future__ import annotations

import psutil

_GONE = (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied)


def tree_memory(pid: int) -> dict[str, int]:
    """{'rss', 'pss', 'uss', 'processes'}: bytes summed over a process and all its descendants;
    processes that end (or deny access) while being read are left out. The process itself gone:
    zeros. Reading PSS walks /proc/PID/smaps_rollup, a few ms per process."""
    total = {"rss": 0, "pss": 0, "uss": 0, "processes": 0}
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except _GONE:
        return total
    for proc in procs:
        try:
            info = proc.memory_full_info()
        except _GONE:
            continue
        total["rss"] += info.rss
        total["pss"] += getattr(info, "pss", 0)
        total["uss"] += info.uss
        total["processes"] += 1
    return total
