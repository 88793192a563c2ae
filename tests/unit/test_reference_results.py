"""The reference results kept in the repository (results/reference/<set-up file>/): each is the results
of a bundled set-up file, and its report regenerates from the stored runs' tables alone, without root's
privileges, to the tables and the answers stored beside them."""
import html
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[2]
REFERENCES = REPO / "results" / "reference"
KEPT = sorted(p for p in REFERENCES.iterdir() if p.is_dir()) if REFERENCES.is_dir() else []
# the set-ups whose reference results are kept: every thesis file that runs on this machine alone, the
# comparison of communication settings, machines of different speeds and the main job (default)
EXPECTED = {"default", "thesis_strategies", "thesis_physical", "thesis_physical_faithful", "thesis_caption",
            "thesis_caption_faithful", "thesis_fig15", "thesis_fig15_faithful", "thesis_fig18", "thesis_fig18_faithful",
            "low_communication", "heterogeneous", "gpu_servers"}
# as root: every capability dropped (uid 0 with none of root's privileges), as a user without root has none
NO_PRIVILEGES = ["setpriv", "--no-new-privs", "--inh-caps=-all", "--bounding-set=-all", "--"] if os.geteuid() == 0 else []


def test_each_kept_set_up_has_its_file_and_none_is_missing():
    names = {p.name for p in KEPT}
    assert names >= EXPECTED, f"missing reference results: {sorted(EXPECTED - names)}"
    for name in names:
        assert (REPO / "topologies" / f"{name}.yaml").is_file(), name
        assert (REFERENCES / name / "runs.csv").is_file() and (REFERENCES / name / "report.html").is_file()
        runs = pd.read_csv(REFERENCES / name / "runs.csv")
        assert (runs["status"] == "ok").all(), f"{name}: {runs['reason'].dropna().tolist()}"


def test_what_runs_the_report_here_holds_no_privilege():
    status = subprocess.run([*NO_PRIVILEGES, "cat", "/proc/self/status"], capture_output=True, text=True).stdout
    assert "CapEff:\t0000000000000000" in status


@pytest.mark.parametrize("folder", KEPT, ids=[p.name for p in KEPT])
def test_the_report_regenerates_from_the_stored_tables_without_root(folder, tmp_path):
    copy = tmp_path / folder.name
    shutil.copytree(folder, copy, ignore=shutil.ignore_patterns("report.html", "figures", "tables"))
    done = subprocess.run([*NO_PRIVILEGES, sys.executable, str(REPO / "run_experiment.py"), "report", str(copy)],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    page = (copy / "report.html").read_text()
    assert "Does distributed training pay off here?" in page
    if folder.name.startswith("thesis_"):
        assert "The thesis and this experiment, side by side" in page
    if (folder / "tables" / "communication.csv").is_file():
        assert "What would make it pay off here" in page
    stored = sorted(p.name for p in (folder / "tables").glob("*.csv"))
    assert sorted(p.name for p in (copy / "tables").glob("*.csv")) == stored
    for name in stored:      # (the fits differ in the 6th digit between CPUs: their BLAS kernels sum in other orders)
        pd.testing.assert_frame_equal(pd.read_csv(copy / "tables" / name), pd.read_csv(folder / "tables" / name),
                                      check_dtype=False, rtol=1e-5, obj=name)


def _answer_items(page: str) -> list[str]:
    """The first answer's sentences (its <ul class='answer'>), as text."""
    start = page.index("<ul class='answer'>")
    block = page[start:page.index("</ul>", start)]
    return [" ".join(html.unescape(re.sub(r"<[^>]+>", " ", x)).split()) for x in block.split("<li>")[1:]]


@pytest.mark.parametrize("folder", KEPT, ids=[p.name for p in KEPT])
def test_the_stored_first_answer_names_its_yardstick_once_per_job(folder):
    items = _answer_items((folder / "report.html").read_text())
    jobs = [x for x in items if x.startswith("The job")]
    assert jobs and all(x.count("Yardstick: ") == 1 for x in jobs), jobs
    assert sum(x.count("Yardstick: ") for x in items) == len(jobs)
    if folder.name == "low_communication":          # every run learned, on the same data
        assert all("Yardstick: the time to reach the target loss" in x for x in jobs), jobs


SETTING = {None: "all-reduce, plain", "allreduce": "all-reduce, plain", "ps": "parameter server"}
AT = r"^At (\d+ [MG]bit/s)"


def _first_answer_claims(sentences: list[str]) -> dict:
    """(engine, bandwidth, setting) -> (faster or slower than one machine, its sentence), of the 4-node points."""
    claims, engine = {}, None
    for s in sentences:
        if s.startswith("The job"):
            engine = re.match(r"The job \([^,]+, (\w+),", s).group(1)
        head = re.match(AT + r"(?: \(([^)]*)\))?, ", s)
        said = re.search(r"4 one-core machines in [^:;]*: [\d.]+× (slower|faster)", s)
        if head and said:
            setting = SETTING.get(head.group(2), f"all-reduce, {(head.group(2) or '').split(', ', 1)[-1]}")
            claims[(engine, head.group(1), setting)] = (said.group(1), s)
    return claims


def _elsewhere_claims(sentences: list[str]) -> dict:
    """(engine, bandwidth, setting) -> faster or slower than one machine, from "What would make it pay off here"."""
    claims = {}
    for s in sentences:
        best = re.match(AT + r" \((\w+)\), the fastest way to the target was (.+?) on \d+ nodes: [^,]+, [\d.]+× "
                             r"(slower|faster) than one machine", s)
        other = re.match(AT + r" \((\w+)\), .*?the fastest distributed setting, (.+?), was [\d.]+× (slower|faster) "
                              r"than one machine", s)
        for m in (best, other):
            if m:
                claims[(m.group(2), m.group(1), m.group(3))] = m.group(4)
    return claims


def test_no_setting_is_faster_in_the_first_answer_and_slower_elsewhere_on_the_same_link():
    """low_communication's stored tables: where the first answer and the pay-off section judge the same setting
    on the same link against one machine, they agree, or the answer's sentence says both and why."""
    from analysis.report.sections import answer
    from analysis.tables import payoff, tables

    exp = tables.load_experiment(REFERENCES / "low_communication")
    first = _first_answer_claims(answer.answer_sentences(exp, answer.section_tables(exp)))
    elsewhere = _elsewhere_claims(payoff.payoff_sentences(payoff.per_setting(payoff.per_run(exp)),
                                                          payoff.left_out(exp)))
    both = [k for k in elsewhere if k in first]
    assert ("pytorch", "100 Mbit/s", "all-reduce, powersgd rank 4") in both, (first.keys(), elsewhere)
    for key in both:
        way, sentence = first[key]
        if way != elsewhere[key]:
            assert re.search(r"process samples [\d.]+× \w+ but learn \w+ from each: they reach the target [\d.]+× "
                             r"\w+ \(.+\)", sentence), (key, sentence)
    powersgd = first[("pytorch", "100 Mbit/s", "all-reduce, powersgd rank 4")][1]
    assert "3.11× slower" in powersgd and "process samples 1.18× faster but learn less from each" in powersgd


def _first_section(page: str) -> str:
    """The report's first section: from its heading to the next one."""
    start = page.index("<h2>Does distributed training pay off here?</h2>")
    return page[start:page.index("<h2>", start + 4)]


def _words(part: str) -> int:
    return len(html.unescape(re.sub(r"<[^>]+>", " ", part)).split())


WORDS = 150         # the first section of one job's report (the main job's), the table included


@pytest.mark.parametrize("folder", KEPT, ids=[p.name for p in KEPT])
def test_the_stored_first_section_is_a_figure_a_table_and_a_few_sentences(folder):
    """Each stored report opens with the answer at a glance: the figure, the table (bandwidth x node count, the
    table of tables/glance.csv), at most one sentence per job and bandwidth, the break-even in at most one
    sentence; at most WORDS words besides the table per job, and for one job of one setting WORDS in all."""
    first = _first_section((folder / "report.html").read_text())
    assert "<figure class='answer'><img src='figures/answer.png'" in first
    assert (folder / "figures" / "answer.png").is_file()
    table = re.search(r"<table class='glance .*?</table>", first, re.S)
    assert table, first[:2000]
    glance = pd.read_csv(folder / "tables" / "glance.csv")
    jobs = glance.groupby(["model", "engine", "batch_per_worker", "fixed"], dropna=False)
    sentences = re.findall(r"<ul class='glance'>(.*?)</ul>", first, re.S)[0].count("<li>")
    assert sentences <= sum(g["bw_bps"].nunique() for _, g in jobs)
    assert first.count("class='break-even'") <= 1 and first.count("PREDICTION") <= 1
    assert _words(first.replace(table.group(0), "")) <= WORDS * len(jobs)
    if len(jobs) == 1 and set(glance["setting"]) <= {"one machine", "all-reduce, plain"}:
        assert _words(first) <= WORDS
    assert "<ul class='answer'>" not in first and "PREDICTION of the cost model, fitted on" not in first


def test_the_main_jobs_table_gives_the_ratios_of_times_to_the_target_recomputed_from_runs_and_steps():
    """The stored main job (topologies/default.yaml) learns, so its yardstick is the time to the target loss; its
    table's factors are one machine's time over each point's, recomputed here from runs.csv and steps.csv alone
    (the counted runs: fidelity ok; the target the highest of their lowest means of 5 consecutive losses; a run's
    time the sum of its lead task's step times up to the first step whose mean of the last 5 is at or below it; a
    point's the mean over its repeats), within 5 %."""
    folder = REFERENCES / "default"
    runs = pd.read_csv(folder / "runs.csv")
    steps = pd.read_csv(folder / "steps.csv")
    counted = runs[runs["fidelity"] == "ok"]
    lead = steps[(steps["kind"] == "step") & (steps["task_index"] == 0) & steps["run_id"].isin(counted["run_id"])]
    curves = {r: s.sort_values("t") for r, s in lead.groupby("run_id")}
    for s in curves.values():                       # every run learned, well beyond the 3 % of the yardstick
        assert s["loss"].iloc[-max(1, len(s) // 10):].mean() < 0.7 * s["loss"].head(5).mean()
    smooth = {r: s["loss"].rolling(5).mean().to_numpy() for r, s in curves.items()}
    target = max(float(pd.Series(m).min()) for m in smooth.values())
    timed = {r: float(curves[r]["time_s"].iloc[:int(np.flatnonzero(m <= target)[0]) + 1].sum())
             for r, m in smooth.items()}
    glance = pd.read_csv(folder / "tables" / "glance.csv")
    assert set(glance["yardstick"]) == {"time to target"} and glance["target_loss"].iloc[0] == pytest.approx(target)
    judged = glance[(glance["hosts"] > 1) & glance["factor"].notna()]
    assert len(judged) >= 3
    mean = lambda hosts, bw: np.mean([timed[r] for r in counted[(counted["hosts"] == hosts)  # noqa: E731
                                                                 & (counted["bw_bps"] == bw)]["run_id"]])
    for _, g in judged.iterrows():     # over the repeats: one machine's mean time over the point's
        assert g["factor"] == pytest.approx(mean(1, g["bw_bps"]) / mean(g["hosts"], g["bw_bps"]), rel=0.05), g.to_dict()
    for (bw, hosts), point in runs.groupby(["bw_bps", "hosts"]):     # a point none of whose runs read ok
        row = glance[(glance["bw_bps"] == bw) & (glance["hosts"] == hosts)]
        if (point["fidelity"] != "ok").all():
            assert row["verdict"].tolist() == ["not counted (degraded)"]
        else:
            assert row["runs"].tolist() == [(point["fidelity"] == "ok").sum()]


def test_the_glance_table_calls_no_setting_faster_than_the_pay_off_section_calls_slower():
    """low_communication's first section (its table, tables/glance.csv) and "What would make it pay off here" judge
    each setting on each link against one machine the same way."""
    from analysis.tables import glance as glance_table, payoff, tables

    exp = tables.load_experiment(REFERENCES / "low_communication")
    elsewhere = _elsewhere_claims(payoff.payoff_sentences(payoff.per_setting(payoff.per_run(exp)),
                                                          payoff.left_out(exp)))
    g = glance_table.table(exp)
    g = g[(g["hosts"] == 4) & g["factor"].notna()]
    checked = 0
    for (engine, bw, setting), way in elsewhere.items():
        row = g[(g["engine"] == engine) & (g["bw_bps"].map(payoff.mbit) == bw) & (g["setting"] == setting)]
        if len(row):
            checked += 1
            assert ("faster" if row["factor"].iloc[0] > 1 else "slower") == way, (engine, bw, setting)
    assert checked >= 3


def test_the_mixed_machines_factors_are_the_steady_samples_ratios_recomputed_from_runs():
    """topologies/heterogeneous.yaml's stored results (fixed steps, so the answer's yardstick is the projected time
    at steady samples/s): tables/mixed_balance.csv's factor of each balancing setting against plain synchronous
    training, the asynchronous parameter server and one machine on each link is the ratio of the counted runs'
    mean steady samples/s (fidelity ok; one machine's on the same link), recomputed here from runs.csv alone; the
    report's Mixed machines section says what balancing bought on each link where a balanced point counted."""
    folder = REFERENCES / "heterogeneous"
    runs = pd.read_csv(folder / "runs.csv")
    counted = runs[(runs["status"] == "ok") & (runs["fidelity"] == "ok")]
    setting = np.where(counted["hosts"] == 1, "one machine", np.where(counted["strategy"] == "ps", "parameter server",
                                                                      counted["balance"].fillna("none")))
    sps = counted.assign(setting=setting).groupby(["bw_bps", "setting"])["steady_samples_per_s"].mean()
    table = pd.read_csv(folder / "tables" / "mixed_balance.csv")
    assert set(table["yardstick"]) == {"steady samples/s"}
    page = (folder / "report.html").read_text()
    checked = 0
    for _, r in table[~table["setting"].isin(["none", "parameter server", "one machine"])].iterrows():
        for ref, col in (("none", "vs_plain"), ("parameter server", "vs_ps"), ("one machine", "vs_one_machine")):
            if (r["bw_bps"], ref) in sps:
                assert r[col] == pytest.approx(sps[(r["bw_bps"], r["setting"])] / sps[(r["bw_bps"], ref)]), r.to_dict()
                checked += 1
        if np.isfinite(r["vs_plain"]):
            bw = f"{r['bw_bps'] / 1e9:g} Gbit/s" if r["bw_bps"] >= 1e9 else f"{r['bw_bps'] / 1e6:g} Mbit/s"
            assert html.escape(f"What balancing bought at {bw}: balance ") in page
    assert checked >= 2
