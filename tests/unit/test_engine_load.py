"""A task loads its engine with its CPU quota lifted, and the quota always comes back: after the
block, after a task killed inside it and started again, and with two tasks of one host at once."""
from __future__ import annotations

import sys

from workloads import cpuquota


def _v2_group(tmp_path, quota: str = "25000 100000"):
    group = tmp_path / "cg" / "dltestbed" / "h1"
    group.mkdir(parents=True)
    (group / "cpu.max").write_text(quota + "\n")
    proc = tmp_path / "proc-cgroup"
    proc.write_text("0::/dltestbed/h1\n")
    run = tmp_path / "run"
    run.mkdir()
    return group / "cpu.max", dict(root=tmp_path / "cg", proc_cgroup=proc, record_dir=str(run))


def test_the_engine_is_imported_with_the_quota_lifted_and_the_quota_comes_back(tmp_path, monkeypatch):
    quota, where = _v2_group(tmp_path)
    (tmp_path / "fake_engine.py").write_text(f"SEEN = open({str(quota)!r}).read().strip()\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "fake_engine", raising=False)
    cpuquota.load_engine("fake_engine", **where)
    assert sys.modules["fake_engine"].SEEN == "max 100000"
    assert quota.read_text() == "25000 100000"
    assert list((tmp_path / "run").iterdir()) == []          # the record is gone with the lift


def test_a_task_killed_while_lifted_leaves_the_quota_to_the_next_task_of_its_host(tmp_path):
    quota, where = _v2_group(tmp_path)
    killed = cpuquota.lifted(**where)
    assert killed.__enter__() is True                       # and never left: SIGKILL inside the block
    assert quota.read_text() == "max 100000"
    with cpuquota.lifted(**where) as free:                  # the task started again finds it lifted
        assert free and quota.read_text() == "max 100000"
    assert quota.read_text() == "25000 100000"


def test_two_tasks_of_one_host_lifting_at_once_leave_the_quota_in_place(tmp_path):
    quota, where = _v2_group(tmp_path)
    chief, server = cpuquota.lifted(**where), cpuquota.lifted(**where)
    chief.__enter__()
    server.__enter__()
    chief.__exit__(None, None, None)
    assert quota.read_text() == "25000 100000"              # the chief's end puts it back at once
    server.__exit__(None, None, None)
    assert quota.read_text() == "25000 100000"


def test_nothing_is_lifted_where_the_quota_cannot_be_written_down(tmp_path):
    quota, where = _v2_group(tmp_path)
    where["record_dir"] = str(tmp_path / "no such folder")
    with cpuquota.lifted(**where) as free:
        assert not free and quota.read_text() == "25000 100000\n"
    where.pop("record_dir")                                 # and no job file to write it beside
    with cpuquota.lifted(**where) as free:
        assert not free
