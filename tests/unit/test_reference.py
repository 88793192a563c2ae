"""A run against stored reference results (`report DIR --compare REFERENCE`), and the thesis's
findings beside what an experiment measured (thesis_vs_measured)."""
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from analysis import report
from analysis.comparisons import reference, thesis
from analysis.tables import speedup, tables
from test_steady import as_new_results

REPO = Path(__file__).resolve().parents[2]
SMALL = REPO / "tests" / "fixtures" / "report_small"
RATE = "steady_samples_per_s"


def _copy(tmp_path, name, change=None) -> Path:
    """report_small as the runner now records it (steady columns), changed by `change`."""
    folder = tmp_path / name
    shutil.copytree(SMALL, folder)
    as_new_results(folder)
    if change is not None:
        change(pd.read_csv(folder / "runs.csv")).to_csv(folder / "runs.csv", index=False)
    return folder


def _slower_two_nodes(runs):
    runs.loc[(runs["hosts"] == 2) & (runs["bw_bps"] == 10_000_000), RATE] /= 1.8
    return runs


def _five_slower_repeats(runs):
    """The 2-node point at 10 Mbit/s run 5 times, 1.8 x slower: enough repeats to judge against 2."""
    point = (runs["hosts"] == 2) & (runs["bw_bps"] == 10_000_000)
    extra = pd.concat([runs[point].iloc[[0]].assign(run_id=f"extra-{i}", repeat=9 + i) for i in range(3)])
    runs = pd.concat([runs, extra], ignore_index=True)
    runs.loc[runs["run_id"].str.startswith("extra-") | point.reindex(runs.index, fill_value=False), RATE] /= 1.8
    return runs


def _without_four(runs):
    return runs[runs["hosts"] != 4]


def _row(table, metric, hosts, bw, strategy="allreduce"):
    [row] = table[(table["metric"] == metric) & (table["hosts"] == hosts) & (table["bw_bps"] == bw)
                  & (table["strategy"] == strategy)].itertuples()
    return row


def test_a_point_outside_the_reference_range_differs_beyond_the_spread(tmp_path):
    ref = tables.load_experiment(_copy(tmp_path, "ref"))
    mine = tables.load_experiment(_copy(tmp_path, "mine", _five_slower_repeats))
    table = reference.against(ref, mine)
    moved = _row(table, RATE, 2, 10_000_000)
    runs = pd.read_csv(ref.path / "runs.csv")
    base = runs[(runs["hosts"] == 2) & (runs["bw_bps"] == 10_000_000) & (runs["status"] == "ok")][RATE]
    assert (moved.reference_runs, moved.reference_min, moved.reference_max) == (len(base), base.min(), base.max())
    assert moved.yours_runs == 5 and moved.verdict == "lower beyond the spread"
    assert moved.ratio == pytest.approx((2 * base.mean() + 3 * base.iloc[0]) / 1.8 / 5 / base.mean())
    others = table[(table["metric"] == RATE) & ~((table["hosts"] == 2) & (table["bw_bps"] == 10_000_000))]
    assert set(others["verdict"]) == {reference.WITHIN}
    # the speedup compared is each side's own summary's (the figure its report states)
    compared = _row(table, "speedup", 2, 10_000_000)
    summary = speedup.summary(tables.counted_runs(mine)).set_index(["strategy", "hosts", "bw_bps"])
    assert compared.yours_mean == pytest.approx(summary.loc[("allreduce", 2, 10_000_000), "speedup"])
    assert compared.yours_max == pytest.approx(summary.loc[("allreduce", 2, 10_000_000), "speedup_max"])
    said = " ".join(reference.sentences(table, ref, mine))
    assert "Steady samples per second: 11 configurations measured on both sides" in said
    assert "1 differs beyond the spread" in said and "10 Mbit/s, allreduce, 2 nodes" in said and ", lower)" in said


def test_ranges_apart_with_two_repeats_a_side_are_too_few_to_judge(tmp_path):
    ref = tables.load_experiment(_copy(tmp_path, "ref"))
    mine = tables.load_experiment(_copy(tmp_path, "mine", _slower_two_nodes))
    table = reference.against(ref, mine)
    assert _row(table, RATE, 2, 10_000_000).verdict == reference.TOO_FEW
    said = " ".join(reference.sentences(table, ref, mine))
    assert "none differs from the reference beyond the spread of the repeats where it could be judged" in said
    assert "the ranges lie apart at 1 configuration (10 Mbit/s, allreduce, 2 nodes)" in said
    assert "by chance alone 33% of the time, so no verdict" in said


def test_within_the_spread_only_where_the_ranges_overlap():
    side = lambda n, lo, hi: pd.Series({"runs": n, "mean": (lo + hi) / 2, "min": lo, "max": hi})
    assert reference.verdict(side(2, 1.0, 2.0), side(2, 1.9, 3.0)) == reference.WITHIN
    assert reference.verdict(side(3, 1.0, 2.0), side(3, 2.1, 3.0)) == "higher beyond the spread"
    assert reference.verdict(side(2, 1.0, 2.0), side(5, 0.5, 0.6)) == "lower beyond the spread"
    assert reference.verdict(side(2, 1.0, 2.0), side(2, 2.1, 3.0)) == reference.TOO_FEW     # apart 1 time in 3
    assert reference.verdict(side(2, 1.0, 2.0), side(1, 0.5, 0.5)) == reference.TOO_FEW
    assert reference.verdict(side(1, 1.0, 1.0), side(1, 5.0, 5.0)) == reference.NO_SPREAD
    assert reference.verdict(side(0, float("nan"), float("nan")), side(1, 5.0, 5.0)) == reference.ONLY


def test_points_measured_on_one_side_only_are_named(tmp_path):
    ref = tables.load_experiment(_copy(tmp_path, "ref"))
    mine = tables.load_experiment(_copy(tmp_path, "mine", _without_four))
    table = reference.against(ref, mine)
    assert set(table[table["hosts"] == 4]["verdict"]) == {reference.ONLY}
    said = " ".join(reference.sentences(table, ref, mine))
    assert "Measured in the reference only (no ok run in yours): " in said and "4 nodes" in said


def test_a_different_number_of_steps_is_said_to_explain_the_times(tmp_path):
    ref = tables.load_experiment(_copy(tmp_path, "ref"))
    fewer = tables.load_experiment(_copy(tmp_path, "mine", lambda runs: runs.assign(steps=runs["steps"] // 2)))
    said = " ".join(reference.sentences(reference.against(ref, fewer), ref, fewer))
    steps = sorted({f"{v:g}" for v in ref.runs["steps"].dropna()})
    assert f"The reference ran with steps per run {', '.join(steps)} and yours with" in said
    same = tables.load_experiment(_copy(tmp_path, "same"))
    assert "steps per run" not in " ".join(reference.sentences(reference.against(ref, same), ref, same))


def test_report_compare_on_two_folders_writes_the_section_figure_and_table(tmp_path):
    ref, mine = _copy(tmp_path, "ref"), _copy(tmp_path, "mine", _five_slower_repeats)
    done = subprocess.run([sys.executable, str(REPO / "run_experiment.py"), "report", "--compare", str(ref), str(mine)],
                          capture_output=True, text=True, cwd=REPO, timeout=300)
    assert done.returncode == 0, done.stderr
    page = (mine / "report.html").read_text()
    assert "Against the reference results" in page and "figures/against_reference.png" in page
    assert (mine / "figures" / "against_reference.png").stat().st_size > 10_000
    stored = pd.read_csv(mine / "tables" / "against_reference.csv")
    assert (stored[stored["metric"] == RATE]["verdict"] == "lower beyond the spread").sum() == 1
    again = subprocess.run([sys.executable, str(REPO / "run_experiment.py"), "report", str(mine)],
                           capture_output=True, text=True, cwd=REPO, timeout=300)
    assert again.returncode == 0 and "Against the reference" not in (mine / "report.html").read_text()
    assert not (mine / "tables" / "against_reference.csv").exists()
    missing = subprocess.run([sys.executable, str(REPO / "run_experiment.py"), "report", "--compare",
                              str(tmp_path / "nowhere"), str(mine)], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert missing.returncode == 2 and "nowhere" in missing.stderr and "Traceback" not in missing.stderr


def test_thesis_side_by_side_from_the_tables(tmp_path):
    exp = tables.load_experiment(_copy(tmp_path, "small"))
    derived = report.derived_tables(exp)
    side = thesis.side_by_side(exp, derived).set_index("figure")
    assert list(side.index) == ["set-up", "15, 18", "17"]
    assert (side["thesis"] == pd.Series(thesis.THESIS)[side.index]).all()
    checks = derived["iperf_checks"]
    median = (checks["measured_bps"] / checks["configured_bps"]).median()
    assert f"{median:.3f} of the configured rate" in side.loc["17", "measured"]
    s = derived["summary"]
    ten = s[(s["strategy"] == "allreduce") & (s["bw_bps"] == 10_000_000)].set_index("hosts")
    rate = exp.runs[(exp.runs["strategy"] == "allreduce") & (exp.runs["bw_bps"] == 10_000_000)
                    & (exp.runs["status"] == "ok")].groupby("hosts")[RATE].mean()
    assert ten.loc[4, "speedup"] == pytest.approx(rate[4] / rate[1])
    assert (f"10 Mbit/s (allreduce): 4 nodes {rate[1] / rate[4]:.3g}× slower than one in steady throughput, "
            "training time grew with every node") in side.loc["15, 18", "measured"]


def test_one_node_against_two_is_a_row_where_the_sweep_ran_both(tmp_path):
    exp = tables.load_experiment(_copy(tmp_path, "two", _without_four))
    side = thesis.side_by_side(exp, report.derived_tables(exp)).set_index("figure")
    assert "19" in side.index and side.loc["19", "measured"].startswith("One node against two")


def test_keep_reference_copies_what_the_report_reads_and_nothing_else(tmp_path):
    sys.path.insert(0, str(REPO / "scripts"))
    import keep_reference
    source = _copy(tmp_path, "source")
    run = next(p for p in (source / "runs").iterdir() if p.is_dir())
    (run / "events-worker-0.jsonl").write_text("{}\n")
    (run / "model").mkdir()
    (run / "model" / "weights.h5").write_bytes(b"x" * 1000)
    dest = keep_reference.keep(source, tmp_path / "kept")
    assert sorted(p.name for p in dest.glob("*.csv")) == sorted(p.name for p in source.glob("*.csv"))
    kept = {p.relative_to(dest).as_posix() for p in (dest / "runs").rglob("*") if p.is_file()}
    assert kept == {p.relative_to(source).as_posix() for p in (source / "runs").rglob("*")
                    if p.is_file() and p.name in keep_reference.RUN_FILES}
    assert f"runs/{run.name}/topology.json" in kept and not any("model" in k or "jsonl" in k for k in kept)
    runs = pd.DataFrame({"started_at": ["2026-11-25T08:00:00+00:00", "2026-11-25T08:05:00+00:00"],
                         "wall_time_s": [100.0, 60.0]})
    assert keep_reference.duration_s(runs) == 360.0
