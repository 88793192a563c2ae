"""A TensorFlow training task loads neither matplotlib nor pandas (Keras imports them only when they are
installed, and they cost a second of each task's CPU at its start), and Keras trains without them."""
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

TASK = """
import sys
from workloads import data, models, train
train.load_tensorflow()                         # what a TensorFlow task loads before its model
model = models.build_model("mlp", {"width": 16})
models.compile_model(model)
history = model.fit(data.synthetic_dataset("mlp", models.resolve_params("mlp", {"width": 16}), 0, 8).take(2),
                    epochs=1, verbose=0)
print("loss", history.history["loss"][-1])
print("loaded", sorted(m for m in sys.modules if m.split(".")[0] in ("matplotlib", "pandas")))
"""


def test_a_tensorflow_task_trains_without_matplotlib_or_pandas():
    proc = subprocess.run([sys.executable, "-c", TASK], cwd=REPO, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "loaded []" in proc.stdout, proc.stdout
    loss = float(proc.stdout.split("loss ")[1].split()[0])
    assert loss == loss and loss > 0            # it trained: a finite loss
