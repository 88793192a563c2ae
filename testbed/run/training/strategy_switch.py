"""strategy switch: at each epoch's end, the measured step against the cost model's prediction for
the other strategy (analysis.model.advisor.switch_verdict); Training.switch restarts the tasks under it.

The bandwidth is the checks' narrowest measured goodput; while a set_bw fault holds a link at
another rate, the narrowest rate of the moment times the measured/configured ratio of the checks.
The hosts' CPU limits are the topology's, or a set_cpu fault's while it holds.
"""
from __future__ import annotations

from analysis.model import advisor
from analysis.tables import steady
from testbed.run.faults.faults import link_key
from testbed.spec.rules.experiment import advisor_results_paths


class Switcher:
    """Asked by the training loop with the lead task's events; returns a Verdict to switch, else None."""

    def __init__(self, exp, graph, check_rows: list[dict], shared: bool, progress=lambda msg: None):
        self.w, self.progress = exp.workload, progress
        self.inputs = advisor.advise_inputs(exp, graph, check_rows, advisor_results_paths(exp), shared)
        self.links = {frozenset((e.a, e.b)): e.params.bw for e in graph.links}
        self.verdicts: list[advisor.Verdict] = []
        self.switched = 0

    def check(self, training, lead_events: list[dict]):
        """At a new epoch end (not the last) of the running attempt: compare, record, and return the
        verdict when it says switch (at most workload.switch.max_switches times)."""
        if self.switched >= self.w.switch.max_switches:
            return None
        attempt = _last_attempt(lead_events)
        epochs = [e for e in attempt if e.get("event") == "epoch"]
        if not epochs or epochs[-1]["epoch"] >= self.w.epochs or \
                any(v.epoch == epochs[-1]["epoch"] for v in self.verdicts):
            return None
        epoch = epochs[-1]["epoch"]
        times = [e["time_s"] for e in attempt if e.get("event") == "step" and e.get("epoch") == epoch
                 and e.get("time_s")]
        if not times:
            return None
        strategy = training.workload.strategy
        workers = sum(t.task_type == "worker" for t in training.tasks)
        per_step = self.w.samples_per_step(workers, strategy)
        left = (self.w.epochs - epoch) * self.w.steps_at(workers, strategy)
        samples = left * per_step if self.w.fixed == "data" else None     # the other trains them in its own steps
        now = {"bw_bps": self.bandwidth(training.faults), "cpu": self.cpu(training.faults)}
        advice = advisor.advise(**{**self.inputs, **now}, steps=None if samples else left, samples=samples)
        step = steady.typical(times, asynchronous=strategy == "ps")
        verdict = advisor.switch_verdict(epoch, strategy, step, per_step, advice, self.w.switch.margin,
                                         _startup(attempt, training), left, samples)
        self.verdicts.append(verdict)
        self.progress(f"strategy switch: {verdict.reason}: {'switch' if verdict.switch else 'stay'}")
        if not verdict.switch:
            return None
        self.switched += 1
        return verdict

    def bandwidth(self, applier) -> float | None:
        """The narrowest goodput now: measured by the checks, scaled while a set_bw fault is active."""
        measured, configured = self.inputs["bw_bps"], self.inputs["configured_bps"]
        changed = {link_key(r.fault): r.fault.bw for r in (applier.records if applier else [])
                   if r.active and r.fault.action == "set_bw"}
        if not changed:
            return measured
        narrowest = min(bw for bw in {**self.links, **changed}.values() if bw)
        ratio = measured / configured if measured and configured else self.inputs["model"].rho
        return narrowest * ratio


    def cpu(self, applier) -> dict:
        """Each host's CPU fraction now: the topology's, or an active set_cpu fault's."""
        cpu = dict(self.inputs["cpu"])
        cpu.update({r.fault.host: r.fault.cpu for r in (applier.records if applier else [])
                    if r.active and r.fault.action == "set_cpu"})
        return cpu


def _startup(attempt: list[dict], training) -> float:
    """Seconds from starting the running tasks to the lead's `start` event (TensorFlow's import,
    the cluster's set-up): what new processes cost again at a switch (0 when unknown)."""
    start = next((e["t"] for e in attempt if e.get("event") == "start" and e.get("t") is not None), None)
    launched = getattr(training, "launched", None)
    return max(0.0, start - launched) if start is not None and launched is not None else 0.0


def _last_attempt(events: list[dict]) -> list[dict]:
    """The events since the last `start` (a task started again appends to its file)."""
    starts = [i for i, e in enumerate(events) if e.get("event") == "start"]
    return events[starts[-1]:] if starts else events


def run_figures(lead_events: list[dict], samples_per_step: dict[str, float]) -> dict:
    """runs.csv's training_time_s, time_per_step_s and samples_per_s over a run that switched: from
    the first start to the last done, counting each step once (its last run) with the samples per
    step of the strategy it ran under."""
    start = next((e for e in lead_events if e.get("event") == "start"), None)
    done = [e for e in lead_events if e.get("event") == "done"]
    if start is None or not done:
        return {}
    kept = {e["step"]: e for e in lead_events if e.get("event") == "step" and e.get("step") is not None}
    total = done[-1]["t"] - start["t"]
    samples = sum(samples_per_step.get(e.get("strategy"), 0.0) for e in kept.values())
    return dict(training_time_s=round(total, 3), time_per_step_s=total / len(kept) if kept else None,
                samples_per_s=samples / total if total > 0 else None, steps=len(kept))


def lead_events(outcome) -> list[dict]:
    """The lead task's events over every strategy the run had, in time order."""
    by_stem = {t.log_stem: evs for t, evs in outcome.events.items()}
    stems = list(dict.fromkeys(t.log_stem for t in outcome.leads))
    return sorted((e for stem in stems for e in by_stem.get(stem, [])), key=lambda e: e.get("t") or 0)


def columns(outcome, workload, hosts: int) -> dict:
    """runs.csv columns of a strategy-switch run: switches, and the time, step and sample figures,
    the final loss and the time lost over all its strategies (a switch costs like a restart of
    every task: the steps after the epoch it decided at, stopping, TensorFlow's start, warm-up)."""
    from testbed.run.faults.faults import recovery_columns
    events = lead_events(outcome)
    per_step = {"allreduce": workload.batch_per_worker * hosts, "ps": workload.batch_per_worker}
    done = [e for e in events if e.get("event") == "done"]
    out = {"switches": len(outcome.switches), "final_loss": done[-1].get("final_loss") if done else None,
           "time_lost_s": recovery_columns(events, len(outcome.restarts) + len(outcome.switches))["time_lost_s"]}
    out.update(run_figures(events, per_step))
    return out


def journal(outcome, switcher) -> dict:
    """runs/<run_id>/switch.json: every epoch end's verdict and the switches made."""
    from dataclasses import asdict
    return {"verdicts": [asdict(v) for v in switcher.verdicts], "switches": outcome.switches}
