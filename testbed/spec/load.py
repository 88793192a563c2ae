"""YAML text -> validated Experiment: line numbers for every key, --set overrides, the summary
that `validate` prints, and the JSON Schema."""

from __future__ import annotations

from typing import Any, Sequence

import yaml

from testbed.spec.keypaths import canonical, format_path
from testbed.spec.models import Experiment, SpecError, SpecIssue, Source
from testbed.spec.validate import SET_FILE, apply_values, build, sorted_unique
from testbed.spec.sweep import expand_points
from testbed.spec.graph import build_graph

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


# ---- YAML with line numbers -------------------------------------------------------------------

MAX_FILE_BYTES = 1_000_000
MAX_NODES = 100_000      # YAML nodes after aliases are expanded: far above any real experiment file


def parse_yaml(text: str, file: str) -> tuple[Any, Source]:
    """Data plus a Source mapping every key path to its line; syntax errors -> SpecError.

    Bounded: files over MAX_FILE_BYTES and alias expansions over MAX_NODES (a "billion laughs"
    file) are refused before anything walks them."""
    if len(text) > MAX_FILE_BYTES:
        raise SpecError([SpecIssue(file, 1, "", f"the file is {len(text):,} bytes; experiment files are "
                                   f"limited to {MAX_FILE_BYTES:,}")])
    loader = _LOADER(text)
    try:
        node = loader.get_single_node()
        if node is not None and _expanded_size(node, {}) > MAX_NODES:
            raise SpecError([SpecIssue(file, 1, "", f"aliases expand to more than {MAX_NODES:,} YAML nodes; "
                                       "write the values out or use fewer nested aliases")])
        data = loader.construct_document(node) if node is not None else None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        message = " ".join(str(m) for m in (exc.context, exc.problem) if m)
        raise SpecError([SpecIssue(file, mark.line + 1 if mark else 1, "",
                                   f"YAML syntax error: {message}")]) from None
    except yaml.YAMLError as exc:
        raise SpecError([SpecIssue(file, 1, "", f"YAML error: {exc}")]) from None
    finally:
        loader.dispose()
    source = Source(file, {(): (file, 1)})
    duplicates: list[SpecIssue] = []
    if node is not None:
        _walk(node, (), source, duplicates)
    if duplicates:
        raise SpecError(duplicates)
    return data, source


def _expanded_size(node: yaml.Node, memo: dict) -> int:
    """Number of nodes once every alias is expanded, counted without expanding (memo per node)."""
    if id(node) not in memo:
        memo[id(node)] = 0            # a recursive alias counts once
        children = node.value if isinstance(node, yaml.SequenceNode) else \
            [n for pair in node.value for n in pair] if isinstance(node, yaml.MappingNode) else []
        memo[id(node)] = min(1 + sum(_expanded_size(c, memo) for c in children), MAX_NODES + 1)
    return memo[id(node)]


def _walk(node: yaml.Node, path: tuple, source: Source, duplicates: list) -> None:
    if isinstance(node, yaml.MappingNode):
        seen = set()
        for key_node, value_node in node.value:
            child = path + (key_node.value if isinstance(key_node, yaml.ScalarNode) else str(key_node),)
            line = key_node.start_mark.line + 1
            if child in seen:
                first = source.locations[child][1]
                duplicates.append(SpecIssue(source.file, line, format_path(child),
                                            f"duplicate key (first set on line {first})"))
                continue
            seen.add(child)
            source.locations[child] = (source.file, line)
            _walk(value_node, child, source, duplicates)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            source.locations[path + (i,)] = (source.file, item.start_mark.line + 1)
            _walk(item, path + (i,), source, duplicates)


# ---- overrides --------------------------------------------------------------------------------

def parse_set(text: str) -> tuple[str, Any]:
    """'topology.link.bw=10mbit' -> ('topology.link.bw', '10mbit'); the value is YAML."""
    path, sep, value = text.partition("=")
    if not sep or not path.strip():
        raise SpecError([SpecIssue(SET_FILE, 1, text, "expected KEY.PATH=VALUE, "
                                   "e.g. topology.link.bw=10mbit")])
    try:
        key = canonical(path)
        return key, yaml.safe_load(value)
    except (ValueError, yaml.YAMLError) as exc:
        raise SpecError([SpecIssue(SET_FILE, 1, path.strip(), str(exc).replace("\n", " "))]) from None


# ---- public entry points ---------------------------------------------------------------------

def load_spec(path, overrides: Sequence[str] = ()) -> Experiment:
    """Read, override (--set KEY=VALUE), validate. Raises SpecError listing every problem."""
    file = str(path)
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError as exc:
        raise SpecError([SpecIssue(file, 1, "", f"cannot read the file: {exc.strerror}")]) from None
    return load_spec_text(text, file, overrides)


def load_spec_text(text: str, file: str = "<text>", overrides: Sequence[str] = ()) -> Experiment:
    """load_spec for YAML text; `file` names it in FILE:LINE errors (testbed.api passes '<dict>')."""
    data, source = parse_yaml(text, file)
    issues = []
    for number, item in enumerate(overrides, 1):
        try:
            key, value = parse_set(item)
        except SpecError as exc:
            issues += [issue._replace(line=number) for issue in exc.errors]
            continue
        if isinstance(data, dict):
            issues += apply_values(data, {key: value}, source, origin=(SET_FILE, number))
    try:
        exp = build(data, source)
    except SpecError as exc:
        issues += exc.errors
    if issues:
        raise SpecError(sorted_unique(issues))
    return exp


def validate_file(path, overrides: Sequence[str] = ()) -> tuple[bool, str]:
    """(ok, human summary) for `run_experiment.py validate FILE`."""
    try:
        exp = load_spec(path, overrides)
    except SpecError as exc:
        return False, str(exc)
    points = expand_points(exp)
    graphs = {id(p.spec): build_graph(p.spec.topology) for p in points}
    counts = [_span([len(getattr(g, kind)) for g in graphs.values()], noun)
              for kind, noun in (("hosts", "host"), ("switches", "switch"), ("links", "link"))]
    kinds = ["|".join(dict.fromkeys(getter(p.spec) for p in points)) for getter in
             (lambda s: s.topology.template, lambda s: s.workload.strategy, lambda s: s.workload.model)]
    lines = [f"{path}: ok, {len(points)} run point(s), {', '.join(counts)}, "
             f"{kinds[0]}, {kinds[1]}/{kinds[2]}"]
    if exp.sweep:
        axes = [f"{k} x {len(v)}" for k, v in exp.sweep.axes.items()]
        lines.append(f"  sweep: {', '.join(axes + [f'repeats {exp.sweep.repeats}'])}")
    return True, "\n".join(lines)


def _span(values: list[int], noun: str) -> str:
    low, high = min(values), max(values)
    plural = noun + ("es" if noun.endswith("ch") else "s")
    text = str(low) if low == high else f"{low}-{high}"
    return f"{text} {noun if low == high == 1 else plural}"


def json_schema() -> dict:
    """JSON schema of the YAML (validation mode), for editors and docs."""
    schema = Experiment.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "dltestbed experiment"
    return schema
