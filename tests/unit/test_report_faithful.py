"""Faithful compute in the report: what was emulated, where the time went, what dominates (only from
measured compute), degraded runs marked, listed and left out (fixtures faithful_budgets, faithful_shared;
report_small is an older result without the columns)."""
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis import report
from analysis.figures import figures, run_figures
from analysis.model import costmodel
from analysis.report.sections import trend
from analysis.tables import faithful, tables
from analysis.text import mbit
from test_steady import as_new_results

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
BUDGETS, SHARED, OLD = FIXTURES / "faithful_budgets", FIXTURES / "faithful_shared", FIXTURES / "report_small"
NETWORK_CLAIM = "network dominates"


def _runs(**columns) -> pd.DataFrame:
    base = dict(run_id=["a", "b", "c"], hosts=[1, 2, 4], status="ok")
    base.update(columns)
    return pd.DataFrame(base)


def _text(exp_dir, **kw) -> str:
    exp = tables.load_experiment(exp_dir)
    exp.include_degraded = kw.get("include_degraded", False)
    return "\n".join(trend.trend_text(exp, report.derived_tables(exp)))


def _split(shares, compute="budgets", wire=None):
    """A made-up split: 2 and 4 nodes at 10 Mbit/s, steady steps of 1 s, compute the given shares, the wire
    the given ones (default none)."""
    n = len(shares)
    wire = list(wire) if wire is not None else [0.0] * n
    return pd.DataFrame(dict(model="mlp", strategy="allreduce", hosts=[2, 4][:n], bw_bps=1e7, bw="10mbit",
                             compute=compute, n_runs=1, steady_step_s=1.0, compute_s=list(shares), wire_s=wire,
                             rest_s=[1 - s - w for s, w in zip(shares, wire)], compute_share=list(shares),
                             wire_share=wire, rest_share=[1 - s - w for s, w in zip(shares, wire)]))


@pytest.fixture
def budgets(tmp_path):
    """faithful_budgets as the runner now records it: steady steps of 0.9 x time_per_step_s."""
    folder = tmp_path / "budgets"
    shutil.copytree(BUDGETS, folder)
    as_new_results(folder)
    return folder


# -- what was emulated ---------------------------------------------------------------------------
def test_setup_sentence_budgets_from_fixture():
    runs = pd.read_csv(BUDGETS / "runs.csv")
    k, cores = runs["dilation"].iloc[0], runs["cores"].iloc[0]
    hosts = sorted(runs["hosts"].unique())
    assert faithful.setup_sentence(runs) == (
        f"What was emulated: machines of {cores:g} core each ({hosts[0]}, {hosts[1]} and {hosts[2]} nodes), "
        f"dilation ×{k:g}.")


def test_setup_sentence_each_case():
    four = _runs(hosts=[4, 4, 4], compute="budgets", cores=1.0, dilation=2.5)
    assert faithful.setup_sentence(four) == "What was emulated: 4 machines of 1 core each, dilation ×2.5."
    mixed = _runs(compute="budgets", cores=np.nan, node_cores="h1=2;h2=1", dilation=1.0)
    assert faithful.setup_sentence(mixed) == ("What was emulated: nodes of different sizes (h1=2, h2=1 cores), "
                                              "in real time (dilation ×1).")
    shared = _runs(compute="shared", machine_cores=2, dilation=1.0)
    assert faithful.setup_sentence(shared) == ("What was emulated: the nodes shared this machine's 2 cores "
                                               "without budgets (the thesis's condition).")
    # older results have none of the columns: shared, cores not recorded
    assert "shared the machine's cores without budgets" in faithful.setup_sentence(_runs())


def test_report_states_the_setup_in_its_first_lines(tmp_path):
    exp_dir = tmp_path / "b"
    shutil.copytree(BUDGETS, exp_dir)
    html = report.build_report(exp_dir).read_text()
    sentence = faithful.setup_sentence(pd.read_csv(BUDGETS / "runs.csv"))
    assert html.index(sentence) < html.index(" runs: <b>")     # before the run counts


# -- where the time went -------------------------------------------------------------------------
def test_time_split_equals_pandas_without_degraded_runs(budgets):
    exp = tables.load_experiment(budgets)
    split = faithful.time_split(tables.counted_runs(exp)).set_index(["hosts", "bw_bps"])
    runs = pd.read_csv(budgets / "runs.csv")
    clean = runs[~runs["fidelity"].str.startswith("degraded")]
    want = clean.groupby(["hosts", "bw_bps"])[["steady_step_s", "compute_per_step_s"]].mean()
    assert len(split) == len(want)
    for key, w in want.iterrows():
        got = split.loc[key]
        assert got["steady_step_s"] == pytest.approx(w["steady_step_s"])
        assert got["compute_s"] == pytest.approx(w["compute_per_step_s"])
        assert np.isnan(got["wire_s"])                        # no bytes recorded: the rest holds the wire
        assert got["rest_s"] == pytest.approx(w["steady_step_s"] - w["compute_per_step_s"])
        assert got["compute_share"] == pytest.approx(w["compute_per_step_s"] / w["steady_step_s"])


def test_the_wire_is_the_measured_bytes_at_the_links_rate(tmp_path):
    folder = tmp_path / "small"
    shutil.copytree(OLD, folder)
    runs = as_new_results(folder)
    exp = tables.load_experiment(folder)
    split = faithful.time_split(exp.runs, exp.steps, exp.usage).set_index(["strategy", "hosts", "bw_bps"])
    net = tables.network_per_run(exp.runs, exp.usage).set_index("run_id")["bytes_per_worker_step"]
    ok = runs[runs["status"] == "ok"].assign(wire=lambda r: r["run_id"].map(net) * 8 / r["bw_bps"])
    for (strategy, hosts, bw), rows in ok.groupby(["strategy", "hosts", "bw_bps"]):
        got = split.loc[(strategy, hosts, bw)]
        assert got["wire_s"] == pytest.approx(rows["wire"].mean())
        assert got["rest_s"] == pytest.approx(got["steady_step_s"] - got["compute_s"] - got["wire_s"], nan_ok=True)
        assert got["wire_share"] == pytest.approx(got["wire_s"] / got["steady_step_s"])


def test_time_split_of_older_results_has_no_compute():
    split = faithful.time_split(tables.load_experiment(OLD).runs)
    assert len(split) and split["compute_s"].isna().all() and (split["compute"] == "shared").all()


def test_domination_compute_dominates():
    (text,) = faithful.domination_sentences(_split([0.7, 0.9]))
    assert text.startswith("At every multi-node point measured compute dominates")
    assert "compute 70% to 90%" in text and NETWORK_CLAIM not in text


def test_domination_rest_dominates():
    (text,) = faithful.domination_sentences(_split([0.1, 0.3], wire=[0.2, 0.1]))
    assert text.startswith("At every multi-node point measured the rest dominates: bound by the collective's own "
                           "CPU, latency and waiting, not by the bandwidth")
    assert "compute 10% to 30%, wire 10% to 20%, rest 60% to 70%" in text


def test_domination_tells_a_bandwidth_bound_point_from_a_latency_bound_one():
    (text,) = faithful.domination_sentences(_split([0.1, 0.1], wire=[0.7, 0.2]))
    assert text.startswith("At 10 Mbit/s (allreduce, 2 nodes) the wire dominates: bandwidth-bound")
    assert "; at 10 Mbit/s (allreduce, 4 nodes) the rest dominates" in text


def test_domination_mixed_from_fixture_numbers(budgets):
    exp = tables.load_experiment(budgets)
    split = faithful.time_split(tables.counted_runs(exp))
    multi = split[split["hosts"] > 1]
    text = faithful.domination_sentences(split)[0]
    for bw, rows in multi.groupby("bw_bps"):
        side = "compute dominates" if (rows["compute_share"] >= 0.5).all() else "the rest dominates"
        phrase = f"{mbit(bw)} (allreduce, 2 and 4 nodes)"
        assert phrase in text
        # each bandwidth is named after the verdict its own numbers give
        said = [part for part in text.split("; ") if phrase in part]
        assert len(said) == 1 and side in said[0]


def test_no_measurement_no_claim_and_shared_warning():
    text = _text(OLD)
    assert NETWORK_CLAIM not in text
    assert "No compute time was measured (compute_per_step_s) at a point with a steady step, so this report does " \
        "not say" in text
    assert "includes CPU sharing, not the network alone" in text
    assert "This matches the thesis" in text          # the trend itself is still stated


def test_shared_warning_only_under_shared_compute():
    assert "includes CPU sharing" in _text(SHARED)
    assert "includes CPU sharing" not in _text(BUDGETS)
    for folder in (SHARED, BUDGETS):
        assert NETWORK_CLAIM not in _text(folder)


def test_time_split_figure(tmp_path, budgets):
    exp = tables.load_experiment(budgets)
    path, plotted = figures.time_split(exp, tmp_path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 15_000
    pd.testing.assert_frame_equal(plotted.sort_values(["bw_bps", "hosts"]).reset_index(drop=True),
                                  faithful.time_split(tables.counted_runs(exp))
                                  .sort_values(["bw_bps", "hosts"]).reset_index(drop=True))


# -- degraded runs -------------------------------------------------------------------------------
def _degraded_row():
    runs = pd.read_csv(BUDGETS / "runs.csv")
    row = runs[runs["fidelity"].str.startswith("degraded")]
    assert len(row) == 1
    return row.iloc[0]


def test_degraded_run_left_out_of_tables_trend_and_fit_and_listed(budgets):
    bad = _degraded_row()
    exp_dir = budgets
    html = report.build_report(exp_dir).read_text()
    assert "<h2>Degraded runs</h2>" in html and bad["run_id"] in html
    assert "cpu: 4 nodes asked 4 cores of a 2-core machine; switch: ovs-vswitchd at 100% CPU" in html
    summary = pd.read_csv(exp_dir / "tables" / "summary.csv")
    point = summary[(summary["hosts"] == bad["hosts"]) & (summary["bw_bps"] == bad["bw_bps"])].iloc[0]
    runs = pd.read_csv(BUDGETS / "runs.csv")
    same = runs[(runs["hosts"] == bad["hosts"]) & (runs["bw_bps"] == bad["bw_bps"])]
    clean = same[same["run_id"] != bad["run_id"]]
    assert point["n_runs"] == len(clean)
    assert point["time_mean_s"] == pytest.approx(clean["training_time_s"].mean())
    assert pd.read_csv(exp_dir / "tables" / "degraded_runs.csv")["run_id"].tolist() == [bad["run_id"]]
    cost = pd.read_csv(exp_dir / "tables" / "cost_model.csv")
    assert set(cost.loc[cost["run_id"] == bad["run_id"], "split"]) == {costmodel.DEGRADED_SPLIT}
    # counted when asked
    html = report.build_report(exp_dir, include_degraded=True).read_text()
    assert "counted in the trends" in html
    summary = pd.read_csv(exp_dir / "tables" / "summary.csv")
    point = summary[(summary["hosts"] == bad["hosts"]) & (summary["bw_bps"] == bad["bw_bps"])].iloc[0]
    assert point["n_runs"] == len(same)
    assert point["time_mean_s"] == pytest.approx(same["training_time_s"].mean())


def test_degraded_run_left_out_of_the_cost_model_fit(budgets):
    bad = _degraded_row()
    exp = tables.load_experiment(budgets)
    ev = costmodel.evaluate(exp, cores=2)
    assert bad["run_id"] not in set(ev["in_sample"]["run_id"]) | set(ev["held_out"]["run_id"])
    assert ev["degraded"]["run_id"].tolist() == [bad["run_id"]]
    assert not ev["features"]["degraded"].any()
    counted = costmodel.evaluate(exp, cores=2, include_degraded=True)
    assert bad["run_id"] in set(counted["in_sample"]["run_id"]) and counted["degraded"].empty
    # the outlier moves the fit when it is counted, and only then
    assert counted["model"].fits["allreduce"].params != ev["model"].fits["allreduce"].params
    assert costmodel.fit(exp, cores=2).fits["allreduce"].params == pytest.approx(ev["model"].fits["allreduce"].params)
    assert bad["run_id"] not in set(costmodel.features_of([budgets], cores=2)["run_id"])
    assert bad["run_id"] in set(costmodel.features_of([budgets], cores=2, include_degraded=True)["run_id"])


@pytest.mark.parametrize("include", [False, True])
def test_every_figure_that_draws_runs_crosses_the_degraded_one(tmp_path, monkeypatch, include, budgets):
    bad = _degraded_row()
    crossed = {}
    real = figures.mark_degraded

    def recording(ax, x, y, counted=False):
        crossed.setdefault(ax.figure, []).append((list(np.asarray(x, float)), list(np.asarray(y, float)), counted))
        real(ax, x, y, counted)

    monkeypatch.setattr(figures, "mark_degraded", recording)
    exp = tables.load_experiment(budgets)
    exp.include_degraded = include
    drawn = {}
    for name in ("training_time", "scaling", "time_split", "cost_model"):
        crossed.clear()
        figures.FIGURES[name][0](exp, tmp_path)
        calls = [c for cs in crossed.values() for c in cs if c[0]]
        assert calls, name
        drawn[name] = calls
    hosts, tps, train = bad["hosts"], bad["time_per_step_s"], bad["training_time_s"]
    assert (drawn["training_time"][0][:2], drawn["training_time"][0][2]) == (([hosts], [train]), include)
    assert drawn["time_split"][0][1] == [pytest.approx(0.9 * tps)]            # its steady step
    assert drawn["cost_model"][0][1] == [pytest.approx(0.9 * tps, rel=1e-3)]    # its measured steady step
    assert all(c[0] == [hosts] for c in drawn["scaling"])


def _with_degraded(src, dst, run_ids, reason="cpu: 4 nodes asked 4 cores of a 2-core machine"):
    shutil.copytree(src, dst)
    runs = pd.read_csv(dst / "runs.csv")
    runs["fidelity"] = np.where(runs["run_id"].isin(run_ids), f"degraded: {reason}", "ok")
    runs.to_csv(dst / "runs.csv", index=False)
    return tables.load_experiment(dst)


def test_the_other_figures_cross_degraded_runs_too(tmp_path, monkeypatch):
    crossed = []
    def record(ax, x, y, counted=False):
        crossed.append(len(np.atleast_1d(np.asarray(x))))
    monkeypatch.setattr(figures, "mark_degraded", record)
    monkeypatch.setattr(run_figures, "mark_degraded", record)       # the figures of single runs (BLEU, timeline)
    ar, ps = "h4-bw100mbit-allreduce-r0-3f48d3", "h4-bw100mbit-ps-r0-1da26d"
    shutil.copytree(OLD, tmp_path / "new")
    as_new_results(tmp_path / "new")
    small = _with_degraded(tmp_path / "new", tmp_path / "small", [ar, ps])
    for name in ("bandwidth_checks", "resources", "strategies", "wire_bytes"):
        crossed.clear()
        figures.FIGURES[name][0](small, tmp_path / "fig")
        assert sum(crossed) >= 2, name                          # both degraded runs drawn crossed
    caption = tables.load_experiment(FIXTURES / "report_caption")
    rid = caption.runs.loc[(caption.runs["status"] == "ok") & (caption.runs["hosts"] > 1), "run_id"].iloc[0]
    caption = _with_degraded(FIXTURES / "report_caption", tmp_path / "caption", [rid])
    crossed.clear()
    figures.bleu(caption, tmp_path / "fig")
    assert sum(crossed) == (caption.evals["run_id"] == rid).sum()
    faults = _with_degraded(FIXTURES / "report_faults", tmp_path / "faults", ["link_down-r0-6dc05c"])
    import matplotlib.pyplot as plt
    titles = []
    real_save = run_figures.save
    monkeypatch.setattr(run_figures, "save", lambda fig, path: titles.extend(a.get_title() for a in fig.axes)
                        or real_save(fig, path))
    figures.timeline(faults, tmp_path / "fig")
    plt.close("all")
    assert "run link_down-r0-6dc05c, DEGRADED: cpu: 4 nodes asked 4 cores of a 2-core machine" in titles


def test_setup_sentence_from_the_ok_runs():
    runs = _runs(compute=["budgets", "budgets", np.nan], cores=1.0, dilation=2.0, status=["ok", "ok", "skipped"])
    assert faithful.setup_sentence(runs) == "What was emulated: machines of 1 core each (1 and 2 nodes), dilation ×2."


def test_dilated_times_are_said_to_be_emulated(tmp_path):
    assert "emulated time (wall clock / K)" in faithful.dilation_note(pd.read_csv(BUDGETS / "runs.csv"))
    assert faithful.dilation_note(pd.read_csv(SHARED / "runs.csv")) == ""
    assert faithful.dilation_note(_runs()) == ""


def test_the_split_compares_steady_steps_with_the_probes_steady_steps():
    """time_per_step_s includes the warm-up (the first step builds the training function); the probe does
    not: the split uses the run's steady step, from steps.csv for results recorded before the column, like
    with like; without step timings there is no steady step and nothing is split."""
    runs = pd.DataFrame(dict(run_id=["r"], status="ok", model="mlp", strategy="allreduce", hosts=1, bw_bps=1e7,
                             bw="10mbit", compute="budgets", time_per_step_s=0.1, training_time_s=1.0,
                             compute_per_step_s=0.007, global_batch=32, workers=1, steps=11))
    steps = pd.DataFrame(dict(run_id="r", kind="step", role="worker", task_index=0, step=range(1, 12), epoch=1,
                              t=range(11), time_s=[0.9] + [0.01] * 10))
    split = faithful.time_split(runs, steps)
    assert split["steady_step_s"].iloc[0] == pytest.approx(0.01)
    assert split["compute_share"].iloc[0] == pytest.approx(0.7)           # steady vs steady
    alone = faithful.time_split(runs)
    assert np.isnan(alone["steady_step_s"].iloc[0]) and alone["not_judged"].iloc[0].startswith("no step timings")
