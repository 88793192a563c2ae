"""What the ways of shaping a link can do, in one table: the rates tc paces, which settings need the
netem qdisc, what OVS QoS shapes. The spec's rules read it before anything runs; testbed.shaping and
the faults' and traces' preflight read it against this machine's kernel. Pure data."""
from __future__ import annotations

from dataclasses import dataclass

from testbed.limits import MAX_BANDWIDTH, MIN_BANDWIDTH

NETEM_SETTINGS = ("delay", "jitter", "loss")     # a link's settings that only netem emulates


@dataclass(frozen=True)
class Shaper:
    """A value of topology.shaping: what it shapes, and what it can hold a link to."""
    name: str
    what: str
    netem: bool                     # delay, jitter and loss (with the kernel's netem qdisc)
    min_rate: int = MIN_BANDWIDTH   # bit/s
    max_rate: int = MAX_BANDWIDTH


SHAPERS = {
    "tc": Shaper("tc", "tc (HTB or TBF, netem for delay, jitter and loss)", netem=True),
    "ovs": Shaper("ovs", "OVS QoS shapes bandwidth only", netem=False),
}
NO_NETEM = ("needs the netem qdisc, which this kernel lacks (CONFIG_NET_SCH_NETEM is not set); delay, jitter "
            "and loss cannot be emulated on this machine")


def needs_netem(params) -> bool:
    """Whether a link's parameters ask for delay, jitter or loss."""
    return any(getattr(params, k, None) is not None for k in NETEM_SETTINGS)


def rate_problem(bps: int, shaping: str = "tc") -> str | None:
    """Why a rate cannot be shaped (None: it can)."""
    s = SHAPERS[shaping]
    if s.min_rate <= bps <= s.max_rate:
        return None
    return f"{bps} bit/s cannot be shaped: tc paces rates between {s.min_rate} bit/s and {s.max_rate} bit/s"
