"""Byte scaling on real Mininet, OVS, tc and PyTorch's gloo: two nodes replaying the shipped MLP profile, marked
as computed on a GPU of a 16-core server (tests/fixtures/profiles/mlp-b32-gpu16.json: no CPU contention to
estimate, so the network alone is compared), at 100 Mbit/s, every byte sent against an eighth of them over
links an eighth as fast, at one dilation: the steady step holds, runs.csv says the scale, the iperf3 check
measures the link as shaped, and the recorded bytes are the emulated gradient's."""
from pathlib import Path

import pandas as pd
import pytest

from cli import cli

pytestmark = pytest.mark.integration

SPEC = """name: bytes
topology: {{template: star, hosts: 2, link: {{bw: 100mbit}}, host: {{profile: {profile}}}}}
emulation: {{dilation: 1, compute: replay, byte_scale: 1}}
workload: {{engine: pytorch, strategy: allreduce, model: mlp, batch_per_worker: 32, epochs: 1, steps_per_epoch: 16,
           fixed: steps, timeout: 5m}}
checks: {{iperf: true, ping: false}}
monitor: {{interval: 2s}}
sweep: {{emulation.byte_scale: [1, 8]}}
"""
PROFILE = Path(__file__).resolve().parents[1] / "fixtures/profiles/mlp-b32-gpu16.json"
TOLERANCE = 0.10      # measured: 99.8 and 99.9 ms every byte, 99.3 and 99.1 ms at F = 8 (docs/faithful-compute.md)


def test_an_eighth_of_the_bytes_over_links_an_eighth_as_fast_keeps_the_steady_step(tmp_path, root, no_leftovers):
    spec = tmp_path / "bytes.yaml"
    spec.write_text(SPEC.format(profile=PROFILE))
    proc = cli("run", spec, "--out", tmp_path / "out", "--quiet", "--no-report", timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = pd.read_csv(tmp_path / "out" / "runs.csv").set_index("byte_scale")
    assert list(runs["status"]) == ["ok", "ok"] and sorted(runs.index) == [1, 8]
    whole, scaled = runs.loc[1], runs.loc[8]
    ratio = scaled["steady_step_s"] / whole["steady_step_s"]
    print(f"2 replayed nodes at 100 Mbit/s, x1: every byte {whole['steady_step_s'] * 1000:.1f} ms "
          f"({whole['fidelity']}), byte_scale 8 {scaled['steady_step_s'] * 1000:.1f} ms ({scaled['fidelity']}): "
          f"{ratio:.3f}")
    assert ratio == pytest.approx(1, abs=TOLERANCE)
    assert scaled["gradient_bytes"] == whole["gradient_bytes"] == 1077288      # the profile's, not the sent
    assert scaled["steady_bytes_per_worker_step"] == pytest.approx(whole["steady_bytes_per_worker_step"], rel=0.05)
    checks = pd.read_csv(tmp_path / "out" / "checks.csv").set_index("run_id")
    iperf = checks[checks["tool"] == "iperf3"]
    assert (iperf["configured_bps"] == 100_000_000).all()          # x F back to the rate emulated
    assert (iperf["ratio"] > 0.85).all()                           # measured as shaped: 12.5 Mbit/s at F = 8
