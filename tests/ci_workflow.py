"""docs/ci.md's CI jobs as data, for the tests that keep the page right: tests/unit/test_ci_workflow.py
(its commands parse and name what exists) and tests/integration/test_ci_docs.py (the smoke job's steps
run in a fresh clone)."""
from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import NamedTuple

import yaml

REPO = Path(__file__).resolve().parent.parent
CI_DOC = REPO / "docs" / "ci.md"
GITHUB = "# .github/workflows/testbed.yml"
GITLAB = "# .gitlab-ci.yml"
_FENCED = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)


class Step(NamedTuple):
    """One step of a GitHub Actions job: its shell script (`run`) or the action it uses (`uses`)."""
    name: str
    run: str | None
    uses: str | None
    always: bool                # `if: always()`: it runs after a failed step too
    with_: dict


def code_blocks(language: str) -> list[str]:
    """The fenced blocks of docs/ci.md in `language` (yaml, sh, ...), in order."""
    return [body for lang, body in _FENCED.findall(CI_DOC.read_text()) if lang == language]


def block(first_line: str) -> dict:
    """The YAML block of docs/ci.md whose first line is `first_line`, parsed."""
    for body in code_blocks("yaml"):
        if body.splitlines()[0].strip() == first_line:
            return yaml.safe_load(body)
    raise AssertionError(f"docs/ci.md has no yaml block starting with {first_line!r}")


def steps(job: dict) -> list[Step]:
    out = []
    for i, step in enumerate(job["steps"]):
        name = step.get("name") or step.get("uses") or f"step {i + 1}"
        out.append(Step(name, step.get("run"), step.get("uses"), str(step.get("if", "")).strip() == "always()",
                        step.get("with") or {}))
    return out


def cli_calls(script: str) -> list[list[str]]:
    """The arguments after `run_experiment.py` of every line of a script that calls it."""
    found = []
    for line in script.splitlines():
        words = shlex.split(line, comments=True)
        tail = next((words[i + 1:] for i, w in enumerate(words) if w.endswith("run_experiment.py")), None)
        if tail is not None:
            found.append(tail)
    return found
