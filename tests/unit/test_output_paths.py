"""Every path the testbed writes: an existing target that is not a regular file (a folder, a symbolic link, a
FIFO, a socket, a device) is refused in one sentence and left as it is; a file or a new path is written."""
import os
import socket
import stat
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analysis import outputs
from testbed.run import results

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KINDS = ("file", "missing", "missing_parent", "folder", "symlink_to_file", "dangling_symlink", "fifo", "socket",
         "device")


def make(tmp, kind):
    """A target of `kind` in the fresh folder tmp; its path."""
    path = tmp / "target"
    if kind == "file":
        path.write_text("old")
    elif kind == "missing_parent":
        path = tmp / "new" / "deeper" / "target"
    elif kind == "folder":
        path.mkdir()
    elif kind == "symlink_to_file":
        (tmp / "real").write_text("old")
        path.symlink_to(tmp / "real")
    elif kind == "dangling_symlink":
        path.symlink_to(tmp / "nowhere")
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "socket":
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(str(path))
        sock.close()
    elif kind == "device":
        if os.geteuid() != 0:
            pytest.skip("mknod of a device needs root")
        os.mknod(path, stat.S_IFCHR | 0o600, os.makedev(1, 7))       # as /dev/full
    return path


def state(path):
    try:
        st_ = os.lstat(path)
    except FileNotFoundError:
        return None
    return (stat.S_IFMT(st_.st_mode), st_.st_ino, path.read_bytes() if stat.S_ISREG(st_.st_mode) else None)


@settings(max_examples=40, deadline=None)
@given(kind=st.sampled_from(KINDS), writer=st.sampled_from(["outputs", "results", "json"]), text=st.text(max_size=50))
def test_no_target_but_a_regular_file_is_ever_replaced(tmp_path_factory, kind, writer, text):
    tmp = tmp_path_factory.mktemp("out")
    path = make(tmp, kind)
    before = state(path)
    write = {"outputs": outputs.write_text, "results": results.atomic_write_text,
             "json": lambda p, t: results.write_json(p, {"t": t})}[writer]
    if kind in ("file", "missing", "missing_parent"):
        write(path, text)
        assert stat.S_ISREG(os.lstat(path).st_mode) and path.read_bytes().decode() == (
            text if writer != "json" else results.json.dumps({"t": text}, indent=2) + "\n")
    else:
        with pytest.raises(outputs.OutputError, match="not a file|is a |not a folder") as err:
            write(path, text)
        assert str(path) in str(err.value) and "\n" not in str(err.value)
        assert state(path) == before
        assert not [p for p in tmp.iterdir() if p.name.startswith(".target.")]     # no temporary file left


def test_run_refuses_a_junit_path_that_is_a_folder_or_a_device_before_anything_starts(tmp_path):
    for target in (tmp_path, "/dev/full"):
        done = subprocess.run([sys.executable, os.path.join(REPO, "run_experiment.py"), "run",
                               os.path.join(REPO, "topologies/smoke.yaml"), "--dry-run", "--junit", str(target)],
                              capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "1000"})
        said = done.stdout + done.stderr
        assert done.returncode == 2 and "Traceback" not in said
        assert f"{target} is a " in said and "not a file" in said
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)
