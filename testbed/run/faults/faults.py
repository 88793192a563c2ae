"""Faults during training: the operations each action issues (pure), the applier the training loop
calls, and what each fault cost (pure). The grammar (triggers, task names, the actions' targets,
values and durations) is the spec's: testbed/spec/faults/grammar.py.

A fault of the experiment file (`faults:`) is applied when its trigger is reached on the lead task
(the coordinator or worker 0): `step N` once the N-th step has ended, `epoch N` when the N-th epoch
begins, `15s` that long after training started. An action is one row of ACTIONS: its syntax (the
spec's row of the same name) and the operations that apply and undo it. Operations are plain data
(`Op`): a command in a node or in this machine's namespace, a signal to a task's process group, a
node's new CPU limit. The applier carries them out through the
node interface, the network and the training's processes."""
from __future__ import annotations

import dataclasses
import statistics
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, NamedTuple

from testbed import shaping
from testbed.roles import Task
from testbed.spec.rules.capabilities import NO_NETEM, SHAPERS
from testbed.spec.faults import grammar
from testbed.spec.faults.grammar import parse_task, parse_trigger

# ---- operations ----------------------------------------------------------------------------------

class Op(NamedTuple):
    """One thing an action does. kind cmd: argv run in host `where` (None: this machine's root
    namespace, where switch ports live); signal: `arg` (a signal name) to task `where`; cpu: host
    `where` gets CPU limit `arg` (None: unlimited). check False: a failure is expected and ignored."""
    kind: str
    where: object
    arg: object
    check: bool = True


@dataclass
class LinkState:
    """A link of the running network as its trace and the faults on it leave it, shared by the fault
    applier and the tracer (Network.reshaped). In force: its base (the configured parameters, or its
    trace's row) with each active fault's own change on top, a later fault's over an earlier's."""
    base: object                                    # LinkParams
    changes: list = field(default_factory=list)     # [(fault, {key: value})], the active faults' in the order applied
    shaped: object = None                           # the LinkParams its tc tree was built for; None: unknown

    def _merged(self) -> dict:
        out = {}
        for _, change in self.changes:
            out.update(change)
        return out

    @property
    def params(self):
        """The base with the active faults' bw, delay and loss."""
        return self.base.model_copy(update={k: v for k, v in self._merged().items() if k != "up"})

    @property
    def up(self) -> bool:
        return self._merged().get("up", True)


@dataclass
class Context:
    """What planning needs of the running network: each faulted link's ends (interface, host holding
    it or None for the root namespace) and configured parameters, the shaping, tasks, hosts' CPU."""
    ends: dict = field(default_factory=dict)        # frozenset({a, b}) -> [(interface, host | None)]
    params: dict = field(default_factory=dict)      # frozenset({a, b}) -> LinkParams
    shaping: str = "tc"
    qdisc: str = "htb"
    tasks: list = field(default_factory=list)       # roles.Task
    cpu: dict = field(default_factory=dict)         # host -> configured CPU fraction or None
    qos_rates: dict = field(default_factory=dict)   # shaping ovs: switch port -> rate in force
    links: dict = field(default_factory=dict)       # frozenset({a, b}) -> LinkState (Network.reshaped)
    planned: dict = field(default_factory=dict)     # frozenset({a, b}) -> (LinkParams, {QoS port: rate | None}) to run


def link_key(fault) -> frozenset:
    return frozenset(fault.link)


def link_state(ctx: Context, link: frozenset) -> LinkState:
    """The link's state, shared by every Context of the network (at first: as bring-up shaped it)."""
    if link not in ctx.links:
        ctx.links[link] = LinkState(base=ctx.params[link], shaped=ctx.params[link])
    return ctx.links[link]


def shape_ops(ctx: Context, link: frozenset, params) -> list[Op]:
    """Shape both ends of a link (its key: frozenset of its ends) as `params` say, by the plan bring-up
    uses (shaping.link_plan), replacing what is there: under shaping ovs that includes the QoS root
    class's burst step. What it shapes is recorded once the operations have run (settle)."""
    ends = [shaping.End(intf, holder, holder is None) for intf, holder in ctx.ends[link]]
    rates = dict(ctx.qos_rates)     # link_plan updates it with this link's ports
    plan = shaping.link_plan(ends, params, ctx.shaping, ctx.qdisc, replace=True, qos_rates=rates,
                             in_force=link_state(ctx, link).shaped)
    ctx.planned[link] = (params, {end.intf: rates.get(end.intf) for end in ends if end.switch_port})
    ops = []
    for holder in {**plan.reset, **plan.tc, **plan.link}:
        ops += [Op("cmd", holder, ("tc", *args), check=False) for args in plan.reset.get(holder, [])]
        ops += [Op("cmd", holder, ("tc", *args)) for args in plan.tc.get(holder, [])]
        ops += [Op("cmd", holder, ("ip", *args)) for args in plan.link.get(holder, [])]
    ops += [Op("cmd", None, ("ovs-vsctl", *args)) for args in plan.ovs]
    return ops + [Op("cmd", None, ("tc", *args)) for args in plan.root_classes]


def settle(ctx: Context, ok: bool) -> None:
    """After the planned operations ran: what they shaped is in force (ok), or (one failed) those links'
    trees are unknown, so that their next change removes the root and builds it in full."""
    for link, (params, ports) in ctx.planned.items():
        ctx.links[link].shaped = params if ok else None
        if not ok:
            continue
        for port, rate in ports.items():
            ctx.qos_rates.pop(port, None)
            if rate is not None:
                ctx.qos_rates[port] = rate
    ctx.planned.clear()


def base_ops(ctx: Context, link: frozenset, base) -> list[Op]:
    """The link's base moves to `base` (its trace's new row); the active faults' changes stay on top."""
    state = link_state(ctx, link)
    state.base = base
    return shape_ops(ctx, link, state.params)


def _link_ops(ctx: Context, fault, key: str) -> list[Op]:
    """The link made as its state says: up or down (key "up"), else shaped."""
    state = link_state(ctx, link_key(fault))
    if key == "up":
        return [Op("cmd", holder, ("ip", "link", "set", "dev", intf, "up" if state.up else "down"))
                for intf, holder in ctx.ends[link_key(fault)]]
    return shape_ops(ctx, link_key(fault), state.params)


def _on_link(key: str, value=None) -> tuple:
    """(apply, undo) of an action that sets a link's `key` (up, bw, delay, loss) to `value` or to the
    fault's own value: apply puts the fault's change on top, undo takes off that change alone."""
    def apply(ctx, fault):
        change = {key: getattr(fault, key) if value is None else value}
        link_state(ctx, link_key(fault)).changes.append((fault, change))
        return _link_ops(ctx, fault, key)

    def undo(ctx, fault):
        state = link_state(ctx, link_key(fault))
        state.changes = [(f, c) for f, c in state.changes if f is not fault]
        return _link_ops(ctx, fault, key)
    return apply, undo


def target_tasks(ctx: Context, fault) -> list[Task]:
    """The task a fault names, or every task on the host it names."""
    if fault.task is not None:
        kind, index = parse_task(fault.task)
        return [t for t in ctx.tasks if (t.task_type, t.index) == (kind, index)]
    return [t for t in ctx.tasks if t.host == fault.host]


def _signal(name: str):
    return lambda ctx, fault: [Op("signal", t, name) for t in target_tasks(ctx, fault)]


@dataclass(frozen=True)
class Action(grammar.ActionSyntax):
    """An action of the grammar with the operations that apply and undo it."""
    apply: Callable[[Context, object], list[Op]] = None
    undo: Callable[[Context, object], list[Op]] | None = None


_OPERATIONS: dict[str, tuple] = {       # action -> (apply, undo or None); the names of grammar.ACTIONS
    "link_down": _on_link("up", False),
    "link_up": (_on_link("up", True)[0], None),     # no undo: its change stays on top of earlier ones
    "set_bw": _on_link("bw"),
    "set_delay": _on_link("delay"),
    "set_loss": _on_link("loss"),
    "kill": (_signal("SIGKILL"), None),
    "pause": (_signal("SIGSTOP"), _signal("SIGCONT")),
    "set_cpu": (lambda c, f: [Op("cpu", f.host, f.cpu)], lambda c, f: [Op("cpu", f.host, c.cpu.get(f.host))]),
}

ACTIONS: dict[str, Action] = {name: Action(**dataclasses.asdict(syntax), apply=_OPERATIONS[name][0],
                                           undo=_OPERATIONS[name][1])
                              for name, syntax in grammar.ACTIONS.items()}


def target_text(fault) -> str:
    """'h2-s1' (a link), 'worker 1' (a task) or 'h2' (a host)."""
    target = next((getattr(fault, k) for k in ACTIONS[fault.action].targets if getattr(fault, k) is not None), "")
    return "-".join(target) if isinstance(target, (list, tuple)) else str(target)


def describe(fault) -> str:
    """'link_down h2-s1 for 3s at step 10'."""
    action = ACTIONS[fault.action]
    value = f" to {_text(action.value, getattr(fault, action.value))}" if action.value else ""
    lasting = f" for {fault.duration:g}s" if fault.duration else ""
    return f"{fault.action} {target_text(fault)}{value}{lasting} at {fault.at}"


def _text(key: str, value) -> str:
    from testbed import units
    fmt = {"bw": units.format_bandwidth, "delay": units.format_time, "loss": units.format_percent}
    return fmt[key](value) if key in fmt else f"{value:g}"


def capability_problems(exp) -> list[tuple[str, str]]:
    """(key, message) for faults this machine or this shaping cannot apply (before anything starts)."""
    out = []
    for i, fault in enumerate(exp.faults):
        if not ACTIONS[fault.action].netem:
            continue
        if not SHAPERS[exp.topology.shaping].netem:
            out.append((f"faults[{i}].action", f"{fault.action} needs netem on tc-shaped links; "
                        f"{SHAPERS[exp.topology.shaping].what} (set topology.shaping: tc)"))
        elif not shaping.kernel_has_qdisc("netem"):
            out.append((f"faults[{i}].action", f"{fault.action} {NO_NETEM}. Remove the fault or run on a kernel "
                        "with netem"))
    return out


# ---- the applier -------------------------------------------------------------------------------

@dataclass
class Record:
    """One fault of the run and what became of it (a faults.csv row)."""
    index: int
    fault: object
    applied_step: int | None = None
    applied_t: float | None = None
    undone_step: int | None = None
    undone_t: float | None = None
    outcome: str = "not reached"

    @property
    def active(self) -> bool:
        return self.applied_t is not None and self.undone_t is None and ACTIONS[self.fault.action].undo is not None


class Applier:
    """Applies a run's faults when their triggers are reached and undoes them after their duration
    (and all of them at `close`, whatever happened); `tick` is called by the training loop."""

    def __init__(self, faults, net, tasks, steps_per_epoch: int, journal: Path, progress=lambda msg: None):
        self.net, self.spe, self.journal, self.progress = net, steps_per_epoch, journal, progress
        self.records = [Record(i, f) for i, f in enumerate(faults)]
        self.triggers = [parse_trigger(f.at) for f in faults]
        self.ctx = link_context(net, {tuple(f.link) for f in faults if f.link is not None})
        self.ctx.tasks = list(tasks)
        self.ctx.cpu = {name: node.limits["cpu"] for name, node in net.nodes.items()}
        self.step, self._blamed = None, set()
        self._write()

    def tick(self, training, lead_events: list[dict]) -> str | None:
        """Apply what is due, undo what has lasted its duration; a reason when a fault cannot be applied."""
        self.step = next((e["step"] for e in reversed(lead_events) if e.get("event") == "step"), None)
        start = next((e["t"] for e in lead_events if e.get("event") == "start"), None)
        elapsed = None if start is None else time.time() - start
        for rec, trigger in zip(self.records, self.triggers):
            if rec.applied_t is None and trigger.reached(self.step, elapsed, self.spe):
                problem = self._apply(training, rec)
                if problem:
                    return problem
            elif rec.active and rec.fault.duration and time.time() - rec.applied_t >= rec.fault.duration:
                self._undo(training, rec)
        return None

    def close(self, training) -> None:
        """Undo every fault still in force (last applied first); never raises."""
        for rec in sorted((r for r in self.records if r.active), key=lambda r: -r.applied_t):
            self._undo(training, rec)

    def cause(self, task: Task) -> str | None:
        """The applied fault that ended this task, if one did (each kill explains one end)."""
        for rec in self.records:
            if rec.applied_t is not None and rec.fault.action == "kill" and rec.index not in self._blamed \
                    and task in target_tasks(self.ctx, rec.fault):
                self._blamed.add(rec.index)
                return f"fault #{rec.index + 1}: {describe(rec.fault)}"
        return None

    def _apply(self, training, rec: Record) -> str | None:
        rec.applied_step, rec.applied_t = self.step, time.time()
        try:
            self._run(training, ACTIONS[rec.fault.action].apply(self.ctx, rec.fault))
            rec.outcome = "ok"
            self.progress(f"fault #{rec.index + 1} applied at step {self.step}: {describe(rec.fault)}")
            return None
        except Exception as err:  # noqa: BLE001 - recorded, and the run fails with it
            rec.outcome = f"failed: {err}"
            self._undo(training, rec)      # whatever part of it took effect
            return f"fault #{rec.index + 1} ({describe(rec.fault)}) could not be applied: {err}"
        finally:
            self._write()

    def _undo(self, training, rec: Record) -> None:
        undo = ACTIONS[rec.fault.action].undo
        if undo is None:
            return
        rec.undone_step, rec.undone_t = self.step, time.time()
        try:
            self._run(training, undo(self.ctx, rec.fault))
            self.progress(f"fault #{rec.index + 1} undone at step {self.step}")
        except Exception as err:  # noqa: BLE001 - teardown goes on; the row says so
            rec.outcome += f"; undo failed: {err}"
        self._write()

    def _run(self, training, ops: list[Op]) -> None:
        carry_out(self.ctx, self.net, training, ops)

    def _write(self) -> None:
        """The journal (runs/<id>/faults.json): readable even after an interrupted run."""
        from testbed.run.results import write_json
        write_json(self.journal, [dict(fault=describe(r.fault), applied_step=r.applied_step,
                                       applied_t=r.applied_t, undone_step=r.undone_step, undone_t=r.undone_t,
                                       outcome=r.outcome) for r in self.records])


def run_ops(net, training, ops: list[Op]) -> None:
    """Carry out operations on the running network: commands in a node (through the node interface) or
    in this machine's namespace, signals to the training's tasks, CPU limits; raises on a failed one."""
    for op in ops:
        if op.kind == "signal":
            if not training.signal(op.where, op.arg) and op.check:
                raise RuntimeError(f"{op.where.label} is not running")
        elif op.kind == "cpu":
            net.nodes[op.where].set_cpu(op.arg)
        elif op.where is not None:
            net.nodes[op.where].run(list(op.arg), timeout=30, check=op.check)
        else:
            proc = subprocess.run(list(op.arg), capture_output=True, text=True, timeout=30)
            if proc.returncode != 0 and op.check:
                raise RuntimeError(f"{' '.join(op.arg)} failed: {(proc.stderr or proc.stdout).strip()[:300]}")


def carry_out(ctx: Context, net, training, ops: list[Op]) -> None:
    """run_ops, then settle what they shaped: in force when all succeeded, else unknown."""
    try:
        run_ops(net, training, ops)
    except BaseException:
        settle(ctx, ok=False)
        raise
    settle(ctx, ok=True)


def link_context(net, links) -> Context:
    """A Context for re-shaping `links` (pairs of ends) of a running network; it shares the network's
    OVS QoS rates and links' states (LinkState), so that faults and traces see each other's changes."""
    ctx = Context(shaping=net.topology.shaping, qdisc=net.topology.qdisc, qos_rates=net.qos_rates,
                  links=net.reshaped)
    for a, b in links:
        edge = next(e for e in net.graph.links if {e.a, e.b} == {a, b})
        ctx.params[frozenset((a, b))] = edge.params
        ctx.ends[frozenset((a, b))] = [(intf, node.name if node else None) for intf, node in net.link_ends(a, b)]
    return ctx


# ---- what the faults cost (pure) ----------------------------------------------------------------

def attempts(events: list[dict]) -> list[list[dict]]:
    """A task's events split where it started again (each `start` begins an attempt)."""
    out: list[list[dict]] = []
    for e in events:
        if e.get("event") == "start" or not out:
            out.append([])
        out[-1].append(e)
    return out


def _steps(events) -> list[dict]:
    return [e for e in events if e.get("event") == "step" and e.get("t") is not None]


def restart_costs(lead_events: list[dict]) -> list[dict]:
    """Per restart of the lead: when it was lost (t of its last step), the first step beyond that one
    after the restart, the steps replayed, and the seconds lost (that gap less one median step)."""
    parts = attempts(lead_events)
    runs = [_steps(a) for a in parts]
    median = statistics.median(e["time_s"] for r in runs for e in r) if any(runs) else 0.0
    out, reached = [], None
    for before, after, restarted in zip(runs, runs[1:], parts[1:]):
        reached = before[-1] if before else reached
        if reached is None or not after:
            continue
        beyond = next((e for e in after if e["step"] > reached["step"]), after[-1])
        out.append(dict(lost_t=reached["t"], restarted_t=restarted[0]["t"], step=reached["step"],
                        replayed=max(0, reached["step"] - after[0]["step"] + 1),
                        time_lost_s=round(max(0.0, beyond["t"] - reached["t"] - median), 3)))
    return out


def fault_rows(records: list[Record], events: dict, lead: Task, experiment: str, run_id: str) -> list[dict]:
    """faults.csv rows: the plan, when each fault was applied and undone, its outcome and its cost.
    extra_s: what the lead's steps overlapping the fault's window took beyond its median step (a
    killed task's window lasts until it is back; when the lead itself had to start again: the time
    lost to that); steps_replayed: steps run twice because training resumed from a backup."""
    lead_events = events.get(lead, [])
    steps = _steps(lead_events)
    median = statistics.median(e["time_s"] for e in steps) if steps else 0.0
    costs = restart_costs(lead_events)
    rows = []
    for rec in records:
        f, extra, replayed = rec.fault, None, 0
        if rec.applied_t is not None:
            end = rec.undone_t or _back(rec, events) or rec.applied_t
            restart = next((c for c in costs if c["restarted_t"] > rec.applied_t), None)
            if restart is not None and f.action == "kill":
                extra, replayed = restart["time_lost_s"], restart["replayed"]
            else:
                hit = [e for e in steps if e["t"] >= rec.applied_t and e["t"] - e["time_s"] <= end]
                extra = round(sum(max(0.0, e["time_s"] - median) for e in hit), 3)
        rows.append(dict(experiment=experiment, run_id=run_id, fault=rec.index + 1, action=f.action,
                         target=target_text(f), at=f.at, duration_s=f.duration,
                         applied_step=rec.applied_step, applied_t=rec.applied_t, undone_step=rec.undone_step,
                         undone_t=rec.undone_t, outcome=rec.outcome, extra_s=extra, steps_replayed=replayed))
    return rows


def _back(rec: Record, events: dict) -> float | None:
    """When a killed task was running again (its first start or server event after the kill)."""
    if rec.fault.action != "kill":
        return None
    kind, index = parse_task(rec.fault.task)
    evs = next((evs for t, evs in events.items() if (t.task_type, t.index) == (kind, index)), [])
    return next((e["t"] for e in evs if e.get("event") in ("start", "server") and e.get("t", 0) > rec.applied_t), None)


def recovery_columns(lead_events: list[dict], restarts: int) -> dict:
    """runs.csv's restarts and time_lost_s, and (after a restart) the training time from the first
    attempt's start to the end, with the per-step figures that follow from it."""
    out = {"restarts": restarts, "time_lost_s": round(sum(c["time_lost_s"] for c in restart_costs(lead_events)), 3)}
    start = next((e for e in lead_events if e.get("event") == "start"), None)
    done = next((e for e in lead_events if e.get("event") == "done"), None)
    if restarts and start and done and done.get("steps"):
        total = done["t"] - start["t"]
        out.update(training_time_s=round(total, 3), time_per_step_s=total / done["steps"])
        if done.get("samples_per_s") and done.get("time_per_step_s"):
            out["samples_per_s"] = done["samples_per_s"] * done["time_per_step_s"] / out["time_per_step_s"]
    return out
