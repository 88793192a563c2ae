"""How late this machine wakes a sleeping thread: the bound on any timer-driven shaper.

HTB and TBF release packets from a kernel timer. On a VM whose host stalls its vCPUs, timers fire
tens to hundreds of milliseconds late and the tokens of the stall are lost (a burst only covers a
few milliseconds), so a shaped link delivers less than its rate. Runs record this figure so the
report can tell a shaping problem from a machine problem."""
from __future__ import annotations

import time

from analysis.tables.health import HEALTHY_MAX_MS, HEALTHY_P99_MS


def timer_overshoot(samples: int = 300, sleep_s: float = 0.001) -> dict[str, float]:
    """Overshoot of `samples` short sleeps: median, p99 and max, in milliseconds."""
    late = []
    for _ in range(samples):
        start = time.perf_counter()
        time.sleep(sleep_s)
        late.append((time.perf_counter() - start - sleep_s) * 1e3)
    late.sort()
    return {"timer_p50_ms": round(late[len(late) // 2], 2),
            "timer_p99_ms": round(late[min(len(late) - 1, int(len(late) * 0.99))], 2),
            "timer_max_ms": round(late[-1], 2)}


def healthy(overshoot: dict[str, float]) -> bool:
    return overshoot["timer_p99_ms"] <= HEALTHY_P99_MS and overshoot["timer_max_ms"] <= HEALTHY_MAX_MS


def describe(overshoot: dict[str, float]) -> str:
    return (f"this machine's timers overshoot by up to {overshoot['timer_max_ms']:.0f} ms "
            f"(p99 {overshoot['timer_p99_ms']:.1f} ms): a host that stalls its VM limits any kernel shaper")
