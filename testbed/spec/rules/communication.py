"""The rules of workload.communication: what each setting needs, and what each engine and strategy
cannot do (docs/communication.md). Each problem is blamed on the setting's key, naming what works."""
from __future__ import annotations

from testbed.spec.models import CommunicationConf, Experiment
from testbed.spec.rules.problems import Problem

BASE = ("workload", "communication")
DEFAULT = CommunicationConf()


def communication_problems(exp: Experiment) -> list[Problem]:
    """Every problem of the point's workload.communication (none when it is left at its defaults)."""
    c, w = exp.workload.communication, exp.workload
    if c == DEFAULT:
        return []
    out = _setting_problems(c)
    if not c.in_force():
        return out
    key = BASE + (("compression",) if c.compression != "none" else ("sync_every",) if c.sync_every > 1 else ())
    if w.script is not None:
        return out + [Problem(key, "your own script communicates as it is written: workload.communication is for "
                              "the built-in training loops (remove it, or apply the setting in the script)",
                              ("workload.script",))]
    if w.strategy == "single":
        out.append(Problem(key, "strategy single trains on one node and sends nothing: use strategy allreduce "
                           "to compress or average between workers", ("workload.strategy",)))
    elif w.strategy in ("auto", "switch"):
        out.append(Problem(key, f"strategy {w.strategy} may run ps, which sends every gradient as the optimizer "
                           "makes it: set strategy allreduce", ("workload.strategy",)))
    elif w.strategy == "ps":
        what = ("gradient compression" if c.compression != "none" else "local SGD (sync_every)")
        out.append(Problem(key, f"{what} is for all-reduce: under ps each worker pushes its float32 gradients to "
                           "the servers and pulls the model back; set strategy allreduce", ("workload.strategy",)))
    if w.engine == "tensorflow" and c.compression == "powersgd":
        out.append(Problem(BASE + ("compression",), "PowerSGD is PyTorch's DDP communication hook: set engine: "
                           "pytorch, or compression fp16 or bf16 (TensorFlow casts the gradients for its all-reduce)",
                           ("workload.engine",)))
    if exp.emulation.compute == "replay":
        out.append(Problem(key, "replayed compute sends stand-in gradients of the model's plain shapes: use "
                           "emulation.compute: real for communication settings", ("emulation.compute",)))
    if c.sync_every > 1 and w.recovery != "none":
        out.append(Problem(BASE + ("sync_every",), "a task restarted from a backup would lose its place in the "
                           "averaging period and the outer optimizer's state: set recovery: none",
                           ("workload.recovery",)))
    return out


def _setting_problems(c: CommunicationConf) -> list[Problem]:
    """Settings that need another one: rank (powersgd), start_step (powersgd or sync_every), outer
    (sync_every); compression and sync_every together; PowerSGD's first two steps."""
    out = []
    if c.rank != DEFAULT.rank and c.compression != "powersgd":
        out.append(Problem(BASE + ("rank",), "rank is PowerSGD's: set compression: powersgd, or remove rank"))
    if c.start_step != DEFAULT.start_step and c.compression != "powersgd" and c.sync_every == 1:
        out.append(Problem(BASE + ("start_step",), "start_step delays PowerSGD or local SGD: set compression: "
                           "powersgd or sync_every, or remove start_step"))
    if c.outer is not None and c.sync_every == 1:
        out.append(Problem(BASE + ("outer",), "outer is DiLoCo's optimizer over the averaged model: set sync_every "
                           "(e.g. 8), or remove outer"))
    if c.compression != "none" and c.sync_every > 1:
        out.append(Problem(BASE + ("sync_every",), f"compression {c.compression} and sync_every do not combine: local "
                           "SGD averages the float32 model every sync_every steps and sends no gradients; choose one",
                           ("workload.communication.compression",)))
    if c.compression == "powersgd" and c.start_step < 2:
        out.append(Problem(BASE + ("start_step",), "PyTorch's PowerSGD starts after at least 2 steps of plain "
                           "all-reduce (its error feedback needs DDP's buckets settled): set start_step 2 or more"))
    return out
