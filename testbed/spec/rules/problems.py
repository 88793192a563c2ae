"""A rule's finding (Problem: the key path to blame, the message, the key paths it depends on, so that a
problem caused by a sweep value is reported at that axis) and what several rules ask of a topology's hosts."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from testbed.spec.kinds import DEFAULT_KIND, real_machine

if TYPE_CHECKING:
    from testbed.spec.models import Topology


@dataclass(frozen=True)
class Problem:
    path: tuple
    message: str
    related: tuple[str, ...] = ()


def host_kinds(topo: Topology) -> dict[str, str]:
    return {name: topo.host_conf(name).kind or DEFAULT_KIND for name in topo.host_names()}


def real_machines(topo: Topology) -> set[str]:
    """The hosts that are machines of their own (spec.kinds: real time, no budget, their own link)."""
    return {name for name, k in host_kinds(topo).items() if real_machine(k)}
