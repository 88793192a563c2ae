"""Sweep expansion: an Experiment -> its run points (cartesian product of axes x repeats)."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any

import workloads.balance as balance
import workloads.communication as comm
from testbed.spec.models import CommunicationConf, Experiment
from testbed.spec.validate import sweep_combos, with_values

_PLAIN = CommunicationConf().model_dump(mode="json")     # the usual all-reduce: not part of a run id
_NO_BALANCE = ("none", {"method": "none"})            # workload.balance none: not part of a run id either
_RATE_DEFAULTS = (("learning_rate", 0.001), ("lr_scaling", "none"))   # Adam's rate before it was a setting
_SHORT = {"topology.hosts": "h", "topology.link.bw": "bw", "workload.strategy": "",
          "workload.model": "", "faults": ""}


@dataclass(frozen=True)
class RunPoint:
    run_id: str
    repeat: int
    params: dict[str, Any]  # canonical key path -> value as in JSON form (e.g. "10mbit")
    spec: Experiment  # the point's values applied, sweep removed


def expand_points(exp: Experiment, graphs: dict | None = None) -> list[RunPoint]:
    """Every run point of an experiment (the axes' product, then sweep.include's points); one point (params
    {}) without a sweep. `graphs`: the file's graphs, built once each (graph.graph_of)."""
    sweep = exp.sweep
    axes, include, repeats = (sweep.axes, sweep.include, sweep.repeats) if sweep else ({}, [], 1)
    points = []
    for combo in sweep_combos(axes, include):
        spec = with_values(exp, {**combo, "sweep": None}, graphs)
        params = {path: spec.value(path) for path in combo}
        resolved = spec.model_dump(mode="json")
        points += [RunPoint(run_id(params, r, resolved), r, params, spec) for r in range(repeats)]
    return points


def run_id(params: dict[str, Any], repeat: int, resolved: dict[str, Any]) -> str:
    """'h4-bw10mbit-allreduce-r0-1a2b3c': the swept values as readable labels in sorted key order, and
    a stable hash of the whole resolved point (`resolved`: its spec as JSON), so a file changed
    outside the swept keys makes new run ids and never resumes into the old results. `expect:` is left
    out: it judges the results, it does not change the run (a changed bound judges the same runs again).
    Settings added later are left out at their defaults too (workload.communication plain, workload.balance
    none, workload.learning_rate 0.001 and lr_scaling none, a host's profile null, emulation.byte_scale 1), so
    that files written before them keep their ids."""
    point = {key: value for key, value in resolved.items() if key != "expect"}
    workload = point.get("workload")
    if isinstance(workload, dict) and workload.get("communication") == _PLAIN:
        point["workload"] = workload = {k: v for k, v in workload.items() if k != "communication"}
    if isinstance(workload, dict) and workload.get("balance") in _NO_BALANCE:
        point["workload"] = {k: v for k, v in workload.items() if k != "balance"}
    if isinstance(workload, dict):
        point["workload"] = {k: v for k, v in point["workload"].items() if (k, v) not in _RATE_DEFAULTS}
    if isinstance(point.get("topology"), dict):
        point["topology"] = _without_null_profiles(point["topology"])
    emulation = point.get("emulation")
    if isinstance(emulation, dict) and emulation.get("byte_scale") == 1:
        point["emulation"] = {k: v for k, v in emulation.items() if k != "byte_scale"}
    blob = json.dumps({"params": params, "repeat": repeat, "point": point}, sort_keys=True,
                      separators=(",", ":"), default=str)
    digest = hashlib.sha256(blob.encode()).hexdigest()[:6]
    labels = [_label(path, params[path]) for path in sorted(params)]
    return "-".join(labels + [f"r{repeat}", digest])


def _without_null_profiles(topology: dict) -> dict:
    """The topology with every host setting's `profile: null` left out (topology.host, host_overrides, hosts)."""
    def plain(conf):
        return {k: v for k, v in conf.items() if not (k == "profile" and v is None)} if isinstance(conf, dict) else conf
    out = dict(topology)
    if "host" in out:
        out["host"] = plain(out["host"])
    if isinstance(out.get("host_overrides"), dict):
        out["host_overrides"] = {name: plain(conf) for name, conf in out["host_overrides"].items()}
    if isinstance(out.get("hosts"), list):
        out["hosts"] = [plain(conf) for conf in out["hosts"]]
    return out


def _label(path: str, value: Any) -> str:
    prefix = _SHORT.get(path, path.rsplit(".", 1)[-1].split("[")[0])
    if isinstance(value, list) and all(isinstance(v, dict) and "action" in v for v in value):
        value = "+".join(v["action"] for v in value) or "nofaults"     # a list of faults: their actions
    if path == "workload.communication" and isinstance(value, dict):
        prefix, value = "", _communication_label(value)
    if path == "workload.balance":
        prefix, value = "bal", balance.label(value)
    if path.endswith(".trace") and isinstance(value, str):
        value = value.replace("\\", "/").rsplit("/", 1)[-1].rsplit(".", 1)[0]    # a trace file: its name
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return re.sub(r"[^A-Za-z0-9_.]+", "_", f"{prefix}{text}")[:24].strip("_") or "x"


def _communication_label(value: dict) -> str:
    """'plain', 'sync8', 'sync8outer', ...: a workload.communication value in a run id (its method's
    run label, workloads/communication/)."""
    return comm.run_label(value)
