"""One run point: bring the network up (bringup/network_up.py), check it, train, collect, tear down (always);
what it observed is recorded by point/record.py."""
from __future__ import annotations

import contextlib
import time
import traceback
from pathlib import Path

from analysis.model import advisor
from testbed.nodes.base import NodeError
from testbed.net.network import NetworkError
from testbed.roles import assign_tasks, final_tasks
from testbed.run.faults import faults, traces
from testbed.run.point import record
from testbed.run import results
from testbed.run.training import strategy_switch
from testbed.emulation.fidelity import ComputeProbe, verdict
from testbed.run.training import fidelity_probe
from testbed.run.bringup.network_up import BringUp
from testbed.run.point.point import ResolvedPoint
from testbed.run.bringup.hosthealth import timer_overshoot
from testbed.run.training.monitor import Monitor, summarize
from testbed.run.training.training import Training
from testbed.spec.rules.experiment import advisor_results_paths


INTERNAL_ERROR_LOG = "internal-error.log"     # in the run's folder: where an error of the testbed's own went


def run_point(point: ResolvedPoint, exp_dir: Path, progress=lambda msg: None) -> dict:
    """Execute one resolved point; returns its runs.csv row (status ok or failed, never raises for a
    failed run).

    The point's spec is the emulated world the user wrote; what runs here is its wall spec (rates / K,
    times x K, nodes held to cores / K), and what is recorded is in emulated time again.
    KeyboardInterrupt propagates after teardown, with no row written, so the point is rerun on resume."""
    bringup = BringUp(point, progress)
    graph = point.graph                        # the emulated world: its hosts and link rates
    tasks = assign_tasks(advisor.provisional(point.spec.workload), [h.name for h in graph.hosts])
    folder = results.run_dir(exp_dir, point.run_id)
    record.begin(folder, point.spec, graph, tasks)
    row = record.runs_row(point, graph, tasks) | point.columns()
    observed = record.Observed()
    started = time.monotonic()
    try:
        with bringup as up:
            _execute(point, up, tasks, folder, row, observed, progress)
        row.update(status="ok", reason="")
    except (RunFailed, NetworkError, NodeError) as err:
        row.update(status="failed", reason=str(err))
    except Exception as err:  # noqa: BLE001 - record it and let the sweep go on; Ctrl-C still propagates
        (folder / INTERNAL_ERROR_LOG).write_text(traceback.format_exc())
        row.update(status="failed", reason=f"internal error: {type(err).__name__}: {err} (its traceback: "
                   f"runs/{point.run_id}/{INTERNAL_ERROR_LOG})")
    row["wall_time_s"] = round(time.monotonic() - started, 3)
    row = point.to_emulated(row, observed)
    record.finish(exp_dir, folder, point, row, observed, bringup.tunnel_rows)
    return row


def _speeds(point, graph) -> dict:
    """Each host's speed for workload.balance: its cores, or under replayed compute 1 / its replayed step."""
    if point.replay:
        return {name: 1 / host.step_s for name, host in point.replay.items() if host.step_s > 0}
    return {h.name: h.cores for h in graph.hosts}


def _execute(point, up, tasks, folder: Path, row: dict, observed: record.Observed, progress) -> None:
    """Checks, strategy decision, training under the monitor, the faults and the fidelity probe;
    raises RunFailed. Works on the wall spec: every time and rate as this machine runs it."""
    spec, graph, net = up.spec, up.graph, up.net
    record.write_topology(folder, graph, tasks, net.nodes)
    checked = up.check(point.run_id)
    row.update(checked.timers)
    observed.checks = checked.rows
    if checked.reason and spec.checks.fail_run:
        raise RunFailed(checked.reason)
    if checked.reason:
        progress(f"WARNING {checked.reason} (checks.fail_run is false: training anyway)")
    if spec.workload.strategy == "auto":
        spec, tasks = _advise(spec, graph, net, observed.checks, row, folder, progress)
    switcher = None
    if spec.workload.strategy == "switch":     # runs its start strategy; Training switches
        switcher = _switcher(spec, graph, net, observed.checks, progress)
        spec = spec.model_copy(update={"workload": advisor.provisional(spec.workload)})
    per_epoch = spec.workload.steps_at(sum(t.task_type == "worker" for t in tasks))   # this point's steps
    with _monitor(net, spec, tasks, point.run_id) as monitor, fidelity_probe.Probe(net, graph) as probe:
        applier = faults.Applier(spec.faults, net, tasks, per_epoch,
                                 folder / "faults.json", progress) if spec.faults else None
        workload = spec.workload if point.k == 1 else spec.workload.model_copy(
            update={"env": {**spec.workload.env, "DLTESTBED_DILATION": f"{point.k:g}"}})
        followed = list(point.traces)         # in emulated time: the tracer puts them on the wall clock
        tracer = traces.Tracer(followed, net, per_epoch, point.k, spec.name,
                               point.run_id, progress) if followed else None
        own_code = not point.replays_profiles        # a script replayed from its profile needs no user code
        training = Training(net, workload, tasks, folder, progress, spec.script_path() if own_code else None,
                            applier, switcher, spec.script_files() if own_code else [], tracer, point.replay_job(),
                            speeds=_speeds(point, graph))
        outcome = training.run()
        row.update(record.balance_columns(training.balance, tasks, outcome.events))
    if spec.workload.strategy == "allreduce":
        row["worker_compute_s"] = record.worker_compute(outcome.events, tasks, training.balance, point.replay,
                                                        spec.workload.batch_per_worker, point.k)
    observed.link_changes = tracer.rows if tracer is not None else []
    row["tf_threads"] = min(training.threads.values())
    if monitor is not None:
        observed.usage = monitor.rows
        row.update(summarize(observed.usage), monitor_overhead_pct=round(monitor.overhead_pct, 3))
    lead_host = final_tasks(tasks)[0].host
    budgeted = next((h.cores for h in point.graph.hosts if h.name == lead_host and h.budget is not None), None)
    record.add_training(row, observed, outcome, spec, point.run_id, tasks, point.k, budgeted)
    replayed = None
    if point.replay is not None:
        replayed = tuple(record.replay_nodes(outcome.events, tasks, row, point.k, point.replay))
        lead = point.replay.get(lead_host) or next(iter(point.replay.values()), None)
        row.update(record.replay_columns(list(replayed)),
                   compute_per_step_s=lead.step_s * point.k if lead is not None else None)
    row["fidelity"] = verdict(probe.measures(point.machine_cores, point.k, spec.emulation.reserve,
                                             checked.timers or timer_overshoot(), observed.checks,
                                             spec.checks.tolerance, _compute_probe(row, lead_host),
                                             replayed, point.switch))
    if row["fidelity"] != "ok":
        progress(f"fidelity: {row['fidelity']}")
    if switcher is not None:
        row.update(strategy_switch.columns(outcome, spec.workload, len(graph.hosts)))
        results.write_json(folder / "switch.json", strategy_switch.journal(outcome, switcher))
    if applier is not None:
        observed.faults = faults.fault_rows(applier.records, outcome.events, final_tasks(tasks)[0], spec.name,
                                            point.run_id)
    if not outcome.ok:
        problem = net.problem()       # e.g. Open vSwitch stopped: the cause of the tasks' errors
        raise RunFailed(f"{problem}. {outcome.reason}" if problem else outcome.reason)


class RunFailed(RuntimeError):
    pass


def _advise(spec, graph, net, check_rows, row, folder, progress):
    """strategy auto: choose allreduce or ps from the checks and the cost model (analysis.model.advisor);
    returns the spec with the chosen strategy and its tasks, and records the decision in the row."""
    machines = {node.machine for node in net.nodes.values()}
    try:
        advice = advisor.decide(spec, graph, check_rows, advisor_results_paths(spec), shared=len(machines) <= 1)
    except (ValueError, OSError) as err:
        raise RunFailed(f"strategy auto: {err}") from err
    progress(advice.reason)
    spec = spec.model_copy(update={"workload": spec.workload.model_copy(update={"strategy": advice.strategy})})
    tasks = assign_tasks(spec.workload, [h.name for h in graph.hosts])
    row.update(advice.columns(), strategy=advice.strategy, asynchronous=advice.strategy == "ps",
               workers=sum(t.task_type == "worker" for t in tasks), servers=sum(t.task_type == "ps" for t in tasks))
    record.write_topology(folder, graph, tasks, net.nodes)   # the new roles
    return spec, tasks


def _switcher(spec, graph, net, check_rows, progress):
    """strategy switch: the Switcher that Training asks at every epoch's end (testbed/run/training/strategy_switch.py)."""
    try:
        return strategy_switch.Switcher(spec, graph, check_rows, len({n.machine for n in net.nodes.values()}) <= 1,
                                  progress)
    except (ValueError, OSError) as err:
        raise RunFailed(f"strategy switch: {err}") from err


def _monitor(net, spec, tasks, run_id):
    """A Monitor over every host (or a no-op context when monitoring is off)."""
    if not spec.monitor.enabled:
        return contextlib.nullcontext()
    roles = record.topology_roles(tasks)
    nodes = {name: (node, roles.get(name, "idle")) for name, node in net.nodes.items()}
    return Monitor(nodes, spec.monitor.interval, spec.name, run_id)


def _compute_probe(row: dict, lead_host: str) -> ComputeProbe | None:
    """The lead task's compute probe (its figures in the row), where it measured what the quota's
    slices cost, against the steady step (else, with too few steps to judge, the mean step)."""
    step = row.get("steady_step_s")
    step = step if isinstance(step, float) and step > 0 else row.get("time_per_step_s")
    if not (row.get("compute_slicing") and row.get("compute_per_step_s") and step):
        return None
    return ComputeProbe(lead_host, row["compute_per_step_s"], step, row["compute_slicing"])
