"""Docker containers as nodes on the emulated links: real dockerd, the project's worker image,
Mininet + Open vSwitch + tc, iperf3 and TensorFlow inside the containers."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from cli import cli
from leftovers import containers
from testbed.run.bringup.checks import run_checks
from testbed.run.bringup.hosthealth import healthy, timer_overshoot
from testbed.net.network import Network, node_problems
from testbed.run.bringup.network_up import BringUp
from testbed.run.point.point import resolve_all
from testbed.spec import build_graph, expand_points, load_spec

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.integration

MIXED = """
name: docker-mixed
topology:
  template: star
  hosts: 2
  link: {{bw: 10mbit}}
  shaping: {shaping}
  host_overrides: {{h2: {{kind: docker{limits}}}}}
checks: {{iperf: true, ping: true, pairs: all, duration: 3s}}
workload: {{strategy: allreduce, fixed: steps, epochs: 1, steps_per_epoch: 10}}
"""


@pytest.fixture(scope="module")
def worker_image(root):
    """Docker running and the worker image present (built once, cached between runs)."""
    from testbed.spec.graph import HostNode
    problems = node_problems(type("G", (), {"hosts": [HostNode("h1", "10.0.0.1", kind="docker")], "engine": "tensorflow"})(), print)
    assert not problems, problems


def _write(tmp_path, shaping="tc", limits=""):
    path = tmp_path / "mixed.yaml"
    path.write_text(MIXED.format(shaping=shaping, limits=limits))
    return path



@pytest.mark.parametrize("shaping", ["tc", "ovs"])
def test_container_and_netns_host_pass_the_10mbit_check_both_ways(tmp_path, worker_image, no_leftovers, shaping):
    spec = load_spec(_write(tmp_path, shaping))
    graph = build_graph(spec.topology)
    with Network(graph, spec.topology) as net:
        assert [type(n).kind for n in net.nodes.values()] == ["netns", "docker"]
        before = timer_overshoot()
        rows = run_checks(net, graph, spec.checks, spec.name, "r0")
        after = timer_overshoot()
        hostname = net.nodes["h2"].run(["cat", "/etc/hostname"]).strip()
    assert hostname == "h2", "commands of a docker node run in its container"
    iperf = {(r["src"], r["dst"]): r for r in rows if r["tool"] == "iperf3"}
    ping = [r for r in rows if r["tool"] == "ping"]
    assert set(iperf) == {("h1", "h2"), ("h2", "h1")}
    assert len(ping) == 2 and all(r["passed"] for r in ping)
    for pair, r in iperf.items():
        print(f"{shaping} {pair}: ratio {r['ratio']:.3f}; timers {before} / {after}")
        assert r["ratio"] <= 1.0, f"the shaper must bind on {pair}"
        if healthy(before) and healthy(after):
            assert r["passed"] and r["ratio"] >= 0.90, r
        else:
            assert r["ratio"] >= 0.10, f"traffic must flow even on a stalling VM: {r}"


def test_docker_applies_cpu_and_memory_limits(tmp_path, worker_image, no_leftovers):
    spec = load_spec(_write(tmp_path, limits=", cpu: 0.1, memory: 256mib"))
    with Network(build_graph(spec.topology), spec.topology) as net:
        h2 = net.nodes["h2"]
        config = h2.container.attrs["HostConfig"]
        big = h2.popen(["python3", "-c", "b = bytearray(400 * 2**20); b[::4096] = b'x' * len(b[::4096])"],
                       env=h2.env({}), stderr=subprocess.DEVNULL).wait(timeout=120)
    assert config["CpuQuota"] / config["CpuPeriod"] == pytest.approx(0.1 * os.cpu_count(), rel=0.01)
    assert config["CpuPeriod"] <= 100_000, "a short period, so a small budget is smooth"
    assert config["Memory"] == 256 * 2**20
    assert big != 0, "a process above the container's memory limit must be killed"


def test_a_small_budget_pins_the_container_to_a_cpu(tmp_path, worker_image, no_leftovers):
    """1-core nodes at x4 (0.25 core each) share the first CPU; Docker's own cpuset holds the container."""
    path = _write(tmp_path, limits=", cores: 1")
    path.write_text(path.read_text() + "emulation: {dilation: 4}\n")
    spec = load_spec(path)
    first = str(min(os.sched_getaffinity(0)))
    with BringUp(resolve_all(expand_points(spec), len(os.sched_getaffinity(0)))[0]) as up:
        h2 = up.net.nodes["h2"]
        config = h2.container.attrs["HostConfig"]
        allowed = h2.run(["grep", "Cpus_allowed_list", "/proc/self/status"]).split()[-1]
    assert config["CpusetCpus"] == first and allowed == first
    assert config["CpuQuota"] / config["CpuPeriod"] == pytest.approx(0.25, rel=0.01)


def test_allreduce_with_one_container_worker(tmp_path, worker_image, no_leftovers):
    out = tmp_path / "out"
    proc = cli("run", str(_write(tmp_path)), "--out", str(out), "--quiet", "--no-report",
               "--set", "checks.iperf=false", timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    row = pd.read_csv(out / "runs.csv").iloc[0]
    assert row["status"] == "ok", row["reason"]
    assert row["node_kinds"] == "docker+netns" and row["workers"] == 2
    steps = pd.read_csv(out / "steps.csv")
    assert set(steps["host"]) == {"h1", "h2"}
    assert set(steps.loc[steps["host"] == "h2", "kind"]) >= {"epoch"}
    usage = pd.read_csv(out / "usage.csv")
    by_node = usage.groupby("node")
    assert set(by_node.groups) == {"h1", "h2"}
    for node, rows in by_node:
        assert rows["cpu_pct"].max() > 10, f"{node} trained, so it used CPU"
        assert rows["rss_bytes"].max() > 100 * 2**20, f"{node} holds TensorFlow in memory"
        assert rows["tx_bytes"].iloc[-1] > rows["tx_bytes"].iloc[0], f"{node} sent gradients"


def test_pytorch_ddp_with_one_container_worker(tmp_path, worker_image, no_leftovers):
    """engine pytorch across a netns host and a container: the worker image's CPU build of torch,
    gloo over the 10 Mbit/s link, the torchrun variables set in the container."""
    out = tmp_path / "out"
    proc = cli("run", str(_write(tmp_path)), "--out", str(out), "--quiet", "--no-report",
               "--set", "checks.iperf=false", "--set", "workload.engine=pytorch", timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    row = pd.read_csv(out / "runs.csv").iloc[0]
    assert row["status"] == "ok", row["reason"]
    assert row["engine"] == "pytorch" and row["node_kinds"] == "docker+netns" and row["workers"] == 2
    steps = pd.read_csv(out / "steps.csv")
    on_h2 = steps[(steps["host"] == "h2") & (steps["kind"] == "step")]
    assert on_h2["step"].tolist() == list(range(1, 11))
    usage = pd.read_csv(out / "usage.csv")
    h2 = usage[usage["node"] == "h2"]
    assert h2["tx_bytes"].iloc[-1] - h2["tx_bytes"].iloc[0] > 5 * row["gradient_bytes"], \
        "the container sent its gradients across the link, step after step"


def _single_run(tmp_path, name, *sets):
    out = tmp_path / name
    proc = cli("run", str(_write(tmp_path)), "--out", str(out), "--quiet", "--no-report",
               "--set", "topology.hosts=1", "--set", "topology.host_overrides={}", "--set", "topology.host.kind=docker",
               "--set", "workload.strategy=single", "--set", "workload.steps_per_epoch=30",
               "--set", "checks.iperf=false", "--set", "checks.ping=false", *sets, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    row = pd.read_csv(out / "runs.csv").iloc[0]
    assert row["status"] == "ok", row["reason"]
    return row["time_per_step_s"]


def test_container_with_a_quarter_of_the_machine_trains_slower(tmp_path, worker_image, no_leftovers):
    """Docker's CPU limit holds the container's whole run, the engine's import included (at a tenth of the
    machine the limited run alone took minutes on a slow machine)."""
    limited = _single_run(tmp_path, "limited", "--set", "topology.host.cpu=0.25")
    free = _single_run(tmp_path, "free")
    print(f"time per step: cpu 0.25 {limited:.4f} s, unlimited {free:.4f} s, ratio {limited / free:.2f}")
    assert limited > 1.5 * free


def _start_long_run(tmp_path, out):
    proc = subprocess.Popen([sys.executable, str(REPO / "run_experiment.py"), "run", str(_write(tmp_path)),
                             "--out", str(out), "--quiet", "--no-report", "--set", "checks.iperf=false",
                             "--set", "workload.epochs=50"], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and not list(out.glob("runs/*/h2-worker1.events.jsonl")):
        assert proc.poll() is None, proc.stdout.read()[-2000:]
        time.sleep(0.5)
    time.sleep(3)
    return proc


def test_sigint_removes_the_container(tmp_path, worker_image, no_leftovers):
    proc = _start_long_run(tmp_path, tmp_path / "sigint")
    assert len(containers()) >= 1
    proc.send_signal(signal.SIGINT)
    output, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130, output[-2000:]


def test_failed_run_removes_the_container(tmp_path, worker_image, no_leftovers):
    proc = cli("run", str(_write(tmp_path)), "--out", str(tmp_path / "f"), "--quiet", "--no-report",
               "--set", "checks.iperf=false", "--set", "workload.timeout=1s", timeout=300)
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "timed out after 1 s" in pd.read_csv(tmp_path / "f" / "runs.csv").iloc[0]["reason"]


def test_cleanup_after_sigkill_removes_containers_and_veths(tmp_path, worker_image, no_leftovers):
    proc = _start_long_run(tmp_path, tmp_path / "killed")
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    left = containers()
    assert left, "the killed run should have left its container behind"
    result = cli("cleanup", timeout=120)
    assert result.returncode == 0, result.stderr
    assert any(f"removed container {name}" in result.stdout for name in left), result.stdout
    assert not containers()
