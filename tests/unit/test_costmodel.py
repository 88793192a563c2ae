"""Cost model: its terms on hand-computed cases, CPU sharing, the fit recovering known parameters
from made-up data, held-out evaluation on the steady step, features read from a results folder
(the steady state from runs.csv or steps.csv, runs not judged left out)."""
import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from analysis.model import costmodel
from analysis.tables import tables
from analysis.model.costmodel import run_features
from analysis.model.costmodel import Point

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "report_small"


# -- terms -----------------------------------------------------------------------------------
def test_ring_allreduce_hand_computed():
    # N=4, S=1e6 bytes, B=10 Mbit/s, alpha=1 ms: 2*3/4 * 8e6/1e7 + 6*0.001 = 1.2 + 0.006
    assert float(costmodel.ring_allreduce_time(4, 1e6 * 8, 10e6, 0.001)) == pytest.approx(1.206)
    assert float(costmodel.ring_allreduce_time(4, 8e6, 1e7, 0.0)) == pytest.approx(1.2)
    assert float(costmodel.ring_allreduce_time(1, 8e6, 1e7, 0.001)) == 0.0


def test_parameter_server_terms_hand_computed():
    # one closure: pull S and push S over the worker's link, two calls
    assert float(costmodel.ps_closure_comm(8e6, 1e7, 0.001)) == pytest.approx(1.602)
    # the busiest server link carries S/k each way per closure; unknown k counts as one server
    assert float(costmodel.ps_server_time(1, 8e6, 1e7)) == pytest.approx(0.8)
    assert float(costmodel.ps_server_time(2, 8e6, 1e7)) == pytest.approx(0.4)
    assert float(costmodel.ps_server_time(np.nan, 8e6, 1e7)) == pytest.approx(0.8)


def _ps(p=1.0, d=0.005, **kw):
    return dict(dict(c=0.01, gamma=1.0, alpha=0.001, d=d, p=p, w=0.5, v=0.1, beta=2.0), **kw)


def test_ps_steady_step_hand_computed():
    # N=2 workers, 1 shard, S=8 Mbit, B=10 Mbit/s, r=0: tau = 0.01 + 1.6 + 0.002 = 1.612,
    # workers A = tau/2 = 0.806, server link C = 0.8, coordinator d = 0.005
    pt = Point("ps", 2, 1, 8e6, 1e7, 0.0, np.ones(2))
    assert costmodel.steady_time("ps", _ps(p=1.0), pt) == pytest.approx(0.806 + 0.8 + 0.005)
    assert costmodel.steady_time("ps", _ps(p=200.0), pt) == pytest.approx(0.806, rel=1e-2)
    # sharded over 2 servers: C = 0.4
    pt2 = Point("ps", 2, 2, 8e6, 1e7, 0.0, np.ones(2))
    assert costmodel.steady_time("ps", _ps(p=1.0), pt2) == pytest.approx(0.806 + 0.4 + 0.005)
    # p = 2: the Euclidean combination
    assert costmodel.steady_time("ps", _ps(p=2.0), pt) == pytest.approx(
        np.sqrt(0.806 ** 2 + 0.8 ** 2 + 0.005 ** 2))


def test_ps_heterogeneous_workers_add_throughput():
    # async: a slow worker (compute x5) adds its own rate, it does not stall the others
    p = _ps(p=200.0, d=0.0, gamma=1e-9, alpha=0.0)
    pt = Point("ps", 2, 1, 8e6, 1e7, 0.0, np.array([1.0, 5.0]))
    tau = np.array([0.01, 0.05])
    assert costmodel.steady_time("ps", p, pt) == pytest.approx(1 / np.sum(1 / tau), rel=1e-2)


def test_allreduce_steady_step_hand_computed():
    # N=4 on a shared 2-core machine: slowdown 2; c=10 ms, gamma=1, alpha=1 ms, r=0.4 ms:
    # 0.02 + 1.5*0.8 + 6*(0.001 + 0.0002) = 1.2272
    p = dict(c=0.01, gamma=1.0, alpha=0.001, w=0.5, v=0.1, beta=2.0)
    slow = costmodel.slowdowns(4, u=1.0, cores=2.0)
    pt = Point("allreduce", 4, 1, 8e6, 1e7, 0.0004, slow)
    assert costmodel.steady_time("allreduce", p, pt) == pytest.approx(1.2272)
    # warm-up: w*s + v*(N-1) + beta*S/B = 0.5*2 + 0.3 + 2*0.8
    assert costmodel.warmup_time("allreduce", p, pt) == pytest.approx(2.9)
    # one worker: compute only, no traffic in the warm-up either
    one = Point("allreduce", 1, 1, 8e6, 1e7, 0.0004, np.ones(1))
    assert costmodel.steady_time("allreduce", p, one) == pytest.approx(0.01)
    assert costmodel.warmup_time("allreduce", p, one) == pytest.approx(0.5)


def _topology(tmp_path, text, hosts):
    """A run's topology.json as the runner writes it, for an all-reduce over every host."""
    from spec_helpers import load
    from testbed.roles import assign_tasks
    from testbed.run.point.record import topology_document
    from testbed.spec import build_graph
    spec = load(tmp_path, f"name: t\ntopology: {text}\n")
    graph = build_graph(spec.topology)
    return topology_document(graph, assign_tasks(spec.workload, [h.name for h in graph.hosts][:hosts]))


def test_tensorflows_ring_order_shares_a_trees_uplinks_and_the_model_slows_the_ring_by_it(tmp_path):
    assert costmodel.ring_order(12) == [0, 1, 10, 11, 2, 3, 4, 5, 6, 7, 8, 9]   # task names sort as text
    assert costmodel.ring_order(12, "pytorch") == list(range(12))
    tree16 = _topology(tmp_path, "{template: tree, fanout: 4, hosts: 16}", 16)
    # 0 1 10..15 2 3 ... 9: the first and third leaf switches each send two ring hops up at once
    assert costmodel.ring_share(tree16, "tensorflow") == 2
    assert costmodel.ring_share(tree16, "pytorch") == 1
    for text in ("{template: tree, fanout: 4, hosts: 8}", "{template: star, hosts: 16}"):
        assert costmodel.ring_share(_topology(tmp_path, text, 16), "tensorflow") == 1, text
    p = dict(c=0.0, gamma=1.0, alpha=0.0, w=0.0, v=0.0, beta=0.0)
    alone = Point("allreduce", 16, 1, 8e6, 1e7, 0.0, np.ones(16))
    shared = Point("allreduce", 16, 1, 8e6, 1e7, 0.0, np.ones(16), share=2)
    assert costmodel.steady_time("allreduce", p, shared) == pytest.approx(2 * costmodel.steady_time("allreduce", p, alone))


def test_cpu_sharing_water_filling():
    assert costmodel.fair_shares([1, 1, 1, 1], 2.0) == pytest.approx([0.5] * 4)
    assert costmodel.fair_shares([0.25, 1, 1], 2.0) == pytest.approx([0.25, 0.875, 0.875])
    assert costmodel.fair_shares([0.5, 0.5], 2.0) == pytest.approx([0.5, 0.5])
    # 4 workers wanting a core each on 2 cores: each twice as slow; 2 workers fit
    assert costmodel.slowdowns(4, 1.0, 2.0) == pytest.approx([2, 2, 2, 2])
    assert costmodel.slowdowns(2, 1.0, 2.0) == pytest.approx([1, 1])
    # a lone worker that uses 1.5 cores, sharing with another: each gets 1 -> 1.5x slower
    assert costmodel.slowdowns(2, 1.5, 2.0) == pytest.approx([1.5, 1.5])
    # per-host CPU limit (fraction of the machine): 0.25 of 2 cores = 0.5 core -> 2x slower
    assert costmodel.slowdowns(2, 1.0, 2.0, [1.0, 0.25]) == pytest.approx([1, 2])
    assert costmodel.slowdowns(3, 1.0, 2.0, [0.25]) == pytest.approx([2, 2, 2])   # cycled
    # separate machines: nobody shares
    assert costmodel.slowdowns(8, 1.0, 2.0, shared=False) == pytest.approx([1] * 8)


def test_slowest_worker_sets_the_synchronous_step():
    model = costmodel.default_model()
    fast = model.terms("allreduce", 2, 8e6, 1e9, fractions=[1.0, 1.0])
    slow = model.terms("allreduce", 2, 8e6, 1e9, fractions=[1.0, 0.1])   # 0.2 core: 5x slower
    c = model.fits["allreduce"].params["c"]
    assert slow["slowdown"] == pytest.approx(5.0)
    assert slow["compute_s"] == pytest.approx(5 * c)
    assert slow["steady_s"] - fast["steady_s"] == pytest.approx(4 * c)


def test_ps_shards():
    assert costmodel.ps_shards(2, False, 10 << 20) == 1            # not partitioned
    assert costmodel.ps_shards(2, True, 200_000) == 1              # below 256 KiB: one piece
    assert costmodel.ps_shards(4, True, 600 << 10) == 2            # two 256 KiB pieces
    assert costmodel.ps_shards(3, "fixed", 1000) == 3


# -- fitting ---------------------------------------------------------------------------------
TRUE_AR = dict(c=0.004, gamma=1.15, alpha=0.006, w=0.7, v=0.3, beta=1.5)
TRUE_PS = dict(c=0.006, gamma=1.1, alpha=0.002, d=0.012, p=2.5, w=0.9, v=0.2, beta=6.0)


def synthetic(params=None, noise=0.0, seed=0, cores=2.0, u=1.0) -> pd.DataFrame:
    """Made-up features from known parameters: all-reduce N 1-4 and ps N 1-3 x k 1-2, 3 rates."""
    params = params or {"allreduce": TRUE_AR, "ps": TRUE_PS}
    rng = np.random.default_rng(seed)
    rows = []
    s_bits, batch, steps = 1.6e6, 32.0, 20.0
    # ps also on hosts limited to 0.25 of the machine (4x slower workers): tells compute from latency
    for fam, grid in (("allreduce", [(n, 0, None) for n in (1, 2, 3, 4)]),
                      ("ps", [(n, k, None) for n in (1, 2, 3) for k in (1, 2)] + [(2, 1, [0.125])]),
                      ("ddp", [(n, 0, None) for n in (1, 2, 3, 4)])):
        if fam not in params:
            continue
        for n, k, fr in grid:
            for bw in (1e7, 5e7, 2e8):
                slow = costmodel.slowdowns(n, u, cores, fr)
                pt = Point(fam, n, max(k, 1), s_bits, bw * 0.956, 3e-4, slow)
                st = costmodel.steady_time(fam, params[fam], pt) * np.exp(noise * rng.standard_normal())
                wu = costmodel.warmup_time(fam, params[fam], pt) * np.exp(noise * rng.standard_normal())
                rows.append(dict(run_id=f"{fam}-n{n}-k{k}-{bw:g}-{fr}", strategy="allreduce" if fam == "ddp" else fam,
                                 family=fam, model="mlp",
                                 hosts=n + (1 + k if fam == "ps" else 0), workers=n, servers=k, shards=max(k, 1),
                                 bw_bps=bw, bw=f"{bw:g}", s_bits=s_bits, batch=batch, steps=steps,
                                 bw_meas_bps=bw * 0.956, bw_source="checks", rtt_s=3e-4,
                                 fractions=json.dumps(fr) if fr else "",
                                 slowdown=float(slow.max()), steady="ok", steady_s=st, warmup_s=wu,
                                 samples_per_step=batch * (1 if fam == "ps" else n),
                                 steady_samples_per_s=batch * (1 if fam == "ps" else n) / st,
                                 time_per_step_s=st + wu / steps))
    df = pd.DataFrame(rows, columns=costmodel.FEATURES)
    df.attrs.update(cores=cores, u=u, rho=0.956)
    return df


@pytest.mark.parametrize("family,truth", [("allreduce", TRUE_AR), ("ps", TRUE_PS)])
def test_fit_recovers_known_parameters(family, truth):
    model = costmodel.fit_features(synthetic())
    got = model.fits[family].params
    for name, value in truth.items():
        assert got[name] == pytest.approx(value, rel=0.02), name
    assert model.fits[family].n_runs == (12 if family == "allreduce" else 21)
    assert model.fits[family].defaulted == []


def test_each_engine_gets_its_own_fit_with_the_same_formulas():
    """PyTorch's runs (strategy allreduce, engine pytorch) are the ddp family: fitted apart from
    TensorFlow's all-reduce, each recovering its own parameters, and predicted by its own fit."""
    ddp = dict(TRUE_AR, gamma=1.6, alpha=0.002, c=0.004)
    assert costmodel._family("allreduce", "pytorch") == "ddp" and costmodel._family("single", "pytorch") == "ddp"
    assert costmodel._family("allreduce", "tensorflow") == "allreduce" and costmodel._family("ps") == "ps"
    feats = synthetic({"allreduce": TRUE_AR, "ddp": ddp})
    model = costmodel.fit_features(feats)
    for family, truth in (("allreduce", TRUE_AR), ("ddp", ddp)):
        assert model.fits[family].n_runs == 12
        for name, value in truth.items():
            assert model.fits[family].params[name] == pytest.approx(value, rel=0.02), (family, name)
    cmp = costmodel.comparison(feats, model)
    assert set(cmp["family"]) == {"allreduce", "ddp"} and cmp["rel_error"].abs().max() < 0.01
    assert set(costmodel.accuracy(cmp)["strategy"]) == {"allreduce", "ddp"}


def test_runs_without_a_judged_steady_state_are_left_out_of_the_fit():
    feats = synthetic({"allreduce": TRUE_AR})
    spoiled = feats.copy()
    four = spoiled["workers"] == 4
    # not judged (too few steady steps): no steady step, whatever its time per step says
    spoiled.loc[four, ["steady_s", "warmup_s"]] = np.nan
    spoiled.loc[four, "steady"] = "too few steady steps to judge: 5 after a 1-step warm-up"
    spoiled.loc[four, "time_per_step_s"] *= 10
    assert list(costmodel.fitted_rows(spoiled)["run_id"]) == list(feats.loc[~four, "run_id"])
    model = costmodel.fit_features(costmodel.fitted_rows(spoiled))
    assert model.fits["allreduce"].n_runs == int((~four).sum())
    for name, value in TRUE_AR.items():
        assert model.fits["allreduce"].params[name] == pytest.approx(value, rel=0.02), name
    # and in the comparison they have no error to count
    cmp = costmodel.comparison(spoiled, model)
    assert cmp.loc[cmp["workers"] == 4, "rel_error"].isna().all()
    assert costmodel.accuracy(cmp).loc[0, "runs"] == int((~four).sum())


def test_accuracy_is_on_the_steady_step_not_the_time_per_step():
    feats = synthetic({"allreduce": TRUE_AR})
    model = costmodel.fit_features(feats)
    # a time per step far off (a slow warm-up spread over a short run) does not count ...
    off = feats.assign(time_per_step_s=feats["time_per_step_s"] * 3)
    cmp = costmodel.comparison(off, model)
    assert cmp["rel_error"].abs().max() < 0.01
    assert (cmp["measured_step_s"] > 2 * cmp["predicted_step_s"]).all()
    # ... a steady step off does, by its own relative error
    slow = feats.assign(steady_s=feats["steady_s"] * 1.25)
    cmp = costmodel.comparison(slow, model)
    assert cmp["rel_error"].to_numpy() == pytest.approx(1 / 1.25 - 1, rel=0.02)
    acc = costmodel.accuracy(cmp).iloc[0]
    assert acc["median_abs_rel_error"] == pytest.approx(0.2, rel=0.05)
    # the steady samples/s follow: samples per step over the steady step
    assert (cmp["predicted_samples_per_s"] * cmp["predicted_steady_s"]).to_numpy() == \
        pytest.approx(cmp["samples_per_step"].to_numpy())


def test_fit_with_noise_stays_close():
    model = costmodel.fit_features(synthetic(noise=0.05, seed=3))
    got = model.fits["allreduce"].params
    assert got["gamma"] == pytest.approx(TRUE_AR["gamma"], rel=0.15)
    assert got["alpha"] == pytest.approx(TRUE_AR["alpha"], rel=0.4)


def test_unidentifiable_parameters_keep_defaults():
    # only 1-worker runs: no traffic, so gamma, alpha, v, beta cannot be fitted
    feats = synthetic({"allreduce": TRUE_AR})
    feats = feats[feats["workers"] == 1]
    fit = costmodel.fit_features(feats).fits["allreduce"]
    assert set(fit.defaulted) == {"gamma", "alpha", "v", "beta"}
    assert fit.params["gamma"] == pytest.approx(costmodel.DEFAULTS["allreduce"]["gamma"], rel=1e-3)
    assert fit.params["c"] == pytest.approx(TRUE_AR["c"], rel=0.02)
    # a strategy with no run at all is the defaults, and says so
    assert costmodel.fit_features(feats).fits["ps"].n_runs == 0


def test_holdout_fits_without_the_largest_worker_count():
    feats = synthetic()
    held = costmodel.holdout(feats)
    assert set(held["workers"]) == {3, 4}
    assert set(held.loc[held["strategy"] == "allreduce", "workers"]) == {4}
    assert set(held["trained_on"]) == {"workers <= 3", "workers <= 2"}
    assert held["rel_error"].abs().max() < 0.03      # exact data: extrapolation is exact too
    # the held-out rows took no part in the fit: spoiling them changes nothing predicted
    spoiled = feats.copy()
    top = (spoiled["family"] == "allreduce") & (spoiled["workers"] == 4)
    spoiled.loc[top, ["steady_s", "warmup_s", "time_per_step_s"]] *= 1.3
    held2 = costmodel.holdout(spoiled)
    ar, ar2 = (h[h["strategy"] == "allreduce"].reset_index(drop=True) for h in (held, held2))
    assert ar2["predicted_steady_s"].to_numpy() == pytest.approx(ar["predicted_steady_s"].to_numpy())
    assert ar2["rel_error"].to_numpy() == pytest.approx((1 + ar["rel_error"].to_numpy()) / 1.3 - 1)
    acc = costmodel.accuracy(costmodel.comparison(spoiled), held2).set_index(["strategy", "split"])
    assert acc.loc[("allreduce", "held-out"), "median_abs_rel_error"] == pytest.approx(1 - 1 / 1.3, rel=0.05)


def test_model_save_load_roundtrip(tmp_path):
    model = costmodel.fit_features(synthetic())
    back = costmodel.CostModel.load(model.save(tmp_path / "m.json"))
    assert back.to_dict() == model.to_dict()
    assert back.step("ps", 2, 1.6e6, 1e7, servers=1) == model.step("ps", 2, 1.6e6, 1e7, servers=1)
    assert "allreduce" in back.describe() and "gamma" in back.describe()


# -- from a results folder -------------------------------------------------------------------
def with_steps(src: Path, dst: Path, warmup_s: float = 1.0, steps: int = 40, only=None) -> Path:
    """A copy of a results folder whose steps.csv holds the lead task's steps of every ok run (or of
    the runs in `only`): a warm-up step of `warmup_s`, then steps around runs.csv's time per step
    (their median and mean are that time), so the steady step is known."""
    shutil.copytree(src, dst)
    runs = pd.read_csv(dst / "runs.csv")
    rows = []
    for r in runs[runs["status"] == "ok"].itertuples(index=False):
        if only is not None and r.run_id not in only:
            continue
        role = "chief" if r.strategy == "ps" else "worker"
        t = 0.0
        for k in range(steps):
            time_s = warmup_s if k == 0 else r.time_per_step_s * (1 + 0.02 * ((k % 5) - 2))
            t += time_s
            rows.append(dict(experiment=r.experiment, run_id=r.run_id, role=role, task_index=0, host="h1",
                             kind="step", epoch=0, step=k, time_s=time_s, loss=1.0, samples_per_s=None, t=t))
    pd.DataFrame(rows, columns=tables.STEPS_COLUMNS).to_csv(dst / "steps.csv", index=False)
    return dst


def test_evaluate_on_fixture(tmp_path):
    exp = tables.load_experiment(with_steps(FIXTURE, tmp_path / "exp"))
    ev = costmodel.evaluate(exp, cores=2)
    ok = exp.runs[exp.runs["status"] == "ok"]
    assert len(ev["in_sample"]) == len(ok) and ev["not_judged"].empty
    assert set(ev["held_out"]["workers"]) == {4}
    acc = ev["accuracy"].set_index(["strategy", "split"])
    assert acc.loc[("allreduce", "in-sample"), "median_abs_rel_error"] < 0.10
    assert acc.loc[("allreduce", "held-out"), "median_abs_rel_error"] < 0.20
    # the steady step is the steps' median after the warm-up step; the warm-up that step's time
    f = ev["features"].set_index("run_id")
    tps = ok.set_index("run_id")["time_per_step_s"]
    assert f["steady_s"].to_numpy() == pytest.approx(tps[f.index].to_numpy(), rel=0.01)   # ps: a mean
    assert (f["warmup_s"] == 1.0).all() and (f["warmup_steps"] == 1).all() and (f["steady_steps"] == 39).all()
    # ps: a step is one worker's closure, one worker's batch (runs.csv's global batch is both workers')
    ps = f[f["family"] == "ps"]
    assert (ps["samples_per_step"] == 32).all() and (ps["batch"] == 32).all()
    assert ps["steady_samples_per_s"].to_numpy() == pytest.approx((32 / ps["steady_s"]).to_numpy())
    # the checks' measured bandwidth is used, not the configured one
    checks = exp.checks[exp.checks["tool"] == "iperf3"]
    rid = checks["run_id"].iloc[0]
    assert f.loc[rid, "bw_meas_bps"] == checks.loc[checks["run_id"] == rid, "measured_bps"].min()
    assert f.loc[rid, "bw_source"] == "checks"


def test_runs_not_judged_are_listed_apart_and_said_so(tmp_path):
    runs = pd.read_csv(FIXTURE / "runs.csv")
    ok = runs.loc[runs["status"] == "ok", "run_id"]
    short = set(ok[runs["hosts"] == 4])            # their steps too few to judge
    exp_dir = with_steps(FIXTURE, tmp_path / "exp", only=set(ok) - short)
    steps = pd.read_csv(exp_dir / "steps.csv")
    few = with_steps(FIXTURE, tmp_path / "few", steps=8, only=short)
    pd.concat([steps, pd.read_csv(few / "steps.csv")]).to_csv(exp_dir / "steps.csv", index=False)
    exp = tables.load_experiment(exp_dir)
    ev = costmodel.evaluate(exp, cores=2)
    assert set(ev["not_judged"]["run_id"]) == short
    assert ev["not_judged"]["split"].eq(costmodel.NOT_JUDGED_SPLIT).all()
    assert ev["not_judged"]["rel_error"].isna().all() and ev["not_judged"]["predicted_steady_s"].notna().all()
    assert not set(ev["in_sample"]["run_id"]) & short
    assert ev["model"].fits["allreduce"].n_runs == len(ev["in_sample"])
    (note,) = costmodel.fit_notes(exp)
    assert note.startswith(f"{len(short)} run(s) left out of the cost model's fit, their steady state not judged "
                           "(too few steady steps to judge: 7 after a 1-step warm-up")


def test_steady_state_from_runs_csv_when_recorded_else_from_steps():
    runs = pd.DataFrame([dict(run_id="new", strategy="allreduce", global_batch=64, workers=2, hosts=2,
                              samples_per_step=64, warmup_steps=2, warmup_s=3.0, steady_steps=30,
                              steady_step_s=0.5, steady_step_q1_s=0.4, steady_step_q3_s=0.6,
                              steady_samples_per_s=128.0, steady="ok"),
                         dict(run_id="old", strategy="ps", global_batch=64, workers=2, hosts=4)])
    times = [2.0] + [0.1, 0.3] * 6
    steps = pd.DataFrame(dict(run_id="old", role="chief", task_index=0, kind="step", step=range(13), time_s=times,
                              t=range(13)))
    st = costmodel.steady_of(runs, steps)
    assert st.loc[0, "steady_step_s"] == 0.5 and st.loc[0, "warmup_s"] == 3.0 and st.loc[0, "steady"] == "ok"
    # ps, recorded before the columns: the mean interval after the first step, one worker's batch per step
    assert st.loc[1, "steady_step_s"] == pytest.approx(0.2) and st.loc[1, "warmup_s"] == 2.0
    assert st.loc[1, "steady_samples_per_s"] == pytest.approx(32 / 0.2)
    assert costmodel.run_samples_per_step(runs).tolist() == [64, 32]
    # no step rows: not judged, and why
    none = costmodel.steady_of(runs.iloc[1:], steps.iloc[:0])
    assert none.iloc[0]["steady"].startswith("no step timings") and np.isnan(none.iloc[0]["steady_step_s"])


def test_features_read_each_runs_topology_once(tmp_path, monkeypatch):
    exp_dir = with_steps(FIXTURE, tmp_path / "exp")
    read = []
    real = run_features._read_json
    monkeypatch.setattr(run_features, "_read_json", lambda path: read.append(Path(path)) or real(path))
    feats = costmodel.features(tables.load_experiment(exp_dir), cores=2)
    assert len(read) == len(feats) == len(set(read))


def test_features_read_cpu_limits_and_roles(tmp_path):
    exp_dir = tmp_path / "exp"
    shutil.copytree(FIXTURE, exp_dir)
    runs = pd.read_csv(exp_dir / "runs.csv")
    rid = runs.loc[(runs["hosts"] == 4) & (runs["strategy"] == "allreduce") & (runs["status"] == "ok"),
                   "run_id"].iloc[0]
    folder = exp_dir / "runs" / rid
    folder.mkdir(parents=True)
    (folder / "spec.yaml").write_text(yaml.safe_dump({"topology": {
        "hosts": 4, "host": {"cpu": 0.5}, "host_overrides": {"h3": {"cpu": 0.1}}}}))
    (folder / "topology.json").write_text(json.dumps({"hosts": [
        {"name": f"h{i}", "role": f"worker{i - 1}"} for i in range(1, 5)]}))
    f = costmodel.features(tables.load_experiment(exp_dir), cores=2).set_index("run_id")
    assert json.loads(f.loc[rid, "fractions"]) == [0.5, 0.5, 0.1, 0.5]
    # h3 may use 0.1 of 2 cores = 0.2 core: the slowest worker, u / 0.2 times slower
    u = costmodel.lone_worker_cores(tables.load_experiment(exp_dir), 2)
    assert f.loc[rid, "slowdown"] == pytest.approx(u / 0.2)
    assert costmodel.worker_fractions({}, exp_dir, "nope", "allreduce", 2, 0) == []


def test_repeat_floor_is_the_spread_of_one_configuration_measured_twice():
    row = dict(family="allreduce", model="mlp", hosts=2, workers=2, servers=0, bw_bps=1e7, batch=32, steps=20,
               time_per_step_s=9.0)             # the time per step (warm-up included) plays no part
    feats = pd.DataFrame([dict(row, steady_s=0.1), dict(row, steady_s=0.4),
                          dict(row, hosts=4, workers=4, steady_s=0.3),                 # measured once: left out
                          dict(row, steady_s=np.nan)])                                 # not judged: left out
    floor = costmodel.repeat_floor(feats).iloc[0]
    # geometric mean 0.2: the two runs lie +100 % and -50 % from it
    assert (floor["configurations"], floor["runs"]) == (1, 2)
    assert floor["median_abs_rel_error"] == pytest.approx(0.75) and floor["max_abs_rel_error"] == pytest.approx(1.0)
    assert costmodel.repeat_floor(feats.iloc[1:]).empty


# -- compute budgets --------------------------------------------------------------
BUDGETS = FIXTURE.parent / "faithful_budgets"
SHARED = FIXTURE.parent / "faithful_shared"


def test_budget_runs_compute_on_machines_of_their_own():
    # 4 nodes of 1 core on a 2-core machine: shared they are twice as slow, under budgets not at all
    assert costmodel.slowdowns(4, 1.0, 2.0, [0.5] * 4, shared=True) == pytest.approx([2] * 4)
    assert costmodel.slowdowns(4, 1.0, 2.0, [0.5] * 4, shared=False) == pytest.approx([1] * 4)
    budgets = costmodel.features(tables.load_experiment(BUDGETS), cores=2)
    assert not budgets["shared"].any()
    assert budgets["slowdown"].to_numpy() == pytest.approx(np.ones(len(budgets)))
    assert {tuple(json.loads(f)) for f in budgets["fractions"]} == {(0.5,) * n for n in (1, 2, 4)}
    shared = costmodel.features(tables.load_experiment(SHARED), cores=2).set_index("workers")
    assert shared["shared"].all()
    assert shared.loc[4, "slowdown"].to_numpy() == pytest.approx([2.0] * 3)


def test_budget_fit_keeps_the_compute_term_constant_per_node(tmp_path):
    budgets = with_steps(BUDGETS, tmp_path / "b")
    model = costmodel.fit(tables.load_experiment(budgets), cores=2)
    assert model.fits["allreduce"].n_runs > 0
    terms = {n: model.terms("allreduce", n, 1.6e6, 1e8, fractions=[0.5] * n, shared=False) for n in (1, 2, 4, 8)}
    assert len({round(t["compute_s"], 12) for t in terms.values()}) == 1
    assert terms[8]["comm_s"] > terms[2]["comm_s"]             # what grows is communication
    # the same fit on one shared machine: the compute term grows with the nodes
    shared = [model.terms("allreduce", n, 1.6e6, 1e8, fractions=[0.5] * n)["compute_s"] for n in (2, 4, 8)]
    assert shared[0] < shared[1] < shared[2]
    # and predicting the fitted runs uses their own machine: separate
    feats = costmodel.features(tables.load_experiment(budgets), cores=2)
    pred = costmodel.predict_features(model, feats)
    assert pred["predicted_compute_s"].nunique() == 1


def test_budget_fractions_from_node_cores(tmp_path):
    run = pd.Series(dict(run_id="r1", cores=np.nan, node_cores="h1=2;h2=1;h10=0.5"))
    row = next(pd.DataFrame([run]).itertuples(index=False))
    # no topology.json: all-reduce workers are the hosts in order
    assert costmodel.budget_fractions(row, tmp_path, "allreduce", 3, 0, 2.0) == [1.0, 0.5, 0.25]
    # with roles: the ps workers only
    (tmp_path / "runs" / "r1").mkdir(parents=True)
    (tmp_path / "runs" / "r1" / "topology.json").write_text(json.dumps({"hosts": [
        {"name": "h1", "role": "chief0"}, {"name": "h2", "role": "ps0"}, {"name": "h10", "role": "worker0"}]}))
    assert costmodel.budget_fractions(row, tmp_path, "ps", 1, 1, 2.0) == [0.25]
    equal = next(pd.DataFrame([dict(run_id="r2", cores=1.0, node_cores="")]).itertuples(index=False))
    assert costmodel.budget_fractions(equal, tmp_path, "allreduce", 3, 0, 4.0) == [0.25] * 3
