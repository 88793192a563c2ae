"""The rules of workload.balance: where each balancing method is built (workloads/balance/ declares its engines
and strategies and why it is refused elsewhere) and what the rest of the file must be. Each problem is blamed
on workload.balance, naming the setting and what works."""
from __future__ import annotations

import workloads.balance as balance
import workloads.communication as comm
from testbed.spec.models import Experiment
from testbed.spec.rules.problems import Problem

KEY = ("workload", "balance")


def balance_problems(exp: Experiment) -> list[Problem]:
    """Every problem of the point's workload.balance (none for balance: none)."""
    w = exp.workload
    setting = w.balance
    method = balance.method_of(setting)
    if method.NAME == balance.PLAIN:
        return []
    name = balance.label(setting)
    if w.engine not in method.ENGINES or w.strategy not in method.STRATEGIES:
        related = ("workload.engine",) if w.engine not in method.ENGINES else ("workload.strategy",)
        return [Problem(KEY, method.REFUSAL.format(engine=w.engine, strategy=w.strategy), related)]
    out = []
    if w.script is not None:
        out.append(Problem(KEY, f"balance {name} sizes the built-in training loops' batches; your own script "
                           "sizes its own: remove workload.balance", ("workload.script",)))
    c = w.communication.settings()
    chosen = comm.method_of(c)
    if chosen.KEY != comm.COMPRESSION:
        out.append(Problem(KEY, f"balance {name} weights each step's gradients by the workers' shares; "
                           f"{chosen.TITLE} averages models instead: remove one of the two",
                           (f"workload.communication.{chosen.KEY}",)))
    run = {"engine": w.engine, "strategy": w.strategy, "compute": exp.emulation.compute,
           "communication": comm.label(c)}
    out += [Problem(KEY, message, related) for message, related in getattr(method, "run_problems", lambda s, r: [])(
        setting, run)]
    if w.recovery != "none":
        out.append(Problem(KEY, f"balance {name} with recovery backup is not built (a restarted worker would "
                           "keep its old batch): set recovery: none", ("workload.recovery",)))
    return out
