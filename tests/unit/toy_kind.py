"""A node kind that exists only for tests/unit/test_kinds.py: one module, and what its registry line and its
row of the spec's table name (pure, no root)."""
from __future__ import annotations

from typing import Literal

from pydantic import Field

from testbed.nodes.base import Node
from testbed.spec.settings import KindSettings, Strict, merge_fields


class ToyConf(Strict):
    """A toy's settings. Unset fields inherit topology.host.toy."""

    colour: Literal["red", "blue"] | None = Field(None, description="its colour")
    size: int | None = None

    def merged(self, override: "ToyConf | None") -> "ToyConf":
        return ToyConf.model_construct(**merge_fields(self, override, ToyConf))


def toy_problems(hosts, others):
    return [(h.path + ("toy", "colour"), f"{h.name} is kind toy and needs toy.colour", ("topology.host.kind",))
            for h in hosts if h.conf.toy is None or h.conf.toy.colour is None]


SETTINGS = KindSettings("toy", ToyConf, "a toy's colour and size", toy_problems)     # its row in spec.kinds


class ToyNode(Node):
    kind = "toy"
    records = "toys"

    def mininet_host(self):
        return None

    @property
    def python(self) -> str:
        return "python3"

    def _command(self, argv, cwd):
        return argv

    @classmethod
    def usage(cls, nodes):
        return {}

    @classmethod
    def remove_records(cls, records):
        """Removes every toy but one called 'stuck' (kept for the next cleanup)."""
        return [f"removed toy {r}" for r in records if r != "stuck"], [r for r in records if r == "stuck"]

    @classmethod
    def destroy_leftovers(cls, run_alive):
        return [f"destroyed stray toys of runs over: {run_alive(0)}"]
