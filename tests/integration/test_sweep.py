"""Sweeps that survive: kill and resume, a failing point among good ones."""
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.integration

SWEEP = """
name: sweep-test
topology: {template: star, hosts: 1, link: {bw: 10mbit}}
workload: {strategy: single, model: mlp, model_params: {width: 16, depth: 1}, epochs: 1, steps_per_epoch: 3}
checks: {iperf: false, ping: false}
monitor: {interval: 0.5s}
sweep:
  topology.link.bw: [10mbit, 20mbit, 50mbit]
"""


def start(file: Path, out: Path, *extra):
    return subprocess.Popen([sys.executable, str(REPO / "run_experiment.py"), "run", str(file), "--out", str(out),
                             "--quiet", "--no-report", *extra], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def ok_rows(out: Path) -> int:
    path = out / "runs.csv"
    return int((pd.read_csv(path)["status"] == "ok").sum()) if path.exists() else 0


def test_sigkill_after_first_point_then_resume(tmp_path, root, no_leftovers):
    file, out = tmp_path / "sweep.yaml", tmp_path / "out"
    file.write_text(SWEEP)
    proc = start(file, out)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and ok_rows(out) < 1:
        time.sleep(0.2)
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    first = pd.read_csv(out / "runs.csv")
    assert len(first) >= 1
    subprocess.run([sys.executable, str(REPO / "run_experiment.py"), "cleanup"], cwd=REPO, check=True,
                   capture_output=True)
    resumed = start(file, out)
    output, _ = resumed.communicate(timeout=600)
    assert resumed.returncode == 0, output[-2000:]
    runs = pd.read_csv(out / "runs.csv")
    assert len(runs) == 3 and runs["run_id"].is_unique and (runs["status"] == "ok").all()
    kept = runs.set_index("run_id").loc[first["run_id"], "started_at"]
    assert list(kept) == list(first["started_at"]), "finished points must be skipped, not rerun"
    assert f"{len(first)} of 3 point(s) already recorded" in output


def test_a_failing_point_is_recorded_and_the_sweep_goes_on(tmp_path, root, no_leftovers):
    file, out = tmp_path / "sweep.yaml", tmp_path / "out"
    file.write_text(SWEEP.replace("topology.link.bw: [10mbit, 20mbit, 50mbit]", "workload.timeout: [1s, 5m]"))
    proc = start(file, out)
    output, _ = proc.communicate(timeout=600)
    assert proc.returncode == 1, output[-2000:]   # exit status = number of failed points
    runs = pd.read_csv(out / "runs.csv").set_index("workload.timeout")
    assert runs.loc["1s", "status"] == "failed" and "timed out after 1 s" in runs.loc["1s", "reason"]
    assert runs.loc["5m", "status"] == "ok"
    again = start(file, out)
    again.communicate(timeout=120)
    assert again.returncode == 0, "without --retry-failed a failed point is not rerun"
    retry = start(file, out, "--retry-failed")
    retry.communicate(timeout=300)
    assert retry.returncode == 1
    assert len(pd.read_csv(out / "runs.csv")) == 2


def test_dry_run_lists_points_without_root():
    from testbed.spec import expand_points, load_spec

    points = expand_points(load_spec(REPO / "topologies/default.yaml"))      # 3 node counts x 3 rates x repeats
    proc = subprocess.run([sys.executable, str(REPO / "run_experiment.py"), "run", "topologies/default.yaml",
                           "--dry-run"], cwd=REPO, capture_output=True, text=True, user=65534)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert len(points) >= 9 and len(lines) == len(points) + 1
    assert lines[-1].startswith(f"{len(points)} run point(s)")
    assert [line.split()[0] for line in lines[:-1]] == [p.run_id for p in points]
    assert '"topology.link.bw": "100mbit"' in proc.stdout


def test_the_same_sweep_started_twice_loses_no_row_and_a_changed_file_makes_new_runs(tmp_path, root, no_leftovers):
    file, out = tmp_path / "sweep.yaml", tmp_path / "out"
    file.write_text(SWEEP)
    first = start(file, out)
    lock = Path("/run/dltestbed/lock")
    deadline = time.monotonic() + 120
    while f'"{first.pid}-' not in (lock.read_text() if lock.exists() else ""):
        assert time.monotonic() < deadline and first.poll() is None, "the first sweep never took the lock"
        time.sleep(0.1)
    second = start(file, out)                       # the same folder
    third = start(file, tmp_path / "elsewhere")     # another folder, the same machine's network
    for proc, what in ((second, f"the results folder {out} is"), (third, "at a time here) is")):
        said = " ".join(proc.communicate(timeout=60)[0].split())     # the console wraps lines
        assert proc.returncode == 2 and f"{what} taken: held by pid {first.pid}" in said, said
        assert "since 20" in said and "Traceback" not in said
    said, _ = first.communicate(timeout=600)
    assert first.returncode == 0, said[-2000:]
    runs = pd.read_csv(out / "runs.csv")
    assert len(runs) == 3 and runs["run_id"].is_unique and (runs["status"] == "ok").all()
    for table in ("steps", "usage"):
        rows = pd.read_csv(out / f"{table}.csv")
        assert set(rows["run_id"]) == set(runs["run_id"]), table
    assert not (tmp_path / "elsewhere" / "runs.csv").exists()
    # one point of the changed file: at a bandwidth already recorded, yet new, since the model changed
    changed = start(file, out, "--set", "workload.model_params.width=32", "--set", "sweep.topology.link.bw=[10mbit]")
    said, _ = changed.communicate(timeout=600)
    assert changed.returncode == 0 and "already recorded" not in said, said[-2000:]
    both = pd.read_csv(out / "runs.csv")
    assert len(both) == 4 and both["run_id"].is_unique, "a changed file's runs are new; the old ones stay"
    assert set(runs["run_id"]) < set(both["run_id"])


API_RUN = """
import sys
from testbed import api
outcome = api.run(sys.argv[1], out=sys.argv[2])
sys.exit(0 if outcome.ok else 1)
"""


def test_a_run_started_through_the_api_survives_a_plain_cleanup(tmp_path, root, no_leftovers):
    """Its command line names neither run_experiment nor pytest: only its identity says it is alive."""
    file, out = tmp_path / "sweep.yaml", tmp_path / "out"
    file.write_text(SWEEP.replace("steps_per_epoch: 3", "steps_per_epoch: 40"))
    proc = subprocess.Popen([sys.executable, "-c", API_RUN, str(file), str(out)], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 300
    while not list(Path("/run/dltestbed").glob(f"run-{proc.pid}-*.json")):
        assert time.monotonic() < deadline and proc.poll() is None, "the API run never brought a network up"
        time.sleep(0.1)
    cleaned = subprocess.run([sys.executable, str(REPO / "run_experiment.py"), "cleanup"], cwd=REPO,
                             capture_output=True, text=True, timeout=120)
    assert cleaned.returncode == 0 and "is still alive" in cleaned.stdout, cleaned.stdout + cleaned.stderr
    assert "killed" not in cleaned.stdout and "deleted" not in cleaned.stdout, cleaned.stdout
    said, _ = proc.communicate(timeout=900)
    assert proc.returncode == 0, said[-2000:]
    runs = pd.read_csv(out / "runs.csv")
    assert len(runs) == 3 and (runs["status"] == "ok").all(), runs[["run_id", "status", "reason"]]
