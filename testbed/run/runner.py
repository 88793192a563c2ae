"""One run point: bring the network up, check it, train, collect, tear down (always)."""
from __future__ import annotations

import contextlib
import datetime as dt
import math
import time
from pathlib import Path

import yaml

from analysis import advisor
from testbed.run import faults, results, switching
from testbed.net import shaping
from testbed.run.checks import failure_reason, run_checks
from testbed.run.hosthealth import describe, healthy, timer_overshoot
from testbed.run.monitor import Monitor, summarize
from testbed.net.network import Network, NetworkError, node_problems, port_problems
from testbed.nodes.base import NodeError
from testbed.roles import PlacementError, assign_tasks, final_tasks
from testbed.spec import SpecError, SpecIssue, build_graph
from testbed.run.training import Training
from testbed.units import format_bandwidth


def preflight(exp, points, progress=lambda msg: None, contact_nodes: bool = True) -> None:
    """Everything that can be refused before a network exists, for every point at once.
    `contact_nodes=False` (validate) asks this machine's kernel only: no login to real machines,
    no Docker engine start or image build."""
    found: dict[tuple[str, str], list[str]] = {}
    for point in points:
        spec = point.spec
        graph = build_graph(spec.topology, spec.ssh)
        problems = (shaping.capability_problems(spec.topology, graph) + faults.capability_problems(spec)
                    + port_problems(spec.topology, graph)
                    + (node_problems(graph, progress) if contact_nodes else []))
        try:
            assign_tasks(advisor.provisional(spec.workload), [h.name for h in graph.hosts])
        except PlacementError as err:
            problems.append(("workload.strategy", str(err)))
        for key, message in problems:
            found.setdefault((key, message), []).append(point.run_id)
    issues = []
    for (key, message), run_ids in found.items():
        if len(run_ids) < len(points):
            message += f" (run points {', '.join(run_ids)})"
        issues.append(SpecIssue(*exp.location(key), key, message))
    if issues:
        raise SpecError(issues)


def link_bandwidth(graph) -> int | None:
    """The narrowest configured bandwidth in the topology, the run's 'bw' figure."""
    rates = [e.params.bw for e in graph.links if e.params.bw is not None]
    return min(rates) if rates else None


def run_point(point, exp_dir: Path, progress=lambda msg: None) -> dict:
    """Execute one point; returns its runs.csv row (status ok or failed, never raises for a failed run).

    KeyboardInterrupt propagates after teardown, with no row written, so the point is rerun on resume."""
    spec = point.spec
    graph = build_graph(spec.topology, spec.ssh)
    tasks = assign_tasks(advisor.provisional(spec.workload), [h.name for h in graph.hosts])
    folder = results.run_dir(exp_dir, point.run_id)
    results.atomic_write_text(folder / "spec.yaml", yaml.safe_dump(spec.model_dump(mode="json"), sort_keys=False))
    results.write_json(folder / "topology.json", topology_document(graph, tasks))
    bw = link_bandwidth(graph)
    row = dict(experiment=spec.name, run_id=point.run_id, repeat=point.repeat, **point.params,
               hosts=len(graph.hosts), node_kinds="+".join(sorted({h.kind for h in graph.hosts})), bw_bps=bw, bw=format_bandwidth(bw) if bw else "unshaped",
               strategy=spec.workload.strategy,
               model=f"script:{spec.workload.script}" if spec.workload.script else spec.workload.model,
               workers=sum(t.task_type in ("worker", "single") for t in tasks),
               servers=sum(t.task_type == "ps" for t in tasks),
               asynchronous=spec.workload.strategy == "ps",
               started_at=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"))
    started = time.monotonic()
    check_rows, step_rows, usage_rows, eval_rows, fault_rows = [], [], [], [], []
    from testbed.cluster.bringup import site_for     # loads Mininet's cluster edition: only for a run
    network = Network(graph, spec.topology, progress, site=site_for(spec.cluster))
    try:
        with network as net:
            results.write_json(folder / "topology.json", topology_document(graph, tasks, net.nodes))
            for note in net.notes:
                progress(note)
            if spec.checks.iperf or spec.checks.ping:
                overshoot = timer_overshoot()
                row.update(overshoot)
                check_rows = run_checks(net, graph, spec.checks, spec.name, point.run_id, progress)
                reason = failure_reason(check_rows)
                if reason and not healthy(overshoot):
                    reason += f" [{describe(overshoot)}]"
                if reason and spec.checks.fail_run:
                    raise RunFailed(reason)
                if reason:
                    progress(f"WARNING {reason} (checks.fail_run is false: training anyway)")
            if spec.workload.strategy == "auto":
                spec, tasks = _advise(spec, graph, net, check_rows, row, folder, progress)
            switcher = None
            if spec.workload.strategy == "switch":     # runs its start strategy; Training switches
                switcher = _switcher(spec, graph, net, check_rows, progress)
                spec = spec.model_copy(update={"workload": advisor.provisional(spec.workload)})
            with _monitor(net, spec, tasks, point.run_id) as monitor:
                applier = faults.Applier(spec.faults, net, tasks, spec.workload.steps_per_epoch,
                                         folder / "faults.json", progress) if spec.faults else None
                training = Training(net, spec.workload, tasks, folder, progress, spec.script_path(), applier,
                                    switcher)
                outcome = training.run()
            row["tf_threads"] = min(training.threads.values())
            if monitor is not None:
                usage_rows = monitor.rows
                row.update(summarize(usage_rows), monitor_overhead_pct=round(monitor.overhead_pct, 3))
            step_rows = step_rows_from(outcome.events, spec.name, point.run_id, spec.workload.strategy)
            eval_rows = eval_rows_from(outcome.events, spec.name, point.run_id)
            row.update(summary_from(outcome.events, tasks))
            lead = final_tasks(tasks)[0]
            row.update(faults.recovery_columns(outcome.events.get(lead, []), len(outcome.restarts)))
            if switcher is not None:
                row.update(switching.columns(outcome, spec.workload, len(graph.hosts)))
                results.write_json(folder / "switch.json", switching.journal(outcome, switcher))
            if applier is not None:
                fault_rows = faults.fault_rows(applier.records, outcome.events, lead, spec.name, point.run_id)
            if not outcome.ok:
                problem = net.problem()       # e.g. Open vSwitch stopped: the cause of the tasks' errors
                raise RunFailed(f"{problem}. {outcome.reason}" if problem else outcome.reason)
        row.update(status="ok", reason="")
    except (RunFailed, NetworkError, NodeError) as err:
        row.update(status="failed", reason=str(err))
    except Exception as err:  # noqa: BLE001 - record it and let the sweep go on; Ctrl-C still propagates
        row.update(status="failed", reason=f"internal error: {type(err).__name__}: {err}")
    row["wall_time_s"] = round(time.monotonic() - started, 3)
    results.write_json(folder / "result.json", row)
    results.replace_run_rows(exp_dir, "checks", point.run_id, check_rows)
    results.replace_run_rows(exp_dir, "steps", point.run_id, step_rows)
    results.replace_run_rows(exp_dir, "usage", point.run_id, usage_rows)
    results.replace_run_rows(exp_dir, "evals", point.run_id, eval_rows)
    if spec.faults or (exp_dir / "faults.csv").exists():
        results.replace_run_rows(exp_dir, "faults", point.run_id, fault_rows)
    if spec.cluster is not None:
        tunnel_rows = [dict(experiment=spec.name, run_id=point.run_id, **r) for r in network.tunnel_rows]
        results.replace_run_rows(exp_dir, "tunnels", point.run_id, tunnel_rows)
    results.replace_run_rows(exp_dir, "runs", point.run_id, [row], extra_columns=list(point.params))
    return row


class RunFailed(RuntimeError):
    pass


def _advise(spec, graph, net, check_rows, row, folder, progress):
    """strategy auto: choose allreduce or ps from the checks and the cost model (analysis.advisor);
    returns the spec with the chosen strategy and its tasks, and records the decision in the row."""
    machines = {node.machine for node in net.nodes.values()}
    try:
        advice = advisor.decide(spec, graph, check_rows, shared=len(machines) <= 1)
    except (ValueError, OSError) as err:
        raise RunFailed(f"strategy auto: {err}") from err
    progress(advice.reason)
    spec = spec.model_copy(update={"workload": spec.workload.model_copy(update={"strategy": advice.strategy})})
    tasks = assign_tasks(spec.workload, [h.name for h in graph.hosts])
    row.update(advice.columns(), strategy=advice.strategy, asynchronous=advice.strategy == "ps",
               workers=sum(t.task_type == "worker" for t in tasks), servers=sum(t.task_type == "ps" for t in tasks))
    results.write_json(folder / "topology.json", topology_document(graph, tasks, net.nodes))   # the new roles
    return spec, tasks


def _switcher(spec, graph, net, check_rows, progress):
    """strategy switch: the Switcher that Training asks at every epoch's end (testbed/run/switching.py)."""
    try:
        return switching.Switcher(spec, graph, check_rows, len({n.machine for n in net.nodes.values()}) <= 1,
                                  progress)
    except (ValueError, OSError) as err:
        raise RunFailed(f"strategy switch: {err}") from err


def _monitor(net, spec, tasks, run_id):
    """A Monitor over every host (or a no-op context when monitoring is off)."""
    if not spec.monitor.enabled:
        return contextlib.nullcontext()
    roles = topology_roles(tasks)
    nodes = {name: (node, roles.get(name, "idle")) for name, node in net.nodes.items()}
    return Monitor(nodes, spec.monitor.interval, spec.name, run_id)


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
                   **({"facts": facts[h.name]} if h.name in facts else {})} for h in graph.hosts],
        "switches": [{"name": s.name} for s in graph.switches],
        "links": [{"a": e.a, "b": e.b, "bw": format_bandwidth(e.params.bw) if e.params.bw else "unshaped"}
                  for e in graph.links],
    }


def summary_from(events: dict, tasks) -> dict:
    """Run-level figures from the first final task's events: the workload's start and done, or for
    a user's script without the callback, the launcher's script_start and script_done."""
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
        "time_per_step_s": done.get("time_per_step_s"),
        "samples_per_s": done.get("samples_per_s"), "final_loss": done.get("final_loss"),
        "steps": done.get("steps"),
    }


def step_rows_from(events: dict, experiment: str, run_id: str, strategy: str | None = None) -> list[dict]:
    """steps.csv rows; strategy: each event's own (the built-in workload's), else the run's."""
    rows = []
    for task, evs in events.items():
        for e in evs:
            if e.get("event") in ("step", "epoch"):
                rows.append(dict(experiment=experiment, run_id=run_id, role=task.task_type, task_index=task.index,
                                 host=task.host, strategy=e.get("strategy", strategy), kind=e["event"],
                                 epoch=e.get("epoch"), step=e.get("step"),
                                 time_s=e.get("time_s"), loss=e.get("loss"),
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
