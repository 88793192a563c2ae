"""workload.communication in the experiment file: each refusal at its key and line, naming what works;
sweep.include's points; run ids of files without the setting unchanged."""
import pytest

from spec_helpers import issues, load, one
from testbed.spec import expand_points
from testbed.run.training.training import job_document

BASE = """
name: comm
topology: {{hosts: 4}}
workload:
  engine: {engine}
  strategy: {strategy}
  communication:
    {setting}
"""


def refusal(tmp_path, setting, engine="pytorch", strategy="allreduce"):
    return one(tmp_path, BASE.format(engine=engine, strategy=strategy, setting=setting))


@pytest.mark.parametrize("setting", ["compression: fp16", "compression: bf16", "sync_every: 4",
                                     "{compression: powersgd, rank: 2, start_step: 3}",
                                     "{sync_every: 8, start_step: 0, outer: {lr: 0.7, momentum: 0.9}}"])
def test_pytorch_all_reduce_takes_every_setting(tmp_path, setting):
    exp = load(tmp_path, BASE.format(engine="pytorch", strategy="allreduce", setting=setting))
    assert exp.workload.communication.in_force()


@pytest.mark.parametrize("setting", ["compression: fp16", "compression: bf16", "{sync_every: 4, outer: {lr: 1}}"])
def test_tensorflow_all_reduce_casts_and_averages(tmp_path, setting):
    assert load(tmp_path, BASE.format(engine="tensorflow", strategy="allreduce", setting=setting))


def test_powersgd_is_refused_under_tensorflow_with_what_works(tmp_path):
    found = refusal(tmp_path, "compression: powersgd", engine="tensorflow")
    assert (found.line, found.key) == (7, "workload.communication.compression")
    assert "engine: pytorch" in found.message and "fp16 or bf16" in found.message


@pytest.mark.parametrize("setting, key", [("compression: fp16", "compression"), ("sync_every: 4", "sync_every")])
def test_ps_refuses_compression_and_local_sgd(tmp_path, setting, key):
    found = refusal(tmp_path, setting, engine="tensorflow", strategy="ps")
    assert (found.line, found.key) == (7, f"workload.communication.{key}")
    assert "set strategy allreduce" in found.message


@pytest.mark.parametrize("strategy", ["single", "auto", "switch"])
def test_strategies_without_an_all_reduce_to_change(tmp_path, strategy):
    text = BASE.format(engine="tensorflow", strategy=strategy, setting="compression: fp16")
    found = [i for i in issues(tmp_path, text + ("  epochs: 2\n" if strategy == "switch" else ""))
             if i.key.startswith("workload.communication")]
    assert len(found) == 1 and found[0].line == 7 and "strategy allreduce" in found[0].message


def test_a_setting_without_the_one_it_belongs_to(tmp_path):
    found = issues(tmp_path, BASE.format(engine="pytorch", strategy="allreduce",
                                         setting="{rank: 2, start_step: 3, outer: {lr: 0.5}}"))
    said = {i.key: i.message for i in found}
    assert set(said) == {"workload.communication.rank", "workload.communication.start_step",
                         "workload.communication.outer"}
    assert "compression: powersgd" in said["workload.communication.rank"]
    assert "sync_every" in said["workload.communication.outer"]


def test_compression_and_local_sgd_do_not_combine(tmp_path):
    found = refusal(tmp_path, "{compression: fp16, sync_every: 4}")
    assert found.key == "workload.communication.sync_every" and "choose one" in found.message


def test_powersgd_needs_two_plain_steps_first(tmp_path):
    found = refusal(tmp_path, "{compression: powersgd, start_step: 1}")
    assert found.key == "workload.communication.start_step" and "2 or more" in found.message


def test_unknown_compression_is_a_literal_error_with_its_choices(tmp_path):
    found = refusal(tmp_path, "compression: zip")
    assert found.line == 7 and "none, fp16, bf16, powersgd" in found.message


def test_replayed_compute_and_a_script_are_refused(tmp_path):
    text = BASE.format(engine="pytorch", strategy="allreduce", setting="compression: fp16")
    found = issues(tmp_path, text + "emulation: {compute: replay}\n")
    assert any(i.key == "workload.communication.compression" and "compute: real" in i.message for i in found)
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "train.py").write_text("print(1)\n")
    found = issues(tmp_path, text + "  script: s/train.py\n")
    assert any(i.key == "workload.communication.compression" and "your own script" in i.message for i in found)


def test_a_swept_setting_is_blamed_at_its_sweep_value(tmp_path):
    text = BASE.format(engine="tensorflow", strategy="allreduce", setting="compression: none") + """
sweep:
  workload.communication: [{compression: fp16}, {compression: powersgd}]
"""
    found = one(tmp_path, text)
    assert found.key == "sweep.workload.communication" and found.line == 10
    assert "compression" in found.message and "engine: pytorch" in found.message


def test_the_job_document_carries_the_settings(tmp_path):
    exp = load(tmp_path, BASE.format(engine="pytorch", strategy="allreduce",
                                     setting="{compression: powersgd, rank: 2, start_step: 3}"))
    job = job_document(exp.workload, {"worker": ["10.0.0.1:50501", "10.0.0.2:50501"]})
    assert job["communication"] == {"compression": "powersgd", "rank": 2, "start_step": 3, "sync_every": 1,
                                    "outer": None}


def test_run_ids_of_files_without_the_setting_do_not_change(tmp_path):
    """The plain setting is left out of the hash: these ids were made before workload.communication."""
    text = """
name: ids
topology: {hosts: 2}
sweep: {topology.hosts: [1, 2]}
"""
    assert [p.run_id for p in expand_points(load(tmp_path, text))] == ["h1-r0-e28bc7", "h2-r0-87029a"]


SWEEP = """
name: inc
topology: {hosts: 4, link: {bw: 10mbit}}
workload: {engine: pytorch}
sweep:
  bw: [10mbit, 100mbit]
  workload.communication: [{}, {compression: fp16}, {sync_every: 8, start_step: 4}]
  include:
    - {workload.strategy: single, topology.hosts: 1, bw: 1gbit, workload.communication: {}}
    - {workload.engine: tensorflow, workload.strategy: ps, workload.communication: {}}
  repeats: 2
"""


def test_include_items_are_crossed_with_the_axes_they_do_not_name(tmp_path):
    points = expand_points(load(tmp_path, SWEEP))
    assert len(points) == (2 * 3 + 1 + 2) * 2
    ids = [p.run_id for p in points if p.repeat == 0]
    assert ids[:3] == [i for i in ids if i.startswith("bw10mbit-")][:3]
    assert [i.rsplit("-", 2)[0] for i in ids] == [
        "bw10mbit-plain", "bw10mbit-fp16", "bw10mbit-sync8", "bw100mbit-plain", "bw100mbit-fp16", "bw100mbit-sync8",
        "h1-bw1gbit-plain-single", "bw10mbit-plain-enginetensorflow-ps", "bw100mbit-plain-enginetensorflow-ps"]
    single = next(p for p in points if p.spec.workload.strategy == "single")
    assert single.spec.topology.hosts == 1 and single.params["topology.link.bw"] == "1gbit"


def test_an_include_item_is_checked_at_its_line(tmp_path):
    text = SWEEP.replace("{workload.engine: tensorflow, workload.strategy: ps, workload.communication: {}}",
                         "{workload.engine: tensorflow, workload.strategy: ps}")
    found = issues(tmp_path, text)
    assert {i.line for i in found} == {9} and all(i.key == "sweep.include[1]" for i in found)
    assert "include item #2" in found[0].message and "set strategy allreduce" in found[0].message
    found = one(tmp_path, SWEEP.replace("workload.strategy: single,", "workload.strat: single,"))
    assert (found.line, found.key) == (8, "sweep.include[0].workload.strat") and "strategy" in found.message
    found = one(tmp_path, SWEEP.replace("topology.hosts: 1", "topology.hosts: one"))
    assert found.line == 8 and "include value 'one'" in found.message


def test_a_set_pins_the_include_items_too(tmp_path):
    exp = load(tmp_path, SWEEP, ["topology.link.bw=1gbit", "sweep.repeats=1"])
    points = expand_points(exp)
    assert {p.spec.topology.link.bw for p in points} == {10**9} and len(points) == 3 + 1 + 1


def test_the_bundled_low_communication_file():
    """topologies/low_communication.yaml: PyTorch's four settings at three bandwidths, one machine at each,
    TensorFlow's ps, plain all-reduce and one machine at two; and the integration test's reduced variant."""
    from pathlib import Path

    from testbed.spec import load_spec
    path = Path(__file__).resolve().parents[2] / "topologies" / "low_communication.yaml"
    points = [p for p in expand_points(load_spec(path)) if p.repeat == 0]
    kinds = {(p.spec.workload.engine, p.spec.workload.strategy, p.spec.topology.hosts,
              p.spec.workload.communication.compression, p.spec.workload.communication.sync_every)
             for p in points}
    assert len(points) == 21 and len(expand_points(load_spec(path))) == 63
    assert {k for k in kinds if k[0] == "pytorch" and k[2] == 4} == {
        ("pytorch", "allreduce", 4, c, e) for c, e in (("none", 1), ("fp16", 1), ("powersgd", 1), ("none", 8))}
    assert ("pytorch", "single", 1, "none", 1) in kinds and ("tensorflow", "ps", 4, "none", 1) in kinds
    assert all(p.spec.workload.fixed == "data" for p in points)
    reduced = expand_points(load_spec(path, ["topology.link.bw=100mbit", "sweep.repeats=1",
                                             "workload.samples_per_epoch=5120"]))
    assert len(reduced) == 8 and {p.spec.topology.link.bw for p in reduced} == {10**8}
