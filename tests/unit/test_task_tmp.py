"""A training task's temporary files (TensorFlow's autograph code among them) live in a folder of
its own, which the task removes when it ends and `cleanup` removes when a killed task could not."""
import os
import subprocess
import sys
from pathlib import Path

from testbed import cleanup, owner
from workloads.events import TASK_TMP_PREFIX

REPO = Path(__file__).resolve().parents[2]

# A task body that makes a temporary file as autograph does (delete=False, removed only at exit),
# asks a child process where its temporary files go, then fails, ends, or waits to be killed.
TASK = """import subprocess, sys, tempfile, time
from workloads.events import Emitter, run_task

def body():
    made = tempfile.NamedTemporaryFile(prefix="__autograph_generated_file", suffix=".py", delete=False)
    child = subprocess.run([sys.executable, "-c", "import tempfile; print(tempfile.gettempdir())"],
                           capture_output=True, text=True).stdout.strip()
    print(made.name, child, file=sys.stderr, flush=True)
    if sys.argv[1] == "fail":
        raise RuntimeError("failed on purpose")
    if sys.argv[1] == "wait":
        time.sleep(60)

run_task(Emitter("worker", 0, "h1"), body)
"""


def _start(tmp_path, how, run):
    env = {**os.environ, "TMPDIR": str(tmp_path), owner.OWNER_VAR: run, "PYTHONPATH": str(REPO)}
    return subprocess.Popen([sys.executable, "-c", TASK, how], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)


def _dead_identity() -> str:
    return subprocess.run([sys.executable, "-c", "from testbed.owner import identity; print(identity())"],
                          capture_output=True, text=True, check=True, env={**os.environ, "PYTHONPATH": str(REPO)}
                          ).stdout.strip()


def test_a_task_keeps_its_temporary_files_in_its_own_folder_and_removes_it_when_it_ends_or_fails(tmp_path):
    run = _dead_identity()
    for how, code in (("end", 0), ("fail", 1)):
        proc = _start(tmp_path, how, run)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == code, err
        made, child = err.split("\n")[0].split()
        folder = Path(made).parent
        assert folder.parent == tmp_path and folder.name.startswith(f"{TASK_TMP_PREFIX}{run}-")
        assert child == str(folder)                 # its child processes write there too
        assert list(tmp_path.iterdir()) == [], f"{how}: left {list(tmp_path.iterdir())}"


def test_cleanup_removes_the_folder_of_a_killed_task_of_a_run_that_is_over_and_spares_the_rest(tmp_path, monkeypatch):
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    dead_run, live_run = _dead_identity(), owner.identity(os.getppid())
    killed = _start(tmp_path, "wait", dead_run)
    living = _start(tmp_path, "wait", live_run)
    try:
        for proc in (killed, living):
            proc.stderr.readline()                  # the body has made its file
        killed.kill()
        killed.wait(10)
        left = {p.name.rsplit("-", 1)[0] for p in tmp_path.iterdir()}
        assert left == {f"{TASK_TMP_PREFIX}{dead_run}", f"{TASK_TMP_PREFIX}{live_run}"}
        (tmp_path / f"{TASK_TMP_PREFIX}none-abc").mkdir()     # a task started by hand, no run's
        assert cleanup.remove_task_folders(lambda run: not owner.alive(run))
        assert sorted(p.name.rsplit("-", 1)[0] for p in tmp_path.iterdir()) == [
            f"{TASK_TMP_PREFIX}{live_run}", f"{TASK_TMP_PREFIX}none"]
        assert cleanup.remove_task_folders(lambda run: not owner.alive(run)) == []
    finally:
        living.kill()
        living.wait(10)
