"""The communication methods' registry (workloads/communication/): the methods it finds, a method registered
from elsewhere (fake_comm_method.py) taken by validate on its engines and refused on the others, and used by
predict and the report; the docs list every method."""
from pathlib import Path

import pytest

import fake_comm_method
import workloads.communication as comm
from analysis.model import communication, costmodel, predict
from spec_helpers import load, one

REPO = Path(__file__).resolve().parents[2]
FILE = """
name: fake
topology: {{hosts: 4}}
workload:
  engine: {engine}
  strategy: allreduce
  communication:
    compression: eighth
"""


@pytest.fixture
def eighth():
    comm.register(fake_comm_method)
    yield fake_comm_method
    comm.unregister(fake_comm_method.NAME)


def test_the_methods_found_and_their_defaults():
    assert list(comm.METHODS)[:5] == ["none", "fp16", "bf16", "powersgd", "local_sgd"]
    assert comm.names()[:4] == ["none", "fp16", "bf16", "powersgd"]
    assert comm.defaults() == {"compression": "none", "rank": 4, "start_step": 10, "sync_every": 1, "outer": None}


def test_validate_takes_a_registered_method_on_its_engines_only(tmp_path, eighth):
    exp = load(tmp_path, FILE.format(engine="pytorch"))
    assert exp.workload.communication.compression == "eighth" and exp.workload.communication.in_force()
    found = one(tmp_path, FILE.format(engine="tensorflow"))
    assert (found.line, found.key) == (7, "workload.communication.compression")
    assert "an eighth runs under pytorch" in found.message and "engine: pytorch" in found.message


def test_an_unregistered_name_is_refused_with_the_known_ones(tmp_path):
    found = one(tmp_path, FILE.format(engine="pytorch"))
    assert found.line == 7 and "'eighth' is not one of none, fp16, bf16, powersgd" in found.message


def test_predict_and_the_report_use_its_theory(eighth):
    setting = predict.parse_setting("eighth")
    assert setting == predict.Setting("eighth", 0.125, 1)
    grid = predict.predict_grid(costmodel.default_model(), [4], [1e7], ("allreduce",), setting=setting)
    plain = predict.predict_grid(costmodel.default_model(), [4], [1e7], ("allreduce",))
    assert grid["communication"].tolist() == ["eighth"]
    assert grid["steady_step_s"].iloc[0] < plain["steady_step_s"].iloc[0]
    assert communication.plan("mlp", None, "allreduce", 2, {"compression": "eighth"}).after == 4 * 269_322 / 8
    assert communication.label({"compression": "eighth"}) == "eighth"
    assert "eighth" in predict.methods.predict_forms()


def test_a_method_with_new_keys_registered_after_the_spec_read_them_is_refused():
    class Late:
        NAME, KEY, KEYS = "late", "compression", {"level": comm.Key(1)}
    with pytest.raises(ValueError, match="new keys"):
        comm.register(Late)
    assert "late" not in comm.METHODS


def test_the_docs_list_every_method():
    text = (REPO / "docs" / "communication.md").read_text()
    for m in comm.METHODS.values():
        row = f"| `{m.NAME}` | `{m.CHOOSE}` | {', '.join(m.ENGINES)} | {m.DOC} |"
        assert row in text, f"docs/communication.md's table of methods lacks: {row}"
