"""The Keras callback for users' scripts: a tiny tf_keras fit on CPU, events parsed from stdout."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

os.environ["TF_USE_LEGACY_KERAS"] = "1"  # before TensorFlow is imported
tf_keras = pytest.importorskip("tf_keras")

from testbed.callback import TestbedCallback  # noqa: E402
from workloads import events  # noqa: E402

STEPS, EPOCHS, BATCH = 3, 2, 8


def fit(callback):
    x = np.random.default_rng(0).random((STEPS * BATCH, 4), dtype=np.float32)
    y = (x.sum(axis=1) > 2).astype(np.int32)
    model = tf_keras.Sequential([tf_keras.Input((4,)), tf_keras.layers.Dense(2, activation="softmax")],
                                name="tiny")
    model.compile("sgd", "sparse_categorical_crossentropy")
    model.fit(x, y, batch_size=BATCH, epochs=EPOCHS, callbacks=[callback], verbose=0)
    return model


def printed(capsys):
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def test_events_without_tf_config(capsys, monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    monkeypatch.setenv(events.HOST_ENV, "h7")
    model = fit(TestbedCallback(global_batch=BATCH, eval_fn=lambda: {"acc": 0.5}))
    ev = printed(capsys)
    assert [e["event"] for e in ev] == (["start"] + (["step"] * STEPS + ["epoch", "eval"]) * EPOCHS
                                        + ["done"])
    assert {(e["role"], e["task_index"], e["host"]) for e in ev} == {("single", 0, "h7")}
    start, done = ev[0], ev[-1]
    assert start["strategy"] == "single" and start["model"] == "tiny" and start["workers"] == 1
    assert start["params"] == model.count_params() == 10 and start["gradient_bytes"] == 40
    steps = [e for e in ev if e["event"] == "step"]
    assert [(e["epoch"], e["step"]) for e in steps] == [(1, 1), (1, 2), (1, 3), (2, 4), (2, 5), (2, 6)]
    assert all(e["time_s"] >= 0 and e["loss"] > 0 for e in steps)
    epochs = [e for e in ev if e["event"] == "epoch"]
    assert [(e["epoch"], e["steps"]) for e in epochs] == [(1, STEPS), (2, STEPS)]
    assert all(e["samples_per_s"] > 0 for e in epochs)
    assert [e["epoch"] for e in ev if e["event"] == "eval"] == [1, 2]
    assert ev[-2]["acc"] == 0.5
    assert done["steps"] == STEPS * EPOCHS and done["asynchronous"] is False
    assert done["final_loss"] == pytest.approx(epochs[-1]["loss"])
    assert done["time_per_step_s"] == pytest.approx(done["training_time_s"] / done["steps"])


def test_role_and_index_from_tf_config(capsys, monkeypatch):
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": {"worker": ["10.0.0.1:1", "10.0.0.2:1"]},
                                                "task": {"type": "worker", "index": 1}}))
    fit(TestbedCallback(start=False))
    ev = printed(capsys)
    assert ev[0]["event"] == "step" and ev[-1]["event"] == "done"
    assert {(e["role"], e["task_index"]) for e in ev} == {("worker", 1)}
    assert ev[-1]["samples_per_s"] is None  # no global_batch given
    assert events.cluster_shape() == ("allreduce", 0)


def test_import_path_needs_neither_pandas_nor_pydantic():
    code = ("import sys; sys.modules['pandas'] = sys.modules['pydantic'] = None\n"
            "from testbed.callback import TestbedCallback; print(TestbedCallback.__name__)")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True,
                         env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"), timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "TestbedCallback"
