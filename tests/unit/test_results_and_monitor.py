"""Atomic tables, resume bookkeeping, usage samples and resource summaries."""
import time

import pandas as pd

from testbed.run import results
from testbed.nodes.base import Usage
from testbed.run.training.monitor import Monitor, summarize
from testbed.run.sweep.sweep import completed_ids, eta_text


def test_replace_run_rows_replaces_only_that_run_and_keeps_param_columns(tmp_path):
    results.replace_run_rows(tmp_path, "runs", "a", [dict(experiment="e", run_id="a", repeat=0, status="failed",
                                                          **{"topology.hosts": 2})], ["topology.hosts"])
    results.replace_run_rows(tmp_path, "runs", "b", [dict(experiment="e", run_id="b", repeat=0, status="ok",
                                                          **{"topology.hosts": 4})], ["topology.hosts"])
    results.replace_run_rows(tmp_path, "runs", "a", [dict(experiment="e", run_id="a", repeat=0, status="ok",
                                                          **{"topology.hosts": 2})], ["topology.hosts"])
    table = pd.read_csv(tmp_path / "runs.csv")
    assert sorted(table["run_id"]) == ["a", "b"]
    assert list(table.columns[:4]) == ["experiment", "run_id", "repeat", "topology.hosts"]
    assert set(table["status"]) == {"ok"}
    assert not list(tmp_path.glob(".runs.csv.*")), "temporary files must not be left behind"


def test_empty_rows_still_write_a_readable_table(tmp_path):
    results.replace_run_rows(tmp_path, "checks", "a", [])
    assert list(pd.read_csv(tmp_path / "checks.csv").columns) == results.CHECKS_COLUMNS


def test_completed_ids_skip_ok_and_failed_unless_retrying(tmp_path):
    for rid, status in [("a", "ok"), ("b", "failed")]:
        results.replace_run_rows(tmp_path, "runs", rid, [dict(experiment="e", run_id=rid, repeat=0, status=status)])
    assert completed_ids(tmp_path, retry_failed=False) == {"a", "b"}
    assert completed_ids(tmp_path, retry_failed=True) == {"a"}
    assert completed_ids(tmp_path / "nothing", retry_failed=False) == set()


def test_eta_is_mean_duration_times_remaining():
    assert eta_text([10, 20], 3) == "00:00:45"
    assert eta_text([], 3) == "-"


def test_summarize_usage_rows():
    rows = [dict(node="h1", t=0.0, cpu_pct=50, rss_bytes=100, tx_bytes=0, rx_bytes=0),
            dict(node="h1", t=2.0, cpu_pct=150, rss_bytes=300, tx_bytes=1000, rx_bytes=500),
            dict(node="h2", t=0.0, cpu_pct=10, rss_bytes=50, tx_bytes=0, rx_bytes=0),
            dict(node="h2", t=2.0, cpu_pct=30, rss_bytes=60, tx_bytes=500, rx_bytes=1000)]
    s = summarize(rows)
    assert s["cpu_mean_pct"] == (100 + 20) / 2
    assert s["mem_peak_bytes"] == 300
    assert s["net_bytes_total"] == 1500
    assert s["net_throughput_mean_bps"] == 1500 * 8 / 2
    assert summarize([]) == {}


class FakeRemote:
    """A node kind whose counters come from a sampler on the node: the latest line, read on its clock."""
    lines: list[Usage] = []

    @classmethod
    def usage(cls, nodes):
        return {"r1": cls.lines.pop(0)}


def test_cpu_of_counters_read_on_the_node_is_over_the_node_s_clock_not_when_the_monitor_took_them():
    FakeRemote.lines = [Usage(1.0, 0, 0, 0, clock_s=100.0), Usage(1.5, 0, 0, 0, clock_s=100.25),
                        Usage(1.5, 0, 0, 0, clock_s=100.25), Usage(2.0, 0, 0, 0, clock_s=101.25)]
    monitor = Monitor({"r1": (FakeRemote(), "worker")}, interval=0.5, experiment="e", run_id="a")
    monitor._t0 = time.monotonic()
    for _ in range(4):           # taken a few microseconds apart: the monitor's own time says nothing
        monitor.sample()
    assert [row["cpu_pct"] for row in monitor.rows] == [0, 200, 0, 50]   # 0: the first, then no new line
