"""A live network from Python (testbed/run/live/live_network.py) on a made-up running network: commands and
processes through the node interface, links changed by the faults' own operations, refusals, and the
block's teardown on every path. No network is brought up: the nodes run their commands on this machine
(or only record them), and bring-up is a stand-in."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from contextlib import contextmanager, nullcontext
from pathlib import Path
from types import SimpleNamespace

import pytest

from testbed import api
from testbed.nodes.base import GroupPopen
from testbed.run.faults import faults
from testbed.run.live import live_network
from testbed.run.live.live_network import ChecksFailed, LiveNetwork, open_network, terminate_interrupts
from testbed.run.bringup.network_up import Checked
from testbed.spec import LinkParams

pytestmark = pytest.mark.timing       # times itself: run with the CPUs to itself (testbed.sh test)

REPO = Path(__file__).resolve().parents[2]

STAR = {"name": "live", "topology": {"template": "star", "hosts": 2, "link": {"bw": "10mbit"}}}


class Node:
    """A host whose processes run on this machine (own session, as a node's do); `run` records."""

    def __init__(self, name, address, ran, broken=False):
        self.name, self.address, self.ran, self.broken = name, address, ran, broken
        self.limits = {"cpu": None}

    def env(self, extra):
        return {**os.environ, **extra}

    def popen(self, argv, cwd="/", **kwargs):
        return GroupPopen(argv, cwd=cwd, start_new_session=True, **kwargs)

    def run(self, argv, timeout=30, check=False):
        self.ran.append((self.name, tuple(argv)))
        if check and self.broken:
            raise RuntimeError(f"{argv[0]}: broken")
        return ""


class Net:
    """The parts of a running Network the live network uses: two hosts on s1, tc shaping; commands in the
    root namespace (the switch's ends) recorded instead of run."""

    def __init__(self, monkeypatch, shaping="tc", k=1.0):
        self.ran = []
        monkeypatch.setattr(faults.subprocess, "run", lambda argv, **kw: SimpleNamespace(
            returncode=self.ran.append((None, tuple(argv))) or 0, stdout="", stderr=""))
        self.topology = SimpleNamespace(shaping=shaping, qdisc="htb")
        wall = LinkParams(bw=f"{round(10 / k)}mbit")
        self.graph = SimpleNamespace(links=[SimpleNamespace(a="h1", b="s1", params=wall),
                                            SimpleNamespace(a="h2", b="s1", params=wall)])
        self.qos_rates, self.reshaped = {}, {}
        self.nodes = {h: Node(h, f"10.0.0.{i}", self.ran) for i, h in enumerate(("h1", "h2"), 1)}

    def link_ends(self, a, b):
        host = a if a != "s1" else b
        return [(f"{host}-eth0", self.nodes[host]), (f"s1-eth{host[1]}", None)]


def point(k=1.0):
    """A resolved point's parts the live network reads: its emulated graph and dilation."""
    links = [SimpleNamespace(a=h, b="s1", params=LinkParams(bw="10mbit")) for h in ("h1", "h2")]
    graph = SimpleNamespace(hosts=[SimpleNamespace(name="h1"), SimpleNamespace(name="h2")], links=links)
    return SimpleNamespace(k=k, graph=graph, spec=None)


def live(monkeypatch, shaping="tc", k=1.0) -> tuple[LiveNetwork, Net]:
    net = Net(monkeypatch, shaping, k)
    return LiveNetwork(point(k), SimpleNamespace(net=net)), net


def rates(ran, intf):
    """The HTB rates given to an interface's class, in order."""
    return [argv[argv.index("rate") + 1] for _, argv in ran if intf in argv and "class" in argv and "rate" in argv]


# ---- what it is ----------------------------------------------------------------------------------

def test_hosts_addresses_and_links_as_configured(monkeypatch):
    net, _ = live(monkeypatch)
    assert net.hosts == ["h1", "h2"] and net.ip("h2") == "10.0.0.2"
    assert [(link.a, link.b, link.params.bw, link.up) for link in net.links] == [
        ("h1", "s1", 10_000_000, True), ("h2", "s1", 10_000_000, True)]
    with pytest.raises(ValueError, match=r"no host 'h9' in the network \(hosts: h1, h2\)"):
        net.ip("h9")


# ---- commands and processes ----------------------------------------------------------------------

def test_exec_runs_a_list_and_gives_its_code_and_output(monkeypatch):
    net, _ = live(monkeypatch)
    done = net.exec("h1", ["sh", "-c", 'echo "out $0"; echo err >&2; exit 3', "arg"])
    assert (done.returncode, done.stdout, done.stderr, done.args[:2]) == (3, "out arg\n", "err\n", ["sh", "-c"])
    assert net.exec("h1", ["cat"], input="fed").stdout == "fed"
    assert net.exec("h1", ["sh", "-c", 'echo "$MINE"'], env={"MINE": 7}).stdout == "7\n"
    with pytest.raises(subprocess.CalledProcessError):
        net.exec("h1", ["false"], check=True)


@pytest.mark.parametrize("cmd", ["echo hi; rm -rf /tmp/x", b"ls", [], None])
def test_a_command_is_a_list_never_a_shell_line(monkeypatch, cmd):
    net, _ = live(monkeypatch)
    with pytest.raises(TypeError, match=r"never run through a shell.*\['sh', '-c', 'echo \$HOSTNAME'\]"):
        net.exec("h1", cmd)


def test_exec_past_its_timeout_raises_and_its_process_group_is_gone(monkeypatch, tmp_path):
    net, _ = live(monkeypatch)
    pid_file = tmp_path / "child"
    started = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        net.exec("h1", ["sh", "-c", f'sleep 30 & echo $! > {pid_file}; wait'], timeout=0.5)
    assert time.monotonic() - started < 10
    assert _gone(int(pid_file.read_text()))


def test_processes_still_running_are_stopped_with_their_group_when_the_network_closes(monkeypatch, tmp_path):
    net, _ = live(monkeypatch)
    pid_file = tmp_path / "child"
    server = net.popen("h1", ["sh", "-c", f'sleep 60 & echo $! > {pid_file}; wait'])
    stubborn = net.popen("h2", ["sh", "-c", "trap '' TERM; while :; do sleep 0.1; done"])
    finished = net.popen("h2", ["true"])
    finished.wait()
    while not pid_file.exists() or not pid_file.read_text().strip():
        time.sleep(0.02)
    monkeypatch.setattr(live_network, "STOP_GRACE_S", 0.5)
    net.close()
    assert server.returncode == -signal.SIGTERM and stubborn.returncode == -signal.SIGKILL
    assert _gone(int(pid_file.read_text()))
    with pytest.raises(RuntimeError, match="the network is down"):
        net.exec("h1", ["true"])


def _gone(pid: int) -> bool:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


# ---- links: the faults' operations ---------------------------------------------------------------

def test_set_link_issues_what_a_set_bw_fault_issues_for_the_same_rate(monkeypatch):
    net, ran = live(monkeypatch)
    link = net.set_link("s1", "h1", bw="2mbit")
    assert link.params.bw == 2_000_000 and net.link("h1", "s1").params.bw == 2_000_000
    by_set_link = list(ran.ran)
    fault_net, fault_ran = live(monkeypatch)
    ctx = faults.link_context(fault_ran, [("h1", "s1")])
    fault = SimpleNamespace(action="set_bw", link=["h1", "s1"], bw=2_000_000)
    faults.carry_out(ctx, fault_ran, None, faults.ACTIONS["set_bw"].apply(ctx, fault))
    assert by_set_link == fault_ran.ran and rates(by_set_link, "h1-eth0") == ["2000000bit"]
    assert net.links[0].params.bw == 10_000_000, "links keeps the configured parameters"


def test_under_dilation_a_rate_means_the_emulated_one(monkeypatch):
    net, ran = live(monkeypatch, k=2.0)
    link = net.set_link("h1", "s1", bw="4mbit")
    assert rates(ran.ran, "h1-eth0") == ["2000000bit"] and link.params.bw == 4_000_000
    net.fault("set_bw", link=["h1", "s1"], bw="8mbit")
    assert rates(ran.ran, "h1-eth0")[-1] == "4000000bit"


def test_a_rate_this_machine_cannot_pace_once_divided_by_the_dilation_is_refused(monkeypatch):
    net, ran = live(monkeypatch, k=4.0)
    with pytest.raises(ValueError, match=r"bw: 2000 bit/s cannot be shaped.*\(the rate / dilation 4\)"):
        net.set_link("h1", "s1", bw="8kbit")
    assert ran.ran == []


def test_a_fault_goes_on_top_of_set_link_and_its_undo_leaves_set_links_rate(monkeypatch):
    net, ran = live(monkeypatch)
    net.set_link("h1", "s1", bw="2mbit")
    slower = net.fault("set_bw", link=["h1", "s1"], bw="1mbit")
    assert net.link("h1", "s1").params.bw == 1_000_000
    slower.undo()
    slower.undo()          # once only
    assert net.link("h1", "s1").params.bw == 2_000_000
    assert rates(ran.ran, "h1-eth0") == ["2000000bit", "1000000bit", "2000000bit"]


def test_link_down_and_up_are_the_faults_commands_on_both_ends(monkeypatch):
    net, ran = live(monkeypatch)
    down = net.link_down("h2", "s1")
    assert ran.ran == [("h2", ("ip", "link", "set", "dev", "h2-eth0", "down")),
                       (None, ("ip", "link", "set", "dev", "s1-eth2", "down"))]
    assert net.link("h2", "s1").up is False
    down.undo()
    assert net.link("h2", "s1").up is True and ran.ran[-1][1][-1] == "up"
    net.link_down("h2", "s1")
    up = net.link_up("h2", "s1")
    assert net.link("h2", "s1").up is True
    with pytest.raises(ValueError, match="link_up has no undo"):
        up.undo()


def test_set_cpu_and_its_undo_through_the_node(monkeypatch):
    net, ran = live(monkeypatch)
    calls = []
    for node in ran.nodes.values():
        node.set_cpu = lambda fraction, name=node.name: calls.append((name, fraction))
    net.fault("set_cpu", host="h2", cpu=0.25).undo()
    assert calls == [("h2", 0.25), ("h2", None)]


@pytest.mark.parametrize("call, message", [
    (lambda n: n.set_link("h1", "s1"), "set_link: give bw, delay or loss"),
    (lambda n: n.set_link("h1", "s1", bw="2mbps"), "bw: '2mbps': tc reads 'mbps' as BYTES per second"),
    (lambda n: n.set_link("h1", "s1", bw=2_000_000), "bw: bandwidth needs a unit, e.g. 10mbit"),
    (lambda n: n.set_link("h1", "h2", bw="1mbit"), r"no link between 'h1' and 'h2' \(links: h1-s1, h2-s1\)"),
    (lambda n: n.set_link("h1", "s1", bw="1bit"), r"bw: bandwidth must be at least 8kbit \(got '1bit'\)"),
    (lambda n: n.fault("kill", task="worker 1"), "kill acts on training tasks"),
    (lambda n: n.fault("pause", host="h1"), "pause acts on training tasks"),
    (lambda n: n.fault("set_bw", link=["h1", "s1"], bw="1mbit", duration="2s"), "no at or duration"),
    (lambda n: n.fault("set_bw", link=["h1", "s1"]), "set_bw needs bw"),
    (lambda n: n.fault("set_cpu", cpu=0.5), "set_cpu needs host"),
    (lambda n: n.fault("set_cpu", host="h7", cpu=0.5), "no host 'h7'"),
    (lambda n: n.fault("warp", link=["h1", "s1"]), "no fault action 'warp': link_down, link_up, set_bw"),
    (lambda n: n.fault("set_bw", link=["h1", "s1"], bw="1mbit", speed=3), "speed: Extra inputs are not permitted"),
])
def test_what_cannot_be_done_is_refused_before_any_command(monkeypatch, call, message):
    net, ran = live(monkeypatch)
    with pytest.raises(ValueError, match=message):
        call(net)
    assert ran.ran == []


def test_delay_and_loss_need_netem_on_tc_shaped_links(monkeypatch):
    net, ran = live(monkeypatch, shaping="ovs")
    with pytest.raises(ValueError, match="delay and loss need netem on tc-shaped links; OVS QoS"):
        net.set_link("h1", "s1", delay="5ms")
    with pytest.raises(ValueError, match="topology.shaping: tc"):
        net.fault("set_loss", link=["h1", "s1"], loss="1%")
    monkeypatch.setattr(live_network.shaping, "kernel_has_qdisc", lambda kind: False)
    tc, _ = live(monkeypatch)
    with pytest.raises(ValueError, match="delay and loss needs the netem qdisc, which this kernel lacks"):
        tc.set_link("h1", "s1", delay="5ms")
    assert ran.ran == []


def test_a_failed_change_is_taken_off_again_and_the_next_one_rebuilds_the_tree(monkeypatch):
    net, ran = live(monkeypatch)
    ran.nodes["h1"].broken = True
    with pytest.raises(RuntimeError, match="broken"):
        net.set_link("h1", "s1", bw="2mbit")
    assert net.link("h1", "s1").params.bw == 10_000_000
    assert ran.reshaped[frozenset(("h1", "s1"))].shaped is None


# ---- the block: bring-up as `up`, checks, teardown on every path ---------------------------------

class BringUpStandIn:
    """live.kept as a stand-in: records whether the checks were asked and that the block ended."""

    def __init__(self, monkeypatch, checked=Checked()):
        self.asked, self.ended, self.checked, self.monkeypatch = None, False, checked, monkeypatch
        monkeypatch.setattr(live_network, "run_lock", nullcontext)      # the machine's lock is not taken here
        monkeypatch.setattr(live_network, "preflight", lambda exp, points, progress: None)
        monkeypatch.setattr(live_network.live, "kept", self.kept)

    @contextmanager
    def kept(self, resolved, progress, checks):
        self.asked = checks
        try:
            yield SimpleNamespace(net=Net(self.monkeypatch)), self.checked
        finally:
            self.ended = True


def test_checks_run_when_the_spec_has_a_checks_section_or_when_asked(monkeypatch):
    stand_in = BringUpStandIn(monkeypatch)
    with open_network(api.load(STAR)):
        pass
    assert stand_in.asked is False and stand_in.ended
    with open_network(api.load({**STAR, "checks": {"iperf": False}})):
        pass
    assert stand_in.asked is True
    with open_network(api.load({**STAR, "checks": {"iperf": False}}), checks=False):
        pass
    assert stand_in.asked is False


def test_failed_checks_raise_unless_the_spec_lets_the_run_go_on(monkeypatch):
    rows = [{"tool": "iperf3", "passed": False}]
    stand_in = BringUpStandIn(monkeypatch, Checked(rows, {}, "iperf3 h2->h1 at 0.5 of 10 Mbit/s"))
    with pytest.raises(ChecksFailed, match="the network's checks failed: iperf3 h2->h1") as err:
        with open_network(api.load(STAR), checks=True):
            raise AssertionError("not reached")
    assert err.value.rows == rows and stand_in.ended
    said = []
    with open_network(api.load({**STAR, "checks": {"fail_run": False}}), progress=said.append) as net:
        assert net.checks == rows
    assert said[-1].startswith("WARNING iperf3 h2->h1") and "the network stays up" in said[-1]


@pytest.mark.parametrize("ending", [RuntimeError("a test failed"), KeyboardInterrupt()])
def test_the_block_ends_the_processes_and_the_network_whatever_ends_it(monkeypatch, ending):
    stand_in = BringUpStandIn(monkeypatch)
    with pytest.raises(type(ending)):
        with open_network(api.load(STAR)) as net:
            proc = net.popen("h1", ["sleep", "60"])
            raise ending
    assert proc.returncode == -signal.SIGTERM and stand_in.ended
    with open_network(api.load(STAR)):         # and the next one may start
        pass


def test_one_network_at_a_time_in_a_process_and_a_sweep_brings_up_its_first_point(monkeypatch):
    BringUpStandIn(monkeypatch)
    said = []
    with open_network(api.load({**STAR, "sweep": {"topology.link.bw": ["10mbit", "20mbit"]}}),
                      progress=said.append) as net:
        assert net.spec.topology.link.bw == 10_000_000
        with pytest.raises(RuntimeError, match="holds a live network already"):
            with open_network(api.load(STAR)):
                pass
    assert any("the spec sweeps 2 points; bringing up the first" in s for s in said)


def test_sigterm_inside_the_block_raises_keyboard_interrupt_and_the_handler_is_restored():
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(KeyboardInterrupt, match="SIGTERM"):
        with terminate_interrupts():
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)
    assert signal.getsignal(signal.SIGTERM) is before


def test_sigterm_reaches_the_block_where_the_process_started_with_it_blocked():
    """A harness may start the process with SIGTERM blocked (exec keeps the mask): the block still
    ends on SIGTERM, and the mask it found is back after."""
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    try:
        with pytest.raises(KeyboardInterrupt, match="SIGTERM"):
            with terminate_interrupts():
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(5)
        assert signal.SIGTERM in signal.pthread_sigmask(signal.SIG_BLOCK, [])
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})


def _ignored_and_blocked():
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_the_command_line_is_interrupted_whatever_signal_state_it_inherits(sig):
    """Started with SIGINT ignored and both signals blocked, a command still ends on either."""
    code = ("import time; from testbed.cli.common import interrupt_on_signals; interrupt_on_signals(); "
            "print('ready', flush=True); time.sleep(30)")
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, preexec_fn=_ignored_and_blocked)
    try:
        assert proc.stdout.readline().strip() == "ready"
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=20)
    finally:
        proc.kill()
    assert "KeyboardInterrupt" in err, err[-2000:]


def test_network_checks_the_spec_then_root(monkeypatch):
    from testbed.spec import SpecError
    with pytest.raises(SpecError, match="topology.link.bw"):
        with api.network({"name": "x", "topology": {"hosts": 2, "link": {"bw": 10}}}):
            pass
    monkeypatch.setattr(live_network, "open_network", None)       # never reached: nothing is brought up here
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(PermissionError, match=r"a live network needs root \(Mininet, Open vSwitch and tc\)"):
        with api.network(STAR):
            pass
