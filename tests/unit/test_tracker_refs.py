"""Code, tests, benchmarks and docs name capabilities, not tracker entries: a reader of the
repository has no "issue 19" to open."""
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FOLDERS = ("testbed", "analysis", "workloads", "bench", "tests", "docs")
TRACKER_REF = re.compile(r"issue [0-9]+")


def test_no_file_points_to_an_issue_number():
    found = []
    for folder in FOLDERS:
        for path in sorted((REPO / folder).rglob("*")):
            if path.suffix not in (".py", ".md", ".yaml", ".sh", ".txt") or "__pycache__" in path.parts:
                continue
            for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
                if TRACKER_REF.search(line) and path.name != Path(__file__).name:
                    found.append(f"{path.relative_to(REPO)}:{number}: {line.strip()}")
    assert not found, "name the capability instead:\n" + "\n".join(found)
