"""The remote kind without SSH: spec rules, TF_CONFIG from the machines' addresses, quoting of remote
command lines, what preflight reports, and RemotePopen over a fake channel that runs the command
line in a local shell (as a machine's login shell would)."""
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from spec_helpers import issues, load

from testbed.spec.graph import build_graph
from testbed.net.network import node_problems
from testbed.nodes import remote, remote_agent
from testbed.nodes.remote import machine_problems
from testbed.nodes.ssh_connection import RemotePopen, command_line, exit_code
from testbed.roles import assign_tasks, cluster_spec
from testbed.spec import load_spec
from testbed.run.point.point import resolve_all
from testbed.run.training.training import job_document
from workloads import train

pytestmark = pytest.mark.timing       # times itself: run with the CPUs to itself (testbed.sh test)

TWO_PCS = """
name: lan
topology:
  hosts: 2
  link: {bw: 1gbit}
  host:
    kind: remote
    remote: {user: dl, python: /opt/tf/bin/python, interface: eth0}
  host_overrides:
    h1: {remote: {address: 192.168.1.10}}
    h2: {remote: {address: pc2.lan, port: 2222}}
"""


def test_remote_settings_merge_field_by_field_and_give_the_hosts_their_addresses(tmp_path):
    hosts = build_graph(load(tmp_path, TWO_PCS).topology).hosts
    assert [(h.name, h.ip, h.kind) for h in hosts] == [("h1", "192.168.1.10", "remote"), ("h2", "pc2.lan", "remote")]
    assert [(h.setting("remote").user, h.setting("remote").python, h.setting("remote").port) for h in hosts] == [
        ("dl", "/opt/tf/bin/python", None), ("dl", "/opt/tf/bin/python", 2222)]
    target = remote.Target.of(hosts[1])
    assert (target.label, target.key_name, target.accept_unknown) == ("dl@pc2.lan:2222", "[pc2.lan]:2222", False)


def test_tf_config_is_built_from_the_machines_addresses(tmp_path, monkeypatch):
    spec = load(tmp_path, TWO_PCS)
    hosts = build_graph(spec.topology, spec.ssh).hosts
    tasks = assign_tasks(spec.workload, [h.name for h in hosts])
    cluster = cluster_spec(tasks, {h.name: h.ip for h in hosts})     # what Training does with node.address
    assert cluster == {"worker": ["192.168.1.10:50501", "pc2.lan:50501"]}
    for name in ("TF_CONFIG", "TF_USE_LEGACY_KERAS", "GRPC_FAIL_FAST", "TF_CPP_MIN_LOG_LEVEL"):
        monkeypatch.delenv(name, raising=False)                      # restored after the test
    train.set_environment(job_document(spec.workload, cluster), "worker", 1)
    assert json.loads(os.environ["TF_CONFIG"]) == {"cluster": cluster, "task": {"type": "worker", "index": 1}}


def test_the_thesis_physical_file_is_one_pc_then_two():
    from testbed.spec import expand_points
    exp = load_spec("topologies/thesis_physical_remote.yaml", ["topology.host.remote.address=10.1.1.11",
                                                               "topology.host_overrides.h1.remote.address=10.1.1.10"])
    graphs = [build_graph(p.spec.topology, p.spec.ssh) for p in expand_points(exp)]
    assert {tuple(h.ip for h in g.hosts) for g in graphs} == {("10.1.1.10",), ("10.1.1.10", "10.1.1.11")}


@pytest.mark.parametrize("body,expected", [
    ("  host_overrides: {h1: {remote: {address: 10.1.1.1}}}\n",
     "4: topology.host_overrides.h1.remote: remote is for remote nodes, and h1 is kind netns (set kind: remote)"),
    ("  host: {remote: {address: 10.1.1.1}}\n",
     "4: topology.host.remote: remote is for remote nodes, and no host is kind remote"),
    ("  host: {kind: remote, remote: {python: /usr/bin/python3, interface: eth0}}\n",
     "4: topology.host.remote.address: h1 is kind remote and needs remote.address"),
    ("  host: {kind: remote}\n  host_overrides:\n    h1: {remote: {address: a, interface: eth0}}\n",
     "6: topology.host_overrides.h1.remote.python: h1 is kind remote and needs remote.python"),
    ("  host: {kind: remote, remote: {address: 'a;reboot', python: p, interface: eth0}}\n",
     "4: topology.host.remote.address: 'a;reboot' is not a valid address"),
    ("  host: {kind: remote, remote: {address: a, python: '/my python', interface: eth0}}\n",
     "4: topology.host.remote.python: '/my python' is not a valid path on the machine"),
    ("  host: {kind: remote, remote: {address: a, python: p, interface: averyverylongname0}}\n",
     "4: topology.host.remote.interface: 'averyverylongname0' is not a valid interface name"),
    ("  host: {kind: remote, remote: {address: a, python: p, interface: eth0, user: '-oProxy'}}\n",
     "4: topology.host.remote.user: '-oProxy' is not a valid user name"),
    ("  host: {kind: remote, remote: {adress: a}}\n",
     "4: topology.host.remote.adress: unknown key 'adress' in topology.host.remote; did you mean 'address'?"),
    ("  host: {kind: remote, cpu: 0.5, remote: {address: a, python: p, interface: eth0}}\n",
     "4: topology.host.cpu: cpu limits are not applied on real machines"),
    ("  host: {kind: remote, remote: {address: a, python: p, interface: eth0}}\n",
     "4: topology.host.remote.address: h2 and h1 are the same machine (a)"),
    ("  host: {kind: remote, remote: {address: a, python: p, interface: eth0}}\n  host_overrides: {h2: {kind: netns}}\n",
     "4: topology.host.kind: remote hosts cannot share a topology with emulated ones (h2)"),
])
def test_bad_remote_settings_are_refused_with_file_line_and_key(tmp_path, body, expected):
    errors = [str(e) for e in issues(tmp_path, "name: k\ntopology:\n  hosts: 2\n" + body)]
    assert any(expected in e for e in errors), errors


def test_ssh_settings_have_units_and_strict_booleans(tmp_path):
    assert load(tmp_path, "name: k\nssh: {connect_timeout: 3s}\n").ssh.connect_timeout == 3.0
    errors = [str(e) for e in issues(tmp_path, "name: k\nssh:\n  connect_timeout: 3\n  accept_unknown_host_keys: 'y'\n")]
    assert any(":3: ssh.connect_timeout: time needs a unit" in e or ":3: ssh.connect_timeout:" in e for e in errors), errors
    assert any(":4: ssh.accept_unknown_host_keys:" in e for e in errors), errors


# ---- quoting ------------------------------------------------------------------------------------

HOSTILE = ["a b", "it's", '"q"', "$(touch PWNED)", "`touch PWNED`", "; touch PWNED", "*", "x\ny", "--", ""]


def test_remote_command_lines_pass_every_word_verbatim(tmp_path):
    """The line runs under a login shell (bash here, as sshd does) and argv arrives untouched."""
    cwd = tmp_path / "work dir; $(touch PWNED)"
    cwd.mkdir()
    show = [sys.executable, "-c", "import json, os, sys; print(json.dumps([os.getcwd(), os.environ['V'], sys.argv[1:]]))"]
    line = command_line(show + HOSTILE, str(cwd), {"V": "it's $(touch PWNED)"})
    proc = subprocess.run(["bash", "-c", line], cwd=tmp_path, capture_output=True, text=True, timeout=30)
    first, rest = proc.stdout.split("\n", 1)
    assert first.startswith("dltestbed-pgid ") and int(first.split()[1]) > 1
    assert json.loads(rest) == [str(cwd), "it's $(touch PWNED)", HOSTILE]
    assert not list(tmp_path.rglob("PWNED")), "nothing of argv was run by a shell"


def test_bad_environment_names_and_exit_codes():
    with pytest.raises(ValueError, match="not an environment variable name"):
        command_line(["true"], "/", {"A=B": "x"})
    assert [exit_code(s) for s in (0, 1, 125, 137, 143, 255)] == [0, 1, 125, -9, -15, 255]


# ---- preflight ----------------------------------------------------------------------------------

def fake_machine(missing=(), python_ok=True, tf_ok=True, interface="eth0", uid="1000"):
    """run(argv) -> (status, output) of a machine lacking what it is told to."""
    def run(argv):
        if argv[1:3] == ["-c", "import sys; print(sys.version_info >= (3, 9))"]:
            return (0, "True\n") if python_ok else (127, f"sh: 1: {argv[0]}: not found\n")
        if argv[1] == "-c" and argv[3:] == ["tensorflow", "tf_keras"]:      # nodes/engines.py's question
            return (0, "\n") if tf_ok else (1, "tensorflow\n")
        if argv[1] == "-c" and argv[3:] == ["torch"]:
            return 1, "torch\n"
        if argv[:2] == ["sh", "-c"]:
            return 0, "".join(f"{t}\n" for t in argv[4:] if t in missing)
        if argv[0] == "test":
            return (0, "") if argv[2] == f"/sys/class/net/{interface}" else (1, "")
        if argv == ["id", "-u"]:
            return 0, uid + "\n"
        raise AssertionError(argv)
    return run


def settings(**kw):
    return SimpleNamespace(**{"python": "/opt/tf/bin/python", "interface": "eth0", "shape": None, **kw})


def test_preflight_says_what_a_machine_lacks():
    assert machine_problems(fake_machine(), settings()) == []
    found = dict(machine_problems(fake_machine(missing=("iperf3", "ss"), tf_ok=False), settings()))
    assert found["python"] == "/opt/tf/bin/python cannot import tensorflow: pip install tensorflow-cpu tf_keras into it"
    assert found["address"] == "missing there: iperf3, ss (Debian/Ubuntu packages: iperf3, iproute2)"
    found = dict(machine_problems(fake_machine(python_ok=False, interface="enp3s0", missing=("tc",)),
                                  settings(shape=True)))
    assert "python /opt/tf/bin/python does not run there" in found["python"] and "not found" in found["python"]
    assert found["interface"].startswith("no interface eth0 there")
    assert "tc" in found["address"] and "needs user root" in found["shape"]
    torch = dict(machine_problems(fake_machine(), settings(), "pytorch"))
    assert torch["python"] == "/opt/tf/bin/python cannot import torch: pip install torch (its CPU build) into it"


def test_preflight_reports_each_host_at_its_own_key(tmp_path, monkeypatch):
    class FakeMachine:
        def __init__(self, target):
            if target.address == "pc2.lan":
                raise remote.NodeError(f"{target.label} did not answer within 10 s: timed out")
            self.exec = lambda argv, timeout: fake_machine(missing=("iperf3",))(argv)

        def close(self):
            pass

    monkeypatch.setattr(remote, "Connection", FakeMachine)
    remote._probe.cache_clear()
    problems = node_problems(build_graph(load(tmp_path, TWO_PCS).topology))
    remote._probe.cache_clear()
    assert problems == [
        ("topology.host_overrides.h1.remote.address", "h1 (dl@192.168.1.10:22): missing there: iperf3 "
         "(Debian/Ubuntu packages: iperf3)"),
        ("topology.host_overrides.h2.remote.address", "h2: dl@pc2.lan:2222 did not answer within 10 s: timed out")]


def test_validate_refuses_a_remote_key_file_that_is_not_there_and_run_a_cluster_one(tmp_path, monkeypatch):
    """A remote host's key file is refused by `validate` (its preflight without contacting nodes) and `run`; a
    cluster server's at `run` and `up` only, since `cluster up` may make it."""
    from testbed.run.bringup import network_up
    from testbed.spec import SpecError, expand_points
    text = TWO_PCS.replace("h1: {remote: {address: 192.168.1.10}}",
                           "h1: {remote: {address: 192.168.1.10, key_file: ~/no-such-key}}")
    exp = load(tmp_path, text)
    monkeypatch.setattr(network_up, "node_problems", lambda graph, progress: [])       # no machine is asked
    for contact in (False, True):
        with pytest.raises(SpecError) as err:
            network_up.preflight(exp, resolve_all(expand_points(exp), 2), contact_nodes=contact)
        assert [(i.key, i.line) for i in err.value.errors] == [("topology.host_overrides.h1.remote.key_file", 9)]
        assert "h1: no such key file: ~/no-such-key" in str(err.value)
    cluster = load(tmp_path, "name: c\ncluster:\n  servers:\n    - {name: a, address: local}\n"
                             "    - {name: b, address: 10.1.1.2, key_file: /etc}\n")
    network_up.preflight(cluster, resolve_all(expand_points(cluster), 2), contact_nodes=False)     # validate: not asked
    with pytest.raises(SpecError, match=r"cluster.servers\[1\].key_file: b: /etc is not a file"):
        network_up.preflight(cluster, resolve_all(expand_points(cluster), 2))


HOST_KEY_MESSAGES = """
import json, types, paramiko
from testbed.nodes import ssh_connection as remote
key = lambda fp: types.SimpleNamespace(get_name=lambda: "ssh-ed25519", fingerprint=fp, get_base64=lambda: "AAAA")
target = remote.Target("10.9.9.9", 2222, "dl", known_hosts="/k/known_hosts")
print(json.dumps([remote.connect_error(target, err) for err in (
    remote.UnknownHostKey(key("SHA256:new")),
    paramiko.BadHostKeyException("[10.9.9.9]:2222", key("SHA256:new"), key("SHA256:old")),
    TimeoutError("timed out"))]))
"""


def test_host_key_messages_say_what_to_do():
    # A fresh interpreter: paramiko fails to import once TensorFlow is loaded (other tests load it), as
    # Debian's python3-cryptography apparently meets TensorFlow's BoringSSL under OpenSSL's symbol names.
    out = subprocess.run([sys.executable, "-c", HOST_KEY_MESSAGES], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[2])
    unknown, changed, silent = json.loads(out.stdout)
    assert "unknown host key ssh-ed25519 SHA256:new (not in /k/known_hosts)" in unknown
    assert "ssh.accept_unknown_host_keys: true" in unknown and "ssh-keyscan -p 2222 10.9.9.9" in unknown
    assert "CHANGED" in changed and "SHA256:old" in changed and "-R '[10.9.9.9]:2222'" in changed
    assert silent == "dl@10.9.9.9:2222 did not answer within 10 s: timed out"


# ---- processes over a fake channel ----------------------------------------------------------------

class LocalChannel:
    """A paramiko Channel stand-in that runs the command line with bash on this machine."""

    def __init__(self):
        self.combine = False

    def set_combine_stderr(self, combine):
        self.combine = combine

    def settimeout(self, timeout):
        pass

    def exec_command(self, line):
        self.proc = subprocess.Popen(["bash", "-c", line], stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT if self.combine else subprocess.PIPE)

    def recv(self, n):
        return os.read(self.proc.stdout.fileno(), n)

    def recv_stderr(self, n):
        return os.read(self.proc.stderr.fileno(), n)

    def exit_status_ready(self):
        return self.proc.poll() is not None

    def recv_exit_status(self):
        return self.proc.wait()


class LocalMachine:
    target = remote.Target("local")

    def __init__(self):
        self.transport = SimpleNamespace(open_session=lambda timeout=None: LocalChannel())

    def exec(self, argv, timeout=30.0):
        proc = subprocess.run(["bash", "-c", shlex.join(argv)], capture_output=True, text=True, timeout=timeout)
        return proc.returncode, proc.stdout + proc.stderr


def test_run_like_popen_collects_output_and_exit_status():
    proc = RemotePopen(LocalMachine(), ["sh", "-c", "echo out; echo err >&2; exit 3"], "/", {},
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.communicate(timeout=10) == ("out\nerr\n", None)
    assert proc.returncode == 3 and proc.pid > 1


def test_terminate_ends_the_whole_group_and_files_get_the_streams(tmp_path):
    out, err = open(tmp_path / "out", "w"), open(tmp_path / "err", "w")
    proc = RemotePopen(LocalMachine(), ["sh", "-c", "sleep 300 & echo started; echo log >&2; wait"], "/", {},
                       stdout=out, stderr=err)
    out.close(), err.close()                    # as Training does right after starting a task
    deadline = time.monotonic() + 10
    while "started" not in (tmp_path / "out").read_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    members = subprocess.run(["pgrep", "-g", str(proc.pid)], capture_output=True, text=True).stdout.split()
    assert len(members) == 2, "the shell and its sleep share the group"
    assert proc.poll() is None
    proc.terminate()
    assert proc.wait(10) == -signal.SIGTERM
    while subprocess.run(["pgrep", "-g", str(proc.pid)]).returncode == 0 and time.monotonic() < deadline + 5:
        time.sleep(0.05)                        # (the sleep's zombie waits for init to reap it)
    assert subprocess.run(["pgrep", "-g", str(proc.pid)]).returncode == 1, "the group is gone"
    assert (tmp_path / "out").read_text() == "started\n" and (tmp_path / "err").read_text() == "log\n"
    with pytest.raises(subprocess.TimeoutExpired):
        RemotePopen(LocalMachine(), ["sleep", "2"], "/", {}).wait(0.1)


# ---- the agent ----------------------------------------------------------------------------------

def test_agent_counts_and_ends_only_the_run_s_processes():
    token = f"t{os.getpid()}"
    ours = subprocess.Popen(["sleep", "60"], env={**os.environ, "DLTESTBED_RUN": token})
    other = subprocess.Popen(["sleep", "60"], env={**os.environ, "DLTESTBED_RUN": token + "x"})
    try:
        assert list(remote_agent.run_pids(token)) == [ours.pid]
        deadline = time.monotonic() + 5
        while (sample := remote_agent.counters(token, "lo"))["rss_bytes"] == 0 and time.monotonic() < deadline:
            time.sleep(0.05)                    # (a process just after exec may have no pages yet)
        assert set(sample) == {"cpu_s", "rss_bytes", "tx_bytes", "rx_bytes", "clock_s"} and sample["rss_bytes"] > 0
        out = subprocess.run([sys.executable, "-c", remote.AGENT, "end", token], capture_output=True, text=True)
        assert out.stdout.strip() == "1" and ours.wait(5) == -signal.SIGKILL and other.poll() is None
    finally:
        ours.kill(), other.kill(), ours.wait(), other.wait()


def test_the_agent_carries_out_the_same_cgroup_plan_as_this_machine_and_reads_and_removes_it(tmp_path):
    """cgroups.limit_plan made on a made-up tree by the agent (as on a cluster server) and here."""
    from testbed.emulation.budgets import quota
    from testbed.nodes import cgroups
    there, here = tmp_path / "there", tmp_path / "here"
    for root in (there, here):
        plan = cgroups.limit_plan("t1-h2-ab", quota(0.25), 2**28, 1, root)
        if root == there:
            agent = subprocess.run([sys.executable, "-c", remote.AGENT, "cgroup", json.dumps(plan)])
            assert agent.returncode == 0
        else:
            cgroups.carry_out(plan)
    files = lambda root: sorted((str(p.relative_to(root)), p.read_text()) for p in root.rglob("*") if p.is_file())  # noqa: E731
    assert files(there) == files(here) == [
        ("cpu/dltestbed/t1-h2-ab/cpu.cfs_period_us", "4000"), ("cpu/dltestbed/t1-h2-ab/cpu.cfs_quota_us", "1000"),
        ("memory/dltestbed/t1-h2-ab/memory.limit_in_bytes", str(2**28))]
    cpu, acct = there / "cpu/dltestbed/t1-h2-ab", there / "cpuacct/dltestbed/t1-h2-ab"
    (cpu / "cpu.stat").write_text("nr_periods 4\nnr_throttled 1\nthrottled_time 5000000\n")
    (acct / "cpuacct.usage").write_text("2000000000\n")
    read = subprocess.run([sys.executable, "-c", remote.AGENT, "cgread", str(cpu), str(acct)],
                          capture_output=True, text=True)
    from testbed.emulation import readers
    assert readers.cpu_stat_of(json.loads(read.stdout)) == readers.read_cpu_stat(cpu, acct) == {
        "nr_periods": 4, "nr_throttled": 1, "throttled_s": 0.005, "usage_s": 2.0}
    for f in (cpu / "cpu.stat", cpu / "cpu.cfs_period_us", cpu / "cpu.cfs_quota_us", acct / "cpuacct.usage"):
        f.unlink()                                    # (a real cgroup's files go with its directory)
    gone = subprocess.run([sys.executable, "-c", remote.AGENT, "uncgroup", str(cpu), str(acct)],
                          capture_output=True, text=True)
    assert gone.stdout.strip() == "2" and not cpu.exists() and not acct.exists()


def test_exec_prefix_quotes_what_follows_for_the_machine_s_shell(tmp_path):
    """`run_experiment.py exec HOST -- ARGV` appends argv to the prefix; ssh would join it with blanks."""
    fake = tmp_path / "ssh"
    fake.write_text(f"#!{sys.executable}\nimport json, sys\nprint(json.dumps(sys.argv[1:]))\n")
    fake.chmod(0o755)
    node = remote.RemoteNode(build_graph(load(tmp_path, TWO_PCS).topology).hosts[1], registry=None)
    argv = ["printf", "%s|", *HOSTILE]
    out = subprocess.run(node.exec_prefix() + argv, capture_output=True, text=True, check=True,
                         env={"PATH": f"{tmp_path}:/usr/bin:/bin"}).stdout
    *options, login, dashes, line = json.loads(out)
    assert (options[:2], login, dashes) == (["-p", "2222"], "dl@pc2.lan", "--")
    assert subprocess.run(["bash", "-c", line], capture_output=True, text=True, cwd=tmp_path).stdout == \
        "".join(f"{word}|" for word in HOSTILE)
    assert not list(tmp_path.rglob("PWNED"))


def test_records_of_a_machine_that_does_not_answer_are_kept_for_the_next_cleanup(tmp_path, monkeypatch):
    from testbed import cleanup

    def refuse(target):
        raise remote.NodeError(f"{target.label} did not answer within 5 s: timed out")

    monkeypatch.setattr(remote, "Connection", refuse)
    machine = {**vars(remote.Target("10.9.9.9")), "host_key": "ssh-ed25519 AAAA"}
    records = [{"machine": machine, "token": "t1", "python": "python3"}, {"machine": machine, "tc": "eth0"}]
    state = cleanup.State(owner_pid=1, pids=[], remote=list(records))
    actions = cleanup.remove_state(state)
    assert actions == ["root@10.9.9.9:22 did not answer within 5 s: timed out: kept for the next cleanup"]
    path = tmp_path / "run-1-1.json"
    path.write_text("{}")
    cleanup.settle(path, state)
    assert json.loads(path.read_text())["remote"] == records
    path.unlink()                              # another cleanup finished it meanwhile: it stays gone
    cleanup.settle(path, state)
    assert not path.exists()


def test_cleanup_finds_processes_by_their_runs_identity_and_spares_a_live_runs(tmp_path):
    """Real processes: one carries the identity of a live run (this test's parent process, taken as
    a live run), one of a run that is over; both run the same command line, so only the identity
    can tell them apart."""
    import subprocess
    import sys
    from testbed import cleanup, owner
    dead = subprocess.run([sys.executable, "-c", "import os; from testbed.owner import identity; print(identity())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    argv = [sys.executable, "-c", "import time; time.sleep(60)  # workloads/train.py"]
    live = owner.identity(os.getppid())
    live_child = subprocess.Popen(argv, env={**os.environ, owner.OWNER_VAR: live})
    dead_child = subprocess.Popen(argv, env={**os.environ, owner.OWNER_VAR: dead})
    try:
        for _ in range(50):
            if owner.process_owner(dead_child.pid) and owner.process_owner(live_child.pid):
                break
            time.sleep(0.02)
        assert not owner.alive(dead) and owner.alive(live)
        strays = cleanup.stray_processes({live})
        assert owner.identity(dead_child.pid) in strays
        assert owner.identity(live_child.pid) not in strays
        assert owner.identity(live_child.pid) in cleanup.stray_processes(set())
        assert cleanup.kill_processes([owner.identity(dead_child.pid)])
        assert dead_child.wait(5) == -9 and live_child.poll() is None
        assert cleanup.kill_processes([str(live_child.pid)]) == []       # a bare pid is never trusted
    finally:
        for child in (live_child, dead_child):
            child.kill()
            child.wait()
