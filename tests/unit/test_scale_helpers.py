"""Helpers that make 1000-host networks quick: the parallel reachability ping, the batched node
commands (terminal line limit) and their error reports. Nodes are faked; the shell and xargs are real."""
import os
import subprocess
from types import SimpleNamespace

import pytest

from testbed.run.bringup.checks import unreachable
from testbed.net.network import MAX_LINE, NetworkError, batch_lines, run_on_nodes


class LocalNode:
    """A node whose commands run here, with a stub `ping` that answers only `alive` addresses."""

    def __init__(self, tmp_path, alive, flaky=()):
        self.name, self.calls = "h1", 0
        stub = tmp_path / "ping"
        # the last argument is the address; a flaky address fails its first ping only
        stub.write_text("#!/bin/sh\nfor a; do addr=$a; done\n"
                        f"case \" {' '.join(flaky)} \" in *\" $addr \"*) [ -e {tmp_path}/seen-$addr ] || "
                        f"{{ touch {tmp_path}/seen-$addr; exit 1; }};; esac\n"
                        f"case \" {' '.join(alive)} \" in *\" $addr \"*) exit 0;; esac\nexit 1\n")
        stub.chmod(0o755)
        self.env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"}

    def run(self, argv, timeout=30.0):
        self.calls += 1
        return subprocess.run(argv, capture_output=True, text=True, env=self.env, timeout=timeout).stdout


def nodes(count):
    return [SimpleNamespace(name=f"h{i}", address=f"10.0.{i // 250}.{i % 250 + 1}") for i in range(2, count + 1)]


def test_unreachable_names_exactly_the_hosts_that_do_not_answer(tmp_path):
    others = nodes(300)
    dead = {"h7", "h150", "h300"}
    first = LocalNode(tmp_path, [n.address for n in others if n.name not in dead])
    assert unreachable(first, others, parallel=64) == ["h7", "h150", "h300"]


def test_a_host_missed_once_is_pinged_again(tmp_path):
    others = nodes(20)
    first = LocalNode(tmp_path, [n.address for n in others], flaky=[others[3].address])
    assert unreachable(first, others) == [] and first.calls == 2
    assert unreachable(LocalNode(tmp_path, [], flaky=[]), others[:2], tries=1) == ["h2", "h3"]


def test_batch_lines_stay_under_the_terminal_limit_and_keep_every_item_quoted():
    items = [f"qdisc replace dev s1-eth{i} root handle 1: htb default 1" for i in range(1000)] + ["it's"]
    lines = batch_lines("tc -batch -", items)
    assert len(lines) > 1 and all(len(line) <= MAX_LINE for line in lines)
    fed = [subprocess.run(["sh", "-c", line.replace("tc -batch -", "cat")], capture_output=True, text=True).stdout
           for line in lines]
    assert "".join(fed).splitlines() == items


class ShellNode:
    """A Mininet node's sendCmd/waitOutput pair over a real shell."""

    def __init__(self, name):
        self.name, self.sent = name, []

    def sendCmd(self, line):
        self.sent.append(line)
        self._out = subprocess.run(["sh", "-c", line], capture_output=True, text=True).stdout

    def waitOutput(self):
        return self._out


def test_run_on_nodes_sends_each_round_to_all_and_names_the_failures():
    a, b = ShellNode("a"), ShellNode("b")
    run_on_nodes({a: ["true", "true"], b: "true"}, "tc")
    assert len(a.sent) == 2 and len(b.sent) == 1
    with pytest.raises(NetworkError, match=r"tc failed on 1 node\(s\): b: .*no-such-dev"):
        run_on_nodes({a: "true", b: "echo no-such-dev; false"}, "tc")
