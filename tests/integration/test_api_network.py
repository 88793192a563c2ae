"""testbed.api.network on a real network: commands in its hosts, `exec` from another shell, a link
changed and brought down, and teardown on every path: the block's end, an exception, SIGTERM while
inside, and SIGKILL followed by `cleanup`."""
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from cli import cli, interruptible
from testbed import api

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
STAR = {"name": "api-network", "topology": {"template": "star", "hosts": 2, "link": {"bw": "10mbit"}}}
MARKER = "dltb-live-network-test-process"       # in the command line of the processes started in the hosts


def _processes_with(marker: str) -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if entry.name.isdigit() and marker in cmd and "pytest" not in cmd:
            found.append(f"{entry.name} {cmd[:80]}")
    return found


def _started(marker: str, within: float = 60) -> list[str]:
    """The processes with `marker` once there are any (a process popen() started has its command line only
    once it has exec'd: on a loaded machine some time after popen() returned), or none after `within` s."""
    deadline = time.monotonic() + within
    while not (found := _processes_with(marker)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return found


def _sleeper(name: str) -> list[str]:
    return ["python3", "-c", "import time, sys; time.sleep(600)", f"{MARKER}-{name}"]


def test_commands_exec_from_another_shell_links_and_the_end_of_the_block(tmp_path, root, no_leftovers):
    with api.network(STAR) as net:
        ping = net.exec("h2", ["ping", "-c1", "-W", "2", net.ip("h1")])
        assert ping.returncode == 0 and "1 received" in ping.stdout, ping.stdout + ping.stderr
        assert net.exec("h1", ["cat", "/proc/net/dev"]).stdout.count("h1-eth0") == 1, "in h1's namespace"
        other = cli("exec", "h2", "--", "ping", "-c1", "-W", "2", "10.0.0.1", timeout=60)
        assert other.returncode == 0 and "1 received" in other.stdout, other.stdout + other.stderr
        refused = cli("up", "topologies/smoke.yaml", timeout=120)
        assert refused.returncode == 1 and "held by pid" in refused.stdout + refused.stderr
        net.popen("h1", _sleeper("end"))
        down = net.link_down("h2", "s1")
        assert net.exec("h2", ["ping", "-c1", "-W", "1", net.ip("h1")]).returncode != 0
        down.undo()
        assert net.exec("h2", ["ping", "-c3", "-i", "0.2", "-W", "2", net.ip("h1")]).returncode == 0, "up again"
        net.set_link("h2", "s1", bw="3mbit")
        classes = subprocess.run(["tc", "class", "show", "dev", "s1-eth2"], capture_output=True, text=True).stdout
        assert "rate 3Mbit" in classes, classes
        with pytest.raises(subprocess.TimeoutExpired):
            net.exec("h1", ["sleep", "30"], timeout=0.5)
    assert not _processes_with(MARKER)
    assert "no live network" in cli("exec", "h1", "--", "true", timeout=60).stderr


def test_an_exception_inside_tears_everything_down(root, no_leftovers):
    with pytest.raises(ZeroDivisionError):
        with api.network(STAR) as net:
            net.popen("h2", _sleeper("exception"))
            1 / 0
    assert not _processes_with(MARKER)
    with api.network(STAR) as net:         # the lock and the names are free again
        assert net.exec("h1", ["true"]).returncode == 0


SCRIPT = """
import sys, time
sys.path.insert(0, {repo!r})
from testbed import api
try:
    with api.network({spec!r}) as net:
        net.popen("h1", {sleeper!r})
        print("up", flush=True)
        time.sleep(600)
except KeyboardInterrupt as err:
    print("interrupted:", err, flush=True)
    sys.exit(130)
"""


def _start(tmp_path, name: str) -> subprocess.Popen:
    script = tmp_path / f"{name}.py"
    script.write_text(textwrap.dedent(SCRIPT.format(repo=str(REPO), spec=STAR, sleeper=_sleeper(name))))
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, preexec_fn=interruptible)
    deadline = time.monotonic() + 180
    lines = []
    while not lines or lines[-1].strip() != "up":
        assert proc.poll() is None and time.monotonic() < deadline, "".join(lines)[-3000:]
        lines.append(proc.stdout.readline())
    return proc


def test_sigterm_while_inside_tears_down_and_says_so(tmp_path, root, no_leftovers):
    proc = _start(tmp_path, "sigterm")
    assert Path("/sys/class/net/s1").exists() and _started(MARKER)
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130 and "interrupted: signal SIGTERM" in out, out[-2000:]
    assert not Path("/sys/class/net/s1").exists() and not _processes_with(MARKER)


def test_sigkill_while_inside_leaves_what_cleanup_removes(tmp_path, root, no_leftovers):
    proc = _start(tmp_path, "sigkill")
    assert _started(MARKER)
    proc.send_signal(signal.SIGKILL)
    proc.stdout.close()                  # the processes it started inside keep their copy of the pipe open
    proc.wait(timeout=60)
    assert Path("/sys/class/net/s1").exists(), "a killed process cannot tear down: its switch stays"
    result = cli("cleanup", timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "deleted OVS bridge s1" in result.stdout and "forgot the live network" in result.stdout, result.stdout
    assert not Path("/sys/class/net/s1").exists() and not _processes_with(MARKER)
