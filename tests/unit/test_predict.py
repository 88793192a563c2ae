"""predict: what-if from the fitted cost model (arguments, the grid in steady samples/s and speedup,
the break-even, the command line)."""
import json
import re
from pathlib import Path

import pandas as pd
import pytest

from analysis.model import costmodel, predict
from analysis.tables import tables
from test_costmodel import synthetic, with_steps
from testbed.cli.results import predict as predict_command

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "report_small"


# -- arguments -------------------------------------------------------------------------------
def test_parse_nodes():
    assert predict.parse_nodes("1,2,4,...,1024") == [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]
    assert predict.parse_nodes("2,4,...,10") == [2, 4, 6, 8, 10]
    assert predict.parse_nodes("1,2,...,5") == [1, 2, 3, 4, 5]
    assert predict.parse_nodes("1,3,9,...,100") == [1, 3, 9, 27, 81, 100]   # the end is always in
    assert predict.parse_nodes("4, 2,3") == [2, 3, 4]
    for bad in ("0,1", "1,...,8", "1,2,...", "a"):
        with pytest.raises(ValueError):
            predict.parse_nodes(bad)


def test_parse_cpus_and_bandwidths():
    assert predict.parse_cpus("1,0.5,1/0.25") == [(1.0,), (0.5,), (1.0, 0.25)]
    assert predict.parse_cpus(None) == [(1.0,)]
    with pytest.raises(ValueError):
        predict.parse_cpus("0")
    assert predict_command.parse_bandwidths("10mbit,1gbit") == [10_000_000, 1_000_000_000]
    with pytest.raises(ValueError):
        predict_command.parse_bandwidths("10mbps")   # bytes per second for tc: refused as everywhere


# -- the grid --------------------------------------------------------------------------------
def _model():
    return costmodel.default_model()


def test_grid_matches_the_model_and_says_the_better_strategy():
    model = _model()
    g = predict.predict_grid(model, [1, 2, 4, 8], [10_000_000], ref_s_bits=1.6e6, ref_batch=32)
    # ps needs a coordinator and a server besides a worker: no ps row below 3 nodes
    assert set(g.loc[g["nodes"] < 3, "strategy"]) == {"allreduce"}
    row = g[(g["nodes"] == 4) & (g["strategy"] == "ps")].iloc[0]
    assert row["workers"] == 2 and row["servers"] == 1
    want = model.terms("ps", 2, 1.6e6, 1e7 * model.rho, servers=1, shards=1, shared=False,
                       fractions=[1.0, 1.0], work=1.6e6 * 32)
    assert row["steady_step_s"] == pytest.approx(want["steady_s"])
    assert row["warmup_s"] == pytest.approx(want["warmup_s"])
    # ps: a step is one worker's closure, one worker's batch; all-reduce: the global batch
    assert row["samples_per_step"] == 32 and row["steady_samples_per_s"] == pytest.approx(32 / want["steady_s"])
    ar = g[(g["nodes"] == 4) & (g["strategy"] == "allreduce")].iloc[0]
    assert ar["samples_per_step"] == 128
    assert ar["steady_samples_per_s"] == pytest.approx(4 * 32 / ar["steady_step_s"])
    # one node is the speedup's baseline; better = more steady samples per second at that point
    assert g.loc[g["nodes"] == 1, "speedup"].item() == pytest.approx(1.0)
    for _, rows in g.groupby("nodes"):
        assert (rows["better"] == rows.loc[rows["steady_samples_per_s"].idxmax(), "strategy"]).all()


def test_speedup_is_the_ratio_of_predicted_steady_samples_per_s_and_the_job_adds_the_warm_up():
    model = costmodel.fit_features(synthetic())
    g = predict.predict_grid(model, [1, 2, 3, 4, 8, 64], [10_000_000, 1_000_000_000], ref_s_bits=1.6e6,
                             ref_batch=32, steps=500)
    for bw, rows in g.groupby("bw_bps"):
        one = rows[(rows["nodes"] == 1) & (rows["strategy"] == "allreduce")]["steady_samples_per_s"].item()
        assert one == pytest.approx(32 / model.terms("allreduce", 1, 1.6e6, bw * model.rho, shared=False,
                                                     fractions=[1.0], work=1.6e6 * 32)["steady_s"])
        # both strategies over the same baseline: one node alone
        assert rows["speedup"].to_numpy() == pytest.approx(rows["steady_samples_per_s"].to_numpy() / one)
        assert rows["efficiency"].to_numpy() == pytest.approx(rows["speedup"].to_numpy() / rows["nodes"].to_numpy())
    # the job: 500 steps of one node (500 x 32 samples), its time warm-up + samples / steady samples/s
    assert (g["job_samples"] == 500 * 32).all()
    assert g["job_time_s"].to_numpy() == pytest.approx(
        (g["warmup_s"] + 16000 / g["steady_samples_per_s"]).to_numpy())
    assert "time_per_step_s" not in g and "samples_per_s" not in g      # nothing with the warm-up folded in


def _synthetic_feats(family="allreduce", hosts=(1, 2, 4), bws=(1e8,), servers=0):
    rows = [dict(run_id=f"{family}-{n}-{bw:g}", family=family, strategy=family, hosts=n,
                 workers=n - (1 + servers if family == "ps" else 0), servers=servers, shards=max(servers, 1),
                 s_bits=8e6, batch=32.0, bw_bps=bw, bw_meas_bps=bw * 0.9, shared=True, fractions="")
            for n in hosts for bw in bws]
    return pd.DataFrame(rows)


def _ring_model(c=0.01, gamma=1.0):
    """All-reduce with no latency: N machines beat one exactly when N > 2*gamma*S / (c*B)."""
    p = dict(c=c, gamma=gamma, alpha=0.0, w=1.0, v=0.0, beta=0.0)
    fits = {k: costmodel.StrategyFit(dict(costmodel.DEFAULTS[k]), 0) for k in costmodel.STRATEGIES}
    fits["allreduce"] = costmodel.StrategyFit(p, 6)
    return costmodel.CostModel(fits=fits, cores=2.0, u=1.0, rho=0.9, rtt_s=0.0, work=8e6 * 32)


def test_break_even_where_the_models_crossing_is_known():
    model = _ring_model()
    feats = _synthetic_feats()
    text = predict.break_even(model, feats)
    # at 100 Mbit/s configured, 90 Mbit/s measured: N > 2 * 8e6 / (0.01 * 9e7) = 17.8, so from 18
    nodes, *bandwidths = text
    assert "PREDICTION of the cost model, fitted on 3 all-reduce runs of 1-4 nodes at 100 Mbit/s" in nodes
    assert "at 100 Mbit/s (90 Mbit/s measured), 18 or more machines of 1 core beat one machine's steady " \
           "samples/s" in nodes
    sp = lambda n: n * 0.01 / (0.01 + 2 * (n - 1) / n * 8e6 / 9e7)       # noqa: E731
    assert sp(17) < 1 < sp(18) and f"{sp(18):.2g}x with 18" in nodes
    # per measured node count: N machines beat one from B > 2 * S / (c * N) of goodput, / rho configured
    assert len(bandwidths) == 2
    for n, sentence in zip((2, 4), bandwidths):
        cross = 2 * 8e6 / (0.01 * n) / 0.9
        assert sentence.startswith("PREDICTION of the cost model")
        assert f"{n} machines of 1 core beat one machine's steady samples/s from about " \
               f"{predict.mbit(float(f'{cross:.2g}'))} of link bandwidth" in sentence


def test_the_break_even_in_one_labelled_sentence():
    """The report's first section says the break-even once: per measured bandwidth the fewest machines that beat
    one machine's steady samples/s, as the sentences of break_even do, labelled a PREDICTION."""
    feats = _synthetic_feats(bws=(1e8, 1e9))
    line = predict.break_even_line(_ring_model(), feats)
    assert line.startswith("Break-even (a PREDICTION of the cost model, by steady samples/s): ")
    first = [int(re.search(r"at \d+ \w+/s \(.*?\), (\d+) or more", t).group(1))
             for t in predict.break_even(_ring_model(), feats)[:2]]
    assert line.endswith(f"one-core machines beat one with {first[0]}+ at 100 Mbit/s, {first[1]}+ at 1 Gbit/s.")
    never = predict.break_even_line(_ring_model(c=1e-5), feats)
    assert never.endswith("one-core machines beat one with none up to 1024 at 100 Mbit/s and 1 Gbit/s.")
    assert predict.break_even_line(_ring_model(), _synthetic_feats(hosts=(1,))) == ""


def test_break_even_says_so_when_more_machines_never_beat_one():
    model = _ring_model(c=1e-5)            # compute negligible: the network always loses
    nodes, two, four = predict.break_even(model, _synthetic_feats())
    assert "no number of machines of 1 core from 2 to 1024 beats one machine's steady samples/s" in nodes
    assert "2 machines of 1 core do not beat one machine's steady samples/s at any link bandwidth from " \
           "1 Mbit/s to 100 Gbit/s" in two
    # measured under budgets of 2 cores per node: machines of 2 cores
    budgets = _synthetic_feats().assign(shared=False, fractions=lambda f: [json.dumps([1.0] * w) for w in f["workers"]])
    assert "machines of 2 cores" in predict.break_even(model, budgets)[0]
    # a strategy without a multi-worker run has no break-even; an experiment without a fit none at all
    assert predict.break_even(model, _synthetic_feats(hosts=(1,))) == []


def test_break_even_sentences_of_an_experiment(tmp_path):
    exp = tables.load_experiment(with_steps(FIXTURE, tmp_path / "exp"))
    text = predict.break_even_sentences(exp)
    assert text and all(t.startswith("PREDICTION of the cost model, fitted on ") for t in text)
    assert any("ps runs of 4 nodes" in t for t in text) and any("all-reduce runs of 1-4 nodes" in t for t in text)
    empty = tmp_path / "none"
    with_steps(FIXTURE, empty, only=set())
    assert predict.break_even_sentences(tables.load_experiment(empty)) == []


def test_heterogeneous_cpu_slowest_worker_sets_allreduce_not_ps():
    model = _model()
    even = predict.predict_grid(model, [6], [1_000_000_000], cpus=[(1.0,)], ref_s_bits=1.6e6, ref_batch=32)
    mixed = predict.predict_grid(model, [6], [1_000_000_000], cpus=[(1.0, 0.05)], ref_s_bits=1.6e6,
                                 ref_batch=32)
    ar = [d.loc[d["strategy"] == "allreduce", "steady_step_s"].item() for d in (even, mixed)]
    ps = [d.loc[d["strategy"] == "ps", "steady_step_s"].item() for d in (even, mixed)]
    assert ar[1] / ar[0] > ps[1] / ps[0] >= 1.0   # all-reduce waits for the slow half, ps does not
    assert mixed["cpu"].iloc[0] == "1/0.05"


def test_shared_machine_is_slower_than_separate_machines():
    model = _model()
    sep = predict.predict_grid(model, [8], [1_000_000_000], strategies=["allreduce"], ref_s_bits=1.6e6)
    shared = predict.predict_grid(model, [8], [1_000_000_000], strategies=["allreduce"], shared=True,
                                  ref_s_bits=1.6e6)
    assert shared["steady_step_s"].item() > sep["steady_step_s"].item()


def test_main_writes_table_and_figure(tmp_path, capsys):
    out = tmp_path / "pred"
    exp = with_steps(FIXTURE, tmp_path / "exp")
    rc = predict_command.main([str(exp), "--nodes", "1,2,4,...,64", "--bw", "10mbit,1gbit", "--cpu", "1,1/0.5",
                               "--steps", "100", "--out", str(out)])
    assert rc == 0
    text = capsys.readouterr().out
    assert "cost model from" in text and "better" in text and "predict.png" in text
    assert "job_time_s: warm-up + 3200 samples / steady samples/s" in text
    table = pd.read_csv(out / "predict.csv")
    assert set(table["nodes"]) == {1, 2, 4, 8, 16, 32, 64}
    assert set(table["cpu"]) == {"1", "1/0.5"}
    assert set(table["strategy"]) == {"allreduce", "ps"}
    assert (table["steady_samples_per_s"] > 0).all() and (table["job_time_s"] > table["warmup_s"]).all()
    png = out / "predict.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 20_000
    assert predict_command.main([str(tmp_path / "nowhere")]) == 2
    assert predict_command.main([str(exp), "--strategy", "gossip", "--out", str(out)]) == 2
    # results without a judged steady state: nothing to fit, said so
    bare = with_steps(FIXTURE, tmp_path / "bare", only=set())
    assert predict_command.main([str(bare), "--out", str(out)]) == 2
    assert "no successful run whose steady state was judged" in capsys.readouterr().err


def test_measured_points_are_drawn_as_their_steady_speedup(tmp_path):
    exp = tables.load_experiment(with_steps(FIXTURE, tmp_path / "exp"))
    pts = predict.measured_points(costmodel.evaluate(exp, cores=2))
    one = pts[(pts["workers"] == 1) & (pts["bw_bps"] == 1e8)]["measured_samples_per_s"].mean()
    two = pts[(pts["hosts"] == 2) & (pts["bw_bps"] == 1e8)]
    assert two["measured_speedup"].to_numpy() == pytest.approx(two["measured_samples_per_s"].to_numpy() / one)
    # ps (no one-node ps run) against the one-node all-reduce run at its bandwidth
    ps = pts[(pts["family"] == "ps") & (pts["bw_bps"] == 1e8)]
    assert ps["measured_speedup"].notna().all()


def test_cli_subcommand(tmp_path):
    import run_experiment
    assert run_experiment.main(["predict", str(FIXTURE), "--nodes", "1,2", "--bw", "1gbit",
                                "--out", str(tmp_path)]) == 0
    assert (tmp_path / "predict.csv").is_file()


def test_a_mixed_cluster_steps_at_its_slowest_node_unless_balanced():
    model = _model()
    kw = dict(ref_s_bits=1.6e6, ref_batch=32, strategies=("allreduce",))
    even = predict.predict_grid(model, [4], [1_000_000_000], cpus=[(1.0,)], **kw).iloc[0]
    mixed = predict.predict_grid(model, [4], [1_000_000_000], cpus=[(1.0, 1.0, 0.5, 0.25)], **kw).iloc[0]
    balanced = predict.predict_grid(model, [4], [1_000_000_000], cpus=[(1.0, 1.0, 0.5, 0.25)], balance="static",
                                    **kw).iloc[0]
    assert mixed["balance"] == "none" and balanced["balance"] == "static"
    assert mixed["steady_samples_per_s"] < balanced["steady_samples_per_s"] < even["steady_samples_per_s"]
    slow = model.terms("allreduce", 4, 1.6e6, 1e9 * model.rho, fractions=[1, 1, 0.5, 0.25], shared=False,
                       work=1.6e6 * 32)
    fair = model.terms("allreduce", 4, 1.6e6, 1e9 * model.rho, fractions=[1, 1, 0.5, 0.25], shared=False,
                       work=1.6e6 * 32, balanced=True)
    # balanced: every worker at the mean speed's pace, N / sum(1 / slowdown), not the slowest's
    assert fair["compute_s"] < slow["compute_s"] and slow["slowdown"] >= fair["slowdown"]
    assert fair["slowdown"] == pytest.approx(4 / sum(1 / s for s in
                                                     costmodel.slowdowns(4, model.u, model.cores, [1, 1, 0.5, 0.25],
                                                                         False)))
