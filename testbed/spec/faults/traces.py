"""Links that follow a trace (`trace:` on topology.link, topology.bottleneck or a custom link): which key's
trace each link of the graph follows, and the trace file each one loads (read and checked by
testbed/readers/traces.py). Applying the changes to a running network is testbed/run/traces.py's."""
from __future__ import annotations

import math
import os
from typing import NamedTuple

import testbed.limits as limits
from testbed.readers.traces import DEFAULT_GRANULARITY, Row, Trace, load
from testbed.spec.graph import build_graph
from testbed.spec.keypaths import get_in, parse_path


class LinkTrace(NamedTuple):
    """A link of the graph that follows a trace: its ends, the key path whose trace it follows (e.g.
    'topology.link'), its parameters (with the trace keys) and the trace, in the spec's units."""
    a: str
    b: str
    key: str
    params: object
    trace: Trace


def owners(topo) -> list[tuple[str, object]]:
    """(key path, LinkParams as written) of every place a trace can be set."""
    out = [("topology.link", topo.link)]
    if topo.bottleneck is not None:
        out.append(("topology.bottleneck", topo.bottleneck))
    out += [(f"topology.links[{i}]", item) for i, item in enumerate(topo.links or [])]
    return out


def owner_of(topo, edge) -> str:
    """The key path whose trace a graph edge follows: its custom link item or the dumbbell's bottleneck
    when they set one, else topology.link."""
    ends = {edge.a, edge.b}
    if topo.template == "dumbbell" and topo.bottleneck is not None and topo.bottleneck.trace is not None \
            and ends == {"s1", "s2"}:
        return "topology.bottleneck"
    for i, item in enumerate(topo.links or []):
        if item.trace is not None and ends == {item.a, item.b}:
            return f"topology.links[{i}]"
    return "topology.link"


def trace_file(exp, key: str) -> str:
    """The trace file set at `key` (e.g. 'topology.link') as a path: relative to the file that set it
    (the working directory for --set)."""
    name = get_in(exp.model_dump(mode="json"), parse_path(key) + ("trace",))
    file = exp.location(parse_path(key) + ("trace",))[0]
    base = os.path.dirname(os.path.abspath(file)) if os.path.isfile(file) else os.getcwd()
    return os.path.normpath(os.path.join(base, os.path.expanduser(name)))


def link_traces(exp, scale: float = 1.0, graph=None) -> list[LinkTrace]:
    """Every link of the experiment's graph (`graph`, else built) that follows a trace, with its trace
    loaded (TraceError) and, with `scale` K, on the clock of a wall spec (times x K, rates / K:
    dilation.wall_spec)."""
    topo = exp.topology
    if not any(p.trace is not None for _, p in owners(topo)):
        return []
    out, loaded = [], {}
    for edge in (graph or build_graph(topo)).links:
        params = edge.params
        if params.trace is None:
            continue
        key = owner_of(topo, edge)
        how = (key, params.trace_format, params.trace_granularity)
        if how not in loaded:     # the granularity is in the spec's time, the file's is the trace's own
            g = DEFAULT_GRANULARITY if params.trace_granularity is None else params.trace_granularity / scale
            # a step without deliveries: the slowest rate tc paces on this machine's clock (K x it emulated,
            # whichever clock the trace is asked on)
            floor = math.ceil(limits.MIN_BANDWIDTH * exp.emulation.factor)
            loaded[how] = load(trace_file(exp, key), params.trace_format, g, floor).scaled(scale)
        out.append(LinkTrace(edge.a, edge.b, key, params, loaded[how]))
    return out


def first_params(params, trace: Trace):
    """The link's parameters as its trace's first row sets them (bring-up shapes the link so)."""
    return changed(params, trace.rows[0])


def changed(params, row: Row):
    """`params` with a trace row's values (its empty cells keep the link's own)."""
    update = {"bw": row.bw, **({"delay": row.delay} if row.delay is not None else {}),
              **({"loss": row.loss} if row.loss is not None else {})}
    return params.model_copy(update=update)
