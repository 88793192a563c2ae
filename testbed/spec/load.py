"""YAML text -> validated Experiment: line numbers for every key, --set overrides, the summary
that `validate` prints, and the JSON Schema."""

from __future__ import annotations

from typing import Any, Sequence

import yaml

import testbed.limits as limits
from testbed.spec.keypaths import canonical, format_path
from testbed.spec.models import Experiment, SpecError, SpecIssue, Source
from testbed.spec.validate import SET_FILE, apply_values, build, sorted_unique
from testbed.spec.rules.expect import expect_issues
from testbed.spec.sweep import expand_points
from testbed.spec.graph import graph_of

_BASE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Loader(_BASE_LOADER):
    """The safe loader, with integer literals longer than MAX_INT_DIGITS kept as text: Python refuses to
    read ints of more than 4300 digits, and no key takes a number that long (its type refuses the text)."""


def _int(loader, node):
    if len(node.value) > limits.MAX_INT_DIGITS:
        return node.value
    return yaml.SafeLoader.construct_yaml_int(loader, node)


_Loader.add_constructor("tag:yaml.org,2002:int", _int)


# ---- YAML with line numbers -------------------------------------------------------------------

def parse_yaml(text: str, file: str) -> tuple[Any, Source]:
    """Data plus a Source mapping every key path to its line; syntax errors -> SpecError.

    Bounded: files over MAX_FILE_BYTES, nesting deeper than MAX_DEPTH (read from the event stream,
    before anything is built), aliases that contain themselves or expand to more than MAX_YAML_NODES
    nodes (a "billion laughs" file) are refused before anything walks them."""
    if len(text) > limits.MAX_FILE_BYTES:
        raise SpecError([SpecIssue(file, 1, "", f"the file is over {limits.MAX_FILE_BYTES:,} bytes, the limit "
                                   "for an experiment file")])
    loader = _Loader(text)
    try:
        _check_nesting(text, file)
        node = loader.get_single_node()
        if node is not None:
            _check_expansion(node, file)
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


def _short_path(path: tuple) -> str:
    return format_path(path[:4]) + ("..." if len(path) > 4 else "")


def _check_nesting(text: str, file: str) -> None:
    """Refuse nesting deeper than MAX_DEPTH from the event stream (no nodes built), naming the key."""
    stack: list[list] = []          # per open collection: [key path, next key or index, expecting a key]
    for event in yaml.parse(text, Loader=_BASE_LOADER):
        if isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            stack.pop()
        elif not isinstance(event, (yaml.ScalarEvent, yaml.AliasEvent, yaml.MappingStartEvent,
                                    yaml.SequenceStartEvent)):
            continue
        else:
            path = stack[-1][0] + (stack[-1][1],) if stack else ()
            if stack and stack[-1][2] is True:        # a mapping's key: its value comes next
                stack[-1][1:] = [event.value if isinstance(event, yaml.ScalarEvent) else "?", False]
                path = stack[-1][0] + ("?",)
            elif stack:                               # a value: the next key, or the next item's index
                stack[-1][1:] = [None, True] if stack[-1][2] is False else [stack[-1][1] + 1, None]
            if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                if len(stack) >= limits.MAX_DEPTH:
                    raise SpecError([SpecIssue(file, event.start_mark.line + 1, _short_path(path),
                                               f"nested more than {limits.MAX_DEPTH} levels deep; experiment "
                                               f"files nest a few levels (write the value flat)")])
                mapping = isinstance(event, yaml.MappingStartEvent)
                stack.append([path, None if mapping else 0, True if mapping else None])


def _children(node: yaml.Node) -> list:
    if isinstance(node, yaml.SequenceNode):
        return node.value
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return []


def _check_expansion(root: yaml.Node, file: str) -> None:
    """Refuse aliases that contain themselves, or that expand past MAX_YAML_NODES nodes or MAX_DEPTH
    levels; counted per node without expanding anything (no recursion), blamed on a top-level key."""
    memo: dict[int, tuple[int, int]] = {}            # id -> (expanded nodes, depth), both capped
    cap_nodes, cap_depth = limits.MAX_YAML_NODES + 1, limits.MAX_DEPTH + 1
    parts = root.value if isinstance(root, yaml.MappingNode) else [(None, root)]
    total = 0
    for key, value in parts:
        name = key.value if isinstance(key, yaml.ScalarNode) else ""
        on_path: set[int] = set()
        stack = [(value, False)]
        while stack:
            node, done = stack.pop()
            if done:
                on_path.discard(id(node))
                kids = [memo[id(k)] for k in _children(node)]
                memo[id(node)] = (min(1 + sum(k[0] for k in kids), cap_nodes),
                                  min(1 + max((k[1] for k in kids), default=0), cap_depth))
            elif id(node) in on_path:
                raise SpecError([SpecIssue(file, node.start_mark.line + 1, name, "an alias refers to a value "
                                           "that contains it (a recursive alias); write the values out")])
            elif id(node) not in memo:
                on_path.add(id(node))
                stack.append((node, True))
                stack += [(k, False) for k in _children(node)]
        size, depth = memo[id(value)]
        total += size
        where = (file, (key or value).start_mark.line + 1, name)
        if depth > limits.MAX_DEPTH:
            raise SpecError([SpecIssue(*where, f"aliases nest it more than {limits.MAX_DEPTH} levels deep; "
                                       "write the values out")])
        if total > limits.MAX_YAML_NODES:
            raise SpecError([SpecIssue(*where, f"aliases expand the file to more than {limits.MAX_YAML_NODES:,} "
                                       "YAML nodes; write the values out or use fewer nested aliases")])


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
    except ValueError as exc:
        raise SpecError([SpecIssue(SET_FILE, 1, path.strip()[:100], str(exc).replace("\n", " "))]) from None
    try:
        return key, parse_yaml(value, SET_FILE)[0]     # bounded as a file is
    except SpecError as exc:
        raise SpecError([issue._replace(line=1, key=key) for issue in exc.errors]) from None


# ---- public entry points ---------------------------------------------------------------------

def load_spec(path, overrides: Sequence[str] = (), graphs: dict | None = None) -> Experiment:
    """Read, override (--set KEY=VALUE), validate. Raises SpecError listing every problem. `graphs`: the
    file's graphs, built once each (graph.graph_of)."""
    file = str(path)
    try:
        with open(path, "rb") as handle:
            text = handle.read(limits.MAX_FILE_BYTES + 1).decode("utf-8")
    except OSError as exc:
        raise SpecError([SpecIssue(file, 1, "", f"cannot read the file: {exc.strerror}")]) from None
    except UnicodeDecodeError:
        raise SpecError([SpecIssue(file, 1, "", "the file is not UTF-8 text (an experiment file is YAML)")]) from None
    return load_spec_text(text, file, overrides, graphs)


def load_spec_text(text: str, file: str = "<text>", overrides: Sequence[str] = (),
                   graphs: dict | None = None) -> Experiment:
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
        exp, found = expect_issues(build(data, source, graphs))
        issues += found
    except SpecError as exc:
        issues += exc.errors
    if issues:
        raise SpecError(sorted_unique(issues))
    return exp


def validate_file(path, overrides: Sequence[str] = ()) -> tuple[bool, str]:
    """(ok, human summary) for `run_experiment.py validate FILE`; each graph of the file is built once, by
    its validation, and its points and this summary take it from there."""
    built: dict = {}
    try:
        exp = load_spec(path, overrides, built)
    except SpecError as exc:
        return False, str(exc)
    points = expand_points(exp, built)
    graphs = {id(p.spec): graph_of(p.spec.topology, built) for p in points}
    counts = [_span([len(getattr(g, kind)) for g in graphs.values()], noun)
              for kind, noun in (("hosts", "host"), ("switches", "switch"), ("links", "link"))]
    kinds = ["|".join(dict.fromkeys(getter(p.spec) for p in points)) for getter in
             (lambda s: s.topology.template, lambda s: s.workload.strategy, lambda s: s.workload.model)]
    lines = [f"{path}: ok, {len(points)} run point(s), {', '.join(counts)}, "
             f"{kinds[0]}, {kinds[1]}/{kinds[2]}"]
    if exp.sweep:
        axes = [f"{k} x {len(v)}" for k, v in exp.sweep.axes.items()]
        more = [f"include {len(exp.sweep.include)} item(s)"] if exp.sweep.include else []
        lines.append(f"  sweep: {', '.join(axes + more + [f'repeats {exp.sweep.repeats}'])}")
    for file, graph in {p.spec.topology.graph: graphs[id(p.spec)] for p in points
                        if p.spec.topology.template == "graph"}.items():
        label = {s.name: s.label for s in graph.switches}
        dropped = ", ".join(f"{label[e.a]}-{label[e.b]}" for e in graph.dropped)
        lines.append(f"  graph {file}: {len(graph.switches)} PoPs, {len(graph.links) - len(graph.hosts)} links"
                     + (f"; {len(graph.dropped)} dropped to keep a spanning tree (no loops): {dropped}"
                        if dropped else ""))
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
