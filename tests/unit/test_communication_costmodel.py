"""The cost model's communication term and predict's --communication (analysis/model/costmodel,
analysis/model/predict.py)."""
import pandas as pd
import pytest

from analysis.model import costmodel, predict


def test_the_cost_models_communication_term_takes_the_setting():
    model = costmodel.default_model()
    plain = model.terms("ddp", 4, 8e6, 1e7)
    half = model.terms("ddp", 4, 8e6, 1e7, bytes_factor=0.5)
    every8 = model.terms("ddp", 4, 8e6, 1e7, sync_every=8)
    p = model.fits["ddp"].params
    bandwidth = p["gamma"] * 1.5 * 8e6 / 1e7
    assert plain["comm_s"] - half["comm_s"] == pytest.approx(bandwidth / 2)
    assert every8["comm_s"] == pytest.approx(plain["comm_s"] / 8)
    assert half["compute_s"] == plain["compute_s"]
    assert model.terms("ps", 3, 8e6, 1e7, bytes_factor=0.5)["comm_s"] == model.terms("ps", 3, 8e6, 1e7)["comm_s"]


def test_predict_reads_a_setting():
    assert predict.parse_setting("fp16") == predict.Setting("fp16", 0.5)
    assert predict.parse_setting(None) == predict.Setting()
    assert predict.parse_setting("sync:8") == predict.Setting("local SGD every 8", 1.0, 8)
    assert predict.parse_setting("0.1").bytes_factor == 0.1
    feats = pd.DataFrame({"run_id": ["r0"], "model": ["mlp"]})
    psgd = predict.parse_setting("powersgd:4", feats, {"r0": {"workload": {"model_params": {}}}})
    assert psgd.name == "powersgd rank 4" and psgd.bytes_factor == pytest.approx(7794 / 269_322)
    for bad in ("zip", "sync:0", "2", "powersgd:x"):
        with pytest.raises(ValueError):
            predict.parse_setting(bad, feats, {})
    with pytest.raises(ValueError, match="built-in mlp or cnn"):
        predict.parse_setting("powersgd:4", feats, {})
