"""predict: what-if from the fitted cost model (arguments, the grid, the command line)."""
from pathlib import Path

import pandas as pd
import pytest

from analysis import costmodel, predict
from testbed.cli import predict as predict_command

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
    want = model.step("ps", 2, 1.6e6, 1e7 * model.rho, servers=1, shards=1, shared=False,
                      fractions=[1.0, 1.0], work=1.6e6 * 32)
    assert row["time_per_step_s"] == pytest.approx(want)
    assert row["samples_per_s"] == pytest.approx(32 / want)
    ar = g[(g["nodes"] == 4) & (g["strategy"] == "allreduce")].iloc[0]
    assert ar["samples_per_s"] == pytest.approx(4 * 32 / ar["time_per_step_s"])
    # one node is the speedup's baseline; better = more samples per second at that point
    assert g.loc[g["nodes"] == 1, "speedup"].item() == pytest.approx(1.0)
    for _, rows in g.groupby("nodes"):
        assert (rows["better"] == rows.loc[rows["samples_per_s"].idxmax(), "strategy"]).all()


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
    assert shared["time_per_step_s"].item() > sep["time_per_step_s"].item()


def test_main_writes_table_and_figure(tmp_path, capsys):
    out = tmp_path / "pred"
    rc = predict_command.main([str(FIXTURE), "--nodes", "1,2,4,...,64", "--bw", "10mbit,1gbit", "--cpu", "1,1/0.5",
                       "--out", str(out)])
    assert rc == 0
    text = capsys.readouterr().out
    assert "cost model from" in text and "better" in text and "predict.png" in text
    table = pd.read_csv(out / "predict.csv")
    assert set(table["nodes"]) == {1, 2, 4, 8, 16, 32, 64}
    assert set(table["cpu"]) == {"1", "1/0.5"}
    assert set(table["strategy"]) == {"allreduce", "ps"}
    assert (table["time_per_step_s"] > 0).all()
    png = out / "predict.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 20_000
    assert predict_command.main([str(tmp_path / "nowhere")]) == 2
    assert predict_command.main([str(FIXTURE), "--strategy", "gossip", "--out", str(out)]) == 2


def test_cli_subcommand(tmp_path):
    import run_experiment
    assert run_experiment.main(["predict", str(FIXTURE), "--nodes", "1,2", "--bw", "1gbit",
                                "--out", str(tmp_path)]) == 0
    assert (tmp_path / "predict.csv").is_file()
