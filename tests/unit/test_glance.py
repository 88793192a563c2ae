"""The answer at a glance (analysis/tables/glance.py, the first section of analysis/report/sections/answer.py and
the lines `run` prints at its end), on made-up results: its factors are the yardstick's ratios recomputed from
runs.csv and steps.csv, the terminal says the same factors as the table, and the first section is a figure, a
table and a few sentences."""
import html
import re

import numpy as np
import pandas as pd
import pytest
import yaml

from analysis import report
from analysis.figures import figures
from analysis.tables import glance, tables

FACTOR = re.compile(r"(\d+(?:\.\d+)?)× (faster|slower)")
BANDWIDTHS = (1e7, 1e8, 1e9)
# the seconds of a steady step per bandwidth and node count: one machine computes 32 samples in 0.024 s
STEP = {(bw, 1): 0.024 for bw in BANDWIDTHS} | {(1e7, 2): 0.7, (1e7, 4): 1.1, (1e8, 2): 0.09, (1e8, 4): 0.13,
                                                (1e9, 2): 0.03, (1e9, 4): 0.035}


def main_job_like(folder, learns: bool = True, degraded=(), lr_scaling=None):
    """1, 2 and 4 machines at 10, 100 and 1000 Mbit/s, one repeat each, the same 2048 samples (fixed data): one
    machine takes 64 steps of 32, four nodes 16 of 128, each step after a 1 s first one. Where `learns`, the loss
    falls from 2.3 by 0.02 per update and by 0.05 per update of a global batch of 128 (a larger batch learns
    more per step, not 4x more). `degraded`: (bandwidth, nodes) whose run reads degraded. `lr_scaling`: the
    learning-rate rule runs.csv records (None: no such column, as in results made before the setting)."""
    runs, steps = [], []
    for bw in BANDWIDTHS:
        for hosts in (1, 2, 4):
            run_id = f"h{hosts}-bw{bw:g}"
            n, tau = 64 // hosts, STEP[(bw, hosts)]
            fall = {1: 0.02, 2: 0.035, 4: 0.05}[hosts] if learns else 0.0
            times = [1.0] + [tau] * (n - 1)
            runs.append(dict(experiment="default", run_id=run_id, repeat=0, hosts=hosts, bw_bps=bw, bw=f"{bw:g}",
                             strategy="allreduce", engine="tensorflow", model="cnn", params=125000, workers=hosts,
                             gradient_bytes=500000,
                             global_batch=32 * hosts, status="ok", training_time_s=sum(times), steps=n,
                             time_per_step_s=sum(times) / n, fixed="data", samples_per_epoch=1024, epochs=2,
                             batch_per_worker=32, compute="budgets", cores=1, machine_cores=2, dilation=1.0,
                             fidelity="degraded: cpu: too little" if (bw, hosts) in degraded else "ok",
                             steady="ok", steady_step_s=tau, steady_step_q1_s=tau, steady_step_q3_s=tau,
                             steady_samples_per_s=32 * hosts / tau, warmup_s=1.0, warmup_steps=1, steady_steps=n - 1,
                             steps_per_epoch=n / 2, samples_per_step=32 * hosts, samples_trained=2048,
                             final_loss=2.3 - fall * (n - 1),
                             **({"lr_scaling": lr_scaling} if lr_scaling else {})))
            steps += [dict(experiment="default", run_id=run_id, role="worker", task_index=0, host="h1", kind="step",
                           epoch=1 + (k > n // 2), step=k, time_s=times[k - 1], loss=2.3 - fall * (k - 1),
                           samples_per_s=np.nan, t=1000.0 + sum(times[:k])) for k in range(1, n + 1)]
            spec = folder / "runs" / run_id / "spec.yaml"
            spec.parent.mkdir(parents=True)
            spec.write_text(yaml.safe_dump({"name": "default", "workload": {"epochs": 2, "samples_per_epoch": 1024},
                                            "report": {"job": {"samples": 1000000}}}))
    pd.DataFrame(runs).to_csv(folder / "runs.csv", index=False)
    pd.DataFrame(steps).to_csv(folder / "steps.csv", index=False)
    return folder


def recomputed(folder) -> dict:
    """(bandwidth, nodes) -> the yardstick's ratio from runs.csv and steps.csv alone: where every run's loss fell,
    one machine's time to the target over the point's (the target: the highest of the runs' lowest means of 5
    losses; a run's time to it: its steps' times summed up to the first step whose mean of the last 5 losses is at
    or below it); else the steady samples/s over one machine's."""
    runs, steps = pd.read_csv(folder / "runs.csv"), pd.read_csv(folder / "steps.csv")
    lead = {r: s.sort_values("t") for r, s in steps[(steps["task_index"] == 0)].groupby("run_id")}
    smooth = {r: s["loss"].rolling(5, min_periods=1).mean().to_numpy() for r, s in lead.items()}
    learns = all(s["loss"].iloc[-max(1, len(s) // 10):].mean() <= 0.97 * s["loss"].head(5).mean()
                 for s in lead.values())
    target = max(s.min() for s in smooth.values())
    out = {}
    for bw in BANDWIDTHS:
        one = runs[(runs["bw_bps"] == bw) & (runs["hosts"] == 1)].iloc[0]
        for _, r in runs[(runs["bw_bps"] == bw) & (runs["hosts"] > 1)].iterrows():
            if learns:
                def time_to(run_id):
                    hit = int(np.flatnonzero(smooth[run_id] <= target)[0])
                    return float(lead[run_id]["time_s"].iloc[:hit + 1].sum())
                out[(bw, r["hosts"])] = time_to(one["run_id"]) / time_to(r["run_id"])
            else:
                out[(bw, r["hosts"])] = r["steady_samples_per_s"] / one["steady_samples_per_s"]
    return out


def first_section(page: str) -> str:
    start = page.index("<h2>Does distributed training pay off here?</h2>")
    return page[start:page.index("<h2>", start + 4)]


def words(part: str) -> int:
    return len(html.unescape(re.sub(r"<[^>]+>", " ", part)).split())


@pytest.mark.parametrize("learns", [True, False], ids=["time to target", "steady samples/s"])
def test_the_tables_factors_are_the_yardsticks_ratios_recomputed_from_runs_and_steps(tmp_path, learns):
    folder = main_job_like(tmp_path / "default", learns)
    glance_table = glance.table(tables.load_experiment(folder))
    assert set(glance_table["yardstick"]) == {"time to target" if learns else "steady samples/s"}
    multi = glance_table[glance_table["hosts"] > 1]
    want = recomputed(folder)
    assert len(multi) == len(want) == 6
    for _, r in multi.iterrows():
        assert r["factor"] == pytest.approx(want[(r["bw_bps"], r["hosts"])], rel=0.05), (r["bw_bps"], r["hosts"])
        assert r["verdict"] == "one run"
    one = glance_table[glance_table["hosts"] == 1]
    assert len(one) == 3 and (one["factor"] == 1).all() and (one["verdict"] == glance.REFERENCE).all()
    if learns:     # 4 machines pay off at 1 Gbit/s only; the target is 4 nodes' lowest loss
        assert multi.set_index(["bw_bps", "hosts"])["factor"].gt(1).to_dict() == {
            (1e7, 2): False, (1e7, 4): False, (1e8, 2): False, (1e8, 4): False, (1e9, 2): True, (1e9, 4): True}


def test_the_first_section_is_a_figure_a_table_a_sentence_per_bandwidth_and_the_break_even(tmp_path, monkeypatch):
    folder = main_job_like(tmp_path / "default")
    monkeypatch.setattr(figures, "FIGURES", {})
    page = report.build_report(folder).read_text()
    first = first_section(page)
    assert words(first) <= 150, html.unescape(re.sub(r"<[^>]+>", " ", first))
    assert "<figure class='answer'><img src='figures/answer.png'" in first
    assert (folder / "figures" / "answer.png").is_file()
    assert "<table class='glance " in first
    sentences = re.findall(r"<ul class='glance'>(.*?)</ul>", first)[0].split("<li>")[1:]
    # one machine is fastest at 10 and 100 Mbit/s, 2 machines closest at both: one sentence says both
    assert [s.split(",")[0] for s in sentences] == ["At 10 Mbit/s and 100 Mbit/s", "At 1 Gbit/s"], sentences
    assert "2 machines came closest, 8.53× and 1.57× slower" in sentences[0]
    assert "4 machines were 1.21× faster than one, but one run each: no verdict yet" in sentences[1]
    assert "Verdict on every factor: one run each." in first
    assert "Yardstick: time to the target loss" in first
    assert first.count("PREDICTION") == 1
    assert "<p class='break-even'>Break-even (a PREDICTION of the cost model" in first
    # the details are below: every point's sentence, the cost model's PREDICTION sentences
    detail = page[page.index("<h2>The answer in detail</h2>"):]
    assert "<ul class='answer'>" in detail and "reached the target in" in detail


def test_the_terminal_says_the_tables_factors(tmp_path, monkeypatch, capsys):
    from testbed.cli import run
    folder = main_job_like(tmp_path / "default", degraded=[(1e7, 4)])
    monkeypatch.setattr(figures, "FIGURES", {})
    report.build_report(folder)
    stored = pd.read_csv(folder / "tables" / "glance.csv")
    printed = run.show_answer(folder)
    assert 2 <= len(printed) <= 6 and printed[0].startswith("answer: time to the target loss")
    said = {}
    for line in printed[1:]:
        bw = line.split()[0] + " " + line.split()[1]
        for cell in line.split("; "):
            nodes = re.search(r"(\d+) machines?: ", cell)
            factor = FACTOR.search(cell)
            if nodes and factor:
                value = float(factor.group(1))
                said[(bw, int(nodes.group(1)))] = value if factor.group(2) == "faster" else 1 / value
    assert "4 machines: not counted (degraded)" in printed[1]
    judged = stored[stored["factor"].notna() & (stored["hosts"] > 1)]
    assert len(said) == len(judged) == 5
    for _, r in judged.iterrows():
        bw = {1e7: "10 Mbit/s", 1e8: "100 Mbit/s", 1e9: "1 Gbit/s"}[r["bw_bps"]]
        assert said[(bw, r["hosts"])] == pytest.approx(r["factor"], rel=0.005)     # 3 significant digits
    assert stored.loc[(stored["bw_bps"] == 1e7) & (stored["hosts"] == 4), "verdict"].tolist() == [glance.NOT_COUNTED]


def test_a_degraded_point_is_not_counted_in_the_table_or_the_sentence(tmp_path):
    folder = main_job_like(tmp_path / "default", degraded=[(1e9, 4)])
    g = glance.table(tables.load_experiment(folder))
    gone = g[(g["bw_bps"] == 1e9) & (g["hosts"] == 4)].iloc[0]
    assert gone["verdict"] == glance.NOT_COUNTED and np.isnan(gone["factor"]) and np.isnan(gone["time_s"])
    said = [s for s in glance.bandwidth_sentences(g) if s.startswith("At 1 Gbit/s")][0]
    assert "4 machines not counted (degraded)" in said and "4 machines pay off" not in said


@pytest.mark.parametrize("rule, said", [(None, ""), ("none", ""), ("linear", "learning rate scaled with the global batch"),
                                        ("sqrt", "learning rate scaled with √(global batch)")])
def test_the_yardstick_says_the_learning_rate_rule_where_one_scaled_it(tmp_path, monkeypatch, rule, said):
    from testbed.cli import run
    folder = main_job_like(tmp_path / "default", lr_scaling=rule)
    monkeypatch.setattr(figures, "FIGURES", {})
    first = html.unescape(first_section(report.build_report(folder).read_text()))
    printed = run.show_answer(folder)[0]
    yard = re.search(r"Yardstick: (.*?)</p>", first).group(1)
    assert (said in yard and said in printed) if said else ("learning rate" not in yard + printed), (yard, printed)
    stored = pd.read_csv(folder / "tables" / "glance.csv")      # the column only where a rule scaled the rate
    assert (set(stored["lr_scaling"]) == {rule}) if said else ("lr_scaling" not in stored), stored.columns
