"""The reference results kept in the repository (results/reference/<set-up file>/): each is a thesis
set-up file's results, and its report regenerates from the stored tables alone, without root's
privileges."""
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
# the set-ups whose reference results are kept: every thesis file that runs on this machine alone
EXPECTED = {"thesis_strategies", "thesis_physical", "thesis_physical_faithful", "thesis_caption",
            "thesis_caption_faithful", "thesis_fig15", "thesis_fig15_faithful", "thesis_fig18", "thesis_fig18_faithful"}
UNCHANGED_TABLES = ["iperf_checks", "stability", "bleu"]
# Tables whose definition changed with the steady speedup (the stored ones predate it; the reference results
# are to be run again): only their columns that kept their meaning are compared, on the old configuration keys.
OLD_KEYS = ["model", "engine", "strategy", "hosts", "bw_bps"]
KEPT_COLUMNS = {"summary": ["bw", "n_runs", "time_mean_s", "time_std_s", "time_min_s", "time_max_s",
                            "time_per_step_mean_s"],
                "resources": ["bw", "n_runs", "cpu_mean_pct", "mem_peak_bytes", "net_throughput_mean_bps"]}
# thesis_vs_measured rows whose measured text is now the steady speedup: compared by figure and thesis only
RESTATED = {"15, 18", "19"}
# as root: every capability dropped (uid 0 with none of root's privileges), as a user without root has none
NO_PRIVILEGES = ["setpriv", "--no-new-privs", "--inh-caps=-all", "--bounding-set=-all", "--"] if os.geteuid() == 0 else []


def test_each_kept_set_up_is_a_thesis_file_and_none_is_missing():
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
    assert "The thesis and this experiment, side by side" in page
    assert "Does distributed training pay off here?" in page
    for name in UNCHANGED_TABLES:
        stored = folder / "tables" / f"{name}.csv"
        if stored.is_file():
            pd.testing.assert_frame_equal(pd.read_csv(copy / "tables" / f"{name}.csv"), pd.read_csv(stored),
                                          check_dtype=False, rtol=1e-9)
    for name, columns in KEPT_COLUMNS.items():
        got, stored = pd.read_csv(copy / "tables" / f"{name}.csv"), pd.read_csv(folder / "tables" / f"{name}.csv")
        got, stored = (t.set_index(OLD_KEYS)[columns].sort_index() for t in (got, stored))
        pd.testing.assert_frame_equal(got, stored, check_dtype=False, rtol=1e-9)
    got = pd.read_csv(copy / "tables" / "thesis_vs_measured.csv").set_index("figure")
    stored = pd.read_csv(folder / "tables" / "thesis_vs_measured.csv").set_index("figure")
    assert list(got.index) == list(stored.index) and (got["thesis"] == stored["thesis"]).all()
    same = [f for f in got.index if f not in RESTATED]
    assert (got.loc[same, "measured"] == stored.loc[same, "measured"]).all()
    for figure in RESTATED & set(got.index):
        assert "steady" in got.loc[figure, "measured"], figure
