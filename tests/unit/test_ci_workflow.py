"""docs/ci.md's GitHub Actions and GitLab jobs hold: every `run_experiment.py` command in them parses with the
command line's own parser, the files they name exist, the smoke job is the one the page's smoke section
shows, and the other job sets up as the smoke job does (so that running the smoke job's steps,
tests/integration/test_ci_docs.py, covers its set-up too)."""
from __future__ import annotations

import re

import pytest

from ci_workflow import GITHUB, GITLAB, REPO, block, code_blocks, steps, cli_calls
from testbed.cli import parser
from testbed.cli.presets import PRESETS


def _all_scripts() -> list[str]:
    scripts = [s.run for job in block(GITHUB)["jobs"].values() for s in steps(job) if s.run]
    for job in block(GITLAB).values():
        scripts += [*job.get("script", []), *job.get("after_script", [])]
    return scripts


def test_the_github_workflow_has_the_smoke_job_and_yours_after_it():
    jobs = block(GITHUB)["jobs"]
    assert list(jobs) == ["smoke", "emulated-network"]
    assert jobs["emulated-network"]["needs"] == "smoke"


@pytest.mark.parametrize("script", _all_scripts())
def test_every_testbed_command_of_the_jobs_parses(script):
    for args in cli_calls(script):
        try:
            parser().parse_args(args)
        except SystemExit:
            pytest.fail(f"docs/ci.md: `run_experiment.py {' '.join(args)}` does not parse")


def test_the_smoke_job_runs_the_shipped_smoke_file_under_its_preset_and_reports_its_junit_file():
    smoke = steps(block(GITHUB)["jobs"]["smoke"])
    [run] = [args for s in smoke if s.run for args in cli_calls(s.run)]
    parsed = parser().parse_args(run)
    assert parsed.command == "run" and parsed.preset in PRESETS and parsed.preset == "smoke"
    assert (REPO / parsed.file).is_file()
    [report] = [s for s in smoke if s.uses and "junit-report" in s.uses]
    assert report.with_["report_paths"] == str(parsed.junit) and report.always
    [upload] = [s for s in smoke if s.uses and "upload-artifact" in s.uses]
    assert parsed.out.startswith(upload.with_["path"])
    shown = [line for body in code_blocks("sh") for line in body.splitlines() if "--preset smoke" in line]
    assert shown == [next(s.run for s in smoke if s.run and "--preset smoke" in s.run)], \
        "the smoke section shows the smoke job's command"


def test_the_files_the_jobs_name_exist():
    for job in block(GITHUB)["jobs"].values():
        for step in steps(job):
            for name in re.findall(r"'([^']+)'", str(step.with_.get("key", ""))):
                assert (REPO / name).is_file(), f"hashFiles names {name}"
            if step.run and "testbed.sh" in step.run:
                assert (REPO / "testbed.sh").is_file()


def test_your_job_sets_up_as_the_smoke_job_does():
    jobs = block(GITHUB)["jobs"]
    smoke, yours = steps(jobs["smoke"]), steps(jobs["emulated-network"])
    setup = next(i for i, s in enumerate(smoke) if s.run and "run_experiment.py" in s.run)
    assert smoke[:setup] == yours[:setup]
    assert [s.uses for s in smoke[:setup] if s.uses] == ["actions/checkout@v4", "actions/cache@v4"]
