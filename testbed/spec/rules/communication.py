"""The rules of workload.communication: what each setting needs, and what each engine and strategy
cannot do (docs/communication.md). The methods (workloads/communication/) declare their keys, engines,
strategies and their own problems; these rules apply them. Each problem is blamed on the setting's key,
naming what works."""
from __future__ import annotations

import workloads.communication as comm
from testbed.spec.models import CommunicationConf, Experiment
from testbed.spec.rules.problems import Problem

BASE = ("workload", "communication")
DEFAULT = CommunicationConf()
STRATEGY_REFUSALS = {
    "single": "strategy single trains on one node and sends nothing: use strategy allreduce to compress or "
              "average between workers",
    "auto": "strategy auto may run ps, which sends every gradient as the optimizer makes it: set strategy allreduce",
    "switch": "strategy switch may run ps, which sends every gradient as the optimizer makes it: set strategy "
              "allreduce",
    "ps": "{what} is for all-reduce: under ps each worker pushes its float32 gradients to the servers and pulls the "
          "model back; set strategy allreduce",
}


def communication_problems(exp: Experiment) -> list[Problem]:
    """Every problem of the point's workload.communication (none when it is left at its defaults)."""
    c, w = exp.workload.communication, exp.workload
    if c == DEFAULT:
        return []
    settings = c.settings()
    out = _setting_problems(settings)
    chosen = comm.chosen_all(settings)
    if not chosen:
        return out
    key = BASE + (chosen[0].KEY,)
    if w.script is not None:
        return out + [Problem(key, "your own script communicates as it is written: workload.communication is for "
                              "the built-in training loops (remove it, or apply the setting in the script)",
                              ("workload.script",))]
    if w.strategy not in chosen[0].STRATEGIES:
        why = STRATEGY_REFUSALS.get(w.strategy, f"strategy {w.strategy} does not run it: set strategy allreduce")
        out.append(Problem(key, why.format(what=getattr(chosen[0], "WHAT", chosen[0].TITLE)), ("workload.strategy",)))
    for method in chosen:
        if w.engine not in method.ENGINES:
            out.append(Problem(BASE + (method.KEY,), _engine_refusal(method, w.engine), ("workload.engine",)))
    if exp.emulation.compute == "replay":
        out.append(Problem(key, "replayed compute sends stand-in gradients of the model's plain shapes: use "
                           "emulation.compute: real for communication settings", ("emulation.compute",)))
    run = {"engine": w.engine, "strategy": w.strategy, "recovery": w.recovery, "compute": exp.emulation.compute}
    for method in chosen:
        out += [Problem(BASE + (k,), message, related)
                for k, message, related in getattr(method, "run_problems", lambda c, r: [])(settings, run)]
    return out


def _engine_refusal(method, engine: str) -> str:
    if hasattr(method, "engine_refusal"):
        return method.engine_refusal(engine)
    return (f"{method.TITLE} runs under {' and '.join(method.ENGINES)}, not {engine}: set engine: "
            f"{method.ENGINES[0]}")


def _setting_problems(c: dict) -> list[Problem]:
    """Keys set without a method that owns them (the method's own message), methods that do not combine,
    then each chosen method's own problems (what its keys must be)."""
    chosen = comm.chosen_all(c)
    owned = {k for m in chosen for k in getattr(m, "KEYS", {})} | {comm.COMPRESSION}
    keys = comm.keys()
    out = [Problem(BASE + (name,), comm.orphan_message(name)) for name, key in keys.items()
           if name not in owned and c.get(name) != key.default]
    for later in chosen[1:]:
        first = chosen[0]
        out.append(Problem(BASE + (later.KEY,), f"{first.KEY} {c[first.KEY]} and {later.KEY} do not combine: "
                           f"{getattr(later, 'ALONE', later.TITLE)}; choose one",
                           (".".join(BASE + (first.KEY,)),)))
    for method in chosen:
        out += [Problem(BASE + (k,), message, related)
                for k, message, related in getattr(method, "problems", lambda c: [])(c)]
    return out
