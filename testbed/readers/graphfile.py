"""A WAN topology from a file (`template: graph`): a GraphML or GML graph, such as the Internet
Topology Zoo's, read into points of presence (PoPs) and the links between them. Pure data, no root.

- Every graph node is a PoP, named s1..sN in file order (the file's names never reach a shell);
  its `label` (else its id) is kept for topology.json and figures.
- A link's bandwidth: the edge's `LinkSpeedRaw` (bits/s), else `LinkSpeed` x `LinkSpeedUnits`
  (K, M, G, T); else None (the experiment's topology.link.bw).
- A link's delay: the great-circle (haversine) distance between its ends' `Latitude`/`Longitude`
  over the speed of light in fibre, LIGHT_IN_FIBRE (0 for co-located PoPs); None where an end has no
  coordinates.
- Parallel edges (a multigraph, or a->b and b->a in a directed file) are one link at the largest of
  their speeds (a bundle is not modelled as a faster link); an edge from a node to itself is ignored.
- Cycles: the switches run no spanning-tree protocol, so a loop would flood broadcasts forever. The
  network keeps the minimum spanning tree by distance (links without coordinates last, ties in file
  order); the other links are `dropped` and listed.

Every problem is a GraphFileError naming the graph file and its line.
"""
from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass

import testbed.limits as limits

LIGHT_IN_FIBRE = 2.0e8        # m/s: c / 1.5, the refractive index of silica fibre (about 5 us per km)
EARTH_RADIUS = 6_371_000.0    # m: the mean radius of the Earth (IUGG)
SUFFIXES = (".graphml", ".gml")
SPEED_UNITS = {"": 1, "K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}
LAT_KEYS, LON_KEYS = ("Latitude", "latitude", "lat"), ("Longitude", "longitude", "lon")


class GraphFileError(ValueError):
    """A graph file that cannot be used: str() is 'FILE:LINE: message' (FILE alone without a line)."""

    def __init__(self, file: str, line: int | None, message: str):
        self.file, self.line, self.message = file, line, message
        super().__init__(f"{file}:{line}: {message}" if line else f"{file}: {message}")


@dataclass(frozen=True)
class Pop:
    """A graph node: a switch of the network."""

    name: str                 # s1..sN
    id: str                   # the node's id in the file
    label: str                # its label (else its id)
    lat: float | None = None
    lon: float | None = None
    line: int | None = None   # where the file declares it


@dataclass(frozen=True)
class Wire:
    """A link between two PoPs (switch names)."""

    a: str
    b: str
    bw: int | None            # bits/s from the file; None: topology.link.bw
    distance: float | None    # metres, great-circle; None: an end has no coordinates
    line: int | None = None

    @property
    def delay(self) -> float | None:
        """Seconds: the distance over the speed of light in fibre (None without a distance)."""
        return distance_delay(self.distance) if self.distance is not None else None


@dataclass(frozen=True)
class WanGraph:
    file: str
    pops: tuple[Pop, ...]
    wires: tuple[Wire, ...]       # the spanning tree the network is built from
    dropped: tuple[Wire, ...]     # the links that would close a loop

    def pop(self, name: str) -> Pop:
        return next(p for p in self.pops if p.name == name)

    def sites(self, wanted: list[str] | None) -> list[str]:
        """The switch names hosts are spread over: every PoP in file order, or the PoPs named in
        `wanted` (each a label or an id of the file; an id wins over another node's label), in that
        order. LookupError (index, message) names a bad one."""
        if wanted is None:
            return [p.name for p in self.pops]
        out = []
        for i, word in enumerate(wanted):
            by_id = [p for p in self.pops if p.id == word]
            match = by_id or [p for p in self.pops if p.label == word]
            if not match:
                raise LookupError(i, f"no node with label or id {word!r} in {os.path.basename(self.file)}"
                                  f"{_hint(word, [p.label for p in self.pops])}")
            if len(match) > 1:
                raise LookupError(i, f"{len(match)} nodes have the label {word!r} (lines "
                                  f"{', '.join(str(p.line) for p in match)}): name one by its id")
            if match[0].name in out:
                raise LookupError(i, f"{word!r} is named twice")
            out.append(match[0].name)
        return out


def haversine(lat1: float, lon1: float, lat2: float, lon2: float) -> float:
    """Great-circle distance in metres between two points given in degrees, on a sphere of EARTH_RADIUS."""
    p1, p2 = math.radians(lat1), math.radians(lat2)
    dp, dl = p2 - p1, math.radians(lon2 - lon1)
    h = math.sin(dp / 2) ** 2 + math.cos(p1) * math.cos(p2) * math.sin(dl / 2) ** 2
    return 2 * EARTH_RADIUS * math.asin(min(1.0, math.sqrt(h)))


def distance_delay(metres: float) -> float:
    """One-way propagation delay in seconds over fibre, rounded to the microsecond."""
    return round(metres / LIGHT_IN_FIBRE, 6)


_CACHE: dict[tuple, WanGraph] = {}


def read_graph(path: str) -> WanGraph:
    """The graph file at `path` (absolute), read once per version of the file (path, mtime, size)."""
    if not path.lower().endswith(SUFFIXES):
        raise GraphFileError(path, None, "a graph file is GraphML (.graphml) or GML (.gml): name one by its suffix")
    try:
        stat = os.stat(path)
    except OSError as exc:
        raise GraphFileError(path, None, f"cannot read the graph file: {exc.strerror}") from None
    if stat.st_size > limits.MAX_GRAPH_BYTES:
        raise GraphFileError(path, None, f"the graph file is over {limits.MAX_GRAPH_BYTES:,} bytes, the limit "
                             "for a topology (a Topology Zoo graph is some 10-100 KB)")
    key = (path, stat.st_mtime_ns, stat.st_size)
    if key not in _CACHE:
        if len(_CACHE) > 64:
            _CACHE.clear()
        _CACHE[key] = _read(path)
    return _CACHE[key]


def _read(path: str) -> WanGraph:
    try:
        with open(path, "rb") as handle:
            data = handle.read(limits.MAX_GRAPH_BYTES + 1)
        text = data.decode("utf-8-sig")     # a byte-order mark is not part of the graph
    except OSError as exc:
        raise GraphFileError(path, None, f"cannot read the graph file: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise GraphFileError(path, None, "the graph file is not UTF-8 text") from None
    graphml = path.lower().endswith(".graphml")
    node_lines, edge_lines = (_graphml_lines if graphml else _gml_lines)(path, data, text)
    graph = _parse(path, graphml, text)
    return _build(path, graph, node_lines, edge_lines)


def _parse(path: str, graphml: bool, text: str):
    import io
    import xml.etree.ElementTree as ET
    import networkx as nx
    try:
        if graphml:
            return nx.read_graphml(io.BytesIO(text.encode()), force_multigraph=True)
        return nx.parse_gml(_multigraph(text).splitlines(), label=None)
    except ET.ParseError as exc:
        raise GraphFileError(path, exc.position[0], f"not GraphML: {exc}") from None
    except (nx.NetworkXError, ValueError, KeyError, TypeError, IndexError) as exc:
        found = re.search(r"at \((\d+), \d+\)", str(exc)) or re.search(r"line (\d+)", str(exc))
        kind = "GraphML" if graphml else "GML"
        raise GraphFileError(path, int(found.group(1)) if found else None,
                             f"cannot be read as {kind}: {exc}") from None


def _multigraph(text: str) -> str:
    """GML read as a multigraph, its lines unchanged: many Topology Zoo files repeat an edge without
    declaring `multigraph 1`, which networkx refuses (parallel edges are merged after)."""
    if re.search(r"^\s*multigraph\s+1\b", text, re.M):
        return text
    text, done = re.subn(r"^(\s*)multigraph\s+0\b", r"\1multigraph 1", text, count=1, flags=re.M)
    return text if done else re.sub(r"^(\s*graph\s*\[)", r"\1 multigraph 1", text, count=1, flags=re.M)


def _graphml_lines(path: str, data: bytes, text: str) -> tuple[dict, list]:
    """Line of each node (by id) and each edge ((source, target, line) in file order) of a GraphML file;
    syntax errors, a node id declared twice and a typed value networkx cannot convert located."""
    import xml.parsers.expat
    nodes: dict[str, int] = {}
    edges: list[tuple] = []
    keys: dict[str, tuple] = {}      # key id -> (attr.name, attr.type)
    owners: list[str] = []           # the open node or edge, for messages
    value: list | None = None        # [key, line, text] of the open data element
    parser = xml.parsers.expat.ParserCreate(namespace_separator=" ")

    def start(name, attrs):
        nonlocal value
        tag, line = name.rsplit(" ", 1)[-1], parser.CurrentLineNumber
        value = [attrs.get("key"), line, []] if tag == "data" else None   # data holding elements: not converted
        if tag == "key":
            keys[attrs.get("id")] = (attrs.get("attr.name"), None if "yfiles.type" in attrs else attrs.get("attr.type"))
        elif tag == "node":
            node = attrs.get("id")
            if node in nodes:
                raise GraphFileError(path, line, f"node id {node!r} is declared twice (first on line {nodes[node]})")
            if node is not None:
                nodes[node] = line
            owners.append(f"node {node!r}")
        elif tag == "edge":
            edges.append((attrs.get("source"), attrs.get("target"), line))
            owners.append(f"edge {attrs.get('source')}-{attrs.get('target')}")

    def chars(chunk):
        if value is not None:
            value[2].append(chunk)     # joined once at the end: a text in many pieces costs linear time

    def end(name):
        nonlocal value
        tag = name.rsplit(" ", 1)[-1]
        if tag in ("node", "edge"):
            owners.pop()
        elif tag == "data" and value is not None and value[2]:
            _typed_value(path, keys, value[0], value[1], "".join(value[2]), owners[-1] if owners else "the graph")
        value = None
    parser.StartElementHandler, parser.EndElementHandler, parser.CharacterDataHandler = start, end, chars
    try:
        parser.Parse(data, True)
    except xml.parsers.expat.ExpatError as exc:
        raise GraphFileError(path, exc.lineno, f"not GraphML: {xml.parsers.expat.ErrorString(exc.code)}") from None
    return nodes, edges


_NUMBER_TYPES = {"int": int, "integer": int, "long": int, "float": float, "double": float}


def _typed_value(path: str, keys: dict, key: str, line: int, text: str, what: str) -> None:
    """A data element whose key declares a number type must hold one (networkx's own error has no line)."""
    name, kind = keys.get(key, (key, None))
    convert = _NUMBER_TYPES.get(kind)
    if convert is None:
        return
    try:
        convert(text)
    except ValueError:
        noun = "an integer" if convert is int else "a number"
        raise GraphFileError(path, line, f'{what}: {name} {text!r} is not {noun} (its key {key!r} has '
                             f'attr.type="{kind}")') from None


_GML_TOKEN = re.compile(r'"[^"]*"|\[|\]|#.*$|[^\s\[\]"]+')


def _gml_lines(path: str, data: bytes, text: str) -> tuple[dict, list]:
    """Line of each node (by id) and each edge ((source, target, line) in file order) of a GML file
    (a bracket scan)."""
    nodes: dict[str, int] = {}
    edges: list[tuple] = []
    stack: list[list] = []           # [key, line, {field: value}] per open list
    pending = None
    for number, line in enumerate(text.splitlines(), 1):
        for token in _GML_TOKEN.findall(line):
            if token.startswith("#"):
                continue
            if token == "[":
                stack.append([pending, number, {}])
                pending = None
            elif token == "]":
                if not stack:
                    continue                 # networkx reports the syntax error
                key, start, fields = stack.pop()
                if key == "node" and "id" in fields:
                    nodes.setdefault(fields["id"], start)
                elif key == "edge":
                    edges.append((fields.get("source"), fields.get("target"), start))
            elif pending is None:
                pending = token
            else:
                if stack:
                    stack[-1][2].setdefault(pending, token.strip('"'))
                pending = None
    return nodes, edges


def _number(value, file: str, line: int | None, what: str, key: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = math.nan
    if isinstance(value, bool) or not math.isfinite(number):
        raise GraphFileError(file, line, f"{what}: {key} {value!r} is not a number")
    return number


def _coordinates(data: dict, file: str, line: int | None, what: str) -> tuple[float | None, float | None]:
    lat_key = next((k for k in LAT_KEYS if k in data), None)
    lon_key = next((k for k in LON_KEYS if k in data), None)
    if lat_key is None and lon_key is None:
        return None, None
    if lat_key is None or lon_key is None:
        given, missing = (lat_key, "Longitude") if lon_key is None else (lon_key, "Latitude")
        raise GraphFileError(file, line, f"{what}: has {given} but no {missing} (give both, or neither)")
    lat = _number(data[lat_key], file, line, what, lat_key)
    lon = _number(data[lon_key], file, line, what, lon_key)
    if not -90 <= lat <= 90:
        raise GraphFileError(file, line, f"{what}: {lat_key} {data[lat_key]!r} is not within -90..90 degrees")
    if not -180 <= lon <= 180:
        raise GraphFileError(file, line, f"{what}: {lon_key} {data[lon_key]!r} is not within -180..180 degrees")
    return lat, lon


def _speed(data: dict, file: str, line: int | None, what: str) -> int | None:
    """bits/s from LinkSpeedRaw, else LinkSpeed x LinkSpeedUnits; None when the edge gives neither."""
    if data.get("LinkSpeedRaw") not in (None, ""):
        bps, key = _number(data["LinkSpeedRaw"], file, line, what, "LinkSpeedRaw"), "LinkSpeedRaw"
    elif data.get("LinkSpeed") not in (None, ""):
        speed = _number(data["LinkSpeed"], file, line, what, "LinkSpeed")
        unit = str(data.get("LinkSpeedUnits", "")).strip().upper()
        if unit not in SPEED_UNITS:
            raise GraphFileError(file, line, f"{what}: LinkSpeedUnits {data['LinkSpeedUnits']!r} is not one of "
                                 "K, M, G, T (or empty: bits/s)")
        bps, key = speed * SPEED_UNITS[unit], "LinkSpeed"
    else:
        return None
    if not limits.MIN_BANDWIDTH <= bps <= limits.MAX_BANDWIDTH:
        raise GraphFileError(file, line, f"{what}: {key} gives {bps:g} bit/s; a link is shaped between "
                             f"{limits.MIN_BANDWIDTH:,} bit/s and {limits.MAX_BANDWIDTH:,} bit/s")
    return int(round(bps))


def _build(file: str, graph, node_lines: dict, edge_lines: list) -> WanGraph:
    if graph.number_of_nodes() == 0:
        raise GraphFileError(file, None, "the graph has no nodes")
    if graph.number_of_nodes() > limits.MAX_SWITCHES:
        raise GraphFileError(file, None, f"the graph has {graph.number_of_nodes():,} nodes; at most "
                             f"{limits.MAX_SWITCHES} switches on one machine")
    if graph.number_of_edges() > limits.MAX_LINKS:
        raise GraphFileError(file, None, f"the graph has {graph.number_of_edges():,} edges; at most "
                             f"{limits.MAX_LINKS:,}")
    pops, names = [], {}
    for index, (node, data) in enumerate(graph.nodes(data=True), 1):
        line = node_lines.get(str(node))
        label = str(data.get("label", node))
        lat, lon = _coordinates(data, file, line, f"node {label!r}")
        pops.append(Pop(f"s{index}", str(node), label, lat, lon, line))
        names[node] = pops[-1]
    # each edge's line: networkx yields the edges between two nodes in file order, though not all
    # edges in file order, so the lines of the edges between the same ends are taken in turn
    pair = (lambda a, b: (a, b)) if graph.is_directed() else (lambda a, b: frozenset((a, b)))
    lines: dict = {}
    for source, target, line in edge_lines:
        lines.setdefault(pair(source, target), []).append(line)
    bundles: dict[frozenset, Wire] = {}
    for a, b, *rest in graph.edges(data=True):
        if a == b:
            continue                 # a node's link to itself carries nothing between PoPs
        data = rest[-1]
        turn = lines.get(pair(str(a), str(b)))
        line = turn.pop(0) if turn else None
        what = f"edge {names[a].label}-{names[b].label}"
        bw = _speed(data, file, line, what)
        pa, pb = names[a], names[b]
        far = haversine(pa.lat, pa.lon, pb.lat, pb.lon) if None not in (pa.lat, pb.lat) else None
        ends = frozenset((pa.name, pb.name))
        first = bundles.get(ends)
        if first is not None:        # parallel: one link at the largest speed
            bw = max(bw, first.bw) if None not in (bw, first.bw) else (bw or first.bw)
            line = first.line
        a_name, b_name = sorted((pa.name, pb.name), key=lambda n: int(n[1:]))
        bundles[ends] = Wire(a_name, b_name, bw, far, line)
    _check_connected(file, pops, bundles)
    wires, dropped = _spanning_tree(pops, list(bundles.values()))
    return WanGraph(file, tuple(pops), tuple(wires), tuple(dropped))


def _check_connected(file: str, pops: list[Pop], bundles: dict) -> None:
    adjacent: dict[str, set] = {p.name: set() for p in pops}
    for wire in bundles.values():
        adjacent[wire.a].add(wire.b)
        adjacent[wire.b].add(wire.a)
    seen, todo = {pops[0].name}, [pops[0].name]
    while todo:
        for peer in adjacent[todo.pop()] - seen:
            seen.add(peer)
            todo.append(peer)
    cut = [p for p in pops if p.name not in seen]
    if cut:
        shown = ", ".join(repr(p.label) for p in cut[:5]) + (f" and {len(cut) - 5} more" if len(cut) > 5 else "")
        raise GraphFileError(file, cut[0].line, f"the graph is not connected: {shown} cannot reach "
                             f"{pops[0].label!r} (every PoP needs a path to every other)")


def _spanning_tree(pops: list[Pop], wires: list[Wire]) -> tuple[list[Wire], list[Wire]]:
    """Kruskal: the minimum spanning tree by distance (unknown distances last, ties in file order)."""
    group = {p.name: p.name for p in pops}

    def root(name: str) -> str:
        while group[name] != name:
            group[name] = group[group[name]]
            name = group[name]
        return name
    order = sorted(range(len(wires)), key=lambda i: (wires[i].distance is None, wires[i].distance or 0.0,
                                                     wires[i].line or 0, i))
    keep, dropped = set(), []
    for i in order:
        a, b = root(wires[i].a), root(wires[i].b)
        if a == b:
            dropped.append(wires[i])
        else:
            group[a] = b
            keep.add(i)
    return [w for i, w in enumerate(wires) if i in keep], dropped


def _hint(word: str, labels: list[str]) -> str:
    import difflib
    close = difflib.get_close_matches(word, labels, n=1)
    return f"; did you mean {close[0]!r}?" if close else ""
