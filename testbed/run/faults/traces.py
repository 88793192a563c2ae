"""Time-varying links at run time: the links that follow a trace (`trace:`, read and checked by
testbed/readers/traces.py) start from its first values at bring-up, and the training loop ticks a
Tracer next to the fault applier, which re-shapes each link when its trace reaches a new row, by the
same operations as a set_bw fault (faults.shape_ops: shaping.link_plan with replace, OVS QoS too).
A row is the link's base: the faults active on the link stay on top of it (faults.LinkState).
Each change is a link_changes.csv row, with the lead's step at which it landed. Changes stop when
training ends (the Tracer is ticked only while it runs); teardown removes the links.

Trace times are emulated time: under emulation.dilation K a row lands K x its time after the trace
started, at its rate / K (and delay x K), as every link of the wall graph (run/point/point.py)."""
from __future__ import annotations

import time
from dataclasses import dataclass

from testbed import shaping
from testbed.run.faults import faults
from testbed.spec.rules.capabilities import NO_NETEM, SHAPERS, rate_problem
from testbed.spec.faults.grammar import Trigger, parse_start
from testbed.readers.traces import Trace
from testbed.spec.faults.traces import LinkTrace, changed
from testbed.units import format_bandwidth



def capability_problems(spec, wall_traces) -> list[tuple[str, str]]:
    """(key, message) for traces this machine cannot follow, asked of a wall spec and its traced links
    on the wall clock before anything starts: delay or loss without netem in the kernel (refused like a
    link's delay), a rate below what tc paces."""
    out: dict[str, str] = {}
    for lt in wall_traces:
        key = f"{lt.key}.trace"
        if lt.trace.needs_netem and SHAPERS[spec.topology.shaping].netem and not shaping.kernel_has_qdisc("netem"):
            out[key] = f"this trace has delay or loss, which {NO_NETEM}. Remove them or run on a kernel with netem"
        low = min(r.bw for r in lt.trace.rows)
        if rate_problem(low, spec.topology.shaping):
            out.setdefault(key, f"its slowest rate is {low} bit/s on this machine (the trace's rate / "
                           f"emulation.dilation): tc paces {SHAPERS[spec.topology.shaping].min_rate} bit/s at least")
    return list(out.items())


@dataclass
class Follow:
    """One link following its trace: the trace in emulated units and on the wall clock, its mode and
    start, when it began (unix time) and the (loop, row) in force."""
    link: LinkTrace
    wall: Trace
    mode: str
    start: Trigger
    own: object = None          # the link's parameters on the wall with its own delay and loss (an empty cell's)
    t0: float | None = None
    at: tuple[int, int] | None = None

    @property
    def name(self) -> str:
        return f"{self.link.a}-{self.link.b}"


class Tracer:
    """Moves every traced link along its trace while training runs; `tick` is called by the training
    loop (as the fault applier's), `rows` are the link_changes.csv rows so far."""

    def __init__(self, followed: list[LinkTrace], net, steps_per_epoch: int, dilation: float = 1.0,
                 experiment: str = "", run_id: str = "", progress=lambda msg: None):
        self.net, self.spe, self.k, self.progress = net, steps_per_epoch, dilation, progress
        self.experiment, self.run_id = experiment, run_id
        self.ctx = faults.link_context(net, [(lt.a, lt.b) for lt in followed])
        self.follows = [Follow(lt, lt.trace.scaled(dilation), lt.params.trace_mode or "hold",
                               parse_start(lt.params.trace_start or "start"), self._own(lt, dilation))
                        for lt in followed]
        self.rows: list[dict] = []

    def _own(self, lt: LinkTrace, dilation: float):
        """The link's parameters on the wall clock with the delay and loss the experiment file gave it:
        the network's are the trace's first row's (bring-up shaped it so), which a later row's empty
        cell must not keep."""
        own = lt.params
        return self.ctx.params[frozenset((lt.a, lt.b))].model_copy(update={
            "delay": None if own.delay is None else own.delay * dilation, "loss": own.loss})

    def tick(self, training, lead_events: list[dict]) -> str | None:
        """Start the traces whose start is reached, re-shape the links whose trace reached a new row;
        a reason when a link could not be re-shaped (the run fails with it)."""
        step = next((e["step"] for e in reversed(lead_events) if e.get("event") == "step"), None)
        start = next((e["t"] for e in lead_events if e.get("event") == "start"), None)
        if start is None:
            return None
        now, moved = time.time(), {}
        for f in self.follows:
            if f.t0 is None:
                if not f.start.reached(step, (now - start) / self.k, self.spe):
                    continue
                f.t0 = start + f.start.value * self.k if f.start.kind == "time" else now
            at = f.wall.position(now - f.t0, f.mode)
            if at == f.at:
                continue
            f.at = at
            problem = self._change(training, f, step)
            if problem:
                return problem
            moved.setdefault((f.link.key, at), []).append(f.name)
        for (key, (loop, index)), names in moved.items():
            row = next(f for f in self.follows if f.name == names[0]).link.trace.rows[index]
            self.progress(f"{key}.trace: {', '.join(names[:4])}{' ...' if len(names) > 4 else ''} at "
                          f"{format_bandwidth(row.bw)} (row {index + 1}{f', loop {loop + 1}' if loop else ''}) "
                          f"after step {step or 0}")
        return None

    def _change(self, training, f: Follow, step) -> str | None:
        loop, index = f.at
        key = frozenset((f.link.a, f.link.b))
        landed = time.time()
        row = dict(experiment=self.experiment, run_id=self.run_id, link=f.name, row=index + 1, loop=loop,
                   trace_t=round(f.link.trace.planned(loop, index), 6), step=step, t=landed,
                   late_s=round((landed - f.t0 - f.wall.planned(loop, index)) / self.k, 3))
        emulated = changed(f.link.params, f.link.trace.rows[index])
        row.update(bw_bps=emulated.bw, delay_ms=None if emulated.delay is None else round(emulated.delay * 1e3, 6),
                   loss_pct=emulated.loss, outcome="ok")
        try:
            ops = faults.base_ops(self.ctx, key, changed(f.own, f.wall.rows[index]))
            faults.carry_out(self.ctx, self.net, training, ops)
        except Exception as err:  # noqa: BLE001 - recorded, and the run fails with it
            row["outcome"] = f"failed: {err}"
            return f"link {f.name} could not follow its trace ({f.link.key}.trace, row {index + 1}): {err}"
        finally:
            self.rows.append(row)
        return None
