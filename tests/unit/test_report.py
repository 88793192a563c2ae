"""Report from the committed fixture tables: files, numbers, missing data, figure data."""
import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis import report
from analysis.comparisons import thesis
from analysis.figures import figures
from analysis.report.markup import table_html
from analysis.report.sections import trend
from analysis.tables import speedup, tables
from analysis.text import mbit
from test_steady import as_new_results
from testbed.cli.results import report as report_command

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "report_small"
CAPTION = FIXTURE.parent / "report_caption"  # made-up caption runs with evals.csv (figure 14)
ALL_FIGURES = [n for n in figures.FIGURES if n not in ("bleu", "timeline", "convergence")]  # no evals.csv,
# faults.csv, nor ps steps (tests/unit/test_stability.py draws convergence)


@pytest.fixture
def exp_dir(tmp_path):
    """The fixture as the runner now records it (runs.csv with the steady columns)."""
    dst = tmp_path / "report-small"
    shutil.copytree(FIXTURE, dst)
    as_new_results(dst)
    return dst


@pytest.fixture(scope="module")
def standard(tmp_path_factory):
    """One report built from an untouched copy: (exp_dir, html_path, {figure: (path, plotted)})."""
    dst = tmp_path_factory.mktemp("built") / "report-small"
    shutil.copytree(FIXTURE, dst)
    as_new_results(dst)
    returned = {}

    def recording(name, func):
        def wrapper(exp, outdir):
            returned[name] = func(exp, outdir)
            return returned[name]
        return wrapper

    wrapped = {name: (recording(name, func), caption)
               for name, (func, caption) in figures.FIGURES.items()}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(figures, "FIGURES", wrapped)
        html_path = report.build_report(dst)
    return dst, html_path, returned


@pytest.fixture
def built(standard):
    """(exp_dir, html_path) of the shared standard build (read-only)."""
    exp_dir, html_path, _ = standard
    return exp_dir, html_path


@pytest.fixture
def drawn(standard):
    """figure name -> the DataFrame of numbers that figure drew in the standard build."""
    return {name: res[1] for name, res in standard[2].items()}


def _only_figures(monkeypatch, *names):
    """Let build_report draw only the named figures (the ones a test asserts on)."""
    monkeypatch.setattr(figures, "FIGURES", {n: figures.FIGURES[n] for n in names})


def _ok(exp_dir):
    runs = pd.read_csv(exp_dir / "runs.csv")
    return runs[runs["status"] == "ok"]


def test_every_figure_written_and_referenced(built):
    exp_dir, html_path = built
    assert html_path == exp_dir / "report.html"
    html = html_path.read_text()
    for name in ALL_FIGURES:
        png = exp_dir / "figures" / f"{name}.png"
        assert png.is_file(), name
        assert png.stat().st_size > 15_000, name  # a real plot, not an empty canvas
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"figures/{name}.png" in html
    for caption in ("thesis figures 15 and 18", "thesis figure 17", "thesis figure 19"):
        assert caption in html


def test_summary_table_equals_pandas(built):
    exp_dir, _ = built
    ok = _ok(exp_dir)
    got = pd.read_csv(exp_dir / "tables" / "summary.csv")
    want = ok.groupby(["strategy", "hosts", "bw_bps"])["training_time_s"].agg(["mean", "std", "size"])
    assert len(got) == len(want)
    for _, r in got.iterrows():
        w = want.loc[(r["strategy"], r["hosts"], r["bw_bps"])]
        assert r["time_mean_s"] == pytest.approx(w["mean"])
        assert r["time_std_s"] == pytest.approx(w["std"])
        assert r["n_runs"] == w["size"]


def test_failed_run_excluded_from_means(built):
    exp_dir, _ = built
    runs = pd.read_csv(exp_dir / "runs.csv")
    sel = (runs["strategy"] == "allreduce") & (runs["hosts"] == 4) & (runs["bw_bps"] == 1e7)
    assert (runs.loc[sel, "status"] == "failed").sum() == 1
    got = pd.read_csv(exp_dir / "tables" / "summary.csv")
    row = got[(got["strategy"] == "allreduce") & (got["hosts"] == 4) & (got["bw_bps"] == 1e7)]
    assert row["n_runs"].item() == 2
    assert row["time_mean_s"].item() == pytest.approx(
        runs.loc[sel & (runs["status"] == "ok"), "training_time_s"].mean())


def test_speedup_and_efficiency_equal_pandas(built):
    """The speedup is steady samples/s over the one-node configuration's (means over repeats), with the
    range from this point's slowest repeat over one node's fastest to its fastest over one node's slowest."""
    exp_dir, _ = built
    ok = _ok(exp_dir)
    rate = ok.groupby(["strategy", "bw_bps", "hosts"])["steady_samples_per_s"].agg(["mean", "min", "max"])
    got = pd.read_csv(exp_dir / "tables" / "summary.csv")
    for _, r in got[got["strategy"] == "allreduce"].iterrows():
        here, one = rate.loc[("allreduce", r["bw_bps"], r["hosts"])], rate.loc[("allreduce", r["bw_bps"], 1)]
        assert r["speedup"] == pytest.approx(here["mean"] / one["mean"])
        assert (r["speedup_min"], r["speedup_max"]) == pytest.approx((here["min"] / one["max"], here["max"] / one["min"]))
        assert r["efficiency"] == pytest.approx(r["speedup"] / r["hosts"])
    # ps has no 1-node run: its baseline is the 1-node all-reduce run at the same bandwidth
    ps = got.query("strategy == 'ps'")
    assert (ps["baseline_strategy"] == "allreduce").all()
    for _, r in ps.iterrows():
        assert r["baseline_samples_per_s"] == pytest.approx(rate.loc[("allreduce", r["bw_bps"], 1), "mean"])
        assert r["speedup"] == pytest.approx(rate.loc[("ps", r["bw_bps"], r["hosts"]), "mean"]
                                             / rate.loc[("allreduce", r["bw_bps"], 1), "mean"])
    # the projection: warm-up + the job (the file's epochs x samples per epoch at one node) at steady samples/s
    warm = ok.groupby(["strategy", "bw_bps", "hosts"])["warmup_s"].mean()
    for _, r in got.iterrows():
        key = (r["strategy"], r["bw_bps"], r["hosts"])
        assert r["projected_time_s"] == pytest.approx(warm.loc[key] + r["job_samples"] / rate.loc[key, "mean"])
        assert r["projected_time_min_s"] <= r["projected_time_s"] <= r["projected_time_max_s"]


def test_report_lists_counts_failures_and_trend(built):
    exp_dir, html_path = built
    html = html_path.read_text()
    runs = pd.read_csv(exp_dir / "runs.csv")
    n_ok = (runs["status"] == "ok").sum()
    assert f"{n_ok} ok" in html
    assert f"{len(runs) - n_ok} failed" in html
    assert "report-small" in html
    reason = runs.loc[runs["status"] == "failed", "reason"].item()
    assert reason in html
    # the trend sentence must agree with the numbers
    ok = _ok(exp_dir)
    means = ok[ok["strategy"] == "allreduce"].groupby(["bw_bps", "hosts"])["training_time_s"].mean()
    for bw in means.index.levels[0]:
        grows = bool((np.diff(means.loc[bw].to_numpy()) > 0).all())
        label = mbit(bw)
        assert (f"At {label} (allreduce) training time grows with every node added" in html) == grows
    assert "This matches the thesis" in html


def test_trend_text_reports_a_mismatch(exp_dir):
    runs = pd.read_csv(exp_dir / "runs.csv")
    sel = (runs["hosts"] == 4) & (runs["bw_bps"] == 1e9)
    runs.loc[sel, "training_time_s"] = 0.5  # 4 nodes faster than 1 node
    runs.to_csv(exp_dir / "runs.csv", index=False)
    # the report's trend section is exactly these sentences (no figure is needed for them)
    exp = tables.load_experiment(exp_dir)
    text = "\n".join(trend.trend_text(exp, report.derived_tables(exp)))
    assert "At 1 Gbit/s (allreduce) training time does not change monotonically" in text
    assert "does NOT fully match the thesis" in text
    assert "This matches the thesis" not in text


def test_html_tables_are_the_csv_tables(built):
    exp_dir, html_path = built
    html = html_path.read_text()
    frames = report.derived_tables(tables.load_experiment(exp_dir))
    assert {f"{n}.csv" for n in frames} == {p.name for p in (exp_dir / "tables").glob("*.csv")}
    for name, df in frames.items():
        back = pd.read_csv(exp_dir / "tables" / f"{name}.csv")
        pd.testing.assert_frame_equal(df.reset_index(drop=True), back, check_dtype=False)
        assert table_html(name, df) in html, name


def test_figure_data_matches_input(built, drawn):
    exp_dir, _ = built
    ok = _ok(exp_dir)

    plotted = drawn["training_time"]
    want = ok.groupby(["strategy", "bw_bps", "hosts"])["training_time_s"].mean()
    for _, r in plotted.iterrows():
        assert r["time_mean_s"] == pytest.approx(want.loc[(r["strategy"], r["bw_bps"], r["hosts"])])

    plotted = drawn["bandwidth_checks"]
    checks = pd.read_csv(exp_dir / "checks.csv").query("tool == 'iperf3'")
    assert sorted(plotted["measured_mbps"]) == pytest.approx(sorted(checks["measured_bps"] / 1e6))
    assert sorted(plotted["configured_mbps"]) == pytest.approx(sorted(checks["configured_bps"] / 1e6))

    plotted = drawn["wire_bytes"]
    for _, r in plotted.iterrows():
        src = ok.set_index("run_id").loc[r["run_id"]]
        assert r["bytes_per_worker_step"] == pytest.approx(
            src["net_bytes_total"] / src["steps"] / src["workers"])
        if src["strategy"] == "allreduce":
            n = src["workers"]
            assert r["theory_bytes_per_worker_step"] == pytest.approx(
                2 * (n - 1) / n * src["gradient_bytes"])

    plotted = drawn["strategies"]
    assert set(plotted["strategy"]) == {"allreduce", "ps"}
    assert set(zip(plotted["hosts"], plotted["bw_bps"])) == {(4, 1e7), (4, 1e8)}


def test_resources_filled_from_usage(built, drawn):
    exp_dir, _ = built
    runs = pd.read_csv(exp_dir / "runs.csv")
    usage = pd.read_csv(exp_dir / "usage.csv")
    hole = runs[runs["cpu_mean_pct"].isna() & (runs["status"] == "ok")]
    assert len(hole) == 1  # the fixture leaves one run's resource columns empty
    rid = hole["run_id"].item()
    u = usage[usage["run_id"] == rid]
    cpu = u.groupby("node")["cpu_pct"].mean().mean()
    plotted = drawn["resources"]
    h = hole.iloc[0]
    row = plotted[(plotted["strategy"] == h["strategy"]) & (plotted["hosts"] == h["hosts"])
                  & (plotted["bw_bps"] == h["bw_bps"])]
    other = runs[(runs["strategy"] == h["strategy"]) & (runs["hosts"] == h["hosts"])
                 & (runs["bw_bps"] == h["bw_bps"]) & (runs["run_id"] != rid)]
    assert row["cpu_mean_pct"].item() == pytest.approx((cpu + other["cpu_mean_pct"].item()) / 2)
    per_node = u.groupby("node").agg(tx=("tx_bytes", lambda s: s.max() - s.min()),
                                     rx=("rx_bytes", lambda s: s.max() - s.min()),
                                     span=("t", lambda s: s.max() - s.min()))
    rate = ((per_node["tx"] + per_node["rx"]) * 8 / per_node["span"]).mean()
    assert tables.usage_per_run(usage).set_index("run_id").loc[rid, "net_throughput_mean_bps"] \
        == pytest.approx(rate)


def test_topology_figure_from_json(built, drawn):
    exp_dir, _ = built
    nodes = drawn["topology"]
    topo = json.loads(next(exp_dir.glob("runs/*/topology.json")).read_text())
    hosts = nodes[nodes["kind"] == "host"].set_index("name")
    assert list(hosts.index) == [h["name"] for h in topo["hosts"]]
    assert list(hosts["role"]) == [h["role"] for h in topo["hosts"]]
    assert [link["label"] for link in nodes.attrs["links"]] == ["10mbit"] * 4
    assert (hosts["y"] < nodes.loc[nodes["kind"] == "switch", "y"].min()).all()
    assert hosts["x"].is_unique


def test_layout_two_switches_hosts_below_their_switch():
    topo = {"hosts": [{"name": f"h{i}", "ip": f"10.0.0.{i}", "role": "worker0"} for i in (1, 2, 3)],
            "switches": [{"name": "s1"}, {"name": "s2"}],
            "links": [{"a": "h1", "b": "s1"}, {"a": "s2", "b": "h2"}, {"a": "h3", "b": "s2"},
                      {"a": "s1", "b": "s2"}]}
    nodes = figures.layout(topo).set_index("name")
    assert list(nodes.loc[["h1", "h2", "h3"], "switch"]) == ["s1", "s2", "s2"]
    assert nodes.loc["s1", "x"] < nodes.loc["s2", "x"]
    assert nodes.loc["s2", "x"] == pytest.approx((nodes.loc["h2", "x"] + nodes.loc["h3", "x"]) / 2)
    assert figures.layout(topo).equals(figures.layout(topo))  # deterministic


def test_missing_optional_tables_are_reported(exp_dir):
    # whole-report content with a modified fixture: the one extra full build of this module
    for name in ("checks.csv", "usage.csv", "steps.csv"):
        (exp_dir / name).unlink()
    shutil.rmtree(exp_dir / "runs")
    html = report.build_report(exp_dir).read_text()
    assert "checks.csv is missing" in html
    assert "usage.csv is missing" in html
    assert "Figure <b>bandwidth_checks</b> skipped" in html
    assert "Figure <b>topology</b> skipped: no runs/&lt;run_id&gt;/topology.json" in html
    assert not (exp_dir / "figures" / "bandwidth_checks.png").exists()
    assert (exp_dir / "figures" / "training_time.png").is_file()
    assert (exp_dir / "figures" / "resources.png").is_file()  # from runs.csv columns alone
    assert pd.read_csv(exp_dir / "tables" / "iperf_checks.csv").empty


def test_no_parameter_server_runs_said(exp_dir, monkeypatch):
    runs = pd.read_csv(exp_dir / "runs.csv")
    runs[runs["strategy"] != "ps"].to_csv(exp_dir / "runs.csv", index=False)
    _only_figures(monkeypatch, "strategies")  # the real report, drawing only the figure asserted on
    html = report.build_report(exp_dir).read_text()
    assert "Figure <b>strategies</b> skipped: no parameter-server runs" in html


def test_loader_empty_frames_have_columns(exp_dir):
    (exp_dir / "usage.csv").unlink()
    exp = tables.load_experiment(exp_dir)
    assert exp.missing == ["usage.csv"]
    assert exp.usage.empty and list(exp.usage.columns) == tables.USAGE_COLUMNS


def test_palette_is_one_consistent_mapping(exp_dir):
    exp = tables.load_experiment(exp_dir)
    pal = figures.palette_for(exp)
    bws = sorted(exp.runs["bw_bps"].unique())
    colours = [pal.colour("bw", b) for b in bws]
    assert len(set(colours)) == len(bws)
    assert colours == [figures.palette_for(exp).colour("bw", b) for b in bws]
    assert pal.colour("strategy", "ps") != pal.colour("strategy", "allreduce")
    assert figures.role_kind("ps0+worker1") == "ps" and figures.role_kind("chief0") == "chief"


def test_main_cli(exp_dir, tmp_path, capsys, monkeypatch):
    _only_figures(monkeypatch)  # the CLI is under test here, not the figures (drawn above)
    assert report_command.main([str(exp_dir)]) == 0
    assert capsys.readouterr().out.strip() == str(exp_dir / "report.html")
    assert (exp_dir / "report.html").is_file()
    assert report_command.main([str(tmp_path / "nowhere")]) == 2
    assert "no runs.csv" in capsys.readouterr().err


def test_trend_says_when_the_machine_timers_were_late():
    import pandas as pd
    from analysis.report.sections.network import timer_sentence
    late = pd.DataFrame({"timer_max_ms": [12.0, 700.0], "timer_p99_ms": [2.0, 90.0]})
    assert "up to 700 ms" in timer_sentence(late)[0]
    ok = pd.DataFrame({"timer_max_ms": [3.0], "timer_p99_ms": [1.0]})
    assert "on time" in timer_sentence(ok)[0]
    assert timer_sentence(pd.DataFrame({"run_id": ["a"]})) == []


def test_bleu_figure_and_table_from_evals(tmp_path, monkeypatch):
    exp_dir = tmp_path / "caption"
    shutil.copytree(CAPTION, exp_dir)
    runs = pd.read_csv(exp_dir / "runs.csv")
    evals = pd.read_csv(exp_dir / "evals.csv")
    ok = evals.merge(runs.loc[runs["status"] == "ok", ["run_id", "hosts"]], on="run_id")
    assert len(ok) < len(evals)  # the failed run's rows are left out
    want = ok.groupby(["hosts", "metric", "epoch"])["value"].agg(["mean", "std", "size"])

    path, plotted = figures.bleu(tables.load_experiment(exp_dir), exp_dir / "figures")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 15_000
    assert len(plotted) == len(want) == 2 * 4 * 3  # node counts x metrics x epochs
    for _, r in plotted.iterrows():
        w = want.loc[(r["hosts"], r["metric"], r["epoch"])]
        assert r["value_mean"] == pytest.approx(w["mean"]) and r["n_runs"] == w["size"]
        assert r["value_std"] == pytest.approx(w["std"], nan_ok=True)

    _only_figures(monkeypatch, "bleu")
    html = report.build_report(exp_dir).read_text()
    assert "figures/bleu.png" in html and "reproduces thesis figure 14" in html
    pd.testing.assert_frame_equal(pd.read_csv(exp_dir / "tables" / "bleu.csv"), plotted,
                                  check_dtype=False)
    best = want.loc[(1, "bleu1"), "mean"]
    assert f"With 1 node the best BLEU-1 on the held-out images is {best.max():.3f}, after epoch " \
           f"{best.idxmax()} of 3" in html


def test_bleu_skipped_without_evals(built):
    _, html_path = built
    html = html_path.read_text()
    assert "Figure <b>bleu</b> skipped: no evaluation rows" in html
    assert "evals.csv is missing" not in html  # only caption runs write it


def test_cli_include_degraded_counts_the_degraded_run(tmp_path, capsys, monkeypatch):
    _only_figures(monkeypatch)
    budgets = tmp_path / "budgets"
    shutil.copytree(FIXTURE.parent / "faithful_budgets", budgets)
    runs = as_new_results(budgets)
    degraded = runs[runs["fidelity"].str.startswith("degraded")].iloc[0]
    point = runs[(runs["hosts"] == degraded["hosts"]) & (runs["bw_bps"] == degraded["bw_bps"])]

    def counted(*flags):
        assert report_command.main([str(budgets), *flags]) == 0
        split = pd.read_csv(budgets / "tables" / "time_split.csv")
        return split[(split["hosts"] == degraded["hosts"]) & (split["bw_bps"] == degraded["bw_bps"])].iloc[0]

    left_out, included = counted(), counted("--include-degraded")
    assert left_out["n_runs"] == len(point) - 1 and included["n_runs"] == len(point)
    assert included["steady_step_s"] == pytest.approx(point["steady_step_s"].mean())
    assert left_out["steady_step_s"] == pytest.approx(point.loc[point.index != degraded.name,
                                                                "steady_step_s"].mean())


def test_cli_refuses_a_table_it_cannot_read_in_one_sentence(tmp_path, capsys):
    (tmp_path / "runs.csv").write_text('experiment,run_id\n"unterminated\n')
    assert report_command.main([str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "not a table the testbed writes" in err and "Traceback" not in err and len(err.splitlines()) == 1


def test_run_interrupted_while_drawing_the_report_exits_130_and_says_how_to_draw_it(tmp_path, monkeypatch,
                                                                                    capsys):
    from types import SimpleNamespace

    from testbed.cli import common, run as run_command
    from testbed.run.sweep import sweep

    spec = tmp_path / "x.yaml"
    spec.write_text("name: x\ntopology: {template: star, hosts: 2}\n")
    monkeypatch.setattr(run_command, "need_root", lambda what: None)
    monkeypatch.setattr(run_command, "interrupt_on_signals", lambda: None)
    monkeypatch.setattr(sweep, "run_sweep", lambda *a, **k: SimpleNamespace(
        done=["r0"], failed=[], skipped=[], interrupted=False, run_ids=["r0"], expectations=[]))

    def interrupted(*a, **k):
        raise KeyboardInterrupt
    monkeypatch.setattr(report_command, "draw", interrupted)
    assert common.main_of(run_command.COMMAND, [str(spec), "--out", str(tmp_path / "out")]) == 130
    # the terminal's width wraps the message anywhere, a long folder's name too: read without its spaces
    assert f"report{tmp_path / 'out'}`" in "".join(capsys.readouterr().err.split())


def _two_points(rates: dict) -> pd.DataFrame:
    """Runs of 1 node (single) and 2 (allreduce) at 1 Gbit/s with the given steady samples/s."""
    rows = [dict(run_id=f"{n}-{i}", status="ok", training_time_s=1.0, time_per_step_s=0.1, engine="tensorflow",
                 model="mlp", bw_bps=1e9, bw="1gbit", hosts=n, strategy="single" if n == 1 else "allreduce",
                 global_batch=32 * n, workers=n, steps=40, fixed="data", steady="ok", steady_samples_per_s=v,
                 warmup_s=0.5) for n, values in rates.items() for i, v in enumerate(values)]
    return pd.DataFrame(rows)


def test_one_against_two_states_the_speed_ratio_beside_the_thesis_figure_19():
    """1 node (single) against 2 (allreduce) at 1 Gbit/s, two repeats each: steady samples/s means 300 and
    200, so two nodes were 1.5x slower (the summary's speedup 2/3); a 4-node sweep says nothing of the kind."""
    runs = _two_points({1: [290.0, 310.0], 2: [190.0, 210.0]})
    resources = pd.DataFrame({"engine": "tensorflow", "bw_bps": 1e9, "hosts": [1, 2], "model": "mlp",
                              "batch_per_worker": 32.0, "fixed": "data",
                              "strategy": ["single", "allreduce"], "cpu_mean_pct": [95.0, 60.0],
                              "mem_peak_bytes": [600 * 2**20, 650 * 2**20],
                              "net_throughput_mean_bps": [0.0, 120e6]})
    [said] = thesis.one_against_two(speedup.summary(runs), resources)
    assert said.startswith("One node against two at 1 Gbit/s (allreduce, tensorflow, same data at every node "
                           "count): two nodes were 1.5× slower than one in steady samples per second (300 against "
                           "200, means of 2 and 2 runs; 290-310 and 190-210): the two ranges lie apart, but at 2 "
                           "runs against 2: ranges that far apart come about by chance alone 33% of the time, so no "
                           "verdict (run more repeats, sweep.repeats). Thesis fig. 19: one PC about 55% faster than "
                           "two on a 1 Gbit/s LAN.")
    assert said.endswith("Per node, 1 → 2 nodes: CPU 95 % → 60 %; peak memory 600 MiB → 650 MiB; "
                         "network 0 Mbit/s → 120 Mbit/s.")
    three = _two_points({1: [290.0, 310.0, 290.0], 2: [190.0, 210.0, 190.0]})
    assert "means of 3 and 3 runs; 290-310 and 190-210): beyond the spread of the repeats. Thesis" in \
        thesis.one_against_two(speedup.summary(three), resources)[0]
    close = _two_points({1: [290.0, 310.0], 2: [280.0, 300.0]})
    assert "within the spread of the repeats (their ranges overlap)" in \
        thesis.one_against_two(speedup.summary(close), resources)[0]
    four = pd.concat([runs, runs.assign(hosts=4, run_id=runs["run_id"] + "x")])
    assert thesis.one_against_two(speedup.summary(four), resources) == []
    unjudged = runs.assign(steady=np.where(runs["hosts"] == 2, "too few steady steps to judge: 3 after a 1-step "
                                           "warm-up", "ok"))
    assert "(allreduce, tensorflow, same data at every node count): not judged (too few steady steps to judge: 3" \
        in thesis.one_against_two(speedup.summary(unjudged), resources)[0]


def test_one_bandwidth_judges_the_node_trend_only(exp_dir):
    runs = pd.read_csv(exp_dir / "runs.csv")
    keep = runs["bw_bps"] == runs["bw_bps"].max()
    runs[keep].to_csv(exp_dir / "runs.csv", index=False)
    exp = tables.load_experiment(exp_dir)
    text = "\n".join(trend.trend_text(exp, report.derived_tables(exp)))
    assert "grows with every node added" in text
    assert "whether more bandwidth is faster is not tested here" in text
    assert "does NOT fully match" not in text and "This matches the thesis" not in text
