"""The reference results kept in the repository (results/reference/<set-up file>/): each is the results
of a bundled set-up file, and its report regenerates from the stored runs' tables alone, without root's
privileges, to the tables and the answers stored beside them."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[2]
REFERENCES = REPO / "results" / "reference"
KEPT = sorted(p for p in REFERENCES.iterdir() if p.is_dir()) if REFERENCES.is_dir() else []
# the set-ups whose reference results are kept: every thesis file that runs on this machine alone, and the
# comparison of communication settings
EXPECTED = {"thesis_strategies", "thesis_physical", "thesis_physical_faithful", "thesis_caption",
            "thesis_caption_faithful", "thesis_fig15", "thesis_fig15_faithful", "thesis_fig18", "thesis_fig18_faithful",
            "low_communication"}
# as root: every capability dropped (uid 0 with none of root's privileges), as a user without root has none
NO_PRIVILEGES = ["setpriv", "--no-new-privs", "--inh-caps=-all", "--bounding-set=-all", "--"] if os.geteuid() == 0 else []


def test_each_kept_set_up_has_its_file_and_none_is_missing():
    names = {p.name for p in KEPT}
    assert names >= EXPECTED, f"missing reference results: {sorted(EXPECTED - names)}"
    for name in names:
        assert (REPO / "topologies" / f"{name}.yaml").is_file(), name
        assert (REFERENCES / name / "runs.csv").is_file() and (REFERENCES / name / "report.html").is_file()
        runs = pd.read_csv(REFERENCES / name / "runs.csv")
        assert (runs["status"] == "ok").all(), f"{name}: {runs['reason'].dropna().tolist()}"


def test_what_runs_the_report_here_holds_no_privilege():
    status = subprocess.run([*NO_PRIVILEGES, "cat", "/proc/self/status"], capture_output=True, text=True).stdout
    assert "CapEff:\t0000000000000000" in status


@pytest.mark.parametrize("folder", KEPT, ids=[p.name for p in KEPT])
def test_the_report_regenerates_from_the_stored_tables_without_root(folder, tmp_path):
    copy = tmp_path / folder.name
    shutil.copytree(folder, copy, ignore=shutil.ignore_patterns("report.html", "figures", "tables"))
    done = subprocess.run([*NO_PRIVILEGES, sys.executable, str(REPO / "run_experiment.py"), "report", str(copy)],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    page = (copy / "report.html").read_text()
    assert "Does distributed training pay off here?" in page
    if folder.name.startswith("thesis_"):
        assert "The thesis and this experiment, side by side" in page
    if (folder / "tables" / "communication.csv").is_file():
        assert "What would make it pay off here" in page
    stored = sorted(p.name for p in (folder / "tables").glob("*.csv"))
    assert sorted(p.name for p in (copy / "tables").glob("*.csv")) == stored
    for name in stored:
        pd.testing.assert_frame_equal(pd.read_csv(copy / "tables" / name), pd.read_csv(folder / "tables" / name),
                                      check_dtype=False, rtol=1e-9, obj=name)
