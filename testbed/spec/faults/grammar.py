"""The fault grammar of the experiment file: triggers (`at:`), task names, and the table of actions
with what each targets, the key that carries its new value and whether it takes a duration.

What each action does to a running network (its operations and their undo) is the applier's
business: testbed/run/faults/faults.py, keyed by the same names."""
from __future__ import annotations

import re
from dataclasses import dataclass

from testbed.limits import MAX_COUNT, MAX_TIME
from testbed.units import parse_time

_TRIGGER = re.compile(r"^(step|epoch)\s+(\d+)$")


@dataclass(frozen=True)
class Trigger:
    kind: str        # step | epoch | time
    value: float     # step or epoch number, or seconds after training started

    def __str__(self) -> str:
        return f"{self.kind} {self.value:g}" if self.kind != "time" else f"{self.value:g}s"

    def step(self, steps_per_epoch: int) -> int | None:
        """The lead's step count at which it fires (epoch N begins after N-1 epochs); None: a time."""
        if self.kind == "time":
            return None
        return int(self.value) if self.kind == "step" else (int(self.value) - 1) * steps_per_epoch

    def reached(self, step: int | None, elapsed: float | None, steps_per_epoch: int) -> bool:
        """step: the lead's last step (None before its first); elapsed: seconds since training started."""
        if elapsed is None:
            return False
        target = self.step(steps_per_epoch)
        return elapsed >= self.value if target is None else (step or 0) >= target


def parse_trigger(text) -> Trigger:
    """'step 20', 'epoch 2' (both from 1) or a time after training starts such as '15s' or '1m'."""
    hint = "a trigger is 'step N', 'epoch N' or a time after training starts such as 15s"
    if not isinstance(text, str):
        raise ValueError(f"{str(text)[:40]!r} is not a trigger: {hint}")
    words = " ".join(text.lower().split())
    match = _TRIGGER.match(words)
    if match:
        if len(match.group(2)) > len(str(MAX_COUNT)) or int(match.group(2)) > MAX_COUNT:
            raise ValueError(f"{text[:40]!r}: steps and epochs are at most {MAX_COUNT:,}")
        if int(match.group(2)) < 1:
            raise ValueError(f"{text!r}: steps and epochs count from 1")
        return Trigger(match.group(1), int(match.group(2)))
    try:
        seconds = parse_time(words, MAX_TIME)
    except ValueError as exc:
        if "too large" in str(exc) or "at most" in str(exc):
            raise
        raise ValueError(f"{text[:40]!r} is not a trigger: {hint}") from None
    if seconds <= 0:
        raise ValueError(f"{text!r}: a time trigger must be after training starts (> 0)")
    return Trigger("time", seconds)


def parse_start(text) -> Trigger:
    """A trace's start (trace_start): 'start' (when training starts, a time trigger at 0) or a trigger."""
    if isinstance(text, str) and " ".join(text.lower().split()) == "start":
        return Trigger("time", 0.0)
    try:
        return parse_trigger(text)
    except ValueError as err:
        raise ValueError(f"{err}, or 'start' (when training starts)") from None


def parse_task(text) -> tuple[str, int]:
    """'worker 1' -> ('worker', 1); a bare type is index 0."""
    match = re.fullmatch(r"(single|worker|chief|ps)(?:\s+(\d{1,9}))?", " ".join(str(text).split()))
    if not match:
        raise ValueError(f"{str(text)[:40]!r} is not a task: write its type and index, e.g. 'worker 1' "
                         "(types: single, worker, chief, ps)")
    return match.group(1), int(match.group(2) or 0)


@dataclass(frozen=True)
class ActionSyntax:
    """How an action is written in the file."""
    targets: tuple[str, ...]       # the keys that may name its target (exactly one is given)
    value: str | None              # the key carrying its new value
    duration: str                  # no | optional | required
    netem: bool = False            # needs the netem qdisc
    doc: str = ""


ACTIONS: dict[str, ActionSyntax] = {
    "link_down": ActionSyntax(("link",), None, "optional",
                              doc="both ends of the link down (undo: up, unless a later link_down is active)"),
    "link_up": ActionSyntax(("link",), None, "no", doc="both ends of the link up"),
    "set_bw": ActionSyntax(("link",), "bw", "optional",
                           doc="the link's rate (undo: this fault's rate taken off, the faults still active kept)"),
    "set_delay": ActionSyntax(("link",), "delay", "optional", netem=True,
                              doc="netem delay on the link (undo: this fault's delay taken off)"),
    "set_loss": ActionSyntax(("link",), "loss", "optional", netem=True,
                             doc="netem loss on the link (undo: this fault's loss taken off)"),
    "kill": ActionSyntax(("task",), None, "no", doc="SIGKILL to the task's processes"),
    "pause": ActionSyntax(("task", "host"), None, "required",
                          doc="SIGSTOP to the task (or every task on the host), SIGCONT after the duration"),
    "set_cpu": ActionSyntax(("host",), "cpu", "optional",
                            doc="the host's CPU limit (fraction of the machine; undo: the configured one)"),
}
