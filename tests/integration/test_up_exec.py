"""`up` keeps a network for you to step into; `exec` runs commands in its hosts from another shell."""
import os
import signal
import time

import pytest

from cli import cli, start_up

pytestmark = pytest.mark.integration



def test_up_then_exec_ping_then_ctrl_c_leaves_nothing(tmp_path, root, no_leftovers):
    assert "no live network" in cli("exec", "h1", "--", "true", timeout=60).stderr
    proc, text = start_up("topologies/smoke.yaml", "--set", "topology.host_overrides.h2.kind=docker",
                          "--set", "checks.iperf=false")
    try:
        assert "h1       10.0.0.1        netns" in text and "h2       10.0.0.2        docker" in text
        ping = cli("exec", "h2", "--", "ping", "-c1", "-W", "2", "10.0.0.1", timeout=60)
        assert ping.returncode == 0 and "1 received" in ping.stdout, ping.stdout + ping.stderr
        name = cli("exec", "h2", "--", "cat", "/etc/hostname", timeout=60)
        assert name.stdout.strip() == "h2", "exec enters the container"
        missing = cli("exec", "h9", "--", "true", timeout=60)
        assert missing.returncode == 2 and "no host 'h9' in the live network (hosts: h1, h2)" in missing.stderr
        assert cli("exec", "h1", "--", "false", timeout=60).returncode == 1, "the command's exit code"
    finally:
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, out[-2000:]
    assert "torn down" in out
    assert "no live network" in cli("exec", "h1", "--", "true", timeout=60).stderr


def test_cleanup_during_up_leaves_the_live_network_working_and_a_second_run_is_refused(tmp_path, root,
                                                                                          no_leftovers):
    import subprocess
    proc, _ = start_up("topologies/smoke.yaml", "--set", "checks.iperf=false")
    try:
        cleaned = cli("cleanup", timeout=120)
        assert cleaned.returncode == 0, cleaned.stdout + cleaned.stderr
        assert "is still alive" in cleaned.stdout
        assert "deleted" not in cleaned.stdout and "killed" not in cleaned.stdout, cleaned.stdout
        assert subprocess.run(["ovs-vsctl", "br-exists", "s1"]).returncode == 0, "the live run's switch stays"
        ping = cli("exec", "h2", "--", "ping", "-c1", "-W", "2", "10.0.0.1", timeout=60)
        assert ping.returncode == 0 and "1 received" in ping.stdout, ping.stdout + ping.stderr
        again = cli("up", "topologies/smoke.yaml", timeout=120)
        said = again.stdout + again.stderr
        assert again.returncode == 1 and "Traceback" not in said, said
        assert f"held by pid {proc.pid}" in said and " up topologies/smoke.yaml" in said, said
        started = time.monotonic()
        run = cli("run", "topologies/smoke.yaml", "--out", tmp_path / "out", "--no-report", timeout=120)
        assert run.returncode == 2 and f"held by pid {proc.pid}" in run.stdout + run.stderr, run.stdout + run.stderr
        assert time.monotonic() - started < 60, "refused at once, not after bringing anything up"
        assert oct(os.stat("/run/dltestbed/live.json").st_mode & 0o777) == "0o600"
    finally:
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, out[-2000:]
