"""Which server holds each host and switch: pure logic, no SSH, no Mininet.

`auto` balances the hosts over the servers in host order (templates attach consecutive hosts to the
same switch, so neighbours stay together) and puts each switch on the server that holds most of its
neighbours, in the spirit of Mininet's SwitchBinPlacer (which bins switches first and so puts a
star's every host on one server). Explicitly placed nodes stay where they are put."""
from __future__ import annotations

from testbed.spec.graph import split_evenly


def place(graph, servers: list[str], pinned: dict[str, str] | None = None) -> dict[str, str]:
    """node name -> server name for every host and switch of `graph`."""
    pinned = dict(pinned or {})
    placement = {name: server for name, server in pinned.items()}
    free = [h.name for h in graph.hosts if h.name not in placement]
    load = {s: sum(1 for h in graph.hosts if placement.get(h.name) == s) for s in servers}
    # fill the servers up to an even share each, in server order, keeping host order
    target = {s: len(g) for s, g in zip(servers, split_evenly(range(len(graph.hosts)), len(servers)))}
    for name in free:
        server = next((s for s in servers if load[s] < target[s]), None) or min(servers, key=load.get)
        placement[name] = server
        load[server] += 1
    switches = [s.name for s in graph.switches if s.name not in placement]
    count = {s: sum(1 for n in pinned if placement.get(n) == s and n in {w.name for w in graph.switches})
             for s in servers}
    # switches next to hosts first, then those next to placed switches (tree cores), until all are placed
    while switches:
        scored = [(name, _votes(graph, name, placement)) for name in switches]
        name, votes = max(scored, key=lambda item: sum(item[1].values()))
        best = max(servers, key=lambda s: (votes.get(s, 0), -count[s], -servers.index(s)))
        placement[name] = best
        count[best] += 1
        switches.remove(name)
    return placement


def _votes(graph, name: str, placement: dict[str, str]) -> dict[str, int]:
    """How many of a node's placed neighbours each server holds."""
    votes: dict[str, int] = {}
    for peer in graph.neighbours(name):
        if peer in placement:
            votes[placement[peer]] = votes.get(placement[peer], 0) + 1
    return votes


def crossing_links(graph, placement: dict[str, str]) -> list:
    """The links whose two ends are on different servers (each one is a tunnel)."""
    return [e for e in graph.links if placement[e.a] != placement[e.b]]
