"""Dotted key paths ("topology.link.bw", "topology.links[2].a") over plain data and models.

The same paths name YAML keys in errors, `--set` overrides, sweep axes and result columns.
"""

from __future__ import annotations

import difflib
import re
import types
import typing
from dataclasses import dataclass
from typing import Any, Union

from pydantic import BaseModel

Path = tuple  # tuple[str | int, ...]

ALIASES = {
    "hosts": "topology.hosts",
    "bw": "topology.link.bw",
    "strategy": "workload.strategy",
    "model": "workload.model",
}

_PART = re.compile(r"([A-Za-z0-9_-]+)|\[(\d+)\]|\.")


@dataclass(frozen=True)
class KnownKeys:
    """Annotation marker: a free-form dict whose keys must come from `keys`."""

    keys: tuple[str, ...]


def parse_path(text: str) -> Path:
    """'topology.links[2].a' or 'topology.links.2.a' -> ('topology', 'links', 2, 'a')."""
    text = ALIASES.get(text.strip(), text.strip())
    if not text or text.startswith(".") or text.endswith(".") or ".." in text:
        raise ValueError(f"{text!r} is not a key path like topology.link.bw")
    parts: list = []
    pos = 0
    while pos < len(text):
        match = _PART.match(text, pos)
        if not match:
            raise ValueError(f"{text!r} is not a key path like topology.link.bw")
        name, index = match.groups()
        if index is not None:
            parts.append(int(index))
        elif name is not None:
            parts.append(int(name) if name.isdigit() else name)
        pos = match.end()
    return tuple(parts)


def format_path(path: Path) -> str:
    """('topology', 'links', 2, 'a') -> 'topology.links[2].a'."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def canonical(text: str) -> str:
    """Alias-resolved, normalised spelling of a key path."""
    return format_path(parse_path(text))


def covers(outer: Path, inner: Path) -> bool:
    """True if `inner` is `outer` or lies below it."""
    return inner[: len(outer)] == outer


def get_in(data: Any, path: Path, default: Any = None) -> Any:
    """Value at `path` in nested dicts/lists, or `default`."""
    for part in path:
        if isinstance(data, dict) and part in data:
            data = data[part]
        elif isinstance(data, list) and isinstance(part, int) and 0 <= part < len(data):
            data = data[part]
        else:
            return default
    return data


def set_in(data: dict, path: Path, value: Any) -> None:
    """Set `path` in nested data, creating (or replacing non-dict) intermediate mappings."""
    for i, part in enumerate(path[:-1]):
        child = get_in(data, (part,))
        if not isinstance(child, (dict, list)) or (isinstance(child, list) and not isinstance(path[i + 1], int)):
            child = {}
            data[part] = child
        data = child
    if isinstance(data, list) and not (isinstance(path[-1], int) and path[-1] < len(data)):
        raise ValueError(f"index {path[-1]} is out of range")
    data[path[-1]] = value


def suggest(word: str, choices) -> str:
    """'; did you mean 'hosts'?' or ''."""
    close = difflib.get_close_matches(str(word), [str(c) for c in choices], n=1, cutoff=0.5)
    return f"; did you mean {close[0]!r}?" if close else ""


def _members(tp: Any) -> list:
    """Flatten Annotated/Optional/Union into the concrete member types."""
    if typing.get_origin(tp) is typing.Annotated:
        return _members(typing.get_args(tp)[0])
    if typing.get_origin(tp) in (Union, types.UnionType):
        return [m for arg in typing.get_args(tp) for m in _members(arg) if m is not type(None)]
    return [tp]


def _step(tp: Any, part: Any, hint: KnownKeys | None) -> list[tuple[Any, KnownKeys | None]]:
    """Types reached from `tp` through key `part` (empty if none)."""
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        field = tp.model_fields.get(part) if isinstance(part, str) else None
        if field is None:
            return []
        marker = next((m for m in field.metadata if isinstance(m, KnownKeys)), None)
        return [(field.annotation, marker)]
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is dict and isinstance(part, str) and (hint is None or part in hint.keys):
        return [(args[1] if args else Any, None)]
    if origin is list and isinstance(part, int):
        return [(args[0] if args else Any, None)]
    return []


def resolve(root: type[BaseModel], path: Path) -> str | None:
    """None if `path` names a key the model tree allows, else a message with a suggestion."""
    current: list[tuple[Any, KnownKeys | None]] = [(root, None)]
    for depth, part in enumerate(path):
        nxt = [step for tp, hint in current for member in _members(tp) for step in _step(member, part, hint)]
        if not nxt:
            return _unknown_message(current, path, depth)
        current = nxt
    return None


def _unknown_message(current: list, path: Path, depth: int) -> str:
    part, where = path[depth], format_path(path[:depth]) or "the top level"
    choices: list[str] = []
    for tp, hint in current:
        for member in _members(tp):
            if isinstance(member, type) and issubclass(member, BaseModel):
                choices += list(member.model_fields)
            elif hint is not None:
                choices += list(hint.keys)
    if choices:
        hint = suggest(part, choices) or f" (valid: {', '.join(choices)})"
        return f"unknown key {part!r} in {where}{hint}"
    return f"{where} is a single value; it has no key {part!r}"
