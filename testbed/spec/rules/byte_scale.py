"""The rules of emulation.byte_scale (testbed/emulation/byte_scale.py): a replay of compute profiles only, whose
gradient shapes the testbed scales, over links it can pace at bw / (K x F)."""
from __future__ import annotations

import testbed.limits as limits
from testbed.spec.graph import Graph
from testbed.spec.models import Experiment
from testbed.spec.rules.model import profiles
from testbed.spec.rules.problems import Problem

KEY = ("emulation", "byte_scale")


def byte_scale_problems(exp: Experiment, graph: Graph) -> list[Problem]:
    """byte_scale other than 1: compute: replay, every node replaying a PyTorch profile (its gradients' shapes
    are what is scaled), no link following a trace (its rates are not scaled), and the narrowest link at
    bw / (K x F) no slower than byte scaling holds to (a number F at a number K; auto stays above it)."""
    e = exp.emulation
    if e.byte_scale == 1:
        return []
    say = "; or byte_scale: 1"
    if e.compute != "replay":
        return [Problem(KEY, "byte scaling shrinks replayed gradients: set emulation.compute: replay" + say,
                        ("emulation.compute",))]
    out = []
    hosts = exp.topology.host_names()
    if exp.workload.engine != "pytorch" or len(profiles(exp)) < len(hosts):
        out.append(Problem(KEY, "byte scaling scales the gradients of a PyTorch compute profile: give every node "
                           "one (topology.host.profile, docs/profiles.md) and workload.engine: pytorch" + say,
                           ("topology.host.profile", "workload.engine")))
    traced = sorted({f"{edge.a}-{edge.b}" for edge in graph.links if edge.params.trace is not None})
    if traced:
        out.append(Problem(KEY, f"{', '.join(traced[:3])}: a link that follows a trace keeps its trace's rates "
                           "under byte scaling: remove the trace" + say, ("topology.link.trace",)))
    rates = [edge.params.bw for edge in graph.links if edge.params.bw is not None]
    if rates and e.byte_scale != "auto" and e.dilation != "auto":
        problem = floor_problem(min(rates), e.factor, e.byte_scale)
        if problem:
            out.append(Problem(KEY, problem, ("topology.link.bw", "emulation.dilation")))
    return out


def floor_problem(narrowest_bps: int, k: float, f: int) -> str | None:
    """What is wrong with a byte scale F that paces the narrowest link under limits.MIN_SCALED_BANDWIDTH on the wall
    clock at dilation K (None: nothing)."""
    wall, floor = narrowest_bps / (k * f), limits.MIN_SCALED_BANDWIDTH
    if f <= 1 or wall >= floor:
        return None
    return (f"a link of {narrowest_bps / 1e6:g} Mbit/s at dilation {k:g} and byte_scale {f} is paced at "
            f"{wall / 1e6:.3g} Mbit/s on this machine, under the {floor / 1e6:g} Mbit/s byte scaling holds to "
            "(a scaled step reads longer at slow wall rates): a smaller byte_scale, or auto")
