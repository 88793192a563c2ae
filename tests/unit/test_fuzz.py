"""Every reader answers any input with its own error type, within a bound, never another exception:
experiment files (random and mutated), link traces (csv and Mahimahi), GraphML/GML files and results
folders. Property-based (Hypothesis), with a fixed seed and a time budget here; bench/fuzz.py runs the
same properties far longer."""
import io
import os
import time
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from analysis.tables import speedup, tables
from testbed.spec import SpecError
from testbed.readers.graphfile import GraphFileError, read_graph
from testbed.spec.load import load_spec_text
from testbed.readers.traces import TraceError, parse_csv, parse_mahimahi

pytestmark = pytest.mark.timing       # times itself: run with the CPUs to itself (testbed.sh test)

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = int(os.environ.get("DLTB_FUZZ_EXAMPLES", "60"))     # bench/fuzz.py asks for far more
BOUND_S = 5.0                                                   # an answer, whatever the input, within this
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=False, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
SHIPPED = sorted((REPO / "topologies").glob("*.yaml"))


def answered(read, *args, errors=()):
    """read(*args) returns or raises one of `errors`, within BOUND_S."""
    t0 = time.monotonic()
    try:
        read(*args)
    except errors:
        pass
    assert time.monotonic() - t0 < BOUND_S


def mutated(text: str, data) -> str:
    """The text with a few random edits: bytes replaced, deleted, lines duplicated or dropped."""
    chars = list(text)
    for _ in range(data.draw(st.integers(1, 6))):
        if not chars:
            break
        i = data.draw(st.integers(0, len(chars) - 1))
        how = data.draw(st.sampled_from(["replace", "delete", "insert", "newline"]))
        if how == "replace":
            chars[i] = data.draw(st.sampled_from(list(":{}[]-,#&*!|>'\" \t0123456789abcxyz\n")))
        elif how == "delete":
            del chars[i]
        elif how == "insert":
            chars[i:i] = list(data.draw(st.text(max_size=12)))
        else:
            chars[i:i] = ["\n"]
    return "".join(chars)


@seed(20261126)
@FUZZ
@given(data=st.data())
def test_a_mutated_experiment_file_is_refused_by_line_or_loads(data):
    text = data.draw(st.sampled_from(SHIPPED)).read_text()
    answered(load_spec_text, mutated(text, data), "fuzz.yaml", errors=(SpecError,))


@seed(20261126)
@FUZZ
@given(text=st.text(max_size=400))
def test_any_text_as_an_experiment_file(text):
    answered(load_spec_text, text, "fuzz.yaml", errors=(SpecError,))


CSV_CELL = st.one_of(st.floats(allow_nan=True, allow_infinity=True).map(str), st.integers(-10**30, 10**30).map(str),
                     st.text(max_size=8))


@seed(20261126)
@FUZZ
@given(header=st.sampled_from(["t[s],bw[mbit]", "t[s],bw[mbit],delay[ms],loss[%]", "t,bw", "", "bw[kbit],t[ms]"]),
       rows=st.lists(st.lists(CSV_CELL, max_size=5), max_size=30))
def test_any_csv_trace(header, rows):
    text = header + "\n" + "\n".join(",".join(r) for r in rows)
    answered(parse_csv, text, "fuzz.csv", errors=(TraceError,))


@seed(20261126)
@FUZZ
@given(lines=st.lists(st.one_of(st.integers(-10**6, 10**9).map(str), st.text(max_size=6)), max_size=200),
       granularity=st.floats(0.001, 10))
def test_any_mahimahi_trace(lines, granularity):
    answered(parse_mahimahi, "\n".join(lines), granularity, "fuzz.trace", errors=(TraceError,))


GRAPHML = (REPO / "topologies" / "examples" / "wan_graph.graphml")


@seed(20261126)
@FUZZ
@given(data=st.data())
def test_a_mutated_graph_file(data, tmp_path_factory):
    base = GRAPHML if GRAPHML.exists() else next((REPO / "topologies").rglob("*.graphml"))
    path = tmp_path_factory.mktemp("g") / data.draw(st.sampled_from(["g.graphml", "g.gml"]))
    text = base.read_text() if path.suffix == ".graphml" else 'graph [\n  node [ id 0 label "A" ]\n' \
        '  node [ id 1 label "B" ]\n  edge [ source 0 target 1 LinkSpeedRaw 1000000.0 ]\n]\n'
    path.write_text(mutated(text, data))
    answered(read_graph, str(path), errors=(GraphFileError,))


RUN_COLUMNS = ["experiment", "run_id", "hosts", "bw_bps", "bw", "strategy", "model", "status", "training_time_s",
               "steady_samples_per_s", "steady", "fixed", "global_batch", "workers", "steps"]
CELL = st.one_of(st.none(), st.integers(-5, 10**12), st.floats(allow_nan=True), st.text(max_size=10),
                 st.sampled_from(["ok", "failed", "allreduce", "ps", "=cmd|' /C calc'!A0", "10mbit"]))


@seed(20261126)
@FUZZ
@given(columns=st.lists(st.sampled_from(RUN_COLUMNS + ["junk", ""]), min_size=1, max_size=12, unique=True),
       rows=st.integers(0, 8), data=st.data(), raw=st.binary(max_size=200), as_bytes=st.booleans())
def test_any_results_folder_is_read_or_refused_by_name(columns, rows, data, raw, as_bytes, tmp_path_factory):
    folder = tmp_path_factory.mktemp("results")
    if as_bytes:
        (folder / "runs.csv").write_bytes(raw)
    else:
        table = pd.DataFrame([{c: data.draw(CELL) for c in columns} for _ in range(rows)], columns=columns)
        (folder / "runs.csv").write_text(table.to_csv(index=False))
    t0 = time.monotonic()
    try:
        exp = tables.load_experiment(folder)
        speedup.summary(tables.counted_runs(exp))
    except tables.ResultsError as err:
        assert str(folder / "runs.csv") in str(err)
    assert time.monotonic() - t0 < BOUND_S


@pytest.mark.parametrize("text", ["=HYPERLINK(\"http://x\")", "+1+1", "-cmd", "@SUM(A1)", "\tx"])
def test_cells_a_spreadsheet_would_run_are_written_as_text(text):
    written = tables.csv_text(pd.DataFrame({"reason": [text, "-1.5", "fine"], "n": [1, -2, 3]}))
    back = pd.read_csv(io.StringIO(written), dtype={"reason": str})
    assert list(back["reason"]) == [f"'{text}", "-1.5", "fine"] and list(back["n"]) == [1, -2, 3]
    assert "'-1.5" not in written


def test_a_stored_spec_is_read_as_it_is_now_each_time(tmp_path):
    """The report reads each run's spec.yaml several times, parsed once per text: a file changed between two
    reads is read as changed, and a bad one refused naming it, within the same few milliseconds."""
    spec = tmp_path / "runs" / "r0" / "spec.yaml"
    spec.parent.mkdir(parents=True)
    for steps in (10, 20, 10):
        spec.write_text(f"workload: {{steps_per_epoch: {steps}}}\n")
        assert tables.run_specs(tmp_path, ["r0"])["r0"]["workload"]["steps_per_epoch"] == steps
    tables.run_specs(tmp_path, ["r0"])["r0"]["workload"]["steps_per_epoch"] = 99    # a caller's change stays its own
    assert tables.run_specs(tmp_path, ["r0"])["r0"]["workload"]["steps_per_epoch"] == 10
    spec.write_text("workload: {steps_per_epoch: 'a million'}\n")
    with pytest.raises(tables.ResultsError, match=str(spec)):
        tables.run_specs(tmp_path, ["r0"])
    spec.write_bytes(b"\xff\xfe not text")
    assert tables.run_specs(tmp_path, ["r0"]) == {}
