"""The rules of `expect:` (testbed/spec/expect.py), checked once per file after it validated: each `against` a results folder
with runs.csv; each `where`'s keys key paths of the file (not under sweep or expect), its values ones their keys
take, and some run point of the file has them. The where comes back as canonical key path -> the value in the
spec's JSON form ('10Mbit' -> '10mbit', `hosts` -> `topology.hosts`), as a point's spec gives it back, which is how
the run compares them (testbed/run/sweep/expect_run.py).
"""
from __future__ import annotations

import copy
import os
from typing import Any

from pydantic import ValidationError

from testbed.spec.keypaths import covers, format_path, get_in, parse_path, resolve, set_in
from testbed.spec.models import Experiment, SpecIssue
from testbed.spec.validate import pydantic_problems, sweep_combos


def expect_issues(exp: Experiment) -> tuple[Experiment, list[SpecIssue]]:
    """(the experiment with every where normalised, the problems of its expectations)."""
    base = exp.model_dump(mode="json", exclude={"sweep"})
    issues, items = [], []
    for index, item in enumerate(exp.expect):
        if item.against is not None and not os.path.isfile(os.path.join(item.against, "runs.csv")):
            issues.append(_issue(exp, ("expect", index, "against"), f"no results folder at {item.against} (no "
                                 "runs.csv there): the folder of an earlier run, e.g. results/reference/thesis_fig15"))
        normal = {}
        for key, value in item.where.items():
            path, problem = _key_path(key)
            value, problem = (None, problem) if problem else _normal_value(base, path, value)
            if problem:
                issues.append(_issue(exp, ("expect", index, "where", key), problem))
            else:
                normal[format_path(path)] = value
        if len(normal) < len(item.where):
            items.append(item)
            continue
        items.append(item.model_copy(update={"where": normal}))
        if normal and not _some_point_has(exp, base, normal):
            issues.append(_issue(exp, ("expect", index, "where"), _none_has(exp, base, normal)))
    return exp.model_copy(update={"expect": items}), issues


def _key_path(key: str) -> tuple[tuple, str | None]:
    try:
        path = parse_path(str(key))
    except ValueError as exc:
        return (), str(exc)
    if path[:1] in (("sweep",), ("expect",)):
        return path, f"where selects run points by the values of their keys; {path[0]} is not one"
    return path, resolve(Experiment, path)


def _normal_value(base: dict, path: tuple, value: Any) -> tuple[Any, str | None]:
    """(value in the spec's JSON form, None), or (None, why the key does not take it)."""
    for end, part in enumerate(path):
        items = get_in(base, path[:end])
        if isinstance(part, int) and not (isinstance(items, list) and part < len(items)):
            return None, f"the file has no {format_path(path[:end + 1])}"
    data = copy.deepcopy(base)
    set_in(data, path, value)
    try:
        return Experiment.model_validate(data).value(path), None
    except ValidationError as exc:
        found = [msg for at, msg in pydantic_problems(exc, data) if covers(path, at) or covers(at, path)]
        return None, "; ".join(found or [msg for _, msg in pydantic_problems(exc, data)][:1])


def _points(exp: Experiment, base: dict, where: dict):
    """Each run point's values at the where's key paths (the sweep's axes that bear on them, each combination)."""
    paths = {key: parse_path(key) for key in where}
    def near(key):
        return any(covers(parse_path(key), p) or covers(p, parse_path(key)) for p in paths.values())
    axes = {key: values for key, values in (exp.sweep.axes if exp.sweep else {}).items() if near(key)}
    include = [{key: value for key, value in item.items() if near(key)} for item in (exp.sweep.include if exp.sweep
                                                                                      else [])]
    for combo in sweep_combos(axes, include):
        data = copy.deepcopy(base)
        for key, value in combo.items():
            set_in(data, parse_path(key), value)
        try:
            point = Experiment.model_validate(data).model_dump(mode="json")
        except ValidationError:
            continue
        yield {key: get_in(point, path) for key, path in paths.items()}


def _some_point_has(exp: Experiment, base: dict, where: dict) -> bool:
    return any(values == where for values in _points(exp, base, where))


def _none_has(exp: Experiment, base: dict, where: dict) -> str:
    seen: dict[str, list] = {key: [] for key in where}
    for values in _points(exp, base, where):
        for key, value in values.items():
            seen[key] += [] if value in seen[key] else [value]
    asked = ", ".join(f"{key}={value!r}" for key, value in where.items())
    has = "; ".join(f"{key} {', '.join(repr(v) for v in values)}" for key, values in seen.items())
    return f"no run point has {asked} (the points have {has})"


def _issue(exp: Experiment, path: tuple, message: str) -> SpecIssue:
    return SpecIssue(*exp.location(path), format_path(path), message)
