"""The pair report: the thesis's condition (shared) against its faithful twin (budgets)."""
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis.comparisons import compare
from analysis.tables import speedup, tables
from test_steady import as_new_results

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """faithful_shared and faithful_budgets as the runner now records them: (shared, budgets). Their steady
    step is 0.9 x time_per_step_s x nodes, so that steady throughput (a step trains nodes x 32 samples) falls
    with the nodes as the fixtures' time per step rises."""
    out = []
    for name in ("faithful_shared", "faithful_budgets"):
        folder = tmp_path_factory.mktemp("pair") / name
        shutil.copytree(FIXTURES / name, folder)
        as_new_results(folder, step_of=lambda r: 0.9 * r["time_per_step_s"] * r["hosts"])
        out.append(folder)
    return tuple(out)


def _rate(folder, hosts, bw, degraded=False):
    """Mean steady samples/s of a point (degraded runs left out unless asked)."""
    runs = pd.read_csv(folder / "runs.csv")
    runs = runs if degraded else runs[~runs["fidelity"].str.startswith("degraded")]
    return runs[(runs["hosts"] == hosts) & (runs["bw_bps"] == bw)]["steady_samples_per_s"].mean()


def test_slowdowns_are_the_inverse_of_the_reports_steady_speedup(pair):
    shared, budgets = pair
    table = compare.compare(shared, budgets)
    bws = sorted(pd.read_csv(shared / "runs.csv")["bw_bps"].unique())
    assert sorted(table["bw_bps"]) == bws and (table["nodes"] == 4).all()
    summary = {side: speedup.summary(tables.counted_runs(tables.load_experiment(folder))).set_index(["hosts", "bw_bps"])
               for side, folder in zip(("shared", "faithful"), pair)}
    for r in table.itertuples():
        s = _rate(shared, 1, r.bw_bps) / _rate(shared, 4, r.bw_bps)
        f = _rate(budgets, 1, r.bw_bps) / _rate(budgets, 4, r.bw_bps)
        assert r.shared_slowdown == pytest.approx(s) and r.faithful_slowdown == pytest.approx(f)
        assert r.shared_slowdown == pytest.approx(1 / summary["shared"].loc[(4, r.bw_bps), "speedup"])
        assert r.faithful_slowdown == pytest.approx(1 / summary["faithful"].loc[(4, r.bw_bps), "speedup"])
        assert r.share_cpu == pytest.approx(1 - (f - 1) / (s - 1))
        assert r.share_network == pytest.approx(1 - r.share_cpu) and r.note == ""
        assert r.fixed == "steps"


def test_degraded_twin_run_counts_only_when_asked(pair):
    shared, budgets = pair
    bw = 200e6
    counted = compare.compare(shared, budgets, include_degraded=True).set_index("bw_bps")
    assert counted.loc[bw, "faithful_samples_per_s_n"] == pytest.approx(_rate(budgets, 4, bw, degraded=True))
    assert compare.compare(shared, budgets).set_index("bw_bps").loc[bw, "faithful_samples_per_s_n"] == \
        pytest.approx(_rate(budgets, 4, bw))


def test_results_without_step_timings_have_no_slowdown_to_compare():
    table = compare.compare(FIXTURES / "faithful_shared", FIXTURES / "faithful_budgets")
    assert table.empty and list(table.columns) == compare.COLUMNS


def test_clipping_and_undefined_share_are_explained():
    assert compare.cpu_share(3.0, 2.0) == (0.5, "")
    share, note = compare.cpu_share(2.0, 3.0)
    assert share == 0.0 and "slowed down more" in note
    share, note = compare.cpu_share(2.0, 0.9)
    assert share == 1.0 and "did not slow down" in note
    share, note = compare.cpu_share(0.95, 1.2)
    assert np.isnan(share) and "nothing to attribute" in note


def test_pair_in_either_order_and_refused_when_not_a_pair(tmp_path, pair):
    SHARED, BUDGETS = pair
    shared, faithful = compare.ordered(BUDGETS, SHARED)
    assert (shared.name, faithful.name) == ("faithful_shared", "faithful_budgets")
    with pytest.raises(ValueError, match="one experiment with compute 'shared' and one with 'budgets'"):
        compare.ordered(SHARED, SHARED)
    old = tmp_path / "old"
    shutil.copytree(FIXTURES / "report_small", old)
    with pytest.raises(ValueError):
        compare.ordered(old, SHARED)                      # older results read as shared too
    assert compare.compute_mode(tables.load_experiment(old)) == "shared"


def test_pair_report_sentences_and_files(tmp_path, pair):
    SHARED, BUDGETS = pair
    path = compare.write_pair_report(BUDGETS, SHARED, tmp_path / "pair")
    html = path.read_text()
    table = pd.read_csv(tmp_path / "pair" / "compare.csv")
    assert len(table) == 3
    for r in table.itertuples():
        assert (f"4 nodes were {r.shared_slowdown:.3g}× slower than one in steady throughput with the nodes sharing "
                f"the machine and {r.faithful_slowdown:.3g}× slower with every node held to its own cores: about "
                f"{r.share_cpu:.0%} of the shared slowdown came from sharing the CPU and {r.share_network:.0%} from "
                "the network") in html
    assert "faithful_shared (the thesis&#x27;s condition): What was emulated: the nodes shared" in html
    assert "the inverse of the steady speedup" in html and "Both ran same steps per worker" in html
    assert f"(median {table['share_cpu'].median():.0%})" in html


def test_pair_without_common_points_says_so(pair):
    SHARED, BUDGETS = pair
    exp_s, exp_f = tables.load_experiment(SHARED), tables.load_experiment(BUDGETS)
    exp_f.runs = exp_f.runs[exp_f.runs["hosts"] > 1]               # no 1-node point in the twin
    table = compare.compare(exp_s, exp_f)
    assert table.empty
    assert "cannot be compared" in compare.sentences(table, exp_s, exp_f)[-1]


# -- the command line: run_experiment.py compare SHARED_DIR FAITHFUL_DIR [--out DIR] ----------------
def test_cli_writes_the_pair_report(tmp_path, capsys, pair):
    SHARED, BUDGETS = pair
    from testbed.cli.results import compare as compare_command
    out = tmp_path / "pair"
    assert compare_command.main([str(SHARED), str(BUDGETS), "--out", str(out)]) == 0
    assert capsys.readouterr().out.strip() == str(out / "compare.html")
    got, want = pd.read_csv(out / "compare.csv", keep_default_na=False), compare.compare(SHARED, BUDGETS)
    assert list(got.columns) == compare.COLUMNS and len(got) == len(want)
    for column in ("bw_bps", "nodes", "shared_slowdown", "faithful_slowdown", "share_cpu", "shared_samples_per_s_1"):
        assert got[column].astype(float).tolist() == pytest.approx(want[column].tolist())
    assert "faithful_budgets (its faithful twin)" in (out / "compare.html").read_text()


def test_cli_default_out_is_the_twins_folder_whatever_the_order(tmp_path, capsys, pair):
    SHARED, BUDGETS = pair
    from testbed.cli.results import compare as compare_command
    shared, twin = tmp_path / "shared", tmp_path / "twin"
    shutil.copytree(SHARED, shared)
    shutil.copytree(BUDGETS, twin)
    assert compare_command.main([str(twin), str(shared)]) == 0
    assert capsys.readouterr().out.strip() == str(twin / "compare" / "compare.html")
    assert (twin / "compare" / "compare.csv").is_file() and not (shared / "compare").exists()


def test_cli_include_degraded_and_errors(tmp_path, capsys, pair):
    SHARED, BUDGETS = pair
    from testbed.cli.results import compare as compare_command
    out = tmp_path / "a"
    assert compare_command.main([str(SHARED), str(BUDGETS), "--out", str(out), "--include-degraded"]) == 0
    got = pd.read_csv(out / "compare.csv")
    want = compare.compare(SHARED, BUDGETS, include_degraded=True)
    assert got["faithful_samples_per_s_n"].tolist() == pytest.approx(want["faithful_samples_per_s_n"].tolist())
    assert compare_command.main([str(SHARED), str(SHARED), "--out", str(tmp_path / "b")]) == 2
    assert "one experiment with compute 'shared' and one with 'budgets'" in capsys.readouterr().err
    assert compare_command.main([str(SHARED), str(tmp_path / "nowhere")]) == 2
    assert "no runs.csv" in capsys.readouterr().err
    assert not (tmp_path / "b").exists()


def test_compare_is_a_command_of_run_experiment():
    from testbed.cli import COMMANDS, parser
    assert "compare" in [c.name for c in COMMANDS]
    args = parser().parse_args(["compare", "x", "y", "--out", "z"])
    assert (args.command, str(args.shared), str(args.faithful), str(args.out)) == ("compare", "x", "y", "z")
