"""A run's identity, liveness and locks (testbed.owner), and what cleanup and live.json make of them."""
import json
import os
import subprocess
import sys
import time

import pytest

from testbed import cleanup, owner
from testbed.run.live import live

pytestmark = pytest.mark.timing       # times itself: run with the CPUs to itself (testbed.sh test)

HOLD = """
import sys, time
from testbed.owner import ProcessLock
with ProcessLock(sys.argv[1], "the test lock"):
    print("held", flush=True)
    time.sleep(60)
"""


@pytest.fixture
def holder(tmp_path):
    """Another process holding a ProcessLock on tmp_path/lock."""
    path = tmp_path / "lock"
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(path), "--sweep", "file.yaml"],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    yield path, proc
    proc.kill()
    proc.wait()


def test_identity_is_pid_and_start_time_and_a_reused_pid_is_not_alive():
    me = owner.identity()
    pid, start = me.split("-")
    assert int(pid) == os.getpid() and int(start) > 0
    assert owner.alive(me)
    assert not owner.alive(f"{pid}-{int(start) + 1}")       # same pid, another process
    assert not owner.alive("") and not owner.alive(None) and not owner.alive("x-1")
    done = subprocess.run([sys.executable, "-c", "from testbed.owner import identity; print(identity())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    assert not owner.alive(done)


def test_a_held_lock_is_refused_at_once_naming_its_holder_and_since_when(holder):
    path, proc = holder
    started = time.monotonic()
    with pytest.raises(owner.LockHeld) as err:
        with owner.ProcessLock(path, "the test lock"):
            pass
    assert time.monotonic() - started < 1
    text = str(err.value)
    assert f"held by pid {proc.pid}" in text and "--sweep file.yaml" in text and " since 20" in text
    assert "wait for that run to end" in text.lower()


def test_a_refused_lock_leaks_no_file_descriptor(holder):
    path, _ = holder
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(200):
        with pytest.raises(owner.LockHeld):
            owner.ProcessLock(path, "the test lock").__enter__()
    assert len(os.listdir("/proc/self/fd")) <= before


def test_the_lock_is_reentrant_in_one_process_and_free_after_the_last_exit(tmp_path):
    path = tmp_path / "lock"
    with owner.ProcessLock(path, "x"):
        with owner.ProcessLock(path, "x"):          # a sweep holds it, each point takes it again
            pass
        assert json.loads(path.read_text())["owner"] == owner.identity()
    assert path.read_text() == ""
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    probe = subprocess.run([sys.executable, "-c", HOLD.replace("time.sleep(60)", "pass"), str(path)],
                           capture_output=True, text=True, timeout=30)
    assert probe.stdout.strip() == "held"


def test_bridge_rows_of_ovs_vsctl_find():
    text = 's1\ndltestbed="1" dltestbed-owner="123-456"\n\ns2\ndltestbed="1"\n'
    assert cleanup._bridge_rows(text) == [("s1", {"dltestbed": "1", "dltestbed-owner": "123-456"}),
                                          ("s2", {"dltestbed": "1"})]
    assert cleanup._bridge_rows("") == []


def test_live_json_keeps_only_what_the_testbed_set(monkeypatch):
    monkeypatch.setenv("SECRET_TOKEN", "hunter2")
    entry = live._env_entry({**os.environ, "PATH": "/opt/x:/usr/bin", "DLTESTBED_HOST": "h1"})
    assert "hunter2" not in json.dumps(entry)
    assert entry["env"] == {"PATH": "/opt/x:/usr/bin", "DLTESTBED_HOST": "h1"}
    assert "SECRET_TOKEN" in entry["inherit"]


@pytest.mark.parametrize("text", ["{", "[]", '{"owner_pid": 1}', '{"owner": "1-1", "hosts": {"h1": {}}}',
                                  '{"owner": "1-1", "hosts": []}'])
def test_a_malformed_live_json_is_one_sentence(tmp_path, monkeypatch, text):
    monkeypatch.setattr(live, "LIVE", tmp_path / "live.json")
    (tmp_path / "live.json").write_text(text)
    with pytest.raises(live.LiveError, match="not a live network's file.*cleanup"):
        live.live_hosts()


def test_state_files_are_for_root_only(tmp_path):
    path = tmp_path / "run-1.json"
    cleanup.write_private(path, "{}")
    assert oct(path.stat().st_mode & 0o777) == "0o600"


def test_a_dead_runs_records_never_remove_what_a_live_run_records_under_the_same_names(tmp_path, monkeypatch):
    """A dead run recorded s1 and s1-eth1; a live run has made its own s1 and s1-eth1 since."""
    monkeypatch.setattr(cleanup, "STATE_DIR", tmp_path)
    done = []
    monkeypatch.setattr(cleanup, "_run", lambda *cmd: done.append(cmd) or subprocess.CompletedProcess(cmd, 0, "", ""))
    monkeypatch.setattr(cleanup, "_link_exists", lambda name: True)
    for name in ("destroy_leftovers", "destroy_tagged_ovs_rows", "stray_processes"):
        monkeypatch.setattr(cleanup, name, lambda *a, **k: [])
    dead = subprocess.run([sys.executable, "-c", "from testbed.owner import identity; print(identity())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    shared = {"bridges": ["s1"], "interfaces": ["s1-eth1"]}
    (tmp_path / "run-1-1.json").write_text(json.dumps({"owner_pid": 1, "owner": dead, **shared,
                                                       "interfaces": ["s1-eth1", "s2-eth1"]}))
    (tmp_path / "run-2-2.json").write_text(json.dumps({"owner_pid": os.getpid(), "owner": owner.identity(),
                                                       **shared}))
    actions = cleanup.cleanup()
    deleted = [cmd[-1] for cmd in done if "del" in cmd or "del-br" in cmd]
    assert deleted == ["s2-eth1"], done
    assert any("run-2-2.json: its run" in a and "still alive" in a for a in actions)
    assert not (tmp_path / "run-1-1.json").exists() and (tmp_path / "run-2-2.json").exists()
    done.clear()
    cleanup.cleanup(force=True)
    assert {cmd[-1] for cmd in done if "del" in cmd or "del-br" in cmd} == {"s1", "s1-eth1"}
