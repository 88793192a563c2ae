"""One emulated network spread over two local servers (`cluster up 2`) with Mininet's cluster edition:
real sshd, Open vSwitch (userspace) on each server, VXLAN tunnels, iperf3, TensorFlow.

A 4-host star placed 2 + 2 passes the 10mbit iperf3 check across the tunnel; a 2-worker all-reduce
with one worker on each server finishes with step and usage rows from both; a link asked above the
tunnel's measured capacity is refused before anything trains; nothing is left on either server or
here after success, Ctrl-C, and SIGKILL + `cleanup`. Run it under the dev lock."""
import json
import signal
import subprocess
import sys
import textwrap
import time

import pandas as pd
import pytest
import yaml
from cli import REPO, cli, interruptible, start_up

from testbed.cluster import servers as local_servers
from testbed.nodes.ssh_connection import Connection, Target

pytestmark = pytest.mark.integration

SNAPSHOT = r"""
echo "bridges: $(ovs-vsctl --timeout=5 list-br | tr '\n' ' ')"
echo "links: $(ip -o link show | awk -F': ' '{print $2}' | cut -d@ -f1 | grep -v '^lo$\|^eth0$' | tr '\n' ' ')"
echo "netns: $(readlink /proc/[0-9]*/ns/net 2>/dev/null | sort -u | wc -l)"
echo "procs: $(pgrep -f 'mininet[:]|train[.]py|iperf[3]|dltestbed remote agen[t]|nsente[r]' | wc -l)"
echo "cgroups: $(ls -d /sys/fs/cgroup/*/dltestbed/*/ /sys/fs/cgroup/dltestbed/*/ 2>/dev/null | tr '\n' ' ')"
"""


@pytest.fixture(scope="module")
def cluster(root):
    """Two local servers (started if none run; taken down again then) and their cluster: section."""
    was_up = len(local_servers.status()) >= 2
    up = cli("cluster", "up", "2", timeout=900)
    assert up.returncode == 0, up.stderr
    section = yaml.safe_load(up.stdout[up.stdout.index("cluster:"):])["cluster"]
    yield section
    if not was_up:
        local_servers.down()


def server_state(section) -> dict:
    """What each server holds that a run could leave: bridges, links, namespaces, processes."""
    state = {}
    for s in section["servers"]:
        conn = Connection(Target(s["address"], 22, s["user"], s["key_file"], section["known_hosts"]))
        try:
            code, out = conn.exec(["sh", "-c", SNAPSHOT], timeout=60)
        finally:
            conn.close()
        assert code == 0, out
        state[s["name"]] = out
    return state


def spec(tmp_path, section, body: str, name="cluster") -> str:
    path = tmp_path / f"{name}.yaml"
    text = f"name: {name}\n" + textwrap.dedent(body).lstrip("\n") + yaml.safe_dump({"cluster": section})
    path.write_text(text)
    return str(path)


def table(out, name) -> pd.DataFrame:
    return pd.read_csv(out / f"{name}.csv")


STAR = """
topology: {template: star, hosts: 4, link: {bw: 10mbit}}
workload: {strategy: single, epochs: 1, steps_per_epoch: 3, model_params: {width: 32, depth: 1}}
checks: {pairs: first, duration: 3s, tolerance: 0.1}
"""


def test_a_star_placed_two_and_two_passes_the_iperf_check_across_the_tunnel(cluster, no_leftovers, tmp_path):
    before = server_state(cluster)
    out = tmp_path / "out"
    done = cli("run", spec(tmp_path, cluster, STAR), "--out", out, "--quiet", "--no-report", timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    runs = table(out, "runs")
    assert list(runs["status"]) == ["ok"], runs["reason"].tolist()
    topo = json.loads(next(out.glob("runs/*/topology.json")).read_text())
    placed = {h["name"]: h.get("facts", {}).get("server") for h in topo["hosts"]}
    assert placed == {"h1": "srv1", "h2": "srv1", "h3": "srv2", "h4": "srv2"}
    checks = table(out, "checks")
    iperf = checks[checks["tool"] == "iperf3"].set_index("src")
    print(iperf[["dst", "configured_bps", "measured_bps", "ratio", "passed"]])
    for across in ("h3", "h4"):            # h3 -> h1 and h4 -> h1 cross the tunnel srv2 -> srv1
        assert iperf.loc[across, "passed"] and 0.9 <= iperf.loc[across, "ratio"] <= 1.1
    tunnels = table(out, "tunnels")
    print(tunnels)
    assert list(tunnels["tunnel"]) == ["srv1-srv2"] and tunnels["capacity_bps"].iloc[0] > 10e6 / 0.9
    assert set(tunnels["links"].iloc[0].split(";")) == {"h3-s1", "h4-s1"}
    assert server_state(cluster) == before


ALLREDUCE = """
topology: {template: star, hosts: 2, link: {bw: 100mbit}}
workload: {strategy: allreduce, fixed: steps, epochs: 1, steps_per_epoch: 6, model_params: {width: 64, depth: 1}}
checks: {iperf: false, ping: true}
monitor: {interval: 0.5s}
"""


def test_two_workers_one_on_each_server_train_with_steps_and_usage_from_both(cluster, no_leftovers, tmp_path):
    before = server_state(cluster)
    section = {**cluster, "placement": {"h1": "srv1", "s1": "srv1", "h2": "srv2"}}
    out = tmp_path / "out"
    done = cli("run", spec(tmp_path, section, ALLREDUCE), "--out", out, "--quiet", "--no-report", timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    runs = table(out, "runs")
    assert list(runs["status"]) == ["ok"], runs["reason"].tolist()
    steps = table(out, "steps")
    assert set(steps[steps["kind"] == "step"]["host"]) == {"h1", "h2"}
    usage = table(out, "usage")
    for host in ("h1", "h2"):
        rows = usage[usage["node"] == host]
        assert len(rows) >= 2 and rows["tx_bytes"].max() > 0 and rows["rss_bytes"].max() > 100e6, rows.tail()
    assert server_state(cluster) == before


def test_budgets_hold_on_the_servers_under_dilation_and_go_with_the_run(cluster, no_leftovers, tmp_path):
    """Two 1-core workers, one per server, at x4: each held to 0.25 core by a cgroup on its server,
    so neither used more than its one emulated core once its engine was loaded (the quota is lifted
    while it loads, docs/faithful-compute.md); the cgroups are gone afterwards."""
    before = server_state(cluster)
    section = {**cluster, "placement": {"h1": "srv1", "s1": "srv1", "h2": "srv2"}}
    body = ALLREDUCE.replace("link: {bw: 100mbit}}", "link: {bw: 100mbit}, host: {cores: 1}}").replace(
        "interval: 0.5s", "interval: 0.25s").replace("steps_per_epoch: 6", "steps_per_epoch: 60")
    out = tmp_path / "out"
    done = cli("run", spec(tmp_path, section, body + "emulation: {dilation: 4}\n"), "--out", out, "--quiet",
               "--no-report", timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    runs = table(out, "runs")
    assert list(runs["status"]) == ["ok"], runs["reason"].tolist()
    assert runs["dilation"].iloc[0] == 4 and runs["compute"].iloc[0] == "budgets"
    print(runs[["time_per_step_s", "time_per_step_wall_s", "fidelity"]])
    usage = table(out, "usage")
    for host in ("h1", "h2"):
        mine = usage[usage["node"] == host].sort_values("t")
        # the samples between the one its first gradients went out in and the one its last did: the first's
        # interval can hold the end of the engine's loading, quota lifted (a sample at 166 % of one core, then
        # 99 %), and the last's the start of the compute probe, which measures the node alone with its quota lifted
        sent = mine["tx_bytes"].diff() > 100_000
        training = mine[sent.cummax().shift(fill_value=False) & sent[::-1].cummax()[::-1].shift(-1, fill_value=False)]
        assert len(training) >= 3, f"{host}: usage samples while it trained"
        busiest = training["cpu_pct"].max()      # % of an emulated core (wall % x 4)
        print(f"{host}: busiest sample {busiest:.0f} % of its one emulated core")
        assert 20 < busiest <= 140, f"{host} trained within its budget of one emulated core: {busiest:.0f} %"
    assert server_state(cluster) == before


def test_pytorch_ddp_with_one_worker_on_each_server(cluster, no_leftovers, tmp_path):
    """engine pytorch on the servers: the server image (the worker image's venv) has torch."""
    before = server_state(cluster)
    section = {**cluster, "placement": {"h1": "srv1", "s1": "srv1", "h2": "srv2"}}
    out = tmp_path / "out"
    done = cli("run", spec(tmp_path, section, ALLREDUCE), "--out", out, "--quiet", "--no-report",
               "--set", "workload.engine=pytorch", timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    runs = table(out, "runs")
    assert list(runs["status"]) == ["ok"], runs["reason"].tolist()
    assert runs["engine"].iloc[0] == "pytorch"
    steps = table(out, "steps")
    assert set(steps[steps["kind"] == "step"]["host"]) == {"h1", "h2"}
    assert server_state(cluster) == before


def test_a_server_python_without_the_engine_is_refused_naming_server_and_module(cluster, no_leftovers, tmp_path):
    """cluster.python = the server's system python, which has no torch: refused before anything is made."""
    before = server_state(cluster)
    section = {**cluster, "python": "/usr/bin/python3", "placement": {"h1": "srv1", "s1": "srv1", "h2": "srv2"}}
    out = tmp_path / "out"
    cli("run", spec(tmp_path, section, ALLREDUCE), "--out", out, "--quiet", "--no-report",
        "--set", "workload.engine=pytorch", timeout=600)
    runs = table(out, "runs")
    reason = runs["reason"].iloc[0]
    assert runs["status"].iloc[0] == "failed", reason
    assert "srv1: /usr/bin/python3 cannot import torch: pip install torch" in reason, reason
    assert "srv2: /usr/bin/python3 cannot import torch" in reason and "set cluster.python" in reason, reason
    assert table(out, "steps").empty
    assert server_state(cluster) == before


def test_a_link_above_the_tunnels_capacity_is_refused_before_training(cluster, no_leftovers, tmp_path):
    before = server_state(cluster)
    out = tmp_path / "out"
    body = STAR.replace("bw: 10mbit", "bw: 400gbit")
    cli("run", spec(tmp_path, cluster, body), "--out", out, "--quiet", "--no-report", timeout=600)
    runs = table(out, "runs")
    reason = runs["reason"].iloc[0]
    assert runs["status"].iloc[0] == "failed" and "fidelity guard" in reason, reason
    assert "h3-s1" in reason and "400gbit" in reason and "srv1-srv2" in reason and "measured" in reason
    assert table(out, "steps").empty and table(out, "checks").empty
    assert len(table(out, "tunnels")) == 1
    assert server_state(cluster) == before


def _on_server(section, name: str, command: str) -> tuple[int, str]:
    s = next(s for s in section["servers"] if s["name"] == name)
    conn = Connection(Target(s["address"], 22, s["user"], s["key_file"], section["known_hosts"]))
    try:
        return conn.exec(["sh", "-c", command], timeout=60)
    finally:
        conn.close()


def test_a_switch_named_like_a_bridge_the_server_has_is_refused_and_that_bridge_kept(cluster, no_leftovers,
                                                                                    tmp_path):
    section = {**cluster, "placement": {"h1": "srv1", "s1": "srv2", "h2": "srv2"}}
    assert _on_server(cluster, "srv2", "ovs-vsctl --timeout=5 add-br s1 -- set Bridge s1 datapath_type=netdev")[0] == 0
    try:
        before = server_state(cluster)
        out = tmp_path / "out"
        cli("run", spec(tmp_path, section, ALLREDUCE), "--out", out, "--quiet", "--no-report", timeout=600)
        runs = table(out, "runs")
        assert runs["status"].iloc[0] == "failed", runs
        assert "already have a bridge or interface of: s1 on srv2" in runs["reason"].iloc[0]
        assert server_state(cluster) == before, "the server's own s1 was kept, and nothing was added"
    finally:
        _on_server(cluster, "srv2", "ovs-vsctl --timeout=5 --if-exists del-br s1")


LONG = """
topology: {template: star, hosts: 2, link: {bw: 100mbit}}
workload: {strategy: allreduce, fixed: steps, epochs: 200, steps_per_epoch: 5, model_params: {width: 64, depth: 1}}
checks: {iperf: false, ping: false}
"""


def _start_long_run(cluster, tmp_path):
    section = {**cluster, "placement": {"h1": "srv1", "s1": "srv1", "h2": "srv2"}}
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, str(REPO / "run_experiment.py"), "run", spec(tmp_path, section, LONG),
                             "--out", str(out), "--quiet", "--no-report"], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, preexec_fn=interruptible)
    deadline = time.monotonic() + 600
    while not [p for p in out.glob("runs/*/h2-worker1.events.jsonl") if '"epoch"' in p.read_text()]:
        assert proc.poll() is None and time.monotonic() < deadline, proc.stdout.read()[-3000:] if proc.poll() else "slow"
        time.sleep(0.5)
    return proc


def test_ctrl_c_leaves_nothing_on_either_server(cluster, no_leftovers, tmp_path):
    before = server_state(cluster)
    proc = _start_long_run(cluster, tmp_path)
    assert server_state(cluster) != before          # bridges, tunnels, shells, workers exist now
    proc.send_signal(signal.SIGINT)
    output, _ = proc.communicate(timeout=180)
    assert proc.returncode == 130, output[-3000:]
    assert server_state(cluster) == before


def test_sigkill_then_cleanup_leaves_nothing_on_either_server(cluster, no_leftovers, tmp_path):
    before = server_state(cluster)
    proc = _start_long_run(cluster, tmp_path)
    proc.kill()
    proc.communicate(timeout=30)
    done = cli("cleanup", timeout=300)
    assert done.returncode == 0, done.stderr
    print(done.stdout)
    assert "deleted OVS bridge s1 on root@172.31.250.2" in done.stdout
    assert server_state(cluster) == before


def test_this_machine_as_the_first_server_with_a_tunnel_to_the_other(cluster, no_leftovers, tmp_path):
    before = server_state(cluster)
    section = {**cluster, "servers": [{"name": "here", "address": "local"}, cluster["servers"][1]]}
    out = tmp_path / "out"
    done = cli("run", spec(tmp_path, section, STAR), "--out", out, "--quiet", "--no-report", timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert list(table(out, "runs")["status"]) == ["ok"], table(out, "runs")["reason"].tolist()
    topo = json.loads(next(out.glob("runs/*/topology.json")).read_text())
    assert {h["name"]: h.get("facts", {}).get("server") for h in topo["hosts"]} == \
        {"h1": None, "h2": None, "h3": "srv2", "h4": "srv2"}          # h1, h2 (and s1) here
    iperf = table(out, "checks").query("tool == 'iperf3'").set_index("src")
    assert iperf.loc["h3", "passed"] and iperf.loc["h4", "passed"]
    assert list(table(out, "tunnels")["tunnel"]) == ["here-srv2"]
    assert server_state(cluster) == before


def test_up_then_exec_enters_a_host_on_a_server_and_ctrl_c_leaves_nothing(cluster, no_leftovers, tmp_path):
    before = server_state(cluster)
    body = STAR.replace("checks: {pairs: first, duration: 3s, tolerance: 0.1}", "checks: {iperf: false}")
    proc, _ = start_up(spec(tmp_path, cluster, body))
    try:
        addresses = cli("exec", "h3", "--", "ip", "-br", "addr", timeout=60)      # h3 is on srv2
        assert "h3-eth0" in addresses.stdout and "10.0.0.3/" in addresses.stdout, addresses.stdout + addresses.stderr
        ping = cli("exec", "h3", "--", "ping", "-c1", "-W", "2", "10.0.0.1", timeout=60)   # across the tunnel
        assert ping.returncode == 0 and "1 received" in ping.stdout, ping.stdout + ping.stderr
        assert cli("exec", "h3", "--", "false", timeout=60).returncode == 1, "the command's exit code"
    finally:
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=180)
    assert proc.returncode == 0 and "torn down" in out, out[-2000:]
    assert server_state(cluster) == before
