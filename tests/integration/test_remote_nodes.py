"""Remote nodes over real SSH: Debian's sshd in two network namespaces made here stand in for two
machines (one LAN veth between them, one veth each to this namespace for SSH). They share this
machine's file system, so the venv's python (not resolved) has TensorFlow there."""
import json
import os
import signal
import socket
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

from cli import cli, start_up
from testbed.cleanup import STATE_DIR
from testbed.net.network import node_problems
from testbed.nodes import remote
from testbed.nodes.base import NodeError
from testbed.spec import build_graph, load_spec

REPO = Path(__file__).resolve().parents[2]
PYTHON = str(REPO / ".venv" / "bin" / "python")      # the venv's: resolving the link would lose the venv
pytestmark = pytest.mark.integration

SPEC = """
name: remote-lan
topology:
  hosts: 2
  link: {{bw: 20mbit}}
  host:
    kind: remote
    remote: {{user: root, key_file: {key}, python: {python}, interface: lan0, shape: true}}
  host_overrides:
    h1: {{remote: {{address: {a1}, workdir: {w1}}}}}
    h2: {{remote: {{address: {a2}, workdir: {w2}}}}}
workload: {{strategy: allreduce, fixed: steps, epochs: {epochs}, steps_per_epoch: 10, batch_per_worker: 16,
           model_params: {{width: 64, depth: 1}}}}
checks: {{iperf: {iperf}, ping: true, duration: 2s, attempts: 2, tolerance: 0.2, fail_run: false}}
monitor: {{interval: 0.25s}}
ssh: {{known_hosts: {known}, connect_timeout: 5s}}
"""


def sh(*cmd, check=True):
    return subprocess.run([str(c) for c in cmd], check=check, capture_output=True, text=True)


class Machines:
    """The namespaces, their addresses and the files sshd and the client use."""

    def __init__(self, folder: Path, tag: str):
        self.folder, self.tag = folder, tag
        self.names = [f"dltbrm{tag}{i}" for i in (1, 2)]
        self.addresses = ["10.252.0.1", "10.252.0.2"]
        self.key = folder / "id"
        self.known_hosts = folder / "known_hosts"
        self.sshd: list[subprocess.Popen] = []

    def host_key(self, i: int) -> str:
        return " ".join((self.folder / f"host{i}.pub").read_text().split()[:2])

    def spec(self, folder: Path, known_hosts=None, epochs=1, iperf="true") -> Path:
        path = folder / "remote.yaml"
        path.write_text(SPEC.format(key=self.key, python=PYTHON, a1=self.addresses[0], a2=self.addresses[1],
                                    w1=self.folder / "m1", w2=self.folder / "m2", epochs=epochs, iperf=iperf,
                                    known=known_hosts or self.known_hosts))
        return path

    def processes(self) -> list[str]:
        """What runs on the machines besides sshd (zombies have left their namespace already)."""
        found = []
        for ns in self.names:
            for pid in sh("ip", "netns", "pids", ns, check=False).stdout.split():
                try:
                    cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                except OSError:
                    continue
                if cmd and not cmd.startswith(("sshd", "/usr/sbin/sshd")):
                    found.append(f"{ns}: {pid} {cmd[:100]}")
        return found

    def settled(self, timeout=30.0) -> list[str]:
        deadline = time.monotonic() + timeout
        while self.processes() and time.monotonic() < deadline:
            time.sleep(0.2)
        return self.processes()

    def qdiscs(self) -> list[str]:
        return [sh("ip", "netns", "exec", ns, "tc", "qdisc", "show", "dev", "lan0").stdout for ns in self.names]


SSHD_CONFIG = """Port 22
ListenAddress {address}
HostKey {folder}/host{i}
PidFile {folder}/sshd{i}.pid
AuthorizedKeysFile {folder}/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
Subsystem sftp internal-sftp
PrintMotd no
LogLevel ERROR
"""


@pytest.fixture(scope="module")
def machines(root, tmp_path_factory):
    """Two "machines" with sshd, reachable only from here and from each other; all removed afterwards."""
    m = Machines(tmp_path_factory.mktemp("machines"), str(os.getpid() % 100000))
    a, b = f"rm{m.tag}a", f"rm{m.tag}b"
    try:
        sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "", "-f", m.key)
        (m.folder / "authorized_keys").write_text((m.folder / "id.pub").read_text())
        Path("/run/sshd").mkdir(exist_ok=True)
        for i, ns in enumerate(m.names, 1):
            sh("ip", "netns", "add", ns)
            sh("ip", "-n", ns, "link", "set", "lo", "up")
        sh("ip", "link", "add", a, "type", "veth", "peer", "name", b)          # the LAN between the machines
        for i, (ns, end, address) in enumerate(zip(m.names, (a, b), m.addresses), 1):
            sh("ip", "link", "set", end, "netns", ns)
            sh("ip", "-n", ns, "link", "set", end, "name", "lan0")
            sh("ip", "-n", ns, "addr", "add", f"{address}/24", "dev", "lan0")
            sh("ip", "-n", ns, "link", "set", "lan0", "up")
            here, there = f"rm{m.tag}r{i}", f"rm{m.tag}n{i}"                  # SSH from this namespace
            sh("ip", "link", "add", here, "type", "veth", "peer", "name", there)
            sh("ip", "link", "set", there, "netns", ns)
            sh("ip", "-n", ns, "link", "set", there, "name", "mgmt0")
            sh("ip", "-n", ns, "link", "set", "mgmt0", "up")
            sh("ip", "addr", "add", f"10.253.{i}.1/32", "dev", here)
            sh("ip", "link", "set", here, "up")
            sh("ip", "route", "add", f"{address}/32", "dev", here, "src", f"10.253.{i}.1")
            sh("ip", "-n", ns, "route", "add", f"10.253.{i}.1/32", "dev", "mgmt0")
            sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "", "-f", m.folder / f"host{i}")
            config = m.folder / f"sshd{i}.conf"
            config.write_text(SSHD_CONFIG.format(address=address, folder=m.folder, i=i))
            m.sshd.append(subprocess.Popen(["ip", "netns", "exec", ns, "/usr/sbin/sshd", "-D", "-f", str(config),
                                            "-E", str(m.folder / f"sshd{i}.log")]))
        m.known_hosts.write_text("".join(f"{address} {m.host_key(i)}\n" for i, address in enumerate(m.addresses, 1)))
        for address in m.addresses:
            _wait_for_port(address, 22)
        yield m
    finally:
        for proc in m.sshd:
            proc.terminate()
        for ns in m.names:
            for pid in sh("ip", "netns", "pids", ns, check=False).stdout.split():
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except ProcessLookupError:
                    pass
        for proc in m.sshd:
            proc.wait(10)
        for ns in m.names:
            sh("ip", "netns", "del", ns, check=False)
        for link in (a, b, f"rm{m.tag}r1", f"rm{m.tag}r2"):
            if Path(f"/sys/class/net/{link}").exists():
                sh("ip", "link", "del", link, check=False)


def _wait_for_port(address: str, port: int, timeout=10.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection((address, port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise



def _watch_stage(stage: Path, seen: list, done: threading.Event) -> None:
    """Collect the names of the files staged below `stage` until `done`."""
    while not done.wait(0.1):
        try:
            seen.extend(p.name for p in stage.rglob("*") if p.is_file() and p.name not in seen)
        except OSError:      # a file removed while walked
            pass


def _remote_records() -> list:
    return [r for p in STATE_DIR.glob("run-*.json") for r in json.loads(p.read_text()).get("remote", [])]


def test_two_machine_allreduce_with_checks_shaping_and_usage(machines, no_leftovers, tmp_path):
    out = tmp_path / "out"
    proc = cli("run", machines.spec(tmp_path), "--out", out, "--quiet", "--no-report", timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    row = pd.read_csv(out / "runs.csv").iloc[0]
    assert row["status"] == "ok", row["reason"]
    assert row["node_kinds"] == "remote" and row["workers"] == 2 and row["steps"] == 10
    checks = pd.read_csv(out / "checks.csv")
    ping = checks[checks["tool"] == "ping"].iloc[0]
    iperf = checks[checks["tool"] == "iperf3"].iloc[0]
    print(f"iperf3 h2->h1 over tc on lan0: {iperf['measured_bps'] / 1e6:.2f} of 20 Mbit/s; ping {ping['rtt_ms']} ms")
    assert ping["passed"] and (ping["src"], ping["dst"]) == ("h2", "h1")
    assert iperf["configured_bps"] == 20e6 and 0.3 <= iperf["ratio"] <= 1.0, "shaped by tc on the machines"
    steps = pd.read_csv(out / "steps.csv")
    assert set(steps["host"]) == {"h1", "h2"}
    usage = pd.read_csv(out / "usage.csv")
    assert set(usage["node"]) == {"h1", "h2"}
    for node, rows in usage.groupby("node"):
        assert rows["cpu_pct"].max() > 10, f"{node} trained, so its processes used CPU"
        assert rows["rss_bytes"].max() > 100 * 2**20, f"{node} held TensorFlow in memory"
        assert rows["tx_bytes"].iloc[-1] > rows["tx_bytes"].iloc[0], f"{node} sent gradients on lan0"
    run = next((out / "runs").iterdir())
    facts = {h["name"]: h["facts"] for h in json.loads((run / "topology.json").read_text())["hosts"]}
    assert facts["h1"]["host_key"] == machines.host_key(1) and facts["h1"]["host_key_in_known_hosts"] is True
    for stem in ("h1-worker0", "h2-worker1"):      # streamed back from each machine
        assert json.loads((run / f"{stem}.events.jsonl").read_text().splitlines()[-1])["event"] == "done"
    secret = (machines.folder / "id").read_text().split("\n")[1]
    for f in run.rglob("*"):
        assert secret not in f.read_text(errors="replace"), f"{f.name} holds key material"
    assert (machines.folder / "m1" / "workloads" / "train.py").exists()
    assert machines.settled() == [], "nothing of the run is left on the machines"
    assert all("htb" not in q for q in machines.qdiscs()), "the shaping was removed"
    assert _remote_records() == []


def test_up_honours_the_files_ssh_section(machines, no_leftovers, tmp_path):
    """`up` logs in with the file's ssh: known_hosts (not ~/.ssh/known_hosts, which lacks these
    machines' keys), as `run` does, and `exec` reaches each machine through it."""
    proc, text = start_up(machines.spec(tmp_path, iperf="false"))
    try:
        assert "remote" in text.split("up: ")[0], text
        hosts = json.loads((STATE_DIR / "live.json").read_text())["hosts"]
        assert f"UserKnownHostsFile={machines.known_hosts}" in hosts["h2"]["prefix"]
        there = cli("exec", "h2", "--", "ip", "-o", "-4", "addr", "show", "dev", "lan0", timeout=60)
        assert there.returncode == 0 and f"inet {machines.addresses[1]}/24" in there.stdout, there.stderr
    finally:
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0 and "torn down" in out, out[-2000:]
    assert machines.settled() == [] and _remote_records() == []


def test_code_copy_skips_unchanged_files(machines, tmp_path):
    target = remote.Target(machines.addresses[0], key_file=str(machines.key), known_hosts=str(machines.known_hosts))
    machine = remote.Connection(target)
    try:
        with machine.sftp() as sftp:
            first = remote.sync_code(sftp, str(tmp_path / "code"))
            second = remote.sync_code(sftp, str(tmp_path / "code"))
    finally:
        machine.close()
    assert first[0] == str(tmp_path / "code") and first[1] >= 5 and second[1] == 0


def test_a_machine_without_sftp_is_refused_in_one_sentence_that_says_how_to_enable_it(machines, tmp_path):
    config = tmp_path / "nosftp.conf"
    config.write_text(SSHD_CONFIG.format(address=machines.addresses[0], folder=machines.folder, i=1)
                      .replace("Port 22", "Port 2222").replace("sshd1.pid", "nosftp.pid")
                      .replace("Subsystem sftp internal-sftp\n", ""))
    sshd = subprocess.Popen(["ip", "netns", "exec", machines.names[0], "/usr/sbin/sshd", "-D", "-f", str(config),
                             "-E", str(tmp_path / "nosftp.log")])
    try:
        _wait_for_port(machines.addresses[0], 2222)
        (tmp_path / "known_hosts").write_text(f"[{machines.addresses[0]}]:2222 {machines.host_key(1)}\n")
        target = remote.Target(machines.addresses[0], port=2222, key_file=str(machines.key),
                               known_hosts=str(tmp_path / "known_hosts"))
        machine = remote.Connection(target)
        try:
            with pytest.raises(NodeError, match=r"refused an SFTP session .*Subsystem sftp internal-sftp"):
                machine.sftp()
        finally:
            machine.close()
    finally:
        sshd.terminate()
        sshd.wait(10)


def test_unknown_host_key_is_refused_unless_accepted(machines, no_leftovers, tmp_path):
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    spec = machines.spec(tmp_path, known_hosts=empty, iperf="false")
    refused = cli("run", spec, "--out", tmp_path / "refused", "--quiet", "--no-report", timeout=300)
    assert refused.returncode == 2, refused.stderr[-2000:]
    assert "topology.host_overrides.h1.remote.address: h1: root@10.252.0.1:22: unknown host key ssh-ed25519 SHA256:" \
        in refused.stderr
    assert "ssh.accept_unknown_host_keys: true" in refused.stderr
    assert not (tmp_path / "refused" / "runs").exists(), "nothing started"
    accepted = cli("run", spec, "--out", tmp_path / "ok", "--quiet", "--no-report",
                   "--set", "ssh.accept_unknown_host_keys=true", timeout=600)
    assert accepted.returncode == 0, accepted.stderr[-3000:]
    assert "accepted the unknown host key" in accepted.stderr
    run = next((tmp_path / "ok" / "runs").iterdir())
    facts = json.loads((run / "topology.json").read_text())["hosts"][1]["facts"]
    assert facts["host_key"] == machines.host_key(2) and facts["host_key_in_known_hosts"] is False
    assert machines.settled() == []


def test_changed_host_key_is_refused_even_when_unknown_keys_are_accepted(machines, tmp_path):
    wrong = tmp_path / "known_hosts"
    wrong.write_text(f"{machines.addresses[0]} {machines.host_key(2)}\n{machines.addresses[1]} {machines.host_key(2)}\n")
    spec = load_spec(machines.spec(tmp_path, known_hosts=wrong), ["ssh.accept_unknown_host_keys=true"])
    remote._probe.cache_clear()
    problems = dict(node_problems(build_graph(spec.topology, spec.ssh)))
    assert "the host key has CHANGED" in problems["topology.host_overrides.h1.remote.address"]
    assert "topology.host_overrides.h2.remote.address" not in problems


def _start_long_run(machines, tmp_path):
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, str(REPO / "run_experiment.py"), "run", str(machines.spec(tmp_path, epochs=200)),
                             "--out", str(out), "--quiet", "--no-report", "--set", "checks.iperf=false"], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 600     # (TensorFlow starts slowly on a busy machine)
    while not [p for p in out.glob("runs/*/h2-worker1.events.jsonl") if '"epoch"' in p.read_text()]:
        assert proc.poll() is None and time.monotonic() < deadline, proc.stdout.read()[-3000:] if proc.poll() else "slow"
        time.sleep(0.5)
    assert len(machines.processes()) >= 4, "two workers and two samplers are running"
    return proc


def test_ctrl_c_ends_the_remote_processes(machines, no_leftovers, tmp_path):
    proc = _start_long_run(machines, tmp_path)
    proc.send_signal(signal.SIGINT)
    output, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130, output[-3000:]
    assert machines.settled() == []
    assert all("htb" not in q for q in machines.qdiscs())
    assert _remote_records() == []


def test_cleanup_after_sigkill_reconnects_and_ends_them(machines, no_leftovers, tmp_path):
    proc = _start_long_run(machines, tmp_path)
    proc.kill()                 # what it started there ends when it next writes to the lost connection,
    proc.communicate(timeout=30)  # or by cleanup; the guard there removes the shaping
    assert _without_htb(machines, 30), machines.qdiscs()
    done = cli("cleanup", timeout=120)
    assert done.returncode == 0, done.stderr
    print(done.stdout)
    assert "process(es) of run" in done.stdout and "removed shaping from lan0" in done.stdout
    assert machines.settled() == []
    assert all("htb" not in q for q in machines.qdiscs())
    assert _remote_records() == []


def test_remote_shaping_spares_ssh_and_is_undone_there_when_this_side_dies(machines, no_leftovers, tmp_path):
    """The shaped interface here is the one SSH uses (mgmt0), at 8 kbit/s: SSH still carries 2 MB in
    seconds, because only traffic to the run's other machines is shaped; after a SIGKILL of `up`,
    the guard on each machine removes the shaping by itself."""
    spec = machines.spec(tmp_path, iperf="false")
    spec.write_text(spec.read_text().replace("interface: lan0", "interface: mgmt0").replace("20mbit", "8kbit"))
    proc, _ = start_up(spec)
    try:
        shaped = [sh("ip", "netns", "exec", ns, "tc", "class", "show", "dev", "mgmt0").stdout for ns in machines.names]
        assert all("rate 8Kbit" in q for q in shaped), shaped
        started = time.monotonic()
        bulk = cli("exec", "h2", "--", "head", "-c", "2000000", "/dev/zero", timeout=120)
        assert bulk.returncode == 0 and len(bulk.stdout) == 2000000, bulk.stderr
        assert time.monotonic() - started < 30, "SSH crossed the 8 kbit/s shaper (it would take 2000 s)"
    finally:
        proc.kill()
        proc.communicate(timeout=30)
    assert _without_htb(machines, 30, "mgmt0"), "the guards removed the shaping"
    assert cli("cleanup", timeout=120).returncode == 0
    assert machines.settled() == [] and _remote_records() == []


def _without_htb(machines, timeout: float, dev: str = "lan0") -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all("htb" not in sh("ip", "netns", "exec", ns, "tc", "qdisc", "show", "dev", dev).stdout
               for ns in machines.names):
            return True
        time.sleep(0.5)
    return False


def test_a_users_script_and_the_callback_run_on_the_machines(machines, no_leftovers, tmp_path):
    job = tmp_path / "job"            # the script, a file it lists, and one it does not: never copied
    job.mkdir()
    shutil.copy(REPO / "tests" / "fixtures" / "scripts" / "mwms_tutorial.py", job)
    (job / "notes.txt").write_text("listed\n")
    (job / "secret.txt").write_text("not listed\n")
    out = tmp_path / "out"
    staged, done = [], threading.Event()
    watcher = threading.Thread(target=_watch_stage, args=(machines.folder / "m2" / "stage", staged, done))
    watcher.start()
    proc = cli("run", machines.spec(tmp_path, iperf="false"), "--out", out, "--quiet", "--no-report",
               "--set", f"workload.script={job / 'mwms_tutorial.py'}", "--set", "workload.files=[notes.txt]",
               "--set", "workload.args=[--callback]", timeout=600)
    done.set()
    watcher.join()
    assert proc.returncode == 0, proc.stderr[-3000:]
    row = pd.read_csv(out / "runs.csv").iloc[0]
    assert row["status"] == "ok", row["reason"]
    steps = pd.read_csv(out / "steps.csv")
    assert set(steps["host"]) == {"h1", "h2"} and (steps["kind"] == "step").sum() >= 10
    assert {"mwms_tutorial.py", "notes.txt"} <= set(staged) and "secret.txt" not in staged, staged
    assert not any((machines.folder / "m2" / "stage").iterdir())       # removed at the end
    assert machines.settled() == []
