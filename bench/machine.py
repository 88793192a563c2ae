"""The machine's state a benchmark figure was measured in, printed beside the figure."""
from __future__ import annotations

import os

import psutil

from testbed.run.bringup.hosthealth import timer_overshoot


def machine_state() -> str:
    """Cores, free memory, load average and timer health (how late 1 ms sleeps wake)."""
    t = timer_overshoot()
    vm = psutil.virtual_memory()
    return (f"machine: {os.cpu_count()} cores, {vm.available / 2**30:.1f} of {vm.total / 2**30:.1f} GiB available; "
            f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}; 1 ms sleeps overshoot "
            f"p50 {t['timer_p50_ms']} ms, p99 {t['timer_p99_ms']} ms, max {t['timer_max_ms']} ms")
