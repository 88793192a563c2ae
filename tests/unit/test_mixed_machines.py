"""The report's mixed machines (analysis/tables/mixed.py): each worker's steady step split into compute, wire and
waiting; what the slowest node cost; each balancing setting against plain synchronous training, the asynchronous
parameter server and one machine, as the answer compares (the projected time of the job at steady samples/s where
the runs trained fixed steps, time to the target loss where every run learned the same data), with the spread of
the repeats, recomputed here from made-up runs.csv and steps.csv."""
import html

import numpy as np
import pandas as pd
import pytest

from analysis.tables import mixed, tables

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


# -- compared as the answer compares ------------------------------------------------------------------
# (setting, strategy, engine, hosts, seconds per step, loss drop per step, repeats): four nodes of 1, 1, 0.5 and
# 0.25 core; one machine is one node of 1 core. Balanced, the step is shorter (the mean speed's, not the slowest's).
POINTS = [("none", "allreduce", "pytorch", 4, 0.40, 0.010, 2), ("static", "allreduce", "pytorch", 4, 0.20, 0.010, 2),
          ("dynamic", "allreduce", "pytorch", 4, 0.25, 0.010, 1), ("none", "ps", "tensorflow", 4, 0.05, 0.008, 1),
          ("none", "single", "pytorch", 1, 0.10, 0.006, 1)]
CORES = "h1=1;h2=1;h3=0.5;h4=0.25"


def _experiment(tmp_path, fixed="steps", compute="replay", degraded=()):
    """Made-up results of the four settings and one machine at 1 Gbit/s, 20 steps each (repeats a hundredth
    slower each); `degraded`: settings (or strategies) whose runs read degraded."""
    runs, steps = [], []
    for setting, strategy, engine, hosts, tau, fall, repeats in POINTS:
        for r in range(repeats):
            run_id, tau_r, n = f"{strategy}-{setting}-r{r}", tau * (1 + 0.01 * r), 20
            batch = 256
            per_step = batch * hosts if strategy != "ps" else batch
            runs.append(dict(
                experiment="het", run_id=run_id, repeat=r, hosts=hosts, bw_bps=1e9, bw="1gbit", strategy=strategy,
                engine=engine, model="mlp", params=1000, global_batch=batch * hosts, workers=hosts, status="ok",
                training_time_s=n * tau_r, time_per_step_s=tau_r, steps=n, fixed=fixed,
                samples_per_epoch=20480 if fixed == "data" else per_step * n, epochs=1, batch_per_worker=batch,
                compute=compute if strategy != "ps" else "budgets", cores=1, machine_cores=2,
                fidelity="degraded: cpu: too little" if {setting, strategy} & set(degraded) else "ok", steady="ok",
                steady_step_s=tau_r, steady_step_q1_s=tau_r, steady_step_q3_s=tau_r,
                steady_samples_per_s=per_step / tau_r, warmup_s=1.0, warmup_steps=1, steady_steps=n - 1,
                steps_per_epoch=n, samples_per_step=per_step, samples_trained=per_step * n,
                balance=setting if strategy == "allreduce" else "none",
                node_cores=CORES if hosts > 1 else "h1=1", worker_compute_s="h1=0.1;h2=0.1;h3=0.2;h4=0.4"
                if strategy == "allreduce" else "", batches="", final_loss=2.3 - fall * (n - 1)))
            steps += [dict(experiment="het", run_id=run_id, role="worker", task_index=0, host="h1", kind="step",
                           epoch=1, step=k, time_s=tau_r, loss=2.3 - fall * (k - 1), samples_per_s=np.nan,
                           t=1000.0 + k) for k in range(1, n + 1)]
    pd.DataFrame(runs).to_csv(tmp_path / "runs.csv", index=False)
    pd.DataFrame(steps).to_csv(tmp_path / "steps.csv", index=False)
    return tables.load_experiment(tmp_path)


def _projected(runs: pd.DataFrame, setting: str, run_id: str | None = None) -> float:
    """The answer's projected time of the job from runs.csv alone: the mean warm-up plus the job (one machine's
    samples: its samples per epoch x epochs, the file's work at its fewest nodes) at the mean steady samples/s
    (of the setting's runs, or of one run)."""
    one = runs[runs["hosts"] == 1].iloc[0]
    mine = runs[(runs["_setting"] == setting) & ((runs["run_id"] == run_id) if run_id else True)]
    return mine["warmup_s"].mean() + one["samples_per_epoch"] * one["epochs"] / mine["steady_samples_per_s"].mean()


def _labelled(folder) -> pd.DataFrame:
    runs = pd.read_csv(folder / "runs.csv")
    return runs.assign(_setting=np.where(runs["hosts"] == 1, "one machine",
                                         np.where(runs["strategy"] == "ps", "parameter server", runs["balance"])))


def test_balancing_is_compared_by_the_projected_time_where_the_runs_trained_fixed_steps(tmp_path):
    exp = _experiment(tmp_path)
    table, words = mixed.bought(exp, mixed.mixed_runs(exp))
    runs, t = _labelled(tmp_path), table.set_index("setting")
    assert set(table["yardstick"]) == {"steady samples/s"}
    for setting in ("none", "static", "dynamic", "parameter server", "one machine"):
        assert t.loc[setting, "time_s"] == pytest.approx(_projected(runs, setting))
    sps = runs.groupby("_setting")["steady_samples_per_s"].mean()     # the factors: the answer's speedup
    for setting in ("static", "dynamic"):
        assert t.loc[setting, "vs_plain"] == pytest.approx(sps[setting] / sps["none"])
        assert t.loc[setting, "vs_ps"] == pytest.approx(sps[setting] / sps["parameter server"])
        assert t.loc[setting, "vs_one_machine"] == pytest.approx(sps[setting] / sps["one machine"])
    # the spread: two repeats against two lie apart, too few to judge; one run against one: no spread
    assert t.loc["static", "vs_plain_verdict"] == "too few repeats"
    assert t.loc["dynamic", "vs_one_machine_verdict"] == "one run"
    each = [_projected(runs, "static", r) for r in ("allreduce-static-r0", "allreduce-static-r1")]
    assert (t.loc["static", "time_min_s"], t.loc["static", "time_max_s"]) == pytest.approx([min(each), max(each)])
    said = " ".join(words)
    assert "Compared as the answer compares, by the projected time of the job at steady samples/s" in said
    assert "the node counts trained different data" in said
    static = next(w for w in words if w.startswith("At 1 Gbit/s, balance static:"))
    assert (f"{t.loc['static', 'vs_plain']:.3g}× faster than plain synchronous training "
            f"({_projected(runs, 'none'):.3g} s; too few repeats)") in static
    assert "over 2 runs" in static and "the asynchronous parameter server" in static and "one machine" in static
    dynamic = next(w for w in words if w.startswith("At 1 Gbit/s, balance dynamic:"))
    assert "(one run)" in dynamic and "one run each" in dynamic
    best = max(("static", "dynamic"), key=lambda s: t.loc[s, "vs_plain"])
    assert (f"What balancing bought at 1 Gbit/s: balance {best} made training {t.loc[best, 'vs_plain']:.3g}× faster "
            "than plain synchronous training") in said


def _time_to_target(folder) -> dict:
    """run_id -> its time to the target loss from steps.csv alone (per engine, the target is the highest of its
    runs' lowest means of 5 losses; a run's time: its steps' times summed up to the first step whose mean of the
    last 5 losses is at or below it)."""
    runs, steps = pd.read_csv(folder / "runs.csv"), pd.read_csv(folder / "steps.csv")
    smooth = {r: s.sort_values("t")["loss"].rolling(5, min_periods=1).mean().to_numpy()
              for r, s in steps.groupby("run_id")}
    engine = runs.set_index("run_id")["engine"]
    target = {e: max(smooth[r].min() for r in smooth if engine[r] == e) for e in set(engine)}
    out = {}
    for r, s in steps.groupby("run_id"):
        hit = int(np.flatnonzero(smooth[r] <= target[engine[r]])[0])
        out[r] = float(s.sort_values("t")["time_s"].iloc[:hit + 1].sum())
    return out


def test_balancing_is_compared_by_time_to_the_target_where_every_run_learns_the_same_data(tmp_path):
    exp = _experiment(tmp_path, fixed="data", compute="budgets")
    table, words = mixed.bought(exp, mixed.mixed_runs(exp))
    runs, t = _labelled(tmp_path), table.set_index("setting")
    times = _time_to_target(tmp_path)
    runs["_t"] = runs["run_id"].map(times)
    mean = runs.groupby("_setting")["_t"].mean()
    assert set(table["yardstick"]) == {"time to target"}
    assert t.loc["static", "time_s"] == pytest.approx(mean["static"])
    assert t.loc["static", "vs_plain"] == pytest.approx(mean["none"] / mean["static"])
    assert t.loc["dynamic", "vs_one_machine"] == pytest.approx(mean["one machine"] / mean["dynamic"])
    # the parameter server ran TensorFlow: its target loss is its own, so no factor against it
    assert np.isnan(t.loc["static", "vs_ps"])
    said = " ".join(words)
    assert said.startswith("Compared as the answer compares, by time to the target loss: every run's loss fell")
    assert ("not compared with the asynchronous parameter server (tensorflow: each engine's target loss is its "
            "own") in said


def test_degraded_settings_are_left_out_and_said(tmp_path):
    exp = _experiment(tmp_path, degraded=("dynamic", "ps"))
    table, words = mixed.bought(exp, mixed.mixed_runs(exp))
    assert not {"dynamic", "parameter server"} & set(table["setting"])
    assert table["vs_ps"].isna().all()
    [left] = [w for w in words if w.startswith("Not counted (degraded")]
    assert "balance dynamic at 1 Gbit/s (1 run)" in left and "the asynchronous parameter server at 1 Gbit/s (1 run)" in left
    static = next(w for w in words if w.startswith("At 1 Gbit/s, balance static:"))
    assert "no time of the asynchronous parameter server to compare with" in static


def test_the_report_section_says_the_comparison(tmp_path):
    from analysis.report.sections.settings import mixed_machines
    exp = _experiment(tmp_path)
    t = mixed_machines.section_tables(exp)
    html_text = "".join(mixed_machines.parts(exp, t))
    _, words = mixed.bought(exp, mixed.mixed_runs(exp))
    assert "<h2>Mixed machines</h2>" in html_text
    assert all(html.escape(w) in html_text for w in words)
    assert "set the pace" in html_text          # what the slowest node cost, without balancing
