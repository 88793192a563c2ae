"""The workload's model and the nodes' compute profiles: a zoo name its source resolves (with the
closest names when it does not), for the source's engine; model_params its source takes; and each
profile readable, of this format, and of the run's engine and model (workloads/zoo,
workloads/profiling/fileformat.py)."""
from __future__ import annotations

import importlib.util
import os

from testbed.spec.keypaths import parse_path, suggest
from testbed.spec.models import Experiment
from testbed.spec.rules.problems import Problem, real_machines
from testbed.spec.workload import model_params_allowed
import workloads.zoo as zoo
import workloads.profiling.fileformat as fileformat

MODEL = ("workload", "model")


def profiles(exp: Experiment) -> dict[str, tuple[str, str]]:
    """Each host with a profile: (key path, absolute path)."""
    out = {}
    for name in exp.topology.host_names():
        found = exp.profile_path(name)
        if found is not None:
            out[name] = found
    return out


def profiled_model(exp: Experiment) -> str:
    """The name a profile of this workload carries: script:NAME for a script, else the model's."""
    w = exp.workload
    return f"script:{os.path.basename(w.script)}" if w.script is not None else w.model


def model_problems(exp: Experiment, every_host_profiled: bool) -> list[Problem]:
    """The model name and its model_params; a zoo name is checked against its source's package where that is
    installed, and must be installed unless every node replays a profile (which needs no model code)."""
    w, out = exp.workload, []
    allowed = model_params_allowed(w.model)
    for key, value in w.model_params.items():
        path = ("workload", "model_params", key)
        if key not in allowed:
            out.append(Problem(path, f"unknown model_params key {key!r} for model {w.model}{suggest(key, allowed)} "
                               f"(allowed: {', '.join(allowed)})", ("workload.model",)))
        elif isinstance(value, bool) or not isinstance(value, int) or value < 1:
            out.append(Problem(path, f"{key} must be a positive integer (got {value!r})", ("workload.model",)))
    if w.script is not None or not zoo.is_zoo(w.model):
        return out
    try:
        source, name = zoo.split(w.model)
    except zoo.UnknownModel as err:
        return out + [Problem(MODEL, str(err))]
    if source.ENGINE != w.engine:
        out.append(Problem(MODEL, f"{w.model} is a {source.ENGINE} model (engine {w.engine}): set engine: "
                           f"{source.ENGINE}, or name a {w.engine} model", ("workload.engine",)))
    missing = [p for p in (source.PACKAGES or ()) if importlib.util.find_spec(p) is None]
    if missing and not every_host_profiled:
        out.append(Problem(MODEL, f"{w.model} is built by the Python package {', '.join(missing)}, not installed "
                           f"in this venv: install it (.venv/bin/pip install {' '.join(missing)}), or replay a "
                           "profile of it taken where it is installed (topology.host.profile, docs/profiles.md)"))
    elif not missing:
        try:
            zoo.check_name(w.model)
        except zoo.UnknownModel as err:
            out.append(Problem(MODEL, str(err)))
        except Exception as err:  # noqa: BLE001 - a package that does not load: say what it said
            if not every_host_profiled:         # (a profile needs no model code)
                out.append(Problem(MODEL, f"{w.model}: its package does not load here ({type(err).__name__}: "
                                   f"{str(err)[:200]}); replay a profile of it taken where it loads "
                                   "(topology.host.profile, docs/profiles.md)"))
    return out


def profile_problems(exp: Experiment, found: dict[str, tuple[str, str]]) -> list[Problem]:
    """Every profile readable and of this format, of the run's engine, model and batch, all of one gradient
    shape (the nodes all-reduce the same parameters), and only under compute: replay."""
    if not found:
        return []
    out, shapes = [], {}
    if exp.emulation.compute != "replay":
        key = next(iter(found.values()))[0]
        return [Problem(parse_path(key), "a profile is replayed: set emulation.compute: replay (or remove "
                        "the profile to compute for real)", ("emulation.compute",))]
    bare = [h for h in exp.topology.host_names() if h not in found and h not in real_machines(exp.topology)]
    if bare:
        out.append(Problem(("topology", "host", "profile"), f"{', '.join(bare[:3])}{', ...' if len(bare) > 3 else ''}: "
                           "no profile, beside nodes that replay one; every node all-reduces the profiled "
                           "parameters, so give each a profile (topology.host.profile, or host_overrides)"))
    want = profiled_model(exp)
    named: dict[tuple[str, str], list[str]] = {}
    for name, where in found.items():
        named.setdefault(where, []).append(name)
    for (key, path), names in named.items():
        host = ", ".join(names)
        try:
            doc = fileformat.load(path)
        except fileformat.ProfileError as err:
            out.append(Problem(parse_path(key), f"{host}: {err}"))
            continue
        if doc["engine"] != exp.workload.engine:
            out.append(Problem(parse_path(key), f"{host}: {path} profiles engine {doc['engine']}, this run trains "
                               f"with {exp.workload.engine}: take a profile with --engine {exp.workload.engine}",
                               ("workload.engine",)))
        elif doc["model"] != want:
            out.append(Problem(parse_path(key), f"{host}: {path} profiles model {doc['model']}, this run trains "
                               f"{want}: set workload.model to it, or profile {want}",
                               ("workload.model", "workload.script")))
        elif doc["batch"] != exp.workload.batch_per_worker:
            out.append(Problem(parse_path(key), f"{host}: {path} profiles a batch of {doc['batch']}, this run trains "
                               f"{exp.workload.batch_per_worker} a worker: set workload.batch_per_worker: {doc['batch']}, "
                               "or profile that batch", ("workload.batch_per_worker",)))
        else:
            shapes.setdefault(repr(fileformat.param_shapes(doc)), []).extend(names)
    if len(shapes) > 1:
        groups = "; ".join(", ".join(hosts) for hosts in shapes.values())
        out.append(Problem(("topology", "host", "profile"), f"the profiles' gradients differ in shape or in the "
                           f"order they become ready ({groups}): every node all-reduces the same parameters in "
                           "one order, so profile one model at the same model_params on every machine"))
    return out
