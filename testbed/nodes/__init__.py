"""Node kinds at run time: one interface (base.Node), one class per kind, registered here by name.

A new kind is one module plus one line below, and its row in the spec's table (testbed/spec/kinds.py:
its name, what it is, its own host setting). A kind's class says what cleanup removes (`records`,
`remove_records`, `destroy_leftovers`). Classes are imported on first use; kind modules import Mininet,
the Docker SDK and paramiko only inside functions."""
from __future__ import annotations

import importlib

from testbed.spec.kinds import DEFAULT_KIND

KINDS = {
    "netns": "testbed.nodes.netns:NetnsNode",     # a Mininet host: a shell in its own network namespace
    "docker": "testbed.nodes.docker:DockerNode",  # a container joined to the emulated links by a veth
    "remote": "testbed.nodes.remote:RemoteNode",  # a real machine driven over SSH (its own network)
}
__all__ = ["DEFAULT_KIND", "KINDS", "kind_classes", "node_class"]


def node_class(kind: str):
    """The class registered for `kind` (ValueError naming the known kinds otherwise)."""
    if kind not in KINDS:
        raise ValueError(f"unknown node kind {kind!r}; known kinds: {', '.join(KINDS)}")
    module, _, name = KINDS[kind].partition(":")
    return getattr(importlib.import_module(module), name)


def kind_classes() -> list:
    """Every registered kind's class, in registry order."""
    return [node_class(kind) for kind in KINDS]
