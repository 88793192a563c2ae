"""runs.csv's communication columns from a run's settings and its lead events (testbed/run/point/record.py)."""
import math

import pytest

from spec_helpers import load
from testbed.run.point.record import communication_columns, communication_settings

FILE = """
name: rec
topology: {{hosts: 2}}
workload:
  engine: pytorch
  communication: {setting}
"""


def lead(steps: int, per_step) -> list[dict]:
    sent, out = 10_000, []
    for k in range(1, steps + 1):
        sent += per_step(k)
        out.append({"event": "step", "step": k, "time_s": 0.1, "tx_bytes": sent})
    return out


def test_powersgd_theory_and_the_steady_wire(tmp_path):
    w = load(tmp_path, FILE.format(setting="{compression: powersgd, rank: 4, start_step: 2}")).workload
    row = {"steps": 40, "warmup_steps": 3, "workers": 2, "gradient_bytes": 1_077_288, "steady": "ok"}
    cols = communication_columns(w, row, lead(40, lambda k: 1_077_288 if k <= 2 else 33_000))
    assert communication_settings(w) == dict(compression="powersgd", rank=4, start_step=2, sync_every=1, outer="")
    assert cols["theory_bytes_per_worker_step"] == pytest.approx((2 * 1_077_288 + 38 * 31_176) / 40)
    assert cols["theory_steady_bytes_per_worker_step"] == 31_176
    assert cols["steady_bytes_per_worker_step"] == 33_000


def test_local_sgd_columns_and_nothing_measured_without_a_steady_state(tmp_path):
    w = load(tmp_path, FILE.format(setting="{sync_every: 4, start_step: 0, outer: {lr: 0.5, momentum: 0.8}}")).workload
    row = {"steps": 20, "warmup_steps": 1, "workers": 2, "gradient_bytes": 1_000, "steady": "too few"}
    cols = communication_columns(w, row, lead(20, lambda k: 1_000 if (k - 1) % 4 == 0 else 0))
    said = communication_settings(w)
    assert math.isnan(said["rank"]) and said["start_step"] == 0 and said["sync_every"] == 4
    assert said["outer"] == "lr 0.5, momentum 0.8, nesterov"
    assert cols["theory_bytes_per_worker_step"] == pytest.approx(5 * 1_000 / 20)
    assert math.isnan(cols["steady_bytes_per_worker_step"])


def test_plain_runs_keep_their_theory(tmp_path):
    w = load(tmp_path, FILE.format(setting="{}")).workload
    cols = communication_columns(w, {"steps": 10, "warmup_steps": 1, "workers": 2, "gradient_bytes": 800,
                                     "steady": "ok"}, lead(10, lambda k: 800))
    assert communication_settings(w)["compression"] == "none" and math.isnan(communication_settings(w)["start_step"])
    assert cols["theory_bytes_per_worker_step"] == cols["theory_steady_bytes_per_worker_step"] == 800
    assert cols["steady_bytes_per_worker_step"] == 800
