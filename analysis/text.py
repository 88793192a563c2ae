"""Words and numbers that the tables, the comparisons and the figures share, without matplotlib: a rate
or a count as text, and the thesis's measured points."""
from __future__ import annotations

HTB_TCP_CEILING = 1448 / 1514   # TCP payload per full Ethernet frame with timestamps
THESIS_FIG17 = (10e6, 9.75e6)   # thesis iperf check: 10 Mbit/s configured, 9.75 measured
THESIS_FIG14 = (2, 0.578)        # thesis caption model: best BLEU-1, at epoch 2 (of 20)


def mbit(bps) -> str:
    """Label for a rate in bits/s: '10 Mbit/s', '1 Gbit/s'."""
    bps = float(bps)
    for unit, f in (("Gbit/s", 1e9), ("Mbit/s", 1e6), ("kbit/s", 1e3)):
        if bps >= f:
            return f"{bps / f:g} {unit}"
    return f"{bps:g} bit/s"


def plural(n, noun: str) -> str:
    """'1 node', '2 nodes'."""
    return f"{int(n)} {noun}{'' if int(n) == 1 else 's'}"
