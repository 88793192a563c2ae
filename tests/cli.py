"""The testbed's command line as the integration tests call it."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def interruptible() -> None:
    """A child's SIGINT and SIGTERM at their defaults, unblocked, whatever this process inherited (a shell
    starts background jobs with SIGINT ignored; a harness may block signals, which exec keeps): the
    preexec_fn of a child that a test interrupts."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})


def cli(*args, **kwargs) -> subprocess.CompletedProcess:
    """`run_experiment.py ARGS` with this interpreter, to completion, output captured (a wide console,
    so that messages are not wrapped)."""
    return subprocess.run([sys.executable, str(REPO / "run_experiment.py"), *map(str, args)], cwd=REPO,
                          capture_output=True, text=True, env={**os.environ, "COLUMNS": "1000"}, **kwargs)


def start_up(*args, timeout: float = 300) -> tuple[subprocess.Popen, str]:
    """`run_experiment.py up ARGS` in the background (signals as `interruptible` sets them), returned once it says "up: " with what it printed so far; killed if it never does."""
    proc = subprocess.Popen([sys.executable, str(REPO / "run_experiment.py"), "up", *map(str, args)], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            preexec_fn=interruptible)
    lines = []
    try:
        deadline = time.monotonic() + timeout
        while not any(line.startswith("up: ") for line in lines):
            assert time.monotonic() < deadline and proc.poll() is None, "".join(lines)[-3000:]
            lines.append(proc.stdout.readline())
    except BaseException:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=180)
        raise
    return proc, "".join(lines)


def counting_degraded(out: Path, runs) -> list[str]:
    """When a run of `runs` (out's runs.csv) read degraded on this machine: out's report redrawn with it
    counted, marked, and the option to pass to later `report` calls; else [] (the report stays as run drew it)."""
    if not runs["fidelity"].astype(str).str.startswith("degraded").any():
        return []
    print("degraded:", runs["fidelity"].tolist())
    redrawn = cli("report", "--include-degraded", out, timeout=300)
    assert redrawn.returncode == 0, redrawn.stderr[-3000:]
    return ["--include-degraded"]


def run_one(spec: Path, out: Path, timeout: float = 1500):
    """`run SPEC --out OUT` of a file of one run point, which must succeed: its runs.csv row."""
    import pandas as pd

    proc = cli("run", spec, "--out", out, "--quiet", "--no-report", timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (row,) = [r for _, r in pd.read_csv(out / "runs.csv").iterrows()]
    assert row["status"] == "ok", row["reason"]
    return row


def steady_ratio(what: str, real, replayed) -> float:
    """The replayed run's steady step over the real one's, printed with both and their dilation and verdict."""
    ratio = replayed["steady_step_s"] / real["steady_step_s"]
    print(f"{what}: real {real['steady_step_s'] * 1000:.1f} ms (x{real['dilation']:g}, {real['fidelity']}), replayed "
          f"{replayed['steady_step_s'] * 1000:.1f} ms (x{replayed['dilation']:g}, {replayed['fidelity']}): {ratio:.3f}")
    return ratio
