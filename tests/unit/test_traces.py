"""Time-varying links: trace files (csv and Mahimahi), where a trace is at a time (hold, loop), the
spec's keys and their errors, the example traces' script, and the tracer's changes on a made-up net."""
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from testbed.run.faults import traces as run_traces
from testbed.spec import SpecError, load_spec
from testbed.spec.faults import traces
from testbed.run.point.point import resolve_all
from testbed.spec import expand_points
from testbed.spec.graph import build_graph
from testbed.readers import traces as trace_files
from testbed.readers.traces import Row, TraceError, parse_csv, parse_mahimahi

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests" / "fixtures" / "traces"
STEPS = "t[s],bw[mbit]\n0,50\n6,5\n12,50\n"


# ---- csv ------------------------------------------------------------------------------------------

def test_csv_rows_in_the_header_units_with_optional_delay_and_loss():
    trace = parse_csv("# a comment\n\nt[ms], bw[kbit], delay[ms], loss[%]\n0,800\n500,200,20,0.5\n1500,800,,1\n")
    assert trace.rows == (Row(0.0, 800_000), Row(0.5, 200_000, 0.02, 0.5), Row(1.5, 800_000, None, 1.0))
    assert trace.period == 1.5 and trace.needs_netem
    assert not parse_csv(STEPS).needs_netem


@pytest.mark.parametrize("text, line, words", [
    ("t[s],bw[mbit]\n0,50\n5,5mbit\n", 3, "'5mbit' is not a number"),
    ("t[s],bw[mbps]\n0,50\n", 1, "bytes"),
    ("t[s],bw\n0,50\n", 1, "needs its unit in brackets"),
    ("t[s],rate[mbit]\n0,50\n", 1, "unknown column 'rate[mbit]'"),
    ("bw[mbit],t[s]\n50,0\n", 1, "the first two columns are t and bw"),
    ("t[s],bw[mbit]\n1,50\n", 2, "the first row must be at t 0"),
    ("t[s],bw[mbit]\n0,50\n5,5\n5,6\n", 4, "times must rise"),
    ("t[s],bw[mbit]\n0,50\n5,\n", 3, "t and bw are required"),
    ("t[s],bw[mbit]\n0,50,3\n", 2, "3 cells, but the header names 2"),
    ("t[s],bw[kbit]\n0,1\n", 2, "at least"),
    ("# nothing\n", 0, "no rows"),
])
def test_csv_errors_name_the_line(text, line, words):
    with pytest.raises(TraceError) as err:
        parse_csv(text, "x.csv")
    assert err.value.line == line and words in str(err.value), str(err.value)
    assert str(err.value).startswith(f"x.csv:{line}: " if line else "x.csv: ")


# ---- mahimahi -------------------------------------------------------------------------------------

def test_mahimahi_opportunities_become_rate_steps_of_the_granularity():
    # 0-1 s: 100 packets; 1-2 s: none (the slowest rate tc paces); 2-2.5 s: one packet, a half-second step
    trace = parse_mahimahi("\n".join(["1"] * 100 + ["2500"]), 1.0)
    assert trace.rows == (Row(0.0, 1_200_000), Row(1.0, 8_000), Row(2.0, 24_000), Row(2.5, 24_000))
    assert trace.period == 2.5


def test_mahimahi_sample_file_at_two_granularities():
    fine = trace_files.load(str(FIXTURE / "sample.mahimahi"), "mahimahi", 0.5)
    coarse = trace_files.load(str(FIXTURE / "sample.mahimahi"), "mahimahi", 1.0)
    assert fine.period == coarse.period == 3.0
    # 12 Mbit/s (1000 packets a second) for 1 s, 1.2 Mbit/s for 1 s, 12 Mbit/s for 1 s
    assert [(r.t, r.bw) for r in coarse.rows] == [(0.0, 12_000_000), (1.0, 1_200_000), (2.0, 12_000_000),
                                                   (3.0, 12_000_000)]
    assert [r.bw for r in fine.rows] == [12_000_000, 1_200_000, 12_000_000, 12_000_000]


@pytest.mark.parametrize("text, line, words", [
    ("1\n2\nfast\n", 3, "not a delivery time"),
    ("5\n3\n", 2, "must not fall"),
    ("0\n0\n", 0, "no delivery after 0 ms"),
])
def test_mahimahi_errors_name_the_line(text, line, words):
    with pytest.raises(TraceError) as err:
        parse_mahimahi(text, 1.0, "m.trace")
    assert err.value.line == line and words in str(err.value)


def test_mahimahi_steps_are_exact_at_any_granularity():
    # 1 packet a millisecond for 2002 ms: 12 Mbit/s throughout; 1.001 s is not exact in binary
    trace = parse_mahimahi("\n".join(str(ms) for ms in range(1, 2003)), 1.001)
    assert trace.rows == (Row(0.0, 12_000_000), Row(2.002, 12_000_000))
    times = [r.t for r in trace.rows]
    assert times == sorted(set(times))
    assert parse_mahimahi("\n".join(["1"] * 10 + ["900"]), 0.3 / 3).rows == parse_mahimahi(
        "\n".join(["1"] * 10 + ["900"]), 0.1).rows


def test_mahimahi_refuses_digits_that_are_not_ascii():
    with pytest.raises(TraceError) as err:
        parse_mahimahi("1\n2\n\u00b2\n", 1.0, "m.trace")
    assert err.value.line == 3 and "not a delivery time" in str(err.value)


def test_a_csv_saved_with_a_byte_order_mark_reads(tmp_path):
    (tmp_path / "excel.csv").write_text("\ufefft[s],bw[mbit]\n0,50\n6,5\n", encoding="utf-8")
    assert trace_files.load(str(tmp_path / "excel.csv")).rows == parse_csv(STEPS.replace("12,50\n", "")).rows


# ---- where a trace is -----------------------------------------------------------------------------

def test_hold_keeps_the_last_row_and_loop_starts_over_at_the_end():
    trace = parse_csv(STEPS)
    assert [trace.position(t, "hold") for t in (-1, 0, 5.9, 6, 12, 100)] == [(0, 0), (0, 0), (0, 0), (0, 1),
                                                                            (0, 2), (0, 2)]
    # loop: the last row (t 12) closes the period, so 12 s in is row 0 of the second pass
    assert [trace.position(t, "loop") for t in (0, 6, 11.99, 12, 18, 30)] == [(0, 0), (0, 1), (0, 1), (1, 0),
                                                                             (1, 1), (2, 1)]
    assert trace.planned(2, 1) == 30.0
    one = parse_csv("t[s],bw[mbit]\n0,50\n")
    assert one.position(99, "loop") == (0, 0)
    # a row due exactly now is in force, even where the sum in binary falls short (0.6 + 0.1)
    fine = parse_csv("t[ms],bw[mbit]\n0,50\n100,5\n200,50\n300,50\n")
    assert fine.position(0.7, "loop") == (2, 1) and fine.position(0.2, "hold") == (0, 2)


def test_scaled_trace_runs_k_times_slower_at_a_kth_of_the_rate():
    trace = parse_csv("t[s],bw[mbit],delay[ms]\n0,50,10\n6,5\n").scaled(2)
    assert trace.rows == (Row(0.0, 25_000_000, 0.02), Row(12.0, 2_500_000))


# ---- the spec -------------------------------------------------------------------------------------

def spec_file(tmp_path, link, extra="", trace=STEPS, name="steps.csv"):
    (tmp_path / name).write_text(trace)
    path = tmp_path / "exp.yaml"
    path.write_text(f"name: t\ntopology:\n  hosts: 2\n  link: {link}\n{extra}")
    return path


def issues(path) -> list:
    with pytest.raises(SpecError) as err:
        load_spec(path)
    return err.value.errors


def test_a_trace_relative_to_the_file_gives_every_link_its_first_values(tmp_path):
    exp = load_spec(spec_file(tmp_path, "{trace: steps.csv, trace_mode: loop, trace_start: step 3}"))
    found = traces.link_traces(exp)
    assert [(lt.a, lt.b, lt.key) for lt in found] == [("h1", "s1", "topology.link"), ("h2", "s1", "topology.link")]
    assert found[0].params.trace_mode == "loop" and found[0].trace.source == str(tmp_path / "steps.csv")
    point = resolved(exp)
    assert {e.params.bw for e in point.graph.links} == {50_000_000}
    twice = resolved(exp, 2.0)
    assert {e.params.bw for e in twice.wall_graph.links} == {25_000_000}


@pytest.mark.parametrize("link, line, key, words", [
    ("{trace: nothere.csv}", 4, "topology.link.trace", "cannot be read"),
    ("{trace: steps.csv, bw: 10mbit}", 4, "topology.link.bw", "the trace gives the link's rate"),
    ("{trace_mode: loop}", 4, "topology.link.trace_mode", "follows none"),
    ("{trace: steps.csv, trace_granularity: 2s}", 4, "topology.link.trace_granularity", "mahimahi"),
    ("{trace: steps.csv, trace_start: step 99}", 4, "topology.link.trace_start", "past the end of training"),
    ("{trace: steps.csv, trace_start: soon}", 4, "topology.link.trace_start", "or 'start'"),
    ("{trace: steps.csv, trace_mode: forever}", 4, "topology.link.trace_mode", "not one of hold, loop"),
])
def test_trace_keys_errors_name_file_line_and_key(tmp_path, link, line, key, words):
    found = issues(spec_file(tmp_path, link))
    assert any(i.line == line and i.key == key and words in i.message for i in found), found


def test_a_bad_row_of_the_trace_file_is_named_with_its_own_line(tmp_path):
    [issue] = issues(spec_file(tmp_path, "{trace: steps.csv}", trace="t[s],bw[mbit]\n0,50\n6,fast\n"))
    assert (issue.line, issue.key) == (4, "topology.link.trace")
    assert f"{tmp_path / 'steps.csv'}:3: bw: 'fast' is not a number" in issue.message


def test_a_looping_trace_needs_two_rows_and_delay_needs_tc(tmp_path):
    [issue] = issues(spec_file(tmp_path, "{trace: steps.csv, trace_mode: loop}", trace="t[s],bw[mbit]\n0,50\n"))
    assert issue.key == "topology.link.trace_mode" and "cannot loop" in issue.message
    found = issues(spec_file(tmp_path, "{trace: steps.csv}", "  shaping: ovs\n",
                             trace="t[s],bw[mbit],loss[%]\n0,50,1\n"))
    assert any(i.key == "topology.link.trace" and "OVS QoS shapes bandwidth only" in i.message for i in found)


def test_delay_in_a_trace_is_refused_on_a_kernel_without_netem(tmp_path, monkeypatch):
    exp = load_spec(spec_file(tmp_path, "{trace: steps.csv}", trace="t[s],bw[mbit],delay[ms]\n0,50\n5,5,30\n"))
    monkeypatch.setattr(run_traces.shaping, "kernel_has_qdisc", lambda kind: kind != "netem")
    point = resolved(exp)
    [(key, message)] = run_traces.capability_problems(point.wall_spec, point.wall_traces())
    assert key == "topology.link.trace" and "CONFIG_NET_SCH_NETEM" in message
    monkeypatch.setattr(run_traces.shaping, "kernel_has_qdisc", lambda kind: True)
    assert run_traces.capability_problems(point.wall_spec, point.wall_traces()) == []


def test_bottleneck_and_custom_links_follow_their_own_traces(tmp_path):
    (tmp_path / "slow.csv").write_text("t[s],bw[mbit]\n0,2\n3,1\n")
    path = spec_file(tmp_path, "{trace: steps.csv}", "  template: dumbbell\n  bottleneck: {trace: slow.csv}\n")
    exp = load_spec(path)
    keys = {(lt.a, lt.b): (lt.key, lt.trace.rows[0].bw) for lt in traces.link_traces(exp)}
    assert keys[("s1", "s2")] == ("topology.bottleneck", 2_000_000)
    assert keys[("h1", "s1")] == ("topology.link", 50_000_000)
    # a bottleneck with a bw of its own keeps it: it does not follow topology.link's trace
    path.write_text(path.read_text().replace("bottleneck: {trace: slow.csv}", "bottleneck: {bw: 10mbit}"))
    exp = load_spec(path)
    assert ("s1", "s2") not in {(lt.a, lt.b) for lt in traces.link_traces(exp)}
    assert next(e for e in build_graph(exp.topology).links if e.a == "s1").params.bw == 10_000_000
    custom = tmp_path / "custom.yaml"
    custom.write_text("name: c\ntopology:\n  template: custom\n  hosts: [{name: h1}, {name: h2}]\n"
                      "  switches: [{name: s1}]\n  link: {bw: 100mbit}\n"
                      "  links: [{a: h1, b: s1}, {a: h2, b: s1, trace: slow.csv, trace_mode: loop}]\n")
    [lt] = traces.link_traces(load_spec(custom))
    assert (lt.a, lt.b, lt.key, lt.params.trace_mode) == ("h2", "s1", "topology.links[1]", "loop")


def test_a_sweep_over_traces_names_each_file_in_the_run_ids(tmp_path):
    from testbed.spec import expand_points
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "lte.csv").write_text(STEPS)
    path = spec_file(tmp_path, "{trace_mode: loop}", "sweep:\n  topology.link.trace: [steps.csv, sub/lte.csv]\n")
    points = expand_points(load_spec(path))
    assert [p.run_id.rsplit("-", 2)[0] for p in points] == ["tracesteps", "tracelte"]
    assert [traces.link_traces(p.spec)[0].trace.source for p in points] == [str(tmp_path / "steps.csv"),
                                                                            str(tmp_path / "sub" / "lte.csv")]


def test_dilation_scales_the_wall_specs_trace_start_and_granularity(tmp_path):
    (tmp_path / "m.trace").write_text((FIXTURE / "sample.mahimahi").read_text())
    exp = load_spec(spec_file(tmp_path, "{trace: m.trace, trace_format: mahimahi, trace_granularity: 500ms, "
                                        "trace_start: 3s}", "emulation: {dilation: 2}\n"))
    point = resolved(exp)
    wall = point.wall_spec
    assert wall.topology.link.trace_start == "6s" and wall.topology.link.trace_granularity == 1.0
    emulated, dilated = traces.link_traces(exp)[0].trace, traces.link_traces(wall, 2.0)[0].trace
    assert dilated == emulated.scaled(2) == point.wall_traces()[0].trace


def resolved(exp, k: float | None = None):
    """The experiment's first point resolved as a run resolves it (at dilation k when given)."""
    if k is not None:
        exp = exp.model_copy(update={"emulation": exp.emulation.model_copy(update={"dilation": k})})
    return resolve_all(expand_points(exp), 2)[0]


# ---- the tracer ------------------------------------------------------------------------------------

class Net:
    """The parts of a running network the tracer uses; commands are collected, not run (the switch's
    end too, which would run in this machine's namespace)."""
    def __init__(self, exp, monkeypatch):
        monkeypatch.setattr(run_traces.faults.subprocess, "run",
                            lambda argv, **kw: self.ran.append((None, argv)) or SimpleNamespace(returncode=0))
        self.topology, self.qos_rates, self.reshaped, self.ran = exp.topology, {}, {}, []
        self.graph = resolved(exp).graph
        self.nodes = {h: SimpleNamespace(name=h, limits={"cpu": None},
                                         run=lambda argv, timeout, check, h=h: self.ran.append((h, argv)))
                      for h in ("h1", "h2")}

    def link_ends(self, a, b):
        host = a if a.startswith("h") else b
        return [(f"{host}-eth0", self.nodes[host]), (f"s1-eth{host[1]}", None)]


def test_the_tracer_changes_each_link_at_the_trace_times_and_records_the_steps(tmp_path, monkeypatch):
    exp = load_spec(spec_file(tmp_path, "{trace: steps.csv}", "workload: {steps_per_epoch: 20}\n"))
    net, clock = Net(exp, monkeypatch), [1000.0]
    monkeypatch.setattr(run_traces.time, "time", lambda: clock[0])
    tracer = run_traces.Tracer(traces.link_traces(exp), net, 20, 1.0, "t", "r0")
    events = [{"event": "start", "t": 1000.0}]
    assert tracer.tick(None, []) is None and tracer.rows == []          # training has not started
    for now, step in ((1000.0, None), (1003.0, 4), (1006.1, 9), (1008.0, 10), (1012.2, 14), (1020.0, 20)):
        clock[0] = now
        assert tracer.tick(None, events + ([{"event": "step", "step": step}] if step else [])) is None
    rows = [(r["link"], r["row"], r["trace_t"], r["step"], r["bw_bps"], r["late_s"], r["outcome"])
            for r in tracer.rows]
    assert rows == [("h1-s1", 1, 0.0, None, 50_000_000, 0.0, "ok"), ("h2-s1", 1, 0.0, None, 50_000_000, 0.0, "ok"),
                    ("h1-s1", 2, 6.0, 9, 5_000_000, 0.1, "ok"), ("h2-s1", 2, 6.0, 9, 5_000_000, 0.1, "ok"),
                    ("h1-s1", 3, 12.0, 14, 50_000_000, 0.2, "ok"), ("h2-s1", 3, 12.0, 14, 50_000_000, 0.2, "ok")]
    # the same commands as a set_bw fault: both ends at the row's rate, changed in place (the same tree)
    changes = [argv for _, argv in net.ran if "class" in argv]
    assert len(changes) == 12, "both ends of both links, at each of the three rows"
    assert [next(a for a in argv if a.endswith("bit")) for argv in changes if "s1-eth1" in argv] == [
        "50000000bit", "5000000bit", "50000000bit"]
    assert not any("del" in argv for _, argv in net.ran)


def test_the_tracer_starts_at_a_step_and_loops_on_a_dilated_clock(tmp_path, monkeypatch):
    exp = load_spec(spec_file(tmp_path, "{trace: steps.csv, trace_mode: loop, trace_start: step 5}",
                              "workload: {steps_per_epoch: 40}\n"))
    net, clock = Net(exp, monkeypatch), [0.0]
    monkeypatch.setattr(run_traces.time, "time", lambda: clock[0])
    followed = [lt for lt in traces.link_traces(exp) if lt.a == "h1"]
    tracer = run_traces.Tracer(followed, net, 40, 2.0, "t", "r0")
    start = [{"event": "start", "t": 0.0}]
    for now, step in ((1.0, 4), (2.0, 5), (13.0, 8), (14.0, 9), (26.0, 20), (38.0, 30)):
        clock[0] = now
        tracer.tick(None, start + [{"event": "step", "step": step}])
    # began at 2.0 (step 5); rows every 6 emulated s = 12 wall s, looping after 12 emulated s
    assert [(r["row"], r["loop"], r["trace_t"], r["step"]) for r in tracer.rows] == [
        (1, 0, 0.0, 5), (2, 0, 6.0, 9), (1, 1, 12.0, 20), (2, 1, 18.0, 30)]
    assert [r["late_s"] for r in tracer.rows] == [0.0, 0.0, 0.0, 0.0]


def test_an_empty_cell_gives_the_links_own_delay_not_the_first_rows(tmp_path, monkeypatch):
    trace = "t[s],bw[mbit],delay[ms]\n0,50,100\n5,10,\n10,50,100\n"
    exp = load_spec(spec_file(tmp_path, "{trace: steps.csv}", "workload: {steps_per_epoch: 20}\n", trace=trace))
    net, clock = Net(exp, monkeypatch), [0.0]
    monkeypatch.setattr(run_traces.time, "time", lambda: clock[0])
    tracer = run_traces.Tracer([lt for lt in traces.link_traces(exp) if lt.a == "h1"], net, 20)
    start = [{"event": "start", "t": 0.0}]
    netem = []
    for now in (0.0, 5.0, 10.0):
        clock[0], before = now, len(net.ran)
        assert tracer.tick(None, start) is None
        netem.append([argv for h, argv in net.ran[before:] if h == "h1" and "netem" in argv and "del" not in argv])
    assert [r["delay_ms"] for r in tracer.rows] == [100.0, None, 100.0]
    assert netem[0] and not netem[1] and netem[2], "row 2 leaves no delay, as the file (no delay of its own) says"


def test_faults_on_a_traced_link_stay_on_top_of_its_rows_until_undone(tmp_path, monkeypatch):
    extra = ("workload: {steps_per_epoch: 20}\nfaults:\n"
             "  - {at: 7s, action: set_loss, link: [h1, s1], loss: 1%, duration: 10s}\n"
             "  - {at: 8s, action: set_bw, link: [h1, s1], bw: 1mbit, duration: 6s}\n")
    exp = load_spec(spec_file(tmp_path, "{trace: steps.csv}", extra))
    net, clock = Net(exp, monkeypatch), [0.0]
    monkeypatch.setattr(run_traces.time, "time", lambda: clock[0])
    tracer = run_traces.Tracer([lt for lt in traces.link_traces(exp) if lt.a == "h1"], net, 20)
    applier = run_traces.faults.Applier(exp.faults, net, [], 20, tmp_path / "faults.json")
    shaped = []
    for now in (0.0, 6.1, 7.0, 8.0, 12.2, 14.1, 17.1):
        clock[0], before = now, len(net.ran)
        assert applier.tick(None, [{"event": "start", "t": 0.0}]) is None
        assert tracer.tick(None, [{"event": "start", "t": 0.0}]) is None
        h1 = [argv for h, argv in net.ran[before:] if h == "h1" and "del" not in argv]
        shaped.append((next(a[a.index("rate") + 1] for a in h1 if "class" in a),
                       next((a[-1] for a in h1 if "netem" in a), None)))
    assert shaped == [("50000000bit", None), ("5000000bit", None),
                      ("5000000bit", "1.0%"),          # the loss on top of the trace's row in force
                      ("1000000bit", "1.0%"),
                      ("1000000bit", "1.0%"),          # the trace's next row: set_bw's rate holds, the loss stays
                      ("50000000bit", "1.0%"),         # set_bw undone: the trace's row in force
                      ("50000000bit", None)]
    assert [r["bw_bps"] for r in tracer.rows] == [50_000_000, 5_000_000, 50_000_000]


def test_a_mahimahi_gap_is_paced_on_this_machines_clock_under_dilation(tmp_path):
    (tmp_path / "m.trace").write_text("\n".join(["1"] * 100 + ["2500"]))
    exp = load_spec(spec_file(tmp_path, "{trace: m.trace, trace_format: mahimahi}", "emulation: {dilation: 4}\n"))
    emulated = traces.link_traces(exp)[0].trace
    # the gap, and the last half second's one packet (24 kbit/s), at 4 x 8 kbit/s: 8 kbit/s on the wall
    assert [(r.t, r.bw) for r in emulated.rows] == [(0.0, 1_200_000), (1.0, 32_000), (2.5, 32_000)]
    point = resolved(exp)
    assert traces.link_traces(point.wall_spec, 4.0)[0].trace == emulated.scaled(4) == point.wall_traces()[0].trace
    assert min(r.bw for r in emulated.scaled(4).rows) == 8_000
    assert run_traces.capability_problems(point.wall_spec, point.wall_traces()) == []


def test_a_failed_change_fails_the_run_and_is_recorded(tmp_path, monkeypatch):
    exp = load_spec(spec_file(tmp_path, "{trace: steps.csv}"))
    net = Net(exp, monkeypatch)

    def broken(argv, timeout, check):
        raise RuntimeError("tc: no such device")
    net.nodes["h1"].run = broken
    monkeypatch.setattr(run_traces.time, "time", lambda: 5.0)
    tracer = run_traces.Tracer(traces.link_traces(exp)[:1], net, 20)
    problem = tracer.tick(None, [{"event": "start", "t": 0.0}])
    assert "link h1-s1 could not follow its trace (topology.link.trace, row 1): tc: no such device" in problem
    assert tracer.rows[0]["outcome"].startswith("failed: ")


# ---- the example traces ------------------------------------------------------------------------------

def test_the_script_reproduces_the_committed_example_traces(tmp_path):
    subprocess.run([sys.executable, str(REPO / "scripts" / "make_traces.py"), "--out", str(tmp_path)], check=True,
                   capture_output=True)
    for name in ("lte.csv", "diurnal_wan.csv"):
        assert (tmp_path / name).read_text() == (REPO / "topologies" / "traces" / name).read_text(), name
    lte = trace_files.load(str(REPO / "topologies" / "traces" / "lte.csv"))
    rates = [r.bw for r in lte.rows]
    assert min(rates) < 3_000_000 and max(rates) <= 40_000_000 and lte.period == 300
    day = trace_files.load(str(REPO / "topologies" / "traces" / "diurnal_wan.csv"))
    assert day.period == 240 and min(r.bw for r in day.rows) < 30_000_000 < 90_000_000 < max(r.bw for r in day.rows)
