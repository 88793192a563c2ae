"""Recording one run point: its runs.csv row, the rows taken from the tasks' events (steps, evals),
its topology document, and the writes of its folder (spec.yaml, topology.json, result.json) and of
the experiment's tables. sweep/runner.py executes the point and hands what it observed here."""
from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from analysis.model import communication
from analysis.tables import steady
from testbed.emulation import replayed_compute as replay
from testbed.roles import final_tasks, workers
from testbed.run.faults import faults
from testbed.run import results
from testbed.units import format_bandwidth, format_time
import workloads.balance as balance


@dataclass
class Observed:
    """The table rows one point produced (each list replaces the point's rows in its table)."""
    checks: list[dict] = field(default_factory=list)
    steps: list[dict] = field(default_factory=list)
    usage: list[dict] = field(default_factory=list)
    evals: list[dict] = field(default_factory=list)
    faults: list[dict] = field(default_factory=list)
    link_changes: list[dict] = field(default_factory=list)


def link_bandwidth(graph) -> int | None:
    """The narrowest configured bandwidth in the topology, the run's 'bw' figure."""
    rates = [e.params.bw for e in graph.links if e.params.bw is not None]
    return min(rates) if rates else None


def runs_row(point, graph, tasks) -> dict:
    """The point's runs.csv row as known before it starts: parameters, hosts, roles, bandwidth."""
    spec = point.spec
    bw = link_bandwidth(graph)
    return dict(experiment=spec.name, run_id=point.run_id, repeat=point.repeat, **point.params,
                hosts=len(graph.hosts), node_kinds="+".join(sorted({h.kind for h in graph.hosts})), bw_bps=bw,
                bw=format_bandwidth(bw) if bw else "unshaped",
                strategy=spec.workload.strategy, engine=spec.workload.engine,
                model=f"script:{spec.workload.script}" if spec.workload.script else spec.workload.model,
                workers=sum(t.task_type in ("worker", "single") for t in tasks),
                servers=sum(t.task_type == "ps" for t in tasks),
                asynchronous=spec.workload.strategy == "ps",
                started_at=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                **communication_settings(spec.workload), balance=balance.label(spec.workload.balance))


def begin(folder: Path, spec, graph, tasks) -> None:
    """The run's folder before its network exists: the resolved spec and the planned topology."""
    results.atomic_write_text(folder / "spec.yaml", yaml.safe_dump(spec.model_dump(mode="json"), sort_keys=False))
    write_topology(folder, graph, tasks)


def write_topology(folder: Path, graph, tasks, nodes=None) -> None:
    results.write_json(folder / "topology.json", topology_document(graph, tasks, nodes))


def add_training(row: dict, observed: Observed, outcome, spec, run_id: str, tasks, k: float = 1.0,
                 lead_cores: float | None = None) -> None:
    """What the training's events say: steps and evals rows, the run's figures, the work it trained,
    its warm-up and steady state, its restarts (`k`, `lead_cores`: the dilation and the lead node's budgeted
    cores, which its compute probe is judged by)."""
    observed.steps = step_rows_from(outcome.events, spec.name, run_id, spec.workload.strategy)
    observed.evals = eval_rows_from(outcome.events, spec.name, run_id)
    row.update(summary_from(outcome.events, tasks, k, lead_cores))
    row.update(work_columns(spec.workload, tasks, row))
    lead = outcome.events.get(final_tasks(tasks)[0], [])
    times = [e.get("time_s") for e in lead if e.get("event") == "step"]
    periodic = communication.steps_per_sync(spec.workload.communication.settings()) > 1  # the mean step, as under ps
    row.update(steady.split(times, asynchronous=spec.workload.strategy == "ps" or periodic)
               .columns(row["samples_per_step"]))
    row.update(faults.recovery_columns(outcome.events.get(final_tasks(tasks)[0], []), len(outcome.restarts)))
    row.update(communication_columns(spec.workload, row, lead))


def communication_settings(workload) -> dict:
    """runs.csv's workload.communication columns: each key of the methods (workloads/communication/), NaN where
    the method in force does not own it (unless recorded always), a section as text (empty without)."""
    return communication.columns(workload.communication.settings())


def balance_columns(plan: dict | None, tasks, events: dict | None = None) -> dict:
    """runs.csv's per-worker batches under workload.balance, in the workers' order ("43/21": each worker's last
    step's, which balance dynamic re-sizes; the plan's where a worker logged none; empty where every worker kept
    batch_per_worker)."""
    if not plan:
        return {"batches": ""}
    out = []
    for t in workers(tasks):
        steps = [e["batch"] for e in (events or {}).get(t, []) if e.get("event") == "step" and "batch" in e]
        out.append(str(steps[-1] if steps else plan["batches"].get(t.host, "")))
    return {"batches": "/".join(out)}


def worker_compute(events: dict, tasks, plan: dict | None, replay: dict | None, batch: int, k: float) -> str:
    """runs.csv's worker_compute_s: each all-reduce worker's compute per step at its own batch, in emulated
    seconds ("h1=0.118;h2=0.236"): its compute probe's step (`compute` event) / K, or under replayed compute
    its replayed step x its batch / batch_per_worker; empty where no worker measured one."""
    out = []
    for t in workers(tasks):
        own = (plan or {}).get("batches", {}).get(t.host, batch)
        if replay and t.host in replay:
            seconds = replay[t.host].step_s * own / batch
        else:
            probe = next((e for e in events.get(t, []) if e.get("event") == "compute"), {})
            step = probe.get("time_per_step_s")
            seconds = step / k if isinstance(step, (int, float)) and step > 0 else None
        if seconds is not None:
            out.append(f"{t.host}={seconds:.6g}")
    return ";".join(out)


def communication_columns(workload, row: dict, lead: list[dict]) -> dict:
    """runs.csv's wire figures of workload.communication: the theory's gradient bytes per worker step over
    the run (analysis/model/communication.py), and over the steady steps beside what the lead task's node sent in
    them (its step events' tx_bytes; not under ps, whose steps are the coordinator's)."""
    c = workload.communication
    out = dict(theory_bytes_per_worker_step=math.nan, steady_bytes_per_worker_step=math.nan,
               theory_steady_bytes_per_worker_step=math.nan)
    steps, warm = _whole(row.get("steps")), _whole(row.get("warmup_steps"))
    if workload.script is not None or workload.strategy == "switch" or not steps:
        return out
    try:
        plan = communication.plan(workload.model, workload.model_params, workload.strategy, _whole(row.get("workers")),
                                  c.settings(), row.get("gradient_bytes"))
    except (ValueError, ImportError):       # (a zoo model replayed from a profile, its package not here)
        return out
    out["theory_bytes_per_worker_step"] = plan.mean(1, steps)
    if warm and workload.strategy != "ps" and row.get("steady") == steady.OK:
        series = [(e.get("step"), e.get("tx_bytes")) for e in lead if e.get("event") == "step"]
        out["steady_bytes_per_worker_step"] = communication.wire_per_step(series, warm, steps)
        out["theory_steady_bytes_per_worker_step"] = plan.mean(warm + 1, steps)
    return out


def _whole(value) -> int:
    """A count of the row (steps, workers), 0 where it is missing or not a number."""
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) \
        else 0


def replay_nodes(events: dict, tasks, row: dict, k: float,
                 hosts: dict[str, replay.HostReplay] | None = None) -> list[replay.NodeReplay]:
    """Replayed compute: each node's CPU bound and CPU wait over the run's steady steps, from its tasks'
    `usage` events and what it replays (`hosts`); the steps are the lead task's, after the warm-up."""
    ends = [e["t"] for e in events.get(final_tasks(tasks)[0], []) if e.get("event") == "step"
            and isinstance(e.get("t"), (int, float))]
    warm = row.get("warmup_steps")
    warm = int(warm) if isinstance(warm, (int, float)) and not math.isnan(warm) and warm >= 1 else 1
    if len(ends) <= warm:
        return []
    samples: dict[str, list] = {}
    for task, evs in events.items():
        series = [(e["t"], e["cpu_s"] - _number(e.get("charged_cpu_s")), e["run_delay_s"], _number(e.get("unsure_s")))
                  for e in evs
                  if e.get("event") == "usage"
                  and all(isinstance(e.get(key), (int, float)) for key in ("t", "cpu_s", "run_delay_s"))]
        samples.setdefault(task.host, []).append(series)
    return replay.node_figures(samples, ends[warm - 1:], k, hosts)


def _number(x) -> float:
    return float(x) if isinstance(x, (int, float)) and math.isfinite(x) else 0.0


def replay_columns(nodes: list[replay.NodeReplay]) -> dict:
    """runs.csv's replay figures: the largest CPU bound and CPU wait of any node, as shares of the steady step."""
    if not nodes:
        return dict(replay_cpu_bound=math.nan, replay_cpu_wait=math.nan)
    return dict(replay_cpu_bound=round(max(n.cpu_share for n in nodes), 4),
                replay_cpu_wait=round(max(n.wait_share for n in nodes), 4))


def finish(exp_dir: Path, folder: Path, point, row: dict, observed: Observed, tunnel_rows=None) -> None:
    """result.json and the point's rows in every table (faults.csv when it has or had faults,
    link_changes.csv when a link followed a trace, tunnels.csv for the cluster edition); runs.csv last, so a point is done once its row is there."""
    spec = point.spec
    results.write_json(folder / "result.json", row)
    for name in ("checks", "steps", "usage", "evals"):
        results.replace_run_rows(exp_dir, name, point.run_id, getattr(observed, name))
    if spec.faults or (exp_dir / "faults.csv").exists():
        results.replace_run_rows(exp_dir, "faults", point.run_id, observed.faults)
    if observed.link_changes or (exp_dir / "link_changes.csv").exists():
        results.replace_run_rows(exp_dir, "link_changes", point.run_id, observed.link_changes)
    if spec.cluster is not None:
        rows = [dict(experiment=spec.name, run_id=point.run_id, **r) for r in tunnel_rows or []]
        results.replace_run_rows(exp_dir, "tunnels", point.run_id, rows)
    results.replace_run_rows(exp_dir, "runs", point.run_id, [row], extra_columns=list(point.params))


def work_columns(workload, tasks, row: dict) -> dict:
    """What the point trained (workload.fixed): the mode (data, steps, or script: the script decides), its
    steps per epoch, the samples per epoch (fixed data: the file's, which every point trains to the nearest
    step), the samples per step, the samples trained (steps done x per step), and the built-in workload's
    learning rate at this point with its rule (workload.lr_scaling; none for a script, which sets its own)."""
    count = len(workers(tasks))
    if workload.script:
        per_step, mode, per_epoch, epoch_samples = row.get("global_batch"), "script", None, None
    else:
        per_step, mode = workload.samples_per_step(count), workload.fixed
        per_epoch = workload.steps_at(count)
        epoch_samples = workload.epoch_samples() if mode == "data" else per_epoch * per_step
    steps = row.get("steps")
    trained = steps * per_step if isinstance(steps, (int, float)) and isinstance(per_step, (int, float)) else None
    rate = (None, None) if workload.script else (workload.lr_scaling, workload.learning_rate_at(count))
    return dict(fixed=mode, steps_per_epoch=per_epoch, samples_per_step=per_step, samples_per_epoch=epoch_samples,
                samples_trained=trained, lr_scaling=rate[0], learning_rate=rate[1])


def topology_roles(tasks) -> dict[str, str]:
    """host -> role label such as 'chief0' or 'ps0+worker1' (co-located tasks)."""
    roles: dict[str, list[str]] = {}
    for t in tasks:
        roles.setdefault(t.host, []).append(f"{t.task_type}{t.index}")
    return {host: "+".join(labels) for host, labels in roles.items()}


def topology_document(graph, tasks, nodes=None) -> dict:
    """Hosts (with what each running node learned, e.g. a machine's host key), switches, links."""
    roles = topology_roles(tasks)
    facts = {name: node.facts for name, node in (nodes or {}).items() if node.facts}
    return {
        "hosts": [{"name": h.name, "ip": h.ip, "kind": h.kind, "role": roles.get(h.name, "idle"),
                   **{key: value for key, value in (("cores", h.cores), ("real_cores", h.budget),
                                                    ("cpus", h.cpus and list(h.cpus))) if value is not None},
                   **({"facts": facts[h.name]} if h.name in facts else {})} for h in graph.hosts],
        "switches": [{"name": s.name, **({"label": s.label} if s.label else {})} for s in graph.switches],
        "links": [_link(e) for e in graph.links],
        **({"dropped": [_link(e) for e in graph.dropped]} if graph.dropped else {}),
    }


def _link(edge) -> dict:
    """A link of topology.json: its ends, its rate ('unshaped' without one) and its delay if it has one."""
    out = {"a": edge.a, "b": edge.b, "bw": format_bandwidth(edge.params.bw) if edge.params.bw else "unshaped"}
    return {**out, "delay": format_time(edge.params.delay)} if edge.params.delay else out


def summary_from(events: dict, tasks, k: float = 1.0, cores: float | None = None) -> dict:
    """Run-level figures from the first final task's events: the workload's start and done, or for
    a user's script without the callback, the launcher's script_start and script_done (`k`, `cores`:
    the run's dilation and the lead node's budgeted cores, for its compute probe)."""
    lead = final_tasks(tasks)[0]
    evs = events.get(lead, [])
    first = {}
    for e in evs:
        first.setdefault(e.get("event"), e)
    start, done = first.get("start", {}), first.get("done", {})
    return {
        "params": start.get("params"), "gradient_bytes": start.get("gradient_bytes"),
        "global_batch": start.get("global_batch"),
        "training_time_s": done.get("training_time_s", first.get("script_done", {}).get("run_s")),
        "tf_import_s": first.get("script_start", {}).get("tf_import_s"),
        "torch_import_s": first.get("script_start", {}).get("torch_import_s"),
        "time_per_step_s": done.get("time_per_step_s"),
        "samples_per_s": done.get("samples_per_s"), "final_loss": done.get("final_loss"),
        "steps": done.get("steps"),
        "compute_per_step_s": first.get("compute", {}).get("time_per_step_s"),
        "compute_slicing": slicing(first.get("compute", {}), k, cores),
    }


def slicing(compute: dict, k: float = 1.0, cores: float | None = None) -> float | None:
    """What the emulation cost the probe's compute (1: nothing): its time per step under the budget, the
    nodes together, over what the node's machine takes, the step alone with the quota lifted on
    ceil(cores) CPUs x ceil(cores) / cores, x K. Without the figures for that (events of an older probe, a
    node with no budget), its CPU time per step under the budget over the same lifted; None where the
    quota could not be lifted."""
    under, free = compute.get("time_per_step_s"), compute.get("time_per_step_free_s")
    if under and free and cores:
        machine = free * max(1, math.ceil(cores - 1e-9)) / cores
        return round(under / (k * machine), 3)
    under, free = compute.get("cpu_per_step_s"), compute.get("cpu_per_step_free_s")
    return round(under / free, 3) if under and free else None


def step_rows_from(events: dict, experiment: str, run_id: str, strategy: str | None = None) -> list[dict]:
    """steps.csv rows; strategy: each event's own (the built-in workload's), else the run's."""
    rows = []
    for task, evs in events.items():
        for e in evs:
            if e.get("event") in ("step", "epoch"):
                rows.append(dict(experiment=experiment, run_id=run_id, role=task.task_type, task_index=task.index,
                                 host=task.host, strategy=e.get("strategy", strategy), kind=e["event"],
                                 epoch=e.get("epoch"), step=e.get("step"),
                                 time_s=e.get("time_s"), loss=e.get("loss"), batch=e.get("batch", math.nan),
                                 compute_s=e.get("compute_s", math.nan),
                                 samples_per_s=e.get("samples_per_s", math.nan), t=e.get("t")))
    return rows


def eval_rows_from(events: dict, experiment: str, run_id: str) -> list[dict]:
    """evals.csv rows: one per metric (bleu1..bleu4) of every `eval` event."""
    rows = []
    for evs in events.values():
        for e in evs:
            if e.get("event") == "eval":
                rows += [dict(experiment=experiment, run_id=run_id, epoch=e.get("epoch"), metric=k, value=v)
                         for k, v in e.items() if k.startswith("bleu")]
    return rows
