"""A model of the zoo by name, on real Mininet and PyTorch: the file's first run installs the source's
package (transformers) into the venv, and a small GPT-2 built from its configuration learns the synthetic
next-token task on one one-core node."""
import pandas as pd
import pytest

from cli import cli

pytestmark = pytest.mark.integration

SPEC = """name: zoo-gpt2
topology: {hosts: 1, link: {bw: 100mbit}, host: {cores: 1}}
emulation: {dilation: auto}
checks: {iperf: false, ping: false}
workload: {engine: pytorch, strategy: single, model: transformers/gpt2, batch_per_worker: 16, epochs: 1,
           steps_per_epoch: 40, fixed: steps, model_params: {layers: 2, width: 64, heads: 2, vocab_size: 64, seq_len: 16}}
"""


def test_a_transformers_model_installs_its_package_and_learns(tmp_path, root, no_leftovers):
    spec = tmp_path / "gpt2.yaml"
    spec.write_text(SPEC)
    proc = cli("run", spec, "--out", tmp_path / "out", "--no-report", timeout=1200)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    (row,) = [r for _, r in pd.read_csv(tmp_path / "out/runs.csv").iterrows()]
    assert row["status"] == "ok" and row["model"] == "transformers/gpt2" and row["compute"] == "budgets"
    # 2 blocks of width 64 over a 64-token vocabulary (GPT-2's 1024 positions kept): embeddings, attention, MLP,
    # norms, the output layer tied to the token embedding
    assert row["gradient_bytes"] == 4 * (64 * 64 + 1024 * 64 + 2 * (12 * 64 * 64 + 13 * 64) + 2 * 64)
    steps = pd.read_csv(tmp_path / "out/steps.csv")
    losses = steps[steps["kind"] == "step"]["loss"].dropna().tolist()
    assert len(losses) == 40 and sum(losses[-10:]) / 10 < 0.6 * sum(losses[:5]) / 5
