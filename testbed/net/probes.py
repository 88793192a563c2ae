"""Parsers of what the measuring tools print: iperf3's JSON and ping's summary. Used by the run's
checks and by the cluster's fidelity guard."""
from __future__ import annotations

import json
import math
import re


def parse_iperf3(text: str) -> float:
    """Received TCP throughput (bits/s) from `iperf3 -J` output."""
    data = json.loads(text)
    if "error" in data:
        raise RuntimeError(f"iperf3: {data['error']}")
    return float(data["end"]["sum_received"]["bits_per_second"])


def parse_ping(text: str) -> tuple[float, float]:
    """(average RTT in ms, packet loss %) from ping's summary lines."""
    loss = re.search(r"([\d.]+)% packet loss", text)
    rtt = re.search(r"= [\d.]+/([\d.]+)/", text)
    return (float(rtt.group(1)) if rtt else math.nan, float(loss.group(1)) if loss else 100.0)
