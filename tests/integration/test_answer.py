"""The answer, measured right, on real Mininet, OVS, tc and TensorFlow: the main job (topologies/default.yaml)
at one bandwidth for 1, 2 and 4 one-core machines. Each point trains the same samples; runs.csv's steady
figures are what steps.csv's lead-task steps say; summary.csv's speedups are the ratios of those; the report
answers first, in one sentence for the bandwidth, and splits the steady step into compute, wire and rest."""
import re
from html import unescape
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cli import cli

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.integration


def lead_steady(steps: pd.DataFrame, run: pd.Series) -> float:
    """The run's steady samples/s recomputed from steps.csv alone: worker 0's steps in order, those after
    runs.csv's warm-up steps, their median."""
    lead = steps[(steps["run_id"] == run["run_id"]) & (steps["kind"] == "step") & (steps["role"] == "worker")
                 & (steps["task_index"] == 0)].sort_values("t")
    return run["samples_per_step"] / float(np.median(lead["time_s"].iloc[int(run["warmup_steps"]):]))


def test_the_main_job_trains_the_same_samples_and_gives_one_speedup(tmp_path, root, no_leftovers):
    out = tmp_path / "default"
    proc = cli("run", REPO / "topologies" / "default.yaml", "--out", out, "--quiet",
               "--set", "sweep.topology.link.bw=[100mbit]", "--set", "checks.iperf=false", timeout=1200)
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = pd.read_csv(out / "runs.csv").sort_values("hosts")
    assert list(runs["hosts"]) == [1, 2, 4] and (runs["status"] == "ok").all(), runs["reason"].tolist()

    # the same data at every node count: 2 epochs of 1024 samples, within one global batch
    assert (runs["fixed"] == "data").all() and (runs["samples_per_epoch"] == 1024).all()
    assert list(runs["steps_per_epoch"]) == [32, 16, 8] and list(runs["samples_per_step"]) == [32, 64, 128]
    assert ((runs["samples_trained"] - 2048).abs() < runs["samples_per_step"]).all(), runs["samples_trained"]

    # the warm-up apart, and the steady figures as steps.csv says them (within 5 %)
    assert (runs["steady"] == "ok").all() and (runs["warmup_steps"] >= 1).all() and (runs["warmup_s"] > 0).all()
    assert (runs["steady_steps"] >= 10).all()
    assert (runs["steady_step_q1_s"] <= runs["steady_step_s"]).all()
    assert (runs["steady_step_s"] <= runs["steady_step_q3_s"]).all()
    steps = pd.read_csv(out / "steps.csv")
    recomputed = {r.run_id: lead_steady(steps, r) for _, r in runs.iterrows() for r in [r]}
    for _, r in runs.iterrows():
        assert r["steady_samples_per_s"] == pytest.approx(recomputed[r["run_id"]], rel=0.05), r["run_id"]
    # the first step (tracing, the collective's set-up) is most of a short run's time at one node
    one = runs[runs["hosts"] == 1].iloc[0]
    assert one["warmup_s"] > 5 * one["steady_step_s"]

    # one speedup: every one in summary.csv is the ratio of the recomputed steady samples/s (within 5 %);
    # the report counts every point here, whatever its fidelity verdict on this machine said
    assert cli("report", out, "--include-degraded").returncode == 0
    summary = pd.read_csv(out / "tables" / "summary.csv")
    base = recomputed[one["run_id"]]
    judged = summary[summary["speedup"].notna()]
    assert sorted(judged["hosts"]) == [1, 2, 4], summary[["hosts", "speedup", "not_judged"]]
    for _, s in judged.iterrows():
        run = runs[runs["hosts"] == s["hosts"]].iloc[0]
        assert s["speedup"] == pytest.approx(recomputed[run["run_id"]] / base, rel=0.05), s["hosts"]
        assert s["efficiency"] == pytest.approx(s["speedup"] / s["hosts"], rel=1e-6)

    # the report answers first, by the one yardstick it names: where every run's loss fell on the same data, the
    # time to the target loss (time_to_target.csv); else the file's job of a million samples in the one speedup
    html = unescape((out / "report.html").read_text())
    text = " ".join(re.sub(r"<[^>]+>", " ", html).split())
    assert text.index("Does distributed training pay off here?") < text.index("What the trend says")
    if "Yardstick: the time to reach the target loss" in text:
        answer = re.search(r"At 100 Mbit/s, one one-core machine reached the target in .*?\.(?= [A-Z(]|$)", text)
        assert answer, text[:3000]
        reached = pd.read_csv(out / "tables" / "time_to_target.csv")
        ratios = reached[(reached["hosts"] > 1) & reached["vs_one_machine"].notna()]["vs_one_machine"]
    else:
        assert "Yardstick: the projected time of the job at steady samples per second" in text, text[:3000]
        answer = re.search(r"At 100 Mbit/s, one one-core machine would train 1M samples in .*?\.(?= [A-Z(]|$)", text)
        assert answer, text[:3000]
        ratios = judged[judged["hosts"] > 1]["speedup"]
    assert len(ratios) == 2, ratios
    for ratio in ratios:
        words = f"{ratio:.3g}× faster" if ratio >= 1 else f"{1 / ratio:.3g}× slower"
        assert words in answer.group(0), (words, answer.group(0))

    # where the rest of the steady step went: compute (the probe), the wire (bytes at the link's rate), the rest
    split = pd.read_csv(out / "tables" / "time_split.csv")
    multi = split[split["hosts"] > 1]
    assert {"compute_s", "wire_s", "rest_s"} <= set(split.columns)
    assert (multi["wire_s"] > 0).all() and (multi["compute_s"] > 0).all()
    assert (multi["compute_s"] + multi["wire_s"] + multi["rest_s"]).round(6).equals(multi["steady_step_s"].round(6))
