"""docs/ci.md's GitHub Actions job `smoke`, run here as the runner runs it: its `run:` steps in order,
each in `bash --noprofile --norc -eo pipefail` (the runner's shell), in a fresh clone of this repository
at HEAD (what actions/checkout gives: committed work only), with a runner's environment (CI,
GITHUB_ACTIONS, GITHUB_WORKSPACE, RUNNER_OS, a plain PATH; this machine's DLTB_* settings, which say where
its caches are, pass through), as root. A step after a failed one runs only with `if: always()`, as on
GitHub. The `uses:` steps are GitHub's own: the clone stands for the checkout, this machine's
/var/cache/dltestbed for the restored cache, and what the upload and the JUnit report would read is checked
to be there.

Needs: root, this machine set up by `./testbed.sh install` (then the install step only checks what is
there and links the venv: seconds; with a requirements.txt the cache has no venv for, it builds one:
several minutes, and apt may install packages), git, and no other run or `up` holding the network. `sudo`
is used if the machine has it; as root it changes nothing, so without it a stand-in that runs its
command is put first on PATH. The `chown -R "$USER"` step owns the cache folder to root again (its owner
here). The smoke run itself takes about as long as one point of topologies/smoke.yaml (a minute or two on
2 cores); each step's time is printed (-s)."""
import os
import pwd
import shutil
import subprocess
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pandas as pd
import pytest

from ci_workflow import GITHUB, REPO, block, steps

pytestmark = pytest.mark.integration

STEP_TIMEOUT_S = {"install": 45 * 60}       # a step whose name has the key; others get DEFAULT_TIMEOUT_S
DEFAULT_TIMEOUT_S = 20 * 60
SMOKE_RUN_MAX_S = 15 * 60                   # the smoke preset keeps it well under this on 2 cores


def _runner_env(clone: Path, bin_dir: Path, temp: Path) -> dict:
    user = pwd.getpwuid(os.geteuid())
    env = {"PATH": f"{bin_dir}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
           "HOME": user.pw_dir, "USER": user.pw_name, "LANG": "C.UTF-8", "CI": "true", "GITHUB_ACTIONS": "true",
           "GITHUB_WORKSPACE": str(clone), "RUNNER_OS": "Linux", "RUNNER_TEMP": str(temp)}
    env.update({k: v for k, v in os.environ.items() if k.startswith("DLTB_")})
    return env


def _sudo_stand_in(bin_dir: Path) -> None:
    """`sudo CMD...` as root: CMD itself (only when the machine has no sudo)."""
    if shutil.which("sudo") is None:
        (bin_dir / "sudo").write_text('#!/bin/sh\nexec "$@"\n')
        (bin_dir / "sudo").chmod(0o755)


def test_the_smoke_jobs_steps_run_in_a_fresh_clone(tmp_path, root, no_leftovers):
    job = block(GITHUB)["jobs"]["smoke"]
    clone, bin_dir, temp = tmp_path / "workspace", tmp_path / "bin", tmp_path / "runner-temp"
    bin_dir.mkdir()
    temp.mkdir()
    subprocess.run(["git", "clone", "--quiet", str(REPO), str(clone)], check=True, timeout=300)
    _sudo_stand_in(bin_dir)
    env = _runner_env(clone, bin_dir, temp)

    done, failed = [], None
    for step in steps(job):
        if step.run is None:
            continue
        if failed is not None and not step.always:
            done.append((step.name, "skipped", 0.0, ""))
            continue
        timeout = next((t for key, t in STEP_TIMEOUT_S.items() if key in step.name), DEFAULT_TIMEOUT_S)
        started = time.monotonic()
        proc = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step.run], cwd=clone,
                              env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout)
        took = time.monotonic() - started
        done.append((step.name, f"exit {proc.returncode}", took, (proc.stdout + proc.stderr)[-3000:]))
        if proc.returncode != 0 and failed is None:
            failed = step.name
    for name, outcome, took, _ in done:
        print(f"{took:8.1f} s  {outcome:<8} {name}")
    assert failed is None, f"step {failed!r} failed:\n" + next(out for name, _, _, out in done if name == failed)

    smoke_run = next(s.name for s in steps(job) if s.run and "--preset smoke" in s.run)
    took, said = next((took, out) for name, _, took, out in done if name == smoke_run)
    print(said)
    assert "phases: bring-up" in said, "the smoke run says where its time went"
    assert took < SMOKE_RUN_MAX_S, f"the smoke run took {took:.0f} s"
    for step in steps(job):                     # what GitHub's own actions would read is there
        for key in ("path", "report_paths"):
            if key in step.with_:
                assert (clone / step.with_[key]).exists(), f"{step.uses} reads {step.with_[key]}"
    runs = pd.read_csv(clone / "results" / "smoke" / "runs.csv")
    assert list(runs["status"]) == ["ok"], runs[["run_id", "status", "reason"]].to_string()
    assert not (clone / "results" / "smoke" / "report.html").exists(), "the smoke preset draws no report"
    suite = ET.parse(clone / "results" / "smoke-junit.xml").getroot()
    cases = suite.findall(".//testcase")
    assert cases and not suite.findall(".//failure") and not suite.findall(".//error")
