"""Node kinds: one interface (base.Node), one class per kind, registered here by name.

A new kind is one module plus one line below. Classes are imported on first use, so the spec can
ask which kinds exist without importing Mininet or the Docker SDK."""
from __future__ import annotations

import importlib

KINDS = {
    "netns": "testbed.nodes.netns:NetnsNode",     # a Mininet host: a shell in its own network namespace
    "docker": "testbed.nodes.docker:DockerNode",  # a container joined to the emulated links by a veth
    "remote": "testbed.nodes.remote:RemoteNode",  # a real machine driven over SSH (its own network)
}
DEFAULT_KIND = "netns"


def kind_names() -> list[str]:
    return list(KINDS)


def node_class(kind: str):
    """The class registered for `kind` (ValueError naming the known kinds otherwise)."""
    if kind not in KINDS:
        raise ValueError(f"unknown node kind {kind!r}; known kinds: {', '.join(KINDS)}")
    module, _, name = KINDS[kind].partition(":")
    return getattr(importlib.import_module(module), name)
