"""The report's mixed machines (analysis/tables/mixed.py): each worker's steady step split into compute, wire and
waiting; what the slowest node cost; what balancing bought on the link, by steady samples/s where the runs
trained fixed steps."""
import pandas as pd
import pytest

from analysis.tables import mixed

RUNS = pd.DataFrame([
    {"run_id": "balnone", "bw": "1gbit", "bw_bps": 1e9, "balance": "none", "batches": "", "node_cores": "h1=1;h2=0.5",
     "worker_compute_s": "h1=0.118;h2=0.236", "steady_step_s": 0.247, "global_batch": 24576, "batch_per_worker": 12288,
     "steady_samples_per_s": 99318.0, "theory_steady_bytes_per_worker_step": 1077288.0},
    {"run_id": "balstatic", "bw": "1gbit", "bw_bps": 1e9, "balance": "static", "batches": "16384/8192",
     "node_cores": "h1=1;h2=0.5", "worker_compute_s": "h1=0.157;h2=0.157", "steady_step_s": 0.168,
     "global_batch": 24576, "batch_per_worker": 12288, "steady_samples_per_s": 146129.0,
     "theory_steady_bytes_per_worker_step": 1077288.0}])


def test_each_worker_step_is_compute_wire_and_waiting():
    w = mixed.per_worker(RUNS).set_index(["run_id", "host"])
    wire = mixed.communication.on_the_wire(1077288.0) * 8 / 1e9
    assert w.loc[("balnone", "h1"), "wire_s"] == pytest.approx(wire)
    assert w.loc[("balnone", "h1"), "wait_s"] == pytest.approx(0.247 - 0.118 - wire)      # the fast one waits
    assert w.loc[("balnone", "h2"), "wait_s"] == pytest.approx(max(0.0, 0.247 - 0.236 - wire))
    assert list(w.loc["balstatic", "batch"]) == [16384, 8192]
    assert list(w.loc["balnone", "batch"]) == [12288, 12288]


def test_the_slowest_node_cost_is_its_wait_and_the_throughput_all_fast_would_reach():
    cost = mixed.slowest_cost(RUNS, mixed.per_worker(RUNS)).set_index("run_id")
    plain = cost.loc["balnone"]
    assert (plain["slowest"], plain["fastest"]) == ("h2", "h1")
    wire = mixed.communication.on_the_wire(1077288.0) * 8 / 1e9
    assert plain["if_all_fastest_samples_per_s"] == pytest.approx(24576 / (0.118 + wire))
    assert cost.loc["balstatic", "waiting_share"] < plain["waiting_share"]


def test_balance_labels_default_to_none_for_older_results():
    assert list(mixed.balance_labels(pd.DataFrame({"x": [1, 2]}))) == ["none", "none"]
    assert list(mixed.balance_labels(pd.DataFrame({"balance": ["static", None]}))) == ["static", "none"]
