"""template: graph: a GraphML / GML file (Topology Zoo attributes) -> switches, hosts, links with the
file's bandwidth and a delay from the PoPs' distance; its errors with file, line and key."""
import os
import shutil
from pathlib import Path

import pytest

from spec_helpers import load, one, write
from testbed import shaping
from testbed.spec import build_graph, expand_points, load_spec, validate_file
from testbed.readers import graphfile
from testbed.readers.graphfile import LIGHT_IN_FIBRE, distance_delay, haversine, read_graph

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "topologies" / "examples"

WAN = """
name: wan
topology:
  template: graph
  graph: {graph}
  hosts: {hosts}
  link: {{bw: 100mbit}}
"""

# Three PoPs 1000 km apart along the equator (1 degree of longitude = 111.195 km on the sphere),
# in a triangle: the longest edge (a-c, 2000 km) closes the loop and is dropped.
DEG_1000KM = 1_000_000 / (graphfile.EARTH_RADIUS * 3.141592653589793 / 180)
TRIANGLE = f"""<?xml version="1.0" encoding="utf-8"?>
<graphml xmlns="http://graphml.graphdrawing.org/xmlns">
  <key attr.name="label" attr.type="string" for="node" id="l" />
  <key attr.name="Latitude" attr.type="double" for="node" id="lat" />
  <key attr.name="Longitude" attr.type="double" for="node" id="lon" />
  <key attr.name="LinkSpeed" attr.type="string" for="edge" id="s" />
  <key attr.name="LinkSpeedUnits" attr.type="string" for="edge" id="u" />
  <key attr.name="LinkSpeedRaw" attr.type="double" for="edge" id="r" />
  <graph edgedefault="undirected">
    <node id="a"><data key="l">West</data><data key="lat">0</data><data key="lon">0</data></node>
    <node id="b"><data key="l">Middle</data><data key="lat">0</data><data key="lon">{DEG_1000KM}</data></node>
    <node id="c"><data key="l">East</data><data key="lat">0</data><data key="lon">{2 * DEG_1000KM}</data></node>
    <edge source="a" target="b"><data key="s">10</data><data key="u">M</data></edge>
    <edge source="b" target="c"><data key="r">20000000.0</data><data key="s">999</data><data key="u">G</data></edge>
    <edge source="a" target="c"><data key="s">1</data><data key="u">G</data></edge>
  </graph>
</graphml>
"""


def resolved(exp, machine: int = 2):
    """The experiment's first point resolved as a run resolves it."""
    from testbed.run.point.point import resolve_all
    from testbed.spec import expand_points
    return resolve_all(expand_points(exp), machine)[0]


def _graph_file(tmp_path, text: str, name: str = "g.graphml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_distance_and_delay_from_coordinates():
    assert haversine(0, 0, 0, DEG_1000KM) == pytest.approx(1_000_000, rel=1e-9)
    assert distance_delay(1_000_000) == pytest.approx(0.005)          # 1000 km of fibre: 5 ms
    assert LIGHT_IN_FIBRE == 2.0e8
    london_paris = haversine(51.50853, -0.12574, 48.85341, 2.3488)
    assert 340_000 < london_paris < 346_000                            # 343.5 km as the crow flies


def test_graphml_import_delay_from_distance_bandwidth_from_attributes_and_default(tmp_path):
    _graph_file(tmp_path, TRIANGLE)
    exp = load(tmp_path, WAN.format(graph="g.graphml", hosts=3))
    graph = build_graph(exp.topology)
    assert [(s.name, s.label) for s in graph.switches] == [("s1", "West"), ("s2", "Middle"), ("s3", "East")]
    assert [(e.a, e.b) for e in graph.links[:3]] == [("h1", "s1"), ("h2", "s2"), ("h3", "s3")]
    assert all(e.params.bw == 100_000_000 and e.params.delay is None for e in graph.links[:3])
    wan = {(e.a, e.b): e.params for e in graph.links[3:]}
    assert set(wan) == {("s1", "s2"), ("s2", "s3")}
    assert wan[("s1", "s2")].bw == 10_000_000                   # LinkSpeed x LinkSpeedUnits
    assert wan[("s2", "s3")].bw == 20_000_000                   # LinkSpeedRaw wins
    assert wan[("s1", "s2")].delay == pytest.approx(0.005) and wan[("s2", "s3")].delay == pytest.approx(0.005)
    assert [(e.a, e.b, e.params.bw, e.params.delay) for e in graph.dropped] == [("s1", "s3", 10**9, 0.01)]
    bare = load(tmp_path, WAN.format(graph="g.graphml", hosts=3), ["topology.graph_delay=none"])
    assert all(e.params.delay is None for e in build_graph(bare.topology).links)


def test_default_bandwidth_where_the_file_gives_none(tmp_path):
    _graph_file(tmp_path, TRIANGLE.replace('<data key="s">10</data><data key="u">M</data>', ""))
    graph = build_graph(load(tmp_path, WAN.format(graph="g.graphml", hosts=2)).topology)
    assert next(e for e in graph.links if (e.a, e.b) == ("s1", "s2")).params.bw == 100_000_000
    unshaped = load(tmp_path, "name: w\ntopology: {template: graph, graph: g.graphml}\n")
    assert next(e for e in build_graph(unshaped.topology).links if (e.a, e.b) == ("s1", "s2")).params.bw is None


def test_shipped_example_graphml_and_gml_read_alike():
    ml, gml = (read_graph(str(EXAMPLES / f"wan_graph.{ext}")) for ext in ("graphml", "gml"))
    assert [(p.name, p.label, p.lat, p.lon) for p in ml.pops] == [(p.name, p.label, p.lat, p.lon) for p in gml.pops]
    strip = lambda ws: sorted((w.a, w.b, w.bw, w.delay) for w in ws)
    assert strip(ml.wires) == strip(gml.wires) and strip(ml.dropped) == strip(gml.dropped)
    assert len(ml.pops) == 6 and len(ml.wires) == 5 and len(ml.dropped) == 2
    london_paris = next(w for w in ml.wires if {w.a, w.b} == {"s1", "s2"})
    assert london_paris.bw == 2_500_000_000 and london_paris.delay == pytest.approx(0.00172, abs=2e-5)


def test_shipped_example_experiment(tmp_path):
    exp = load_spec(EXAMPLES / "wan.yaml")
    assert exp.topology.graph == str(EXAMPLES / "wan_graph.graphml")
    graph = build_graph(exp.topology)
    sites = {e.a: e.b for e in graph.links if e.a.startswith("h")}
    labels = {s.name: s.label for s in graph.switches}
    assert {h: labels[s] for h, s in sites.items()} == {"h1": "London", "h2": "Paris", "h3": "Amsterdam",
                                                        "h4": "Milan"}
    geneva_milan = next(e for e in graph.links if {labels.get(e.a), labels.get(e.b)} == {"Geneva", "Milan"})
    assert geneva_milan.params.bw == 100_000_000       # no speed in the file: topology.link.bw
    ok, text = validate_file(EXAMPLES / "wan.yaml")
    assert ok and "6 switches" in text and "2 dropped to keep a spanning tree" in text, text
    # the same experiment on the GML copy: a --set path is relative to the working directory
    shutil.copy(EXAMPLES / "wan_graph.gml", tmp_path)
    here = os.getcwd()
    os.chdir(tmp_path)
    try:
        other = load_spec(EXAMPLES / "wan.yaml", ["topology.graph=wan_graph.gml"])
    finally:
        os.chdir(here)
    assert other.topology.graph == str(tmp_path / "wan_graph.gml")
    assert [(e.a, e.b, e.params) for e in build_graph(other.topology).links] == [
        (e.a, e.b, e.params) for e in graph.links]


def test_hosts_spread_round_robin_and_graph_hosts(tmp_path):
    _graph_file(tmp_path, TRIANGLE)
    graph = build_graph(load(tmp_path, WAN.format(graph="g.graphml", hosts=5)).topology)
    assert [e.b for e in graph.links[:5]] == ["s1", "s2", "s3", "s1", "s2"]
    picked = load(tmp_path, WAN.format(graph="g.graphml", hosts=3) + "  graph_hosts: [East, a]\n")
    assert [e.b for e in build_graph(picked.topology).links[:3]] == ["s3", "s1", "s3"]


def test_sweep_points_and_resolved_spec_keep_the_file(tmp_path):
    _graph_file(tmp_path, TRIANGLE)
    path = write(tmp_path, WAN.format(graph="g.graphml", hosts=2)
                 + "sweep: {topology.graph_delay: [distance, none], hosts: [2, 3]}\n")
    points = expand_points(load_spec(path))
    assert len(points) == 4
    delays = {(p.spec.topology.graph_delay, len(build_graph(p.spec.topology).hosts)):
              sorted(str(e.params.delay) for e in build_graph(p.spec.topology).links if e.a.startswith("s"))
              for p in points}
    assert delays[("none", 3)] == ["None", "None"] and delays[("distance", 2)] == ["0.005", "0.005"]
    dumped = points[0].spec.model_dump(mode="json")
    assert dumped["topology"]["graph"] == str(tmp_path / "g.graphml")


def test_gml_errors_name_the_graph_file_line_and_the_key(tmp_path):
    (tmp_path / "bad.gml").write_text('graph [\n  node [ id 0 label "A" ]\n  node [ id 1 label "B"\n'
                                      '  edge [ source 0 target 1 ]\n]\n')
    issue = one(tmp_path, WAN.format(graph="bad.gml", hosts=2))
    assert (issue.line, issue.key) == (4, "topology.graph")
    assert "bad.gml:" in issue.message and "cannot be read as GML" in issue.message
    (tmp_path / "speed.gml").write_text('graph [\n  node [ id 0 label "A" ]\n  node [ id 1 label "B" ]\n'
                                        '  edge [\n    source 0\n    target 1\n    LinkSpeed "10"\n'
                                        '    LinkSpeedUnits "X"\n  ]\n]\n')
    issue = one(tmp_path, WAN.format(graph="speed.gml", hosts=2))
    assert issue.key == "topology.graph" and f"{tmp_path / 'speed.gml'}:4:" in issue.message
    assert "edge A-B: LinkSpeedUnits 'X'" in issue.message


@pytest.mark.parametrize("edit,line,words", [
    (('<data key="lat">0</data><data key="lon">0</data>', '<data key="lat">95</data><data key="lon">0</data>'),
     10, "node 'West': Latitude 95.0 is not within -90..90 degrees"),
    (('<data key="s">10</data>', '<data key="s">fast</data>'), 13, "edge West-Middle: LinkSpeed 'fast' is not a number"),
    (('<data key="r">20000000.0</data>', '<data key="r">1.0</data>'), 14, "edge Middle-East: LinkSpeedRaw gives 1 bit/s"),
    (('<data key="lat">0</data><data key="lon">0</data>', '<data key="lat">0</data>'), 10,
     "node 'West': has Latitude but no Longitude"),
    (('<node id="c">', '<nodx id="c">'), 12, "not GraphML"),
])
def test_graphml_errors_name_the_graph_file_line(tmp_path, edit, line, words):
    _graph_file(tmp_path, TRIANGLE.replace(*edit))
    issue = one(tmp_path, WAN.format(graph="g.graphml", hosts=2))
    assert (issue.line, issue.key) == (4, "topology.graph")
    assert f"{tmp_path / 'g.graphml'}:{line}: " in issue.message and words in issue.message, issue


def test_disconnected_missing_and_too_large_graphs(tmp_path, monkeypatch):
    _graph_file(tmp_path, TRIANGLE.replace('<edge source="b" target="c">', '<edge source="a" target="b">')
                .replace('<edge source="a" target="c">', '<edge source="b" target="a">'))
    issue = one(tmp_path, WAN.format(graph="g.graphml", hosts=2))
    assert "g.graphml:12: the graph is not connected: 'East' cannot reach 'West'" in issue.message, issue
    issue = one(tmp_path, WAN.format(graph="nowhere.graphml", hosts=2))
    assert issue.key == "topology.graph" and "nowhere.graphml: cannot read the graph file" in issue.message
    issue = one(tmp_path, WAN.format(graph="g.txt", hosts=2))
    assert "GraphML (.graphml) or GML (.gml)" in issue.message
    _graph_file(tmp_path, TRIANGLE)
    monkeypatch.setattr(graphfile.limits, "MAX_SWITCHES", 2)
    assert "the graph has 3 nodes; at most 2 switches" in one(tmp_path, WAN.format(graph="g.graphml", hosts=2)).message


def test_keys_where_they_belong(tmp_path):
    _graph_file(tmp_path, TRIANGLE)
    issue = one(tmp_path, "name: w\ntopology: {template: graph, hosts: 2}\n")
    assert issue.key == "topology.graph" and "template graph needs graph: FILE" in issue.message
    issue = one(tmp_path, "name: w\ntopology: {template: star, graph: g.graphml}\n")
    assert issue.key == "topology.graph" and "only used by template graph" in issue.message
    issue = one(tmp_path, WAN.format(graph="g.graphml", hosts=2) + "  graph_hosts: [Est]\n")
    assert issue.key == "topology.graph_hosts[0]" and "did you mean 'East'" in issue.message
    issue = one(tmp_path, WAN.format(graph="g.graphml", hosts=2) + "  shaping: ovs\n")
    assert issue.key == "topology.graph_delay" and "shaping: tc" in issue.message
    load(tmp_path, WAN.format(graph="g.graphml", hosts=2) + "  shaping: ovs\n  graph_delay: none\n")


def test_netem_refusal_names_graph_delay(tmp_path, monkeypatch):
    _graph_file(tmp_path, TRIANGLE)
    monkeypatch.setattr(shaping, "kernel_has_qdisc", lambda kind: kind != "netem")
    exp = load(tmp_path, WAN.format(graph="g.graphml", hosts=2))
    found = shaping.capability_problems(exp.topology, build_graph(exp.topology))
    assert [key for key, _ in found] == ["topology.graph_delay"]
    assert "graph_delay: none" in found[0][1]
    bare = load(tmp_path, WAN.format(graph="g.graphml", hosts=2), ["topology.graph_delay=none"])
    assert shaping.capability_problems(bare.topology, build_graph(bare.topology)) == []


def test_dilation_scales_the_file_speeds_and_delays(tmp_path, monkeypatch):
    """Under time dilation K the wall-clock network is the same graph with every rate / K and every
    delay x K, the file's included (the resolved point's wall graph)."""
    _graph_file(tmp_path, TRIANGLE)
    exp = load(tmp_path, WAN.format(graph="g.graphml", hosts=3) + "  host: {cores: 1}\n"
               "  host_overrides: {h2: {cores: 2}}\nemulation: {dilation: 2}\n")
    emulated = build_graph(exp.topology, dilation=2, machine_cores=4)
    point = resolved(exp, machine=4)
    wall = point.wall_graph
    assert [(s.name, s.label) for s in wall.switches] == [(s.name, s.label) for s in emulated.switches]
    assert [(h.name, h.ip, h.cores, h.budget) for h in wall.hosts] == [(h.name, h.ip, h.cores, h.budget)
                                                                      for h in emulated.hosts]
    assert [(h.cores, h.budget) for h in wall.hosts] == [(1, 0.5), (2, 1.0), (1, 0.5)]
    assert [(e.a, e.b) for e in wall.links] == [(e.a, e.b) for e in emulated.links]
    for w, e in zip(wall.links, emulated.links):
        assert w.params.bw == e.params.bw // 2
        assert w.params.delay == (None if e.params.delay is None else pytest.approx(2 * e.params.delay))
    assert {(e.a, e.b): e.params.delay for e in wall.links}[("s1", "s2")] == pytest.approx(0.010)
    monkeypatch.setattr(shaping, "kernel_has_qdisc", lambda kind: kind != "netem")
    assert [k for k, _ in shaping.capability_problems(point.wall_spec.topology, wall)] == ["topology.graph_delay"]


@pytest.mark.parametrize("header", ["directed 1\n  multigraph 1", "directed 1", "multigraph 0", ""])
def test_parallel_and_directed_edges_are_one_link_and_self_loops_ignored(tmp_path, header):
    """Many Topology Zoo GML files repeat an edge without declaring multigraph 1: read all the same."""
    text = (f'graph [\n  {header}\n  node [ id 0 label "A" ]\n  node [ id 1 label "B" ]\n'
            '  edge [ source 0 target 1 LinkSpeedRaw 1000000.0 ]\n  edge [ source 1 target 0 LinkSpeedRaw 5000000.0 ]\n'
            '  edge [ source 0 target 1 ]\n  edge [ source 1 target 1 ]\n]\n')
    (tmp_path / "p.gml").write_text(text)
    wan = read_graph(str(tmp_path / "p.gml"))
    assert [(w.a, w.b, w.bw, w.distance) for w in wan.wires] == [("s1", "s2", 5_000_000, None)] and not wan.dropped


def test_topology_document_keeps_labels_delays_and_dropped_links(tmp_path):
    from testbed.run.point.record import topology_document
    _graph_file(tmp_path, TRIANGLE)
    graph = build_graph(load(tmp_path, WAN.format(graph="g.graphml", hosts=2)).topology)
    doc = topology_document(graph, [])
    assert doc["switches"][0] == {"name": "s1", "label": "West"}
    assert {"a": "s1", "b": "s2", "bw": "10mbit", "delay": "5ms"} in doc["links"]
    assert doc["dropped"] == [{"a": "s1", "b": "s3", "bw": "1gbit", "delay": "10ms"}]


def test_reads_are_cached_per_version_of_the_file(tmp_path):
    path = _graph_file(tmp_path, TRIANGLE)
    first = read_graph(str(path))
    assert read_graph(str(path)) is first
    shutil.copy(EXAMPLES / "wan_graph.graphml", path)
    assert len(read_graph(str(path)).pops) == 6


def test_dilation_keeps_the_dropped_links_in_the_wall_graph(tmp_path):
    """The wall graph (topology.json under dilation) lists the links the file drops, dilated as the others."""
    from testbed.run.point.record import topology_document
    _graph_file(tmp_path, TRIANGLE)
    exp = load(tmp_path, WAN.format(graph="g.graphml", hosts=2) + "emulation: {dilation: 2}\n")
    wall = resolved(exp).wall_graph
    assert [(e.a, e.b, e.params.bw, e.params.delay) for e in wall.dropped] == [("s1", "s3", 5 * 10**8, 0.02)]
    assert [(e.a, e.b) for e in wall.links] == [(e.a, e.b) for e in build_graph(exp.topology).links]
    assert topology_document(wall, [])["dropped"] == [{"a": "s1", "b": "s3", "bw": "500mbit", "delay": "20ms"}]
    shipped = load_spec(EXAMPLES / "wan.yaml", ["emulation.dilation=2"])
    assert len(resolved(shipped).wall_graph.dropped) == 2
    ok, text = validate_file(EXAMPLES / "wan.yaml", ["emulation.dilation=2"])
    assert ok and "2 dropped to keep a spanning tree" in text, text


def test_co_located_pops_have_no_delay_and_an_end_without_coordinates_the_link_delay(tmp_path):
    _graph_file(tmp_path, TRIANGLE.replace(f'<data key="lon">{DEG_1000KM}</data>', '<data key="lon">0</data>')
                .replace(f'<data key="lat">0</data><data key="lon">{2 * DEG_1000KM}</data>', ""))
    exp = load(tmp_path, WAN.format(graph="g.graphml", hosts=2).replace("{bw: 100mbit}", "{bw: 100mbit, delay: 7ms}"))
    wan = {(e.a, e.b): e.params.delay for e in build_graph(exp.topology).links if e.a.startswith("s")}
    assert wan[("s1", "s2")] == 0.0                 # 0 m apart: no delay, not topology.link.delay
    assert wan[("s2", "s3")] == pytest.approx(0.007)    # East has no coordinates: topology.link.delay
    dilated = load(tmp_path, WAN.format(graph="g.graphml", hosts=2) + "emulation: {dilation: 2}\n")
    assert {(e.a, e.b): e.params.delay for e in resolved(dilated).wall_graph.links}[("s1", "s2")] == 0.0


@pytest.mark.parametrize("header", ["", "directed 1"])
def test_an_error_in_a_parallel_edge_names_its_own_line(tmp_path, header):
    """In a directed file networkx yields 0->1 before 1->0 whatever the file's order."""
    (tmp_path / "p.gml").write_text(f'graph [\n  {header}\n  node [ id 0 label "A" ]\n  node [ id 1 label "B" ]\n'
                                    '  edge [ source 1 target 0 LinkSpeedRaw 1000000.0 ]\n'
                                    '  edge [ source 0 target 1 LinkSpeed 5 LinkSpeedUnits "X" ]\n]\n')
    with pytest.raises(graphfile.GraphFileError) as err:
        read_graph(str(tmp_path / "p.gml"))
    assert err.value.line == 6 and "LinkSpeedUnits 'X'" in err.value.message


def test_duplicate_graphml_node_ids_are_refused_at_the_second(tmp_path):
    _graph_file(tmp_path, TRIANGLE.replace(
        '    <edge source="a" target="b">', '    <node id="b"><data key="l">Other</data></node>\n'
        '    <edge source="a" target="b">'))
    issue = one(tmp_path, WAN.format(graph="g.graphml", hosts=2))
    assert "g.graphml:13: node id 'b' is declared twice (first on line 11)" in issue.message, issue


def test_a_self_loop_is_ignored_whatever_its_speed(tmp_path):
    (tmp_path / "s.gml").write_text('graph [\n  node [ id 0 label "A" ]\n  node [ id 1 label "B" ]\n'
                                    '  edge [ source 0 target 1 ]\n  edge [ source 1 target 1 LinkSpeedRaw 1.0 ]\n]\n')
    assert [(w.a, w.b) for w in read_graph(str(tmp_path / "s.gml")).wires] == [("s1", "s2")]


def test_links_with_a_file_speed_do_not_follow_the_link_trace(tmp_path):
    from testbed.spec.faults.traces import link_traces
    _graph_file(tmp_path, TRIANGLE.replace('<data key="r">20000000.0</data><data key="s">999</data>'
                                           '<data key="u">G</data>', ""))
    (tmp_path / "t.csv").write_text("t[s],bw[mbit]\n0,50\n6,5\n12,50\n")
    exp = load(tmp_path, WAN.format(graph="g.graphml", hosts=2).replace("{bw: 100mbit}", "{trace: t.csv}"))
    assert [(t.a, t.b) for t in link_traces(exp)] == [("h1", "s1"), ("h2", "s2"), ("s2", "s3")]
    file_speed = next(e for e in build_graph(exp.topology).links if (e.a, e.b) == ("s1", "s2"))
    assert file_speed.params.bw == 10_000_000 and file_speed.params.trace is None


def test_an_id_wins_over_another_nodes_label(tmp_path):
    _graph_file(tmp_path, TRIANGLE.replace("<data key=\"l\">East</data>", "<data key=\"l\">a</data>"))
    picked = load(tmp_path, WAN.format(graph="g.graphml", hosts=2) + "  graph_hosts: [a, c]\n")
    assert [e.b for e in build_graph(picked.topology).links[:2]] == ["s1", "s3"]


@pytest.mark.parametrize("name,text", [("g.graphml", TRIANGLE), ("p.gml", 'graph [\n  node [ id 0 ]\n]\n')])
def test_a_byte_order_mark_is_ignored(tmp_path, name, text):
    (tmp_path / name).write_bytes(b"\xef\xbb\xbf" + text.encode())
    assert len(read_graph(str(tmp_path / name)).pops) == text.count("<node") + text.count("node [")


@pytest.mark.parametrize("edit,line,words", [
    (('<data key="lat">0</data><data key="lon">0</data>', '<data key="lat">north</data><data key="lon">0</data>'),
     10, '''node 'a': Latitude 'north' is not a number (its key 'lat' has attr.type="double")'''),
    (('<data key="r">20000000.0</data>', '<data key="r">fast</data>'), 14, "edge b-c: LinkSpeedRaw 'fast' is not"),
    (('attr.type="double" for="edge"', 'attr.type="long" for="edge"'), 14,
     "LinkSpeedRaw '20000000.0' is not an integer"),
])
def test_typed_graphml_values_that_do_not_convert_name_the_line_and_key(tmp_path, edit, line, words):
    _graph_file(tmp_path, TRIANGLE.replace(*edit))
    issue = one(tmp_path, WAN.format(graph="g.graphml", hosts=2))
    assert f"{tmp_path / 'g.graphml'}:{line}: " in issue.message and words in issue.message, issue
