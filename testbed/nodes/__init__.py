"""Node kinds at run time: one interface (base.Node), one class per kind.

The kinds are registered once, in the spec's table (testbed/spec/kinds.py: a row per kind with its
name, what it is, its own host setting and its class as "module:Class"); a new kind is one module
here plus its row there. A kind's class says what cleanup removes (`records`, `remove_records`,
`destroy_leftovers`). Classes are imported on first use; kind modules import Mininet, the Docker
SDK and paramiko only inside functions."""
from __future__ import annotations

from testbed.spec import kinds

DEFAULT_KIND = kinds.DEFAULT_KIND
__all__ = ["DEFAULT_KIND", "kind_classes", "node_class"]


def node_class(kind: str):
    """The class registered for `kind` (ValueError naming the known kinds otherwise)."""
    if kind not in kinds.KINDS:
        raise ValueError(f"unknown node kind {kind!r}; known kinds: {', '.join(kinds.KINDS)}")
    return kinds.load_runtime(kinds.KINDS[kind].runtime)


def kind_classes() -> list:
    """Every registered kind's class, in registry order."""
    return [node_class(kind) for kind in kinds.KINDS]
