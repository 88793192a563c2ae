"""Node kinds: one interface (base.Node), one class per kind, registered here by name.

A new kind is one module plus one line below. A kind's class declares its host setting for the spec
(`settings`, spec/settings.py) and what cleanup removes (`records`, `remove_records`,
`destroy_leftovers`). Classes are imported on first use; kind modules import Mininet, the Docker SDK
and paramiko only inside functions, so the spec can read the kinds' settings without them."""
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


def kind_classes() -> list:
    """Every registered kind's class, in registry order."""
    return [node_class(kind) for kind in KINDS]


def kind_settings() -> dict:
    """kind -> its own host setting (nodes.settings.KindSettings), for the kinds that have one."""
    return {kind: cls.settings for kind, cls in zip(KINDS, kind_classes()) if cls.settings is not None}
