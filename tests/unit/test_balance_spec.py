"""workload.balance in the experiment file: the methods' registry, each form, each refusal at its key and
line naming the setting and the engine or strategy, the written form round-tripping, run ids of files without
the setting unchanged; and the shares: batches proportional to speed keeping the global batch."""
import pytest

import workloads.balance as balance
from spec_helpers import load, one
from testbed.spec import expand_points

BASE = """
name: bal
topology: {{hosts: 3, host: {{cores: 1}}, host_overrides: {{h2: {{cores: 0.5}}}}}}
workload:
  engine: {engine}
  strategy: {strategy}
  balance: {setting}
  epochs: 2
"""


def spec(tmp_path, setting, engine="pytorch", strategy="allreduce"):
    return load(tmp_path, BASE.format(engine=engine, strategy=strategy, setting=setting))


def refusal(tmp_path, setting, engine="pytorch", strategy="allreduce"):
    return one(tmp_path, BASE.format(engine=engine, strategy=strategy, setting=setting))


def test_every_method_declares_itself():
    assert balance.names()[:2] == ["none", "static"] and {"dynamic", "backup"} <= set(balance.names())
    for m in balance.METHODS.values():
        assert m.TITLE and m.DOC and isinstance(m.ENGINES, tuple) and isinstance(m.STRATEGIES, tuple)
        assert callable(m.parse) and callable(m.plan)
    assert balance.forms() == "none | static | dynamic | {backup: k}"


@pytest.mark.parametrize("engine", ["pytorch", "tensorflow"])
def test_static_is_taken_under_all_reduce_by_both_engines(tmp_path, engine):
    w = spec(tmp_path, "static", engine=engine).workload
    assert w.balance == {"method": "static"} and balance.method_of(w.balance).NAME == "static"


def test_left_out_it_is_none_and_dumps_as_the_file_writes_it(tmp_path):
    exp = load(tmp_path, "name: x\ntopology: {hosts: 2}\n")
    assert balance.method_of(exp.workload.balance).NAME == "none"
    assert exp.workload.model_dump(mode="json")["balance"] == "none"
    assert spec(tmp_path, "static").workload.model_dump(mode="json")["balance"] == "static"


@pytest.mark.parametrize("strategy", ["single", "ps", "auto", "switch"])
def test_static_is_refused_where_there_is_no_global_batch_to_share(tmp_path, strategy):
    found = refusal(tmp_path, "static", engine="tensorflow", strategy=strategy)
    assert (found.line, found.key) == (6, "workload.balance")
    assert f"strategy {strategy}" in found.message and "set strategy allreduce" in found.message


def test_dynamic_runs_under_pytorch_only_and_not_on_replayed_compute(tmp_path):
    assert spec(tmp_path, "dynamic").workload.balance == {"method": "dynamic", "every": 10}
    assert spec(tmp_path, "{dynamic: 4}").workload.balance == {"method": "dynamic", "every": 4}
    found = refusal(tmp_path, "dynamic", engine="tensorflow")
    assert found.key == "workload.balance" and "engine tensorflow" in found.message and "balance: static" in found.message
    text = BASE.format(engine="pytorch", strategy="allreduce", setting="dynamic") + "emulation: {compute: replay}\n"
    found = one(tmp_path, text)
    assert found.key == "workload.balance" and "replayed compute" in found.message
    assert refusal(tmp_path, "{dynamic: 0}").message.startswith("balance dynamic takes the steps")


def test_the_dynamic_rule_follows_the_measured_speeds_within_bounds():
    from workloads.balance import dynamic

    plan = dynamic.plan({"every": 2}, 96, {"h1": 1.0, "h2": 1.0})
    assert plan["batches"] == {"h1": 48, "h2": 48} and plan["min_batch"] == 6
    workers = [dynamic.Resizer(plan, rank) for rank in range(2)]
    seconds_per_sample = [0.001, 0.003]         # h2 became three times slower
    for step in (1, 2):
        for w, s in zip(workers, seconds_per_sample):
            w.timed(w.batch * s)
        speeds = [w.samples / w.seconds for w in workers]
        changed = [w.after_step(step, lambda mine: speeds) for w in workers]
    assert changed == [True, True] and [w.batch for w in workers] == [72, 24]
    assert sum(w.weight for w in workers) == pytest.approx(2.0)
    slow = dynamic.Resizer({**plan, "min_batch": 30}, 1)
    slow.timed(1.0)
    slow.after_step(2, lambda mine: [100.0, 1.0])
    assert slow.batch == 30             # the bound holds


@pytest.mark.parametrize("engine,strategy", [("pytorch", "allreduce"), ("tensorflow", "allreduce"),
                                             ("tensorflow", "ps")])
def test_backup_workers_are_refused_naming_the_setting_and_the_engine(tmp_path, engine, strategy):
    found = refusal(tmp_path, "{backup: 1}", engine=engine, strategy=strategy)
    assert found.key == "workload.balance"
    assert "{backup: k}" in found.message and f"engine {engine}" in found.message and "drop" in found.message


@pytest.mark.parametrize("setting,words", [("bogus", "none | static | dynamic | {backup: k}"),
                                           ("{backup: 0}", "at least 1"), ("{static: 2}", "takes no value"),
                                           ("backup", "needs its value"), ("{static: , dynamic: }", "one of"),
                                           ("{dynamic: x}", "whole number")])
def test_a_wrong_value_is_refused_at_its_line(tmp_path, setting, words):
    found = refusal(tmp_path, setting)
    assert (found.line, found.key) == (6, "workload.balance") and words in found.message


def test_local_sgd_a_script_and_recovery_do_not_combine_with_static(tmp_path):
    text = BASE.format(engine="pytorch", strategy="allreduce", setting="static")
    found = one(tmp_path, text + "  communication: {sync_every: 4}\n")
    assert found.key == "workload.balance" and "local SGD" in found.message
    found = one(tmp_path, text.replace("engine: pytorch", "engine: tensorflow") + "  recovery: backup\n")
    assert "recovery" in found.message
    assert spec(tmp_path, "static").workload.balance            # fp16 and the like are weighted as they are
    assert load(tmp_path, text + "  communication: {compression: fp16}\n")


def test_run_ids_of_files_without_balance_keep_their_hash_and_a_sweep_names_it(tmp_path):
    plain = expand_points(load(tmp_path, "name: x\ntopology: {hosts: 2}\n"))[0].run_id
    said = expand_points(load(tmp_path, "name: x\ntopology: {hosts: 2}\nworkload: {balance: none}\n"))[0].run_id
    assert plain == said
    swept = expand_points(spec(tmp_path, "none").model_copy(
        update={"sweep": None}))       # the file without a sweep: one point
    assert len(swept) == 1
    text = BASE.format(engine="pytorch", strategy="allreduce", setting="none") + \
        "sweep: {workload.balance: [none, static]}\n"
    ids = [p.run_id for p in expand_points(load(tmp_path, text))]
    assert [i.split("-")[0] for i in ids] == ["balnone", "balstatic"]


@pytest.mark.parametrize("total,speeds,want", [(64, [1, 0.5], [43, 21]), (96, [1, 0.5], [64, 32]),
                                               (128, [1, 1, 0.5, 0.25], [47, 46, 23, 12]),
                                               (10, [1, 1, 0.5, 0.25], [4, 3, 2, 1]), (4, [100, 1, 1], [2, 1, 1]),
                                               (6, [None, 1, 1], [2, 2, 2])])
def test_batches_follow_the_speeds_and_keep_the_global_batch(total, speeds, want):
    got = balance.batches(total, speeds)
    assert got == want and sum(got) == total and min(got) >= 1


def test_weights_make_the_mean_of_the_workers_means_the_global_mean():
    sizes = [43, 21]
    w = balance.weights(sizes)
    assert sum(wi / len(sizes) for wi in w) == pytest.approx(1.0)
    assert [wi / len(sizes) / b for wi, b in zip(w, sizes)] == pytest.approx([1 / 64, 1 / 64])


def test_the_static_plan_gives_each_host_its_batch_and_weight():
    plan = balance.METHODS["static"].plan({"method": "static"}, 96, {"h1": 1.0, "h2": 0.5})
    assert plan["batches"] == {"h1": 64, "h2": 32}
    assert balance.worker(plan, "h2", 48) == (32, pytest.approx(32 * 2 / 96))
    assert balance.worker(None, "h2", 48) == (48, 1.0)


def test_the_job_document_gives_each_worker_its_batch_and_runs_csv_records_them(tmp_path):
    from testbed.roles import assign_tasks
    from testbed.run.point.record import balance_columns, step_rows_from
    from testbed.run.training.training import balance_plan

    w = spec(tmp_path, "static").workload.model_copy(update={"batch_per_worker": 48})
    tasks = assign_tasks(w, ["h1", "h2", "h3"])
    plan = balance_plan(w, tasks, {"h1": 1.0, "h2": 0.5, "h3": 0.5})
    assert plan["batches"] == {"h1": 72, "h2": 36, "h3": 36} and sum(plan["batches"].values()) == 144
    assert balance_columns(plan, tasks) == {"batches": "72/36/36"} and balance_columns(None, tasks) == {"batches": ""}
    assert balance_plan(w.model_copy(update={"balance": {"method": "none"}}), tasks, {"h1": 1.0}) is None
    events = {tasks[1]: [{"event": "step", "epoch": 1, "step": 1, "time_s": 0.1, "batch": 36}]}
    assert step_rows_from(events, "bal", "r")[0]["batch"] == 36


def test_the_docs_list_every_method_as_declared():
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "mixed-machines.md").read_text()
    for m in balance.METHODS.values():
        row = f"| `{m.NAME}` | {', '.join(m.ENGINES) or 'none (refused)'} | {', '.join(m.STRATEGIES) or 'none'} | {m.DOC} |"
        assert row in text, f"docs/mixed-machines.md's table of methods lacks: {row}"


def test_the_heterogeneous_file_sweeps_every_setting_it_promises():
    from pathlib import Path

    from testbed.spec import load_spec

    points = expand_points(load_spec(Path(__file__).resolve().parents[2] / "topologies" / "heterogeneous.yaml"))
    settings = {(p.spec.workload.strategy, balance.label(p.spec.workload.balance)) for p in points}
    assert settings == {("allreduce", "none"), ("allreduce", "static"), ("allreduce", "dynamic5"), ("ps", "none"),
                        ("single", "none")}                                    # one machine to compare with
    first = [p for p in points if "-r0-" in p.run_id]
    assert len(first) == 10 and len({p.run_id.split('-r0-')[0] for p in first}) == 10     # each at both links
    assert {p.spec.topology.hosts for p in points if p.spec.workload.strategy == "single"} == {1}
