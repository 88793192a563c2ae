"""Python API: dict specs validated like files (FILE:LINE: KEY errors), results read back."""
from pathlib import Path

import pandas as pd
import pytest
import yaml

from testbed import api
from testbed.run import results
from testbed.spec import SpecError, load_spec

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests" / "fixtures" / "report_small"

SPEC = {"name": "api-test",
        "topology": {"template": "star", "hosts": 2, "link": {"bw": "10mbit"}},
        "workload": {"strategy": "allreduce", "model": "mlp", "epochs": 1, "steps_per_epoch": 5},
        "sweep": {"topology.hosts": [1, 2]}}


def test_dict_loads_like_the_same_file(tmp_path):
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(SPEC, sort_keys=False))
    exp = api.load(SPEC)
    assert exp.model_dump() == load_spec(path).model_dump()
    assert exp.topology.link.bw == 10_000_000
    assert exp.location("topology.link.bw") == ("<dict>", 6)  # after name, topology, template, hosts, link
    assert api.validate(SPEC) == []
    assert api.load(exp) is exp


def test_dict_overrides():
    exp = api.load(SPEC, overrides=["topology.link.bw=50mbit", "workload.epochs=3"])
    assert exp.topology.link.bw == 50_000_000 and exp.workload.epochs == 3


def test_dict_errors_name_key_and_line():
    bad = {"name": "api-test",
           "topology": {"hosts": 2, "link": {"bw": 10}, "swich": {"kind": "ovs"}},
           "workload": {"strategy": "allreduce"}}
    # the dict as YAML:  1 name / 2 topology: / 3 hosts / 4 link: / 5 bw / 6 swich: / 7 kind ...
    issues = api.validate(bad)
    found = {(i.file, i.line, i.key) for i in issues}
    assert ("<dict>", 5, "topology.link.bw") in found
    assert ("<dict>", 6, "topology.swich") in found
    assert any("did you mean 'switch'" in i.message for i in issues)
    with pytest.raises(SpecError) as err:
        api.load(bad)
    assert "<dict>:5: topology.link.bw: " in str(err.value)


def test_override_errors_and_unyamlable_values():
    issues = api.validate(SPEC, overrides=["topology.link.bw=10mbps"])
    assert [(i.line, i.key) for i in issues] == [(1, "topology.link.bw")]
    issues = api.validate({"name": "x", "description": object()})
    assert issues[0].file == "<dict>" and "YAML" in issues[0].message


def test_run_checks_the_spec_then_root(monkeypatch):
    with pytest.raises(SpecError):
        api.run({"name": "x", "workload": {"strategy": "mesh"}})
    monkeypatch.setattr(api.os, "geteuid", lambda: 1000)
    with pytest.raises(PermissionError, match="needs root"):
        api.run(SPEC)


def test_load_results_on_fixture(tmp_path):
    got = api.load_results(FIXTURE)
    assert set(got) == {"runs", "checks", "steps", "usage", "evals", "faults", "link_changes", "tunnels"}
    for name in ("runs", "checks", "steps", "usage"):
        pd.testing.assert_frame_equal(got[name], pd.read_csv(FIXTURE / f"{name}.csv"))
    assert got["evals"].empty and list(got["evals"].columns) == results.EVALS_COLUMNS
    assert (got["runs"]["status"] == "ok").sum() > 0
    with pytest.raises(FileNotFoundError):
        api.load_results(tmp_path / "nowhere")
