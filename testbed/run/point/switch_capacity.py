"""This machine's switching capacity: the TCP traffic (bits/s of wall time) one switch of a kind carries
here, unshaped, between PAIRS node pairs sending at once. Many fast links can ask more of the switch
than the machine's CPUs let it forward; replayed points' `dilation: auto` then slows the world until they
fit, and their verdict says when they did not (testbed/emulation/replayed_compute.py). It is measured,
not assumed: once per switch kind and machine, on a network of its own before the run's network comes
up, and cached outside the clone ($DLTB_CACHE/switch), keyed by what went into it (switch kind, CPU
model and count, kernel, Open vSwitch's version, this module)."""
from __future__ import annotations

import hashlib
import json
import os
import platform
import subprocess
import tempfile
import threading
from pathlib import Path

from testbed.nodes.image import CACHE_DIR
from testbed.run import results
from testbed.run.point.calibration import cpu_model

CACHE = CACHE_DIR / "switch"
PAIRS = 2
DURATION_S = 3.0


def _ovs_version() -> str:
    try:
        out = subprocess.run(["ovs-vswitchd", "--version"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return "absent"
    return (out.splitlines() or ["unknown"])[0].strip()


def inputs(kind: str) -> dict:
    """What a measurement depends on: its cache key."""
    code = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]
    return {"kind": kind, "cpu_model": cpu_model(), "cpus": len(os.sched_getaffinity(0)),
            "kernel": platform.release(), "ovs": _ovs_version() if kind == "ovs" else "", "code": code}


def _path(kind: str) -> Path:
    return CACHE / f"{hashlib.sha256(json.dumps(inputs(kind), sort_keys=True).encode()).hexdigest()[:20]}.json"


def cached(kind: str) -> float | None:
    """The capacity measured before (bits/s), or None: never measured, or a cache file of the wrong shape."""
    try:
        bps = json.loads(_path(kind).read_text())["bps"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return float(bps) if isinstance(bps, (int, float)) and not isinstance(bps, bool) and bps > 0 else None


def capacity(kind: str, progress=lambda msg: None, measure=None) -> float | None:
    """The capacity of a switch of `kind` here (bits/s), from the cache or measured now (as root, under the
    network lock); None where it cannot be measured (not root)."""
    found = cached(kind)
    if found is not None:
        return found
    if os.geteuid() != 0:
        return None
    progress(f"measuring this machine's switching capacity ({kind}: {PAIRS} TCP pairs at once, unshaped, "
             f"{DURATION_S:g} s) ...")
    bps = (measure or measure_now)(kind)
    CACHE.mkdir(parents=True, exist_ok=True)
    results.write_json(_path(kind), {"inputs": inputs(kind), "bps": bps})
    progress(f"switching capacity ({kind}): {bps / 1e6:.0f} Mbit/s")
    return bps


def measure_now(kind: str, pairs: int = PAIRS, duration: float = DURATION_S) -> float:
    """Receivers' bits/s summed over `pairs` iperf3 tests at once through one switch of `kind`, unshaped."""
    from testbed.net.network import Network
    from testbed.run.bringup.checks import run_iperf
    from testbed.spec import build_graph, load_spec

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "switch.yaml"
        path.write_text(f"name: switch-capacity\ntopology: {{template: star, hosts: {2 * pairs}, "
                        f"switch: {{kind: {kind}}}}}\n")
        spec = load_spec(path)
    got: dict[int, float] = {}
    failed: list[BaseException] = []
    with Network(build_graph(spec.topology), spec.topology) as net:
        def one(i: int) -> None:
            try:
                got[i] = run_iperf(net.nodes[f"h{2 * i + 2}"], net.nodes[f"h{2 * i + 1}"], duration)
            except BaseException as err:  # noqa: BLE001 - re-raised below, in the calling thread
                failed.append(err)
        threads = [threading.Thread(target=one, args=(i,)) for i in range(pairs)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    if failed:
        raise failed[0]
    return sum(got.values())
