"""What the cost model is fitted on: one row per measured run, with the checks' bandwidth and RTT, the
workers' CPU limits or budgets, the ring's link sharing, the steady step and the warm-up."""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from analysis.model import communication
from analysis.tables import steady, tables
from analysis.tables.tables import ok_runs
from analysis.model.costmodel.formulas import TCP_CEILING, _family, ps_shards, slowdowns

# -- features of measured runs ---------------------------------------------------------------
FEATURES = ["run_id", "strategy", "family", "engine", "model", "fixed", "hosts", "workers", "servers", "shards",
            "share", "bw_bps", "bw", "s_bits", "batch", "samples_per_step", "steps", "samples_trained",
            "bw_meas_bps", "bw_source", "rtt_s", "fractions", "shared", "degraded", "slowdown", "steady",
            "warmup_steps", "steady_steps", "steady_s", "steady_q1_s", "steady_q3_s", "warmup_s",
            "steady_samples_per_s", "time_per_step_s", "communication", "bytes_factor", "sync_every"]
_STEADY = ["warmup_steps", "warmup_s", "steady_steps", "steady_step_s", "steady_step_q1_s",
                  "steady_step_q3_s", "steady_samples_per_s", "steady"]


def run_samples_per_step(runs: pd.DataFrame) -> pd.Series:
    """Each run's samples per step: runs.csv samples_per_step, else (results recorded before it) the
    global batch, under ps one worker's share of it (a coordinator step is one worker's closure)."""
    def col(name):
        return pd.to_numeric(runs[name], errors="coerce") if name in runs else pd.Series(np.nan, index=runs.index)
    own, batch = col("samples_per_step"), col("global_batch")
    workers = col("workers").where(lambda w: w > 0, col("hosts"))
    ps = runs["strategy"] == "ps" if "strategy" in runs else pd.Series(False, index=runs.index)
    return own.where(own > 0, batch.where(~ps, batch / workers))


def steady_of(runs: pd.DataFrame, steps: pd.DataFrame) -> pd.DataFrame:
    """Per run (runs' index): the warm-up and steady columns of runs.csv (_STEADY), derived
    from steps.csv with analysis.tables.steady for a run recorded before they existed (no ``steady``
    verdict); a run without step rows is 'no step timings'."""
    per_step = run_samples_per_step(runs)
    out = pd.DataFrame(index=runs.index, columns=_STEADY, dtype=object)
    have = runs["steady"].notna() if "steady" in runs else pd.Series(False, index=runs.index)
    for col in _STEADY:
        if col in runs:
            out.loc[have, col] = runs.loc[have, col]
    need = runs.loc[~have]
    if len(need):
        ids = need["run_id"] if "run_id" in need else pd.Series(None, index=need.index)
        times = steady.lead_times(steps[steps["run_id"].isin(set(ids.dropna()))]) if len(steps) else {}
        for i, r in need.iterrows():
            split = steady.split(times.get(ids[i], []), asynchronous=r.get("strategy") == "ps")
            for col, v in split.columns(per_step[i]).items():
                out.at[i, col] = v
    for col in _STEADY[:-1]:
        out[col] = pd.to_numeric(out[col], errors="coerce")
    rate = per_step / out["steady_step_s"]
    out["steady_samples_per_s"] = out["steady_samples_per_s"].where(out["steady_samples_per_s"].notna(), rate)
    out["steady"] = out["steady"].fillna("not recorded").astype(str)
    return out


def setting_factor(run, spec: dict | None, workers: int) -> dict:
    """A run's workload.communication as the cost model's bytes factor and sync every (plain: 1 and 1):
    analysis.model.communication's theory for its model (parameters from its spec.yaml)."""
    c = communication.settings_of({k: getattr(run, k, None) for k in communication.COLUMNS})
    if communication.label(c) == "none":
        return dict(bytes_factor=1.0, sync_every=1)
    every = communication.steps_per_sync(c)
    params = ((spec or {}).get("workload") or {}).get("model_params") or {}
    try:
        plan = communication.plan(str(run.model), params, str(run.strategy), max(workers, 2), c, run.gradient_bytes)
    except (ValueError, TypeError):
        return dict(bytes_factor=np.nan, sync_every=every)
    bytes_factor, sync = communication.factor(plan)
    return dict(bytes_factor=bytes_factor, sync_every=sync)


def judged(feats: pd.DataFrame) -> pd.Series:
    """Feature rows whose steady state was judged (a steady step to fit and to compare with)."""
    st = pd.to_numeric(feats["steady_s"], errors="coerce")
    return st.notna() & (st > 0)


def features(exp, cores: float | None = None) -> pd.DataFrame:
    """One row per ok run with what the model needs, measured: the checks' bandwidth and RTT,
    the workers' CPU limits and ps partitioning (runs/<id>/spec.yaml, roles from topology.json, each
    read once) or, under compute budgets, their cores (runs.csv; then shared is False), the steady
    step, its quartiles and the warm-up (runs.csv's steady columns, else analysis.tables.steady on
    steps.csv), the samples per step and whether the run was degraded. steady_s is NaN where the
    steady state was not judged (``steady`` says why). attrs: cores, u, rho."""
    cores = float(cores or os.cpu_count() or 1)
    ok = ok_runs(tables.with_faithful_defaults(exp.runs))
    ok = ok[ok["gradient_bytes"].notna() & (ok["steps"] > 0)]
    rho = bandwidth_ratio(exp.checks)
    u = lone_worker_cores(exp, cores)
    bw_meas, rtt = _measured_bw(exp.checks), _rtt(exp.checks)
    st = steady_of(ok, exp.steps)
    per_step = run_samples_per_step(ok)
    specs = getattr(exp, "specs", None) or {}       # spec.yaml as load_experiment read it, where it did
    rows = []
    for i, r in zip(ok.index, ok.itertuples(index=False)):
        workers = int(r.workers) if pd.notna(r.workers) and r.workers > 0 else int(r.hosts)
        servers = int(r.servers) if pd.notna(r.servers) else 0
        fam = _family(r.strategy, r.engine)        # ok_runs: tensorflow where results predate PyTorch
        folder = Path(exp.path) / "runs" / str(r.run_id)
        spec = specs[str(r.run_id)] if str(r.run_id) in specs else _run_spec(exp.path, r.run_id)
        topo = _read_json(folder / "topology.json")
        shared = r.compute not in tables.OWN_MACHINES
        fr = (worker_fractions(spec, exp.path, r.run_id, fam, int(r.hosts), servers, topology=topo) if shared
              else budget_fractions(r, exp.path, fam, workers, servers, cores, topology=topo))
        partition = ((spec.get("workload") or {}).get("ps") or {}).get("partition") if spec else None
        b_meas, src = bw_meas.get(r.run_id, np.nan), "checks"
        if not np.isfinite(b_meas):
            b_meas, src = r.bw_bps * rho, "configured x rho"
        s = st.loc[i]
        ok_steady = s["steady"] == steady.OK and np.isfinite(s["steady_step_s"]) and s["steady_step_s"] > 0
        trained = getattr(r, "samples_trained", np.nan)
        rows.append(dict(
            run_id=r.run_id, strategy=r.strategy, family=fam, engine=r.engine, model=r.model,
            fixed=getattr(r, "fixed", np.nan), hosts=int(r.hosts), workers=workers, servers=servers,
            shards=ps_shards(servers, partition, r.gradient_bytes) if fam == "ps" else 0,
            share=(ring_share(topo, r.engine) if topo else 1) if fam != "ps" else 1,
            bw_bps=r.bw_bps, bw=r.bw, s_bits=float(r.gradient_bytes) * 8,
            batch=float(r.global_batch) / workers, samples_per_step=float(per_step[i]), steps=float(r.steps),
            samples_trained=float(trained) if pd.notna(trained) else float(r.steps) * float(per_step[i]),
            bw_meas_bps=b_meas, bw_source=src, rtt_s=rtt.get(r.run_id, np.nan),
            fractions=json.dumps(fr) if fr else "", shared=shared, degraded=str(r.fidelity).startswith("degraded"),
            slowdown=float(slowdowns(workers, u, cores, fr, shared).max()), steady=s["steady"],
            warmup_steps=s["warmup_steps"], steady_steps=s["steady_steps"],
            steady_s=float(s["steady_step_s"]) if ok_steady else np.nan,
            steady_q1_s=s["steady_step_q1_s"] if ok_steady else np.nan,
            steady_q3_s=s["steady_step_q3_s"] if ok_steady else np.nan,
            warmup_s=s["warmup_s"] if ok_steady else np.nan,
            steady_samples_per_s=s["steady_samples_per_s"] if ok_steady else np.nan,
            time_per_step_s=float(r.time_per_step_s), communication=r.communication,
            **setting_factor(r, spec, workers)))
    out = pd.DataFrame(rows, columns=FEATURES)
    out.attrs.update(cores=cores, u=u, rho=rho, u_measured=_has_lone_worker(exp))
    return out


def features_of(folders, cores: float | None = None, include_degraded: bool = False) -> pd.DataFrame:
    """features() of several results folders together (e.g. an all-reduce sweep and a ps sweep),
    the rows a fit may use (``fitted_rows``): u from the folders that measured a lone worker, rho
    the median of theirs; degraded runs left out unless include_degraded, runs whose steady state
    was not judged always."""
    parts = [fitted_rows(features(tables.load_experiment(f), cores), include_degraded) for f in folders]
    parts = [p for p in parts if len(p)] or parts[:1]
    out = pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0].copy()
    us = [p.attrs["u"] for p in parts if p.attrs.get("u_measured")]
    out.attrs.update(cores=parts[0].attrs.get("cores"), u=float(np.median(us)) if us else 1.0,
                     rho=float(np.median([p.attrs.get("rho", TCP_CEILING) for p in parts])))
    return out


def fitted_rows(feats: pd.DataFrame, include_degraded: bool = False) -> pd.DataFrame:
    """The rows a fit may use (attrs kept): those whose steady state was judged, and of them all
    but the degraded runs' unless include_degraded."""
    keep = judged(feats)
    if not include_degraded and "degraded" in feats:
        keep &= feats["degraded"].astype(object) != True   # noqa: E712 (NaN: not degraded)
    out = feats[keep].copy()
    out.attrs.update(feats.attrs)
    return out


def budget_fractions(run, exp_dir, family: str, workers: int, servers: int, cores: float,
                     topology: dict | None = None) -> list:
    """Under compute budgets: each worker's cores (runs.csv cores, else node_cores 'h1=1;h2=0.5'),
    as a fraction of `cores` (the P of slowdowns); [] when the run records neither. topology: the
    run's topology.json when already read (else read here)."""
    if pd.notna(run.cores) and run.cores > 0:
        return [float(run.cores) / cores] * workers
    own = dict(item.split("=", 1) for item in str(run.node_cores).split(";") if "=" in item)
    if not own:
        return []
    names = sorted(own, key=lambda n: (len(n), n))
    if topology is None:
        topology = _read_json(Path(exp_dir) / "runs" / str(run.run_id) / "topology.json")
    hosts = _worker_hosts(topology, names, family, servers)
    return [float(own[h]) / cores if h in own else float("nan") for h in hosts]


def bandwidth_ratio(checks: pd.DataFrame) -> float:
    """Median measured / configured iperf3 rate (TCP_CEILING without checks)."""
    ip = checks[(checks["tool"] == "iperf3") & checks["measured_bps"].notna()
                & (checks["configured_bps"] > 0)]
    if ip.empty:
        return TCP_CEILING
    return float((ip["measured_bps"] / ip["configured_bps"]).median())


def _measured_bw(checks: pd.DataFrame) -> dict:
    """run_id -> narrowest measured iperf3 goodput (the slowest path paces a ring and a server)."""
    ip = checks[(checks["tool"] == "iperf3") & (checks["measured_bps"] > 0)]
    return ip.groupby("run_id")["measured_bps"].min().to_dict()


def _rtt(checks: pd.DataFrame) -> dict:
    ping = checks[(checks["tool"] == "ping") & checks["rtt_ms"].notna()]
    return (ping.groupby("run_id")["rtt_ms"].median() / 1e3).to_dict()


def _lone_worker_runs(exp) -> pd.Series:
    runs = ok_runs(exp.runs)
    return runs.loc[(runs["workers"].fillna(runs["hosts"]) == 1) & (runs["strategy"] != "ps"), "run_id"]


def _has_lone_worker(exp) -> bool:
    return bool(exp.usage["run_id"].isin(_lone_worker_runs(exp)).any())


def lone_worker_cores(exp, cores: float) -> float:
    """u: the 90th percentile of a lone worker's CPU (usage.csv of 1-worker all-reduce or single
    runs), in cores; 1.0 when there is none."""
    u = exp.usage[exp.usage["run_id"].isin(_lone_worker_runs(exp)) & exp.usage["cpu_pct"].notna()]
    if u.empty:
        return 1.0
    return float(np.clip(u["cpu_pct"].quantile(0.9) / 100.0, 0.2, cores))


def _run_spec(exp_dir, run_id) -> dict:
    try:
        spec = yaml.safe_load((Path(exp_dir) / "runs" / str(run_id) / "spec.yaml").read_text())
        return spec if isinstance(spec, dict) else {}
    except (OSError, yaml.YAMLError):
        return {}


def worker_fractions(spec: dict, exp_dir, run_id: str, family: str, hosts: int, servers: int,
                     topology: dict | None = None) -> list:
    """The cpu limit (fraction of the machine, NaN = none) of each worker host of a run, from its
    resolved spec and topology.json (roles; `topology` when already read, else read here); [] when
    nothing limits them or the folder is absent."""
    topo = spec.get("topology") if spec else None
    if not isinstance(topo, dict):
        return []
    default = (topo.get("host") or {}).get("cpu")
    if isinstance(topo.get("hosts"), list):
        names = [h["name"] for h in topo["hosts"]]
        own = {h["name"]: h.get("cpu") for h in topo["hosts"]}
    else:
        names = [f"h{i}" for i in range(1, hosts + 1)]
        own = {n: (o or {}).get("cpu") for n, o in (topo.get("host_overrides") or {}).items()}
    if topology is None:
        topology = _read_json(Path(exp_dir) / "runs" / str(run_id) / "topology.json")
    workers = _worker_hosts(topology, names, family, servers)
    cpu = [own.get(n) if own.get(n) is not None else default for n in workers]
    if all(c is None for c in cpu):
        return []
    return [float("nan") if c is None else float(c) for c in cpu]


def ring_order(workers: int, engine: str | None = "tensorflow") -> list[int]:
    """Worker task indices in the order of the all-reduce ring. TensorFlow joins the tasks in the
    lexicographic order of their names, so task:10 comes before task:2
    (collective_param_resolver_local.cc, EstablishGlobalRank); PyTorch's gloo ring goes by rank."""
    return list(range(workers)) if engine == "pytorch" else sorted(range(workers), key=str)


def ring_share(topology: dict, engine: str | None = "tensorflow") -> int:
    """The most ring hops that cross one link in one direction, in a run's topology document
    (topology.json: hosts with roles, links): those hops share that link, so the ring moves at
    B / share. 1 on a star; on a tree, 2 and more once the ring order jumps between its switches."""
    workers = {int(role[len("worker"):]): h["name"] for h in topology.get("hosts", [])
               for role in str(h.get("role", "")).split("+") if role[len("worker"):].isdigit()
               and role.startswith("worker")}
    if len(workers) < 2:
        return 1
    hosts = [workers[i] for i in ring_order(len(workers), engine) if i in workers]
    near: dict[str, list[str]] = {}
    for link in topology.get("links", []):
        near.setdefault(link["a"], []).append(link["b"])
        near.setdefault(link["b"], []).append(link["a"])
    load: dict[tuple[str, str], int] = {}
    for a, b in zip(hosts, hosts[1:] + hosts[:1]):
        path = _path(near, a, b)
        for hop in zip(path, path[1:]):
            load[hop] = load.get(hop, 0) + 1
    return max(load.values(), default=1)


def _path(near: dict, a: str, b: str) -> list[str]:
    """The nodes of a shortest path from a to b (breadth first; [a] when b is unreachable)."""
    before, frontier = {a: None}, [a]
    while frontier and b not in before:
        reached = []
        for node in frontier:
            for n in near.get(node, []):
                if n not in before:
                    before[n] = node
                    reached.append(n)
        frontier = reached
    if b not in before:
        return [a]
    path = [b]
    while path[-1] != a:
        path.append(before[path[-1]])
    return path[::-1]


def _read_json(path: Path) -> dict:
    """A run folder's JSON document ({} when absent or unreadable)."""
    try:
        doc = json.loads(Path(path).read_text())
        return doc if isinstance(doc, dict) else {}
    except (OSError, ValueError):
        return {}


def _worker_hosts(topology: dict, names: list, family: str, servers: int) -> list:
    """The worker hosts of a run: from its topology.json's roles, else (no document) the hosts in
    order (ps: after the coordinator and the servers)."""
    try:
        found = [h["name"] for h in topology.get("hosts", []) for role in str(h.get("role", "")).split("+")
                 if role.startswith(("worker", "single"))]
        if found:
            return found
    except (KeyError, TypeError, AttributeError):
        pass
    return names if family != "ps" else names[1 + servers:]
