"""The workload's compute probe: local steps of the model without a strategy, one `compute` event."""
import io
import json
import os

import pytest

os.environ["TF_USE_LEGACY_KERAS"] = "1"  # before TensorFlow is imported
pytest.importorskip("tf_keras")

from workloads import data, models  # noqa: E402
from workloads.events import Emitter  # noqa: E402
from workloads.train import compute_probe  # noqa: E402

pytestmark = pytest.mark.timing       # times itself: run with the CPUs to itself (testbed.sh test)


def _events(stream):
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_probe_times_local_steps():
    out = io.StringIO()
    p = models.resolve_params("mlp", {"width": 16})
    calls = []

    def dataset():
        calls.append(1)
        return data.synthetic_dataset("mlp", p, 0, 8)

    compute_probe(lambda: models.build_model("mlp", p), dataset, Emitter("single", 0, "h1", stream=out),
                  warmup=1, steps=3)
    (ev,) = _events(out)
    assert ev["event"] == "compute" and ev["steps"] == 3
    assert calls == [1, 1], "batches for the traced first step (quota lifted), then for the timed steps"
    assert 0 < ev["time_per_step_s"] < 5
    assert "error" not in ev


def test_probe_failure_is_reported_not_raised():
    out = io.StringIO()

    def broken():
        raise RuntimeError("no model here")

    compute_probe(broken, lambda: None, Emitter("worker", 1, "h2", stream=out))
    (ev,) = _events(out)
    assert ev["event"] == "compute" and ev["time_per_step_s"] is None and ev["steps"] == 0
    assert ev["error"] == "RuntimeError: no model here"


def test_emitter_line_keeps_its_time_until_written():
    out = io.StringIO()
    emit = Emitter("single", 0, "h1", stream=out)
    held = emit.line("done", steps=4)
    emit("compute", steps=5)
    emit.write(held)
    first, second = _events(out)
    assert (first["event"], second["event"]) == ("compute", "done")
    assert second["t"] <= first["t"] and second["steps"] == 4
