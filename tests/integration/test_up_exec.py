"""`up` keeps a network for you to step into; `exec` runs commands in its hosts from another shell."""
import signal

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
