"""`run_experiment.py cluster up 2 | status | down` with the real Docker engine, sshd, Open vSwitch.

Two local servers answer over SSH with their host keys checked (a wrong key is refused), run Open
vSwitch and mnexec, reach each other over SSH (as cluster.py's tunnels need) including an
`ssh -w` tap tunnel, have writable cgroups of their own; `up` again reuses them; `down` leaves
nothing. It removes any servers already up (run it under the dev lock)."""
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from cli import REPO, cli

from testbed.cluster import servers
from testbed.nodes import docker_engine
from testbed.nodes.base import NodeError
from testbed.nodes.ssh_connection import Connection, Target

pytestmark = pytest.mark.integration


def _section(stdout: str) -> dict:
    return yaml.safe_load(stdout[stdout.index("cluster:"):])["cluster"]


def _run(conn: Connection, script: str) -> str:
    code, out = conn.exec(["sh", "-c", script], timeout=60)
    assert code == 0, f"{script}: exit {code}: {out}"
    return out


def test_cluster_up_two_servers_reachable_verified_then_down_leaves_nothing(root, no_leftovers, tmp_path):
    servers.down()
    up = cli("cluster", "up", "2", timeout=900)
    assert up.returncode == 0, up.stderr
    section = _section(up.stdout)
    try:
        found = section["servers"]
        assert [s["name"] for s in found] == ["srv1", "srv2"]
        assert len({s["address"] for s in found}) == 2
        known_hosts = section["known_hosts"]
        conns = [Connection(Target(s["address"], 22, s["user"], s["key_file"], known_hosts)) for s in found]
        try:
            for conn, s in zip(conns, found):
                assert conn.key_facts["host_key_in_known_hosts"]
                assert _run(conn, "hostname").strip() == s["name"]
                assert _run(conn, "pgrep -x ovs-vswitchd && pgrep -x ovsdb-server").count("\n") == 2
                assert _run(conn, "ovs-vsctl add-br dltbt0 -- set bridge dltbt0 datapath_type=netdev && "
                                  "ovs-vsctl list-br && ovs-vsctl del-br dltbt0").split() == ["dltbt0"]
                _run(conn, "sudo -E mnexec -cdn true")
                _run(conn, "mkdir /sys/fs/cgroup/cpu/dltbt && echo 50000 > /sys/fs/cgroup/cpu/dltbt/cpu.cfs_quota_us"
                           " && rmdir /sys/fs/cgroup/cpu/dltbt")
            one, two = conns
            # a server logs in to the other with the project's key, the host key checked there too
            assert _run(one, f"ssh root@{found[1]['address']} hostname").strip() == "srv2"
            assert _run(two, f"ssh root@{found[0]['address']} hostname").strip() == "srv1"
            # cluster.py's tunnel: tap devices on both, `ssh -w` from one to the other prints '@' and
            # then carries frames (addresses inside the two servers' own namespaces)
            _run(one, "ip tuntap add dev tap6 mode tap user root")
            _run(two, "ip tuntap add dev tap6 mode tap user root")
            try:
                _run(one, f"ssh -n -o Tunnel=Ethernet -w 6:6 root@{found[1]['address']} 'echo @; sleep 120' "
                          ">/tmp/tap6.out 2>&1 </dev/null & echo $! >/tmp/tap6.pid")
                _run(one, "for i in $(seq 100); do grep -q @ /tmp/tap6.out && exit 0; sleep 0.1; done; "
                          "cat /tmp/tap6.out; exit 1")
                _run(one, "ip addr add 10.254.6.1/30 dev tap6 && ip link set tap6 up")
                _run(two, "ip addr add 10.254.6.2/30 dev tap6 && ip link set tap6 up")
                assert " 0% packet loss" in _run(one, "ping -c 3 -W 2 10.254.6.2")
            finally:
                _run(one, "kill $(cat /tmp/tap6.pid); rm -f /tmp/tap6.pid /tmp/tap6.out")
                for conn in conns:
                    _run(conn, "ip link del tap6")
        finally:
            for conn in conns:
                conn.close()

        # host keys are verified, not accepted: srv2's keys under srv1's address are refused
        wrong = tmp_path / "known_hosts"
        wrong.write_text(swapped_known_hosts(known_hosts, found[1]["address"], found[0]["address"]))
        with pytest.raises(NodeError, match="CHANGED"):
            Connection(Target(found[0]["address"], 22, "root", found[0]["key_file"], str(wrong)))

        again = cli("cluster", "up", "2", timeout=300)
        assert again.returncode == 0, again.stderr
        assert again.stderr.count("runs already: reused") == 2
        assert _section(again.stdout) == section
        status = cli("cluster", "status")
        assert status.returncode == 0 and status.stdout.count("running") == 2
    finally:
        down = cli("cluster", "down")
    assert down.returncode == 0, down.stderr
    assert "removed server container dltestbed-srv1" in down.stderr
    cli_ = docker_engine.client()
    try:
        assert not cli_.containers.list(all=True, filters={"label": f"{servers.ROLE}=server"})
        assert not cli_.networks.list(filters={"label": f"{servers.ROLE}=cluster-network"})
    finally:
        cli_.close()
    assert not servers.KNOWN_HOSTS.exists()
    assert cli("cluster", "status").stdout.strip() == "no servers running"


def test_cluster_down_removes_what_a_killed_up_left(root, no_leftovers):
    """SIGKILL of `cluster up` while its servers start: `cluster down` finds them by their labels."""
    servers.down()
    cli_ = docker_engine.client()
    proc = subprocess.Popen([sys.executable, str(REPO / "run_experiment.py"), "cluster", "up", "3"], cwd=REPO,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 300
        while not cli_.containers.list(all=True, filters={"label": f"{servers.ROLE}=server"}):
            assert proc.poll() is None, "cluster up ended before it started a server"
            assert time.monotonic() < deadline, "cluster up started no server within 300 s"
            time.sleep(0.05)
    finally:
        proc.kill()
        proc.wait()
    assert cli_.networks.list(filters={"label": f"{servers.ROLE}=cluster-network"})
    down = cli("cluster", "down")
    assert down.returncode == 0, down.stderr
    assert "removed server container dltestbed-srv1" in down.stderr
    assert not cli_.containers.list(all=True, filters={"label": f"{servers.ROLE}=server"})
    assert not cli_.networks.list(filters={"label": f"{servers.ROLE}=cluster-network"})
    cli_.close()


def swapped_known_hosts(known_hosts: str, source: str, target: str) -> str:
    """The lines of `source`'s keys, naming `target` instead."""
    lines = [ln for ln in Path(known_hosts).read_text().splitlines() if ln.startswith(source + " ")]
    assert lines
    return "".join(target + ln[len(source):] + "\n" for ln in lines)
