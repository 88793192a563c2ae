"""topologies/thesis_caption.yaml (thesis figure 14) on real Mininet, with tiny made-up Flickr8k
data: BLEU rows in evals.csv for every epoch and metric, and the BLEU figure in the report."""
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))
from tiny_flickr8k import WORDS, write_flickr8k  # noqa: E402
pytestmark = pytest.mark.integration
EPOCHS = 2
METRICS = ["bleu1", "bleu2", "bleu3", "bleu4"]


def test_thesis_caption_topology_bleu_per_epoch(tmp_path, root, no_leftovers):
    data, out = tmp_path / "flickr8k", tmp_path / "out"
    write_flickr8k(data)
    sets = [f"workload.data.path={data}", f"workload.epochs={EPOCHS}", "workload.samples_per_epoch=96",
            "workload.model_params={embed_dim: 16, units: 16}", "workload.timeout=8m",
            "checks.iperf=false", "sweep.repeats=1"]
    proc = subprocess.run([sys.executable, str(REPO / "run_experiment.py"), "run",
                           "topologies/thesis_caption.yaml", "--out", str(out), "--quiet",
                           *[a for s in sets for a in ("--set", s)]],
                          cwd=REPO, capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = pd.read_csv(out / "runs.csv")
    assert sorted(runs["hosts"]) == [1, 2] and (runs["status"] == "ok").all(), runs["reason"].tolist()
    assert (runs["model"] == "caption").all()

    evals = pd.read_csv(out / "evals.csv")
    got = set(zip(evals["run_id"], evals["epoch"], evals["metric"]))
    assert got == {(r, e, m) for r in runs["run_id"] for e in range(1, EPOCHS + 1) for m in METRICS}
    assert len(evals) == len(got) and evals["value"].between(0, 1).all()

    html = (out / "report.html").read_text()
    assert "figures/bleu.png" in html and "reproduces thesis figure 14" in html
    assert (out / "figures" / "bleu.png").stat().st_size > 15_000
    assert "the best BLEU-1 on the held-out images" in html

    # figure 20: the trained model captions images by greedy decoding, from its run folder
    vocabulary = set(WORDS)
    for run_id in runs["run_id"]:
        run_dir = out / "runs" / run_id
        assert {p.name for p in (run_dir / "model").iterdir()} == {"weights.npz", "tokenizer.json", "params.json"}
        said = subprocess.run([sys.executable, str(REPO / "run_experiment.py"), "caption", str(run_dir),
                               "--features", str(data / "features.npz"), "--image", "1000_img", "--image", "1009_img"],
                              cwd=REPO, capture_output=True, text=True, timeout=300)
        assert said.returncode == 0, said.stderr[-2000:]
        lines = said.stdout.strip().splitlines()
        assert [line.split(":")[0] for line in lines] == ["1000_img", "1009_img"], said.stdout
        empty = "(no words: the model ended the caption at once)"
        assert all(set(line.split(": ", 1)[1].split()) <= vocabulary or line.endswith(empty) for line in lines), \
            said.stdout
    nothing = subprocess.run([sys.executable, str(REPO / "run_experiment.py"), "caption", str(tmp_path),
                              "--features", str(data / "features.npz")], cwd=REPO, capture_output=True, text=True)
    assert nothing.returncode == 2 and "no trained caption model" in nothing.stderr
