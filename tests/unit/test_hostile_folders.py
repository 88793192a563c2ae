"""Commands that read a results folder (report, predict, compare, report --compare) and a photo (caption)
answer hostile content with one sentence naming the file and exit code 2, never a traceback, and graph
files of nested entities are read in linear time."""
import shutil
import subprocess
import sys
import time
import zlib
from pathlib import Path

import pytest

pytestmark = pytest.mark.timing       # times itself: run with the CPUs to itself (testbed.sh test)

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests" / "fixtures" / "report_small"


def cli(*args):
    return subprocess.run([sys.executable, str(REPO / "run_experiment.py"), *map(str, args)], cwd=REPO,
                          capture_output=True, text=True, timeout=120)


def refused(proc, *words):
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr and all(w in proc.stderr for w in words), proc.stderr


@pytest.fixture
def folder(tmp_path):
    out = tmp_path / "exp"
    shutil.copytree(FIXTURE, out)
    return out


def test_a_runs_csv_that_is_not_utf8_is_named_by_report_and_predict(folder):
    (folder / "runs.csv").write_bytes(b"run_id,hosts\n\xff\xfe\xfa,1\n")
    refused(cli("report", folder), str(folder / "runs.csv"), "not UTF-8")
    refused(cli("predict", folder, "--nodes", "1,2"), str(folder / "runs.csv"), "not UTF-8")
    refused(cli("report", FIXTURE, "--compare", folder), str(folder / "runs.csv"))


def test_a_runs_csv_of_nul_bytes_is_said_to_hold_no_table(folder):
    with open(folder / "runs.csv", "wb") as fh:
        fh.truncate(64 * 2**20)                  # 64 MiB of NUL bytes, sparse
    t0 = time.monotonic()
    refused(cli("report", folder), str(folder / "runs.csv"), "holds no table the testbed writes")
    assert time.monotonic() - t0 < 60
    (folder / "checks.csv").write_text("nothing,like,it\n1,2,3\n")
    (folder / "runs.csv").write_bytes((FIXTURE / "runs.csv").read_bytes())
    refused(cli("report", folder), str(folder / "checks.csv"), "holds no table the testbed writes")


def test_a_stored_spec_whose_figures_are_not_numbers_is_named(folder):
    spec = sorted((folder / "runs").iterdir())[0] / "spec.yaml"
    spec.write_text("name: small\nworkload: {epochs: 1}\nreport: {job: {samples: 'a million'}}\n")
    before = [p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()]
    refused(cli("report", folder), str(spec), "report.job.samples: 'a million' is not a positive number")
    assert [p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()] == before     # nothing written


def test_a_run_id_column_of_numbers_is_read_as_text(folder):
    runs = (folder / "runs.csv").read_text().splitlines()
    head, rows = runs[0], runs[1:]
    cols = head.split(",")
    at = cols.index("run_id")
    numbered = [",".join(str(i) if j == at else c for j, c in enumerate(r.split(","))) for i, r in enumerate(rows)]
    (folder / "runs.csv").write_text("\n".join([head] + numbered * 50) + "\n")
    proc = cli("report", folder)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr


def test_caption_names_a_photo_that_is_no_image_before_tensorflow(tmp_path):
    run_dir = tmp_path / "runs" / "r1"
    (run_dir / "model").mkdir(parents=True)
    (run_dir / "model" / "weights.npz").write_bytes(b"x")
    fake, empty, huge = tmp_path / "a.jpg", tmp_path / "b.png", tmp_path / "c.png"
    fake.write_text("not an image")
    empty.write_bytes(b"")
    from PIL import Image
    Image.new("L", (1, 1)).save(huge)
    data = bytearray(huge.read_bytes())
    data[16:24] = (100_000).to_bytes(4, "big") * 2          # the PNG header's width and height ...
    data[29:33] = zlib.crc32(bytes(data[12:29])).to_bytes(4, "big")     # ... with its checksum
    huge.write_bytes(bytes(data))
    for photo, words in ((fake, "not an image"), (empty, "not an image"), (huge, "100000 x 100000 pixels")):
        t0 = time.monotonic()
        refused(cli("caption", run_dir, "--photo", photo, "--random-weights"), str(photo), words)
        assert time.monotonic() - t0 < 30


def test_nested_entities_in_a_graph_file_are_read_in_linear_time(tmp_path):
    from testbed.readers.graphfile import GraphFileError, read_graph
    entities = ['<!ENTITY e0 "' + "x" * 64 + '">'] + [f'<!ENTITY e{i} "&e{i - 1};&e{i - 1};">' for i in range(1, 16)]
    text = (f'<?xml version="1.0"?><!DOCTYPE graphml [{"".join(entities)}]>'
            '<graphml xmlns="http://graphml.graphdrawing.org/xmlns"><key id="d0" for="node" attr.name="label" '
            'attr.type="string"/><graph edgedefault="undirected"><node id="n0"><data key="d0">&e15;</data></node>'
            '</graph></graphml>')
    path = tmp_path / "bomb.graphml"
    path.write_text(text)
    t0 = time.monotonic()
    try:
        read_graph(str(path))
    except GraphFileError:
        pass
    assert time.monotonic() - t0 < 10
