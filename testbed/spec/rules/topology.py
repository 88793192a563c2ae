"""The topology's cross-field rules: its shape and size, the graph file, shaping, each link's settings,
the node kinds' own settings, custom hosts, switches and links, loops and connectivity."""
from __future__ import annotations


import testbed.limits as limits
from testbed.spec.rules.capabilities import SHAPERS, needs_netem
from testbed.spec.graph import host_count, subnet, switch_total, usable
from testbed.readers.graphfile import GraphFileError, read_graph
from testbed.spec.keypaths import format_path, parse_path, suggest
from testbed.spec.kinds import kind_settings
from testbed.spec.models import LinkParams, Topology
from testbed.spec.rules.problems import Problem, host_kinds
from testbed.spec.settings import KindHost

def topology_problems(topo: Topology) -> list[Problem]:
    shape = shape_problems(topo)
    if shape:
        return shape
    problems = _shaping_problems(topo) + _link_param_problems(topo) + _kind_problems(topo)
    if topo.template == "custom":
        problems += _custom_problems(topo)
    else:
        problems += _override_problems(topo)
    return problems


def shape_problems(topo: Topology) -> list[Problem]:
    """Which keys each template takes, and in which form."""
    t, out, related = topo.template, [], ("topology.template",)
    if t == "custom":
        for key in ("hosts", "switches", "links"):
            if not isinstance(getattr(topo, key), list):
                out.append(Problem(("topology", key), f"template custom needs {key} as a list "
                                   f"(e.g. {key}: [{{name: ...}}])", related))
        if topo.host_overrides:
            out.append(Problem(("topology", "host_overrides"), "template custom sets cpu/memory on "
                               "each host item instead of host_overrides", related))
    else:
        if isinstance(topo.hosts, list):
            out.append(Problem(("topology", "hosts"), f"template {t} takes a number of hosts; "
                               "a list of hosts needs template: custom", related))
        if topo.switches is not None and (t != "linear" or isinstance(topo.switches, list)):
            out.append(Problem(("topology", "switches"), "switches is a number for template linear "
                               "and a list for template custom; remove it", related))
        if topo.links is not None:
            out.append(Problem(("topology", "links"), "links are only for template custom", related))
    if topo.fanout != Topology.model_fields["fanout"].default and t != "tree":
        out.append(Problem(("topology", "fanout"), "fanout is only used by template tree", related))
    if topo.bottleneck is not None and t != "dumbbell":
        out.append(Problem(("topology", "bottleneck"), "bottleneck is only used by template dumbbell",
                           related))
    out += _graph_file_problems(topo)
    count = host_count(topo)   # not host_names(): 10**9 names
    switches = switch_total(topo) if not out else 0     # counted, not built
    if not out and count > limits.MAX_HOSTS:
        out.append(Problem(("topology", "hosts"), f"at most {limits.MAX_HOSTS} hosts on one machine (got {count})"))
    elif not out and switches > limits.MAX_SWITCHES:
        key = "fanout" if topo.template == "tree" else "switches"
        out.append(Problem(("topology", key), f"template {topo.template} would build {switches:,} switches; at "
                           f"most {limits.MAX_SWITCHES} on one machine", ("topology.hosts", "topology.template")))
    elif not out and count + switches > limits.MAX_NODES:
        out.append(Problem(("topology", "hosts"), f"{count} hosts and {switches} switches are {count + switches:,} "
                           f"nodes; at most {limits.MAX_NODES} on one machine (a larger fanout needs fewer switches)",
                           ("topology.template", "topology.fanout")))
    elif not out and usable(subnet(topo)) < count:
        net = subnet(topo)
        out.append(Problem(("topology", "subnet"), f"{count} hosts do not fit {net} ({usable(net)} addresses); "
                           "use a larger network, e.g. 10.0.0.0/"
                           f"{32 - (count + 1).bit_length()}, or remove subnet to get one that fits",
                           ("topology.hosts",)))
    return out


def _graph_file_problems(topo: Topology) -> list[Problem]:
    """template graph: a graph file that reads (testbed/readers/graphfile.py names its line), the sites hosts go to, and
    distance delays only where they can be shaped; its keys only with it."""
    related = ("topology.template",)
    if topo.template != "graph":
        given = [k for k in ("graph", "graph_hosts") if getattr(topo, k) is not None]
        given += ["graph_delay"] if topo.graph_delay != "distance" else []
        return [Problem(("topology", k), f"{k} is only used by template graph", related) for k in given]
    if topo.graph is None:
        return [Problem(("topology", "graph"), "template graph needs graph: FILE, a GraphML (.graphml) or GML "
                        "(.gml) file relative to this file", related)]
    try:
        wan = read_graph(topo.graph)
    except GraphFileError as err:
        return [Problem(("topology", "graph"), str(err))]
    try:
        wan.sites(topo.graph_hosts)
    except LookupError as err:
        index, message = err.args
        return [Problem(("topology", "graph_hosts", index), message, ("topology.graph",))]
    if not SHAPERS[topo.shaping].netem and topo.graph_delay == "distance" and any(w.delay for w in wan.wires):
        return [Problem(("topology", "graph_delay"), "OVS QoS shapes bandwidth only; the delays from the graph's "
                        "distances need shaping: tc (or graph_delay: none for bandwidth only)", ("topology.shaping",))]
    return []


def _shaping_problems(topo: Topology) -> list[Problem]:
    out = []
    netem = [("topology", "link")] if needs_netem(topo.link) else []
    netem += [("topology", "bottleneck")] if topo.bottleneck is not None and needs_netem(topo.bottleneck) else []
    netem += [("topology", "links", i) for i, item in enumerate(topo.links or []) if needs_netem(item)]
    if not SHAPERS[topo.shaping].netem and netem:
        out.append(Problem(("topology", "shaping"), f"{SHAPERS[topo.shaping].what}; the delay, jitter or loss of "
                           f"{format_path(netem[0])} needs shaping: tc", (format_path(netem[0]),)))
    if topo.shaping == "ovs" and topo.switch.kind != "ovs":
        out.append(Problem(("topology", "shaping"), "shaping ovs needs switch kind ovs "
                           f"(got {topo.switch.kind})", ("topology.switch.kind",)))
    if topo.shaping != "tc" and topo.qdisc == "tbf":
        out.append(Problem(("topology", "qdisc"), "qdisc tbf needs shaping: tc "
                           "(OVS shaping uses its own linux-htb queues)", ("topology.shaping",)))
    return out


def _jitter_problem(params: LinkParams, path: tuple, own: LinkParams | None = None) -> list[Problem]:
    if params.jitter is None or params.delay is not None:
        return []
    where = path + ("jitter",) if own is None or own.jitter is not None else path
    return [Problem(where, "jitter needs a delay on the same link (netem varies the delay by the "
                    "jitter)", ("topology.link.delay", "topology.link.jitter"))]


def _link_param_problems(topo: Topology) -> list[Problem]:
    out = _jitter_problem(topo.link, ("topology", "link"))
    if topo.bottleneck is not None:
        out += _jitter_problem(topo.link.merged(topo.bottleneck), ("topology", "bottleneck"),
                               topo.bottleneck)
    for i, item in enumerate(topo.links or []):
        out += _jitter_problem(topo.link.merged(item), ("topology", "links", i), item)
    return out


def _kind_problems(topo: Topology) -> list[Problem]:
    """Each kind's own setting set only where it means something, then the kinds' own rules."""
    settings = kind_settings()
    out = [p for kind, s in settings.items() for p in _kind_setting_problems(topo, s.key, kind)]
    of_host = host_kinds(topo)
    for kind, s in settings.items():
        hosts = [KindHost(name, parse_path(topo.host_own(name)[0]), topo.host_conf(name))
                 for name, has in of_host.items() if has == kind]
        others = [name for name, has in of_host.items() if has != kind]
        out += [Problem(path, message, related) for path, message, related in s.problems(hosts, others)]
    return out


def _kind_setting_problems(topo: Topology, setting: str, kind: str) -> list[Problem]:
    """A kind's own setting (image: docker, remote: remote) only means something on a node of that kind."""
    of_host, out = host_kinds(topo), []
    if getattr(topo.host, setting) is not None and kind not in of_host.values():
        out.append(Problem(("topology", "host", setting), f"{setting} is for {kind} nodes, and no host is "
                           f"kind {kind} (set kind: {kind})", ("topology.host.kind",)))
    for name, has in of_host.items():
        key, own = topo.host_own(name)
        if own is not None and getattr(own, setting) is not None and has != kind:
            out.append(Problem(parse_path(key) + (setting,), f"{setting} is for {kind} nodes, and {name} is "
                               f"kind {has} (set kind: {kind})", ("topology.host.kind",)))
    return out


def _override_problems(topo: Topology) -> list[Problem]:
    names = topo.host_names()
    span = f"h1..h{len(names)}" if len(names) > 1 else "h1"
    return [Problem(("topology", "host_overrides", name), f"no host {name!r} in this topology "
                    f"(hosts are {span})", ("topology.hosts",))
            for name in topo.host_overrides if name not in names]


def _custom_problems(topo: Topology) -> list[Problem]:
    out, kinds = [], {}
    for key, items in (("hosts", topo.hosts), ("switches", topo.switches)):
        for i, item in enumerate(items):
            if item.name in kinds:
                out.append(Problem(("topology", key, i, "name"), f"duplicate node name {item.name!r}"))
            kinds.setdefault(item.name, key)
    if not topo.hosts:
        out.append(Problem(("topology", "hosts"), "a custom topology needs at least one host"))
    return out or _link_problems(topo, kinds)


def _link_problems(topo: Topology, kinds: dict[str, str]) -> list[Problem]:
    out, adjacent = [], {name: set() for name in kinds}
    for i, link in enumerate(topo.links):
        ends = [(end, getattr(link, end)) for end in ("a", "b")]
        bad = [(end, n) for end, n in ends if n not in kinds]
        for end, name in bad:
            out.append(Problem(("topology", "links", i, end), f"link to unknown node {name!r}"
                               f"{suggest(name, kinds)} (nodes: {', '.join(kinds)})"))
        if not bad and link.a == link.b:
            out.append(Problem(("topology", "links", i), f"link from {link.a!r} to itself"))
        elif not bad:
            adjacent[link.a].add((link.b, i))
            adjacent[link.b].add((link.a, i))
    if out:
        return out
    return (_host_link_problems(topo, kinds, adjacent) or _parallel_link_problems(topo)
            or _loop_problems(topo, kinds) or _connectivity_problems(adjacent))


def _parallel_link_problems(topo: Topology) -> list[Problem]:
    """Links are keyed by their two ends: a second link between the same nodes would go unshaped."""
    first, out = {}, []
    for i, link in enumerate(topo.links):
        j = first.setdefault(frozenset((link.a, link.b)), i)
        if j != i:
            out.append(Problem(("topology", "links", i), f"a second link between {link.a} and {link.b} (the first is "
                               f"links[{j}]); one link per pair of nodes: set its bw to the sum instead"))
    return out


def _loop_problems(topo: Topology, kinds: dict) -> list[Problem]:
    """Switches without a spanning tree flood broadcasts around a cycle forever: no loops among them."""
    group = {name: name for name, kind in kinds.items() if kind == "switches"}

    def root(name):
        while group[name] != name:
            group[name] = group[group[name]]
            name = group[name]
        return name
    for i, link in enumerate(topo.links):
        if link.a in group and link.b in group:
            a, b = root(link.a), root(link.b)
            if a == b:
                return [Problem(("topology", "links", i), f"the link {link.a}-{link.b} closes a loop among switches; "
                                "the switches run no spanning tree, so broadcasts would circle forever: remove it")]
            group[a] = b
    return []


def _host_link_problems(topo: Topology, kinds: dict, adjacent: dict) -> list[Problem]:
    out = []
    for i, host in enumerate(topo.hosts):
        peers = sorted(peer for peer, _ in adjacent[host.name])
        if len(peers) == 1 and kinds[peers[0]] == "switches":
            continue
        found = f"links to {', '.join(peers)}" if peers else "has no link"
        out.append(Problem(("topology", "hosts", i), f"host {host.name!r} {found}; a host needs "
                           "exactly one link, to a switch (one interface, one IP)"))
    return out


def _connectivity_problems(adjacent: dict) -> list[Problem]:
    names = list(adjacent)
    seen, todo = {names[0]}, [names[0]]
    while todo:
        for peer, _ in adjacent[todo.pop()]:
            if peer not in seen:
                seen.add(peer)
                todo.append(peer)
    cut = [n for n in names if n not in seen]
    if not cut:
        return []
    return [Problem(("topology", "links"), f"the topology is not connected: {', '.join(cut)} "
                    f"cannot reach {names[0]}")]
