"""The thesis files' faithful twins (topologies/thesis_*_faithful.yaml): the same experiment with one-core
nodes and dilation auto, the factor their comment states, and the command that compares the pair."""
import re
from pathlib import Path

import pytest

from testbed.emulation import dilation
from testbed.spec import expand_points, load_spec

TOPOLOGIES = Path(__file__).resolve().parents[2] / "topologies"
TWINS = sorted(TOPOLOGIES.glob("thesis_*_faithful.yaml"))


def _original(twin: Path) -> Path:
    return twin.with_name(twin.name.replace("_faithful", ""))


def test_every_thesis_file_that_sweeps_nodes_has_a_twin():
    sweeping = [p for p in TOPOLOGIES.glob("thesis_*.yaml") if "_faithful" not in p.name
                and "topology.hosts" in load_spec(p, _remote_addresses(p)).sweep.axes]
    local = [p for p in sweeping if "remote" not in p.name]           # real machines: no budgets, no dilation
    assert {p.name for p in local} >= {"thesis_fig15.yaml", "thesis_fig18.yaml"}
    assert sorted(_original(t) for t in TWINS) == sorted(local)


def _remote_addresses(path: Path) -> list[str]:
    if "remote" not in path.name:
        return []
    return ["topology.host.remote.address=10.1.1.11", "topology.host_overrides.h1.remote.address=10.1.1.10"]


@pytest.mark.parametrize("twin", TWINS, ids=lambda p: p.stem)
def test_twin_is_its_original_with_one_core_nodes_and_dilation_auto(twin):
    original, faithful = load_spec(_original(twin)), load_spec(twin)
    assert original.topology.host.cores is None and original.emulation.dilation == 1
    assert faithful.topology.host.cores == 1 and faithful.emulation.dilation == "auto"
    assert faithful.name == original.name + "-faithful"
    a, b = original.model_dump(), faithful.model_dump()
    for d in (a, b):
        del d["name"], d["description"], d["emulation"], d["topology"]["host"]["cores"]
    assert a == b


@pytest.mark.parametrize("twin", TWINS, ids=lambda p: p.stem)
def test_twin_comment_states_its_factor_and_the_compare_command(twin):
    text, faithful = twin.read_text(), load_spec(twin)
    largest = max(point.spec.topology.hosts for point in expand_points(faithful))
    stated = re.search(r"x([0-9.]+) on 2 cores", text)
    assert stated and float(stated.group(1)) == dilation.choose([[1.0] * largest], 2)
    original = load_spec(_original(twin))
    assert f"run_experiment.py compare results/{original.name} results/{faithful.name}" in text
    assert f"(twin: {twin.name})" in _original(twin).read_text()
