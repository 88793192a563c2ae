"""Validation pipeline: raw data -> Experiment, every problem as a located SpecIssue.

Order: sweep axes and structure (pydantic) first, each sweep value alone against its key's type,
then the cross-field rules (rules/) of every sweep point. `apply_values` is the one
code path for `--set` overrides and `with_values`.
"""

from __future__ import annotations

import copy
import itertools
import math
import json
import os
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

import testbed.limits as limits
from testbed.spec.graph import host_count, switch_total
from testbed.spec.keypaths import canonical, covers, format_path, parse_path, resolve, set_in, suggest
from testbed.spec.rules.experiment import Problem, experiment_problems, topology_problems
from testbed.spec.models import INCLUDE, Experiment, SpecError, SpecIssue, Source, Topology

SET_FILE = "<--set>"


# ---- overrides and with_values (one code path) ------------------------------------------------

def apply_values(data: dict, values: dict[str, Any], source: Source,
                 origin: tuple[str, int] | None = None) -> list[SpecIssue]:
    """Set key paths in raw data; a set key pins (removes) the sweep axes it covers."""
    issues = []
    for text, value in values.items():
        where = origin or source.location(())
        try:
            path = parse_path(text)
        except ValueError as exc:
            issues.append(SpecIssue(*where, str(text), str(exc)))
            continue
        if path[:1] == ("sweep",) and len(path) > 1:
            problem = _set_sweep_axis(data, path[1:], value)
        else:
            problem = resolve(Experiment, path) or _set_value(data, path, value, source)
        if problem:
            issues.append(SpecIssue(*where, format_path(path), problem))
        elif origin:
            _relocate(source, path, origin)
    return issues


def _set_value(data: dict, path: tuple, value: Any, source: Source) -> str | None:
    sweep = data.get("sweep") if isinstance(data.get("sweep"), dict) else {}
    for key in list(sweep):
        if key not in ("repeats", INCLUDE) and _safe_covers(path, key):
            _relocate(source, path, source.location(("sweep", key)))
            del sweep[key]
    if isinstance(sweep.get(INCLUDE), list):      # pinned in each item too: items left empty or alike go
        items = [item for item in (_pinned(item, path, value) for item in sweep[INCLUDE]) if item != {}]
        sweep[INCLUDE] = [item for i, item in enumerate(items) if item not in items[:i]]
    try:
        set_in(data, path, value)
    except ValueError as exc:
        return str(exc)
    return None


def _pinned(item: Any, path: tuple, value: Any) -> Any:
    """An include item with a --set key path pinned: keys below it dropped, a key above it set inside."""
    if not isinstance(item, dict):
        return item
    out = {}
    for key, own in item.items():
        if _safe_covers(path, key):
            continue
        try:
            above = parse_path(str(key))
        except ValueError:
            above = None
        if above is not None and covers(above, path) and isinstance(own, dict):
            own = copy.deepcopy(own)
            set_in(own, path[len(above):], value)
        out[key] = own
    return out


def _safe_covers(path: tuple, key: str) -> bool:
    try:
        return covers(path, parse_path(key))
    except ValueError:
        return False


def _set_sweep_axis(data: dict, axis: tuple, values: Any) -> str | None:
    axis = parse_path(format_path(axis))
    if axis not in (("repeats",), (INCLUDE,)):
        problem = resolve(Experiment, axis)
        if problem:
            return f"unknown sweep key path {format_path(axis)!r}: {problem}"
    if not isinstance(data.get("sweep"), dict):
        data["sweep"] = {}
    sweep, target = data["sweep"], format_path(axis)
    match = next((k for k in sweep if k != "repeats" and _canonical_or_none(k) == target), target)
    sweep[match] = values
    return None


def _canonical_or_none(key: Any) -> str | None:
    try:
        return canonical(str(key))
    except ValueError:
        return None


def _relocate(source: Source, path: tuple, where: tuple[str, int]) -> None:
    for key in [k for k in source.locations if covers(path, k)]:
        del source.locations[key]
    source.locations[path] = where


# ---- validation ------------------------------------------------------------------------------

@dataclass
class Axis:
    key: str  # as written under sweep:
    path: tuple  # canonical
    values: list


def build(data: Any, source: Source, graphs: dict | None = None) -> Experiment:
    """Validate raw data: structure, sweep axes, then every point's cross-field rules (`graphs`: the
    file's graphs, built once each, graph.graph_of)."""
    graphs = {} if graphs is None else graphs
    if not isinstance(data, dict):
        found = "an empty file" if data is None else f"a {type(data).__name__}"
        raise SpecError([SpecIssue(source.file, 1, "", f"expected a mapping with name:, topology:, "
                                   f"workload: ... but found {found}")])
    graph_path(data, source)
    against_paths(data, source)
    axes, issues = read_sweep(data.get("sweep"), source)
    includes, more = read_include(data.get("sweep"), axes, source)
    issues += more
    base = {k: v for k, v in data.items() if k != "sweep"}
    structure = _structure_issues(base, source)
    issues += structure
    if structure and not axes:
        issues += _partial_topology_issues(base, source)
    issues += value_issues(base, axes, source) + include_value_issues(base, includes, source)
    if not issues:
        issues += point_issues(base, axes, source, includes, graphs)
    if issues:
        raise SpecError(sorted_unique(issues))
    for axis in axes:
        _alias_locations(source, axis)
    exp = Experiment.model_validate({**base, "sweep": data.get("sweep") or None})
    exp._source = source
    return exp


def graph_path(data: Any, source: Source) -> None:
    """topology.graph made absolute, relative to the file that set it (else the working directory), so
    that every copy of the spec (sweep points, the wall spec, spec.yaml) finds the same file."""
    topo = data.get("topology") if isinstance(data, dict) else None
    _absolute(topo, "graph", ("topology", "graph"), source)


def against_paths(data: Any, source: Source) -> None:
    """Each expect[i].against made absolute as topology.graph is."""
    items = data.get("expect") if isinstance(data, dict) else None
    for index, item in enumerate(items if isinstance(items, list) else []):
        _absolute(item, "against", ("expect", index, "against"), source)


def _absolute(parent: Any, key: str, path: tuple, source: Source) -> None:
    value = parent.get(key) if isinstance(parent, dict) else None
    if isinstance(value, str) and value.strip() and not os.path.isabs(value):
        file = source.location(path)[0]
        base = os.path.dirname(os.path.abspath(file)) if os.path.isfile(file) else os.getcwd()
        parent[key] = os.path.normpath(os.path.join(base, os.path.expanduser(value)))


def _alias_locations(source: Source, axis: Axis) -> None:
    """Let ('sweep', canonical path, ...) find the lines of the key as written."""
    written, name = ("sweep", axis.key), ("sweep", format_path(axis.path))
    for key, where in list(source.locations.items()):
        if covers(written, key) and written != name:
            source.locations.setdefault(name + key[2:], where)


def with_values(exp: Experiment, values: dict[str, Any], graphs: dict | None = None) -> Experiment:
    """Experiment.with_values: same code path as --set overrides."""
    data, source = exp.model_dump(mode="json", exclude_unset=True), exp._source.copy()
    issues = apply_values(data, values, source)
    if issues:
        raise SpecError(issues)
    return build(data, source, graphs)


def read_sweep(raw: Any, source: Source) -> tuple[list[Axis], list[SpecIssue]]:
    """Sweep axes with canonical paths; unknown paths, empty lists, bad repeats are issues."""
    if raw is None:
        return [], []
    if not isinstance(raw, dict):
        return [], [_issue(source, ("sweep",), "sweep must map key paths to lists of values")]
    axes, issues, seen = [], [], {}
    axes_count = len(raw) - ("repeats" in raw) - (INCLUDE in raw)
    if axes_count > limits.MAX_AXES:
        return [], [_issue(source, ("sweep",), f"the sweep has {axes_count:,} axes; at most "
                           f"{limits.MAX_AXES} (split it into several files)")]
    for key, values in raw.items():
        at = ("sweep", key)
        if key == INCLUDE:
            continue                    # read_include
        if key == "repeats":
            if isinstance(values, bool) or not isinstance(values, int) or values < 1:
                issues.append(_issue(source, at, f"repeats must be an integer >= 1 (got {values!r})"))
            continue
        try:
            path = parse_path(str(key))
        except ValueError as exc:
            issues.append(_issue(source, at, str(exc)))
            continue
        problem = resolve(Experiment, path) if path[:1] != ("sweep",) else "a sweep cannot sweep itself"
        clash = next((k for p, k in seen.items() if covers(p, path) or covers(path, p)), None)
        if problem:
            issues.append(_issue(source, at, f"unknown sweep key path {key!r}: {problem}"))
        elif clash is not None:
            issues.append(_issue(source, at, f"overlaps the sweep axis {clash!r}"))
        elif not isinstance(values, list) or not values:
            issues.append(_issue(source, at, f"a sweep axis needs a non-empty list of values "
                                 f"(got {values!r})"))
        else:
            seen[path] = key
            axes.append(Axis(str(key), path, values))
    repeats = raw.get("repeats") if isinstance(raw.get("repeats"), int) else 1
    items = raw.get(INCLUDE) if isinstance(raw.get(INCLUDE), list) else []
    crossed = sum(math.prod(len(a.values) for a in axes if not any(_overlaps(a.path, str(k)) for k in item))
                  for item in items if isinstance(item, dict))
    points = (math.prod(len(a.values) for a in axes) + crossed) * min(repeats, limits.MAX_POINTS + 1)
    if points > limits.MAX_POINTS:
        issues.append(_issue(source, ("sweep",), f"the sweep has {points:,} run points (axes' values multiplied, "
                             f"times repeats); at most {limits.MAX_POINTS:,} (split it into several files)"))
        axes = []
    return axes, issues


@dataclass
class Include:
    index: int                  # its place in sweep.include
    keys: dict[str, Any]        # canonical key path -> the key as written
    values: dict[str, Any]      # canonical key path -> value

    def names(self, path: tuple) -> bool:
        """Whether the item sets this axis's key path (or one above or below it): then it is not crossed."""
        return any(_overlaps(path, key) for key in self.values)


def _overlaps(path: tuple, key: str) -> bool:
    try:
        other = parse_path(canonical(key))
    except ValueError:
        return False
    return covers(path, other) or covers(other, path)


def read_include(raw: Any, axes: list[Axis], source: Source) -> tuple[list[Include], list[SpecIssue]]:
    """sweep.include: a list of mappings of key paths (as axes take them) to one value each; keys known,
    not the sweep itself, not overlapping one another."""
    items = raw.get(INCLUDE) if isinstance(raw, dict) else None
    if items is None:
        return [], []
    at = ("sweep", INCLUDE)
    if not isinstance(items, list) or not items:
        return [], [_issue(source, at, "sweep.include is a list of points, each a mapping of key paths to values "
                           "(e.g. - {workload.strategy: single, topology.hosts: 1})")]
    out, issues = [], []
    for index, item in enumerate(items):
        where = at + (index,)
        if not isinstance(item, dict) or not item:
            issues.append(_issue(source, where, f"an include item maps key paths to values (got {item!r})"))
            continue
        keys, values, bad = {}, {}, False
        for key, value in item.items():
            try:
                path = parse_path(canonical(str(key)))
            except ValueError as exc:
                issues.append(_issue(source, where + (key,), str(exc)))
                bad = True
                continue
            problem = (resolve(Experiment, path) if path[:1] != ("sweep",) and path != ("repeats",)
                       else "an include item sets the point's keys, not the sweep")
            clash = next((k for k in values if covers(parse_path(k), path) or covers(path, parse_path(k))), None)
            if problem:
                issues.append(_issue(source, where + (key,), f"unknown key path {key!r}: {problem}"))
                bad = True
            elif clash is not None:
                issues.append(_issue(source, where + (key,), f"overlaps {keys[clash]!r} of the same item"))
                bad = True
            else:
                keys[format_path(path)], values[format_path(path)] = key, value
        if not bad:
            out.append(Include(index, keys, values))
    return out, issues


def include_value_issues(base: dict, includes: list[Include], source: Source) -> list[SpecIssue]:
    """Each include value checked alone against its key's type, blamed on its line."""
    issues = []
    for inc in includes:
        for path, value in inc.values.items():
            data = copy.deepcopy(base)
            set_in(data, parse_path(path), value)
            try:
                Experiment.model_validate(data)
            except ValidationError as exc:
                issues += [_issue(source, ("sweep", INCLUDE, inc.index, inc.keys[path]),
                                  f"include value {value!r}: {msg}")
                           for at, msg in pydantic_problems(exc, data) if covers(parse_path(path), at)]
    return issues


def value_issues(base: dict, axes: list[Axis], source: Source) -> list[SpecIssue]:
    """Each sweep value checked alone against its key's type, blamed on the value's line."""
    issues = []
    for axis in axes:
        for index, value in enumerate(axis.values):
            data = copy.deepcopy(base)
            set_in(data, axis.path, value)
            try:
                Experiment.model_validate(data)
            except ValidationError as exc:
                issues += [_issue(source, ("sweep", axis.key, index), f"sweep value {value!r}: {msg}")
                           for path, msg in pydantic_problems(exc, data) if covers(axis.path, path)]
    return issues


def point_issues(base: dict, axes: list[Axis], source: Source, includes: list[Include] = (),
                 graphs: dict | None = None) -> list[SpecIssue]:
    """Cross-field rules of every sweep point (the axes' product, then each include item crossed with the
    axes it does not name), blamed on sweep lines when a swept key is involved."""
    issues, canon, nodes = [], {}, 0
    by_path = {format_path(a.path): a for a in axes}
    points = [(combo, None) for combo in axis_combinations({p: list(enumerate(a.values)) for p, a in by_path.items()})]
    for inc in includes:
        free = {p: list(enumerate(a.values)) for p, a in by_path.items() if not inc.names(a.path)}
        points += [(combo, inc) for combo in axis_combinations(free)]
    for combo, inc in points:
        data = copy.deepcopy(base)
        for path, (_, value) in combo.items():
            set_in(data, by_path[path].path, value)
        for path, value in (inc.values.items() if inc else ()):
            set_in(data, parse_path(path), value)
        graph_path(data, source)
        try:
            exp = Experiment.model_validate(data)
        except ValidationError as exc:
            issues += [_include_issue(source, inc, msg) if inc and inc.names(path) else
                       _axis_issue(source, by_path, combo, path, msg) for path, msg in pydantic_problems(exc, data)]
            continue
        exp._source = source      # rules may need where a key was set (e.g. paths relative to the file)
        nodes += _node_count(exp.topology)
        if axes and nodes > limits.MAX_POINT_NODES:
            return issues + [_issue(source, ("sweep",), f"the sweep's points have more than "
                                    f"{limits.MAX_POINT_NODES:,} nodes (hosts and switches) in all; validating and "
                                    "running them is too much for one file: split it, or sweep fewer values")]
        if inc is None:
            issues += _duplicate_values(exp, combo, by_path, canon, source)
        for problem in experiment_problems(exp, graphs):
            deps = [parse_path(r) for r in problem.related] + [problem.path]
            issues.append(_include_issue(source, inc, f"{format_path(problem.path)}: {problem.message}")
                          if inc and any(inc.names(d) for d in deps) else
                          _problem_issue(source, by_path, combo, problem))
    return issues


def _include_issue(source: Source, inc: Include, message: str) -> SpecIssue:
    """A problem of an include item's point, at the item's line, naming what it sets."""
    said = ", ".join(f"{inc.keys[p]}={v!r}" for p, v in inc.values.items())
    said = said if len(said) <= 120 else said[:117] + "..."
    return _issue(source, ("sweep", INCLUDE, inc.index), f"with include item #{inc.index + 1} ({said}): {message}")


def _node_count(topo: Topology) -> int:
    """Hosts and switches of a point, counted (a point past the caps is refused by the rules)."""
    try:
        return min(host_count(topo), limits.MAX_HOSTS) + min(switch_total(topo), limits.MAX_SWITCHES)
    except (TypeError, ValueError):
        return 0


def _axis_issue(source, by_path, combo, path, message) -> SpecIssue:
    axis = next((a for a in by_path.values() if covers(a.path, path)), None)
    if axis is None:
        return _issue(source, path, message)
    index, value = combo[format_path(axis.path)]
    return _issue(source, ("sweep", axis.key, index), f"sweep value {value!r}: {message}")


def _problem_issue(source, by_path, combo, problem: Problem) -> SpecIssue:
    deps = [parse_path(r) for r in problem.related] + [problem.path]
    swept = [p for p, a in by_path.items() if any(covers(a.path, d) or covers(d, a.path) for d in deps)]
    if not swept:
        return _issue(source, problem.path, problem.message)
    when = ", ".join(f"{p}={combo[p][1]!r}" for p in swept)
    axis, (file, line) = by_path[swept[0]], source.location(problem.path)
    at = f" (line {line})" if problem.path in source.locations and file == source.file else ""
    return _issue(source, ("sweep", axis.key), f"with {when}: {format_path(problem.path)}{at}: "
                  f"{problem.message}")


def _duplicate_values(exp, combo, by_path, canon, source) -> list[SpecIssue]:
    out = []
    for path, (index, value) in combo.items():
        resolved = json.dumps(exp.value(path), sort_keys=True)
        first = canon.setdefault((path, resolved), index)
        if first != index:
            out.append(_issue(source, ("sweep", by_path[path].key, index),
                              f"sweep value {value!r} is the same as value #{first + 1} "
                              f"({by_path[path].values[first]!r})"))
    return out


def _structure_issues(base: dict, source: Source) -> list[SpecIssue]:
    try:
        Experiment.model_validate(base)
    except ValidationError as exc:
        return [_issue(source, path, msg) for path, msg in pydantic_problems(exc, base)]
    return []


def _partial_topology_issues(base: dict, source: Source) -> list[SpecIssue]:
    """Cross-field topology rules even when another section has errors."""
    try:
        topo = Topology.model_validate(base.get("topology") or {})
    except ValidationError:
        return []
    return [_issue(source, p.path, p.message) for p in topology_problems(topo)]


def pydantic_problems(exc: ValidationError, data: Any) -> list[tuple[tuple, str]]:
    """(key path in data, message) for each pydantic error."""
    out = []
    for err in exc.errors():
        path = _data_path(err["loc"], data, keep_last=err["type"] == "missing")
        out.append((path, _message(err, path)))
    return out


def _data_path(loc: tuple, data: Any, keep_last: bool) -> tuple:
    """Drop pydantic's union tags and '[key]' markers from an error location."""
    path, node = [], data
    for i, part in enumerate(loc):
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            node = node[part]
        elif not (keep_last and i == len(loc) - 1):
            continue
        path.append(part)
    return tuple(path)


def _message(err: dict, path: tuple) -> str:
    kind, ctx, value = err["type"], err.get("ctx") or {}, err.get("input")
    if kind == "extra_forbidden":
        return resolve(Experiment, path) or "unknown key"
    if kind == "missing":
        return f"required key {path[-1]!r} is missing"
    if kind == "value_error":
        return str(ctx.get("error", err["msg"]))
    if kind == "literal_error":
        choices = [c.strip("'") for c in ctx.get("expected", "").replace(" or ", ", ").split(", ")]
        return f"{value!r} is not one of {', '.join(choices)}{suggest(str(value), choices)}"
    shown = repr(value)
    return f"{err['msg']} (got {shown[:60] + '...' if len(shown) > 60 else shown})"


def _issue(source: Source, path: tuple, message: str) -> SpecIssue:
    file, line = source.location(path)
    return SpecIssue(file, line, format_path(path), message)


def sorted_unique(issues: list[SpecIssue]) -> list[SpecIssue]:
    unique = list(dict.fromkeys(issues))
    return sorted(unique, key=lambda i: (i.file == SET_FILE, i.file, i.line))


def sweep_combos(axes: dict[str, list], include: list[dict[str, Any]] = ()) -> list[dict[str, Any]]:
    """{canonical key path: value} per point: the axes' product, then each include item crossed with the
    axes it does not name (an item that repeats a point of the product runs it again)."""
    out = axis_combinations(axes)
    for item in include:
        free = {p: v for p, v in axes.items() if not any(_overlaps(parse_path(p), k) for k in item)}
        out += [{**combo, **item} for combo in axis_combinations(free)]
    return out


def axis_combinations(axes: dict[str, list]) -> list[dict[str, Any]]:
    """{path: value} per point, in axis order, last axis varying fastest."""
    paths = list(axes)
    return [dict(zip(paths, values)) for values in itertools.product(*axes.values())]
