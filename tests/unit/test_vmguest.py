"""The pure parts of the netem VM tests (tests/vmguest.py, tests/netem_vm_job.py): the cache key,
QEMU's command line, the job built from the testbed's own shaping and fault builders, the readers
and the expected figures."""
import math
import shlex
import time

import pytest

import netem_vm_job as job
import vmguest
from leftovers import snapshot
from testbed import shaping
from testbed.net.network import batch_lines
from testbed.run.faults import faults
from testbed.spec.models import LinkParams

pytestmark = pytest.mark.timing       # times itself: run with the CPUs to itself (testbed.sh test)

PING = """PING 10.0.0.2 (10.0.0.2) 56(84) bytes of data.
64 bytes from 10.0.0.2: icmp_seq=1 ttl=64 time=100.5 ms
64 bytes from 10.0.0.2: icmp_seq=2 ttl=64 time=98.5 ms
64 bytes from 10.0.0.2: icmp_seq=4 ttl=64 time=101.0 ms

--- 10.0.0.2 ping statistics ---
4 packets transmitted, 3 received, 25% packet loss, time 61ms
rtt min/avg/max/mdev = 98.500/100.000/101.000/1.080 ms, pipe 5
"""


def test_cache_key_follows_every_input_and_nothing_else():
    key = vmguest.image_key()
    assert key == vmguest.image_key() and len(key) == 12
    assert vmguest.image_key(suite="trixie") != key
    assert vmguest.image_key(packages=(*vmguest.PACKAGES, "openvswitch-switch")) != key
    assert vmguest.image_key(init=vmguest.INIT + "\n") != key
    assert vmguest.image_key(recipe="v2") != key
    assert vmguest.image_key(arch="aarch64") != key
    folder = vmguest.image_folder()
    assert folder.parent == vmguest.CACHE_DIR and folder.name.endswith(key)


def test_init_loads_netem_and_powers_off():
    assert "sch_netem" in vmguest.INIT and "9pnet_virtio" in vmguest.INIT
    assert vmguest.INIT.startswith("#!/bin/sh") and "echo o > /proc/sysrq-trigger" in vmguest.INIT


def test_qemu_command_is_tcg_without_kvm_and_never_writes_the_image(tmp_path):
    img = vmguest.VmImage(tmp_path / "img")
    cmd = vmguest.qemu_command(img, tmp_path / "share", tmp_path / "console.log", kvm=False)
    text = shlex.join(cmd)
    assert cmd[0] == "qemu-system-x86_64" and "-accel tcg" in text and "kvm" not in text
    assert f"file={img.rootfs},format=raw,if=virtio,snapshot=on" in cmd
    assert "-no-reboot" in cmd and "panic=-1" in text and "init=/sbin/dltb-init" in text
    assert cmd[cmd.index("-name") + 1] == vmguest.QEMU_NAME
    assert f"local,path={tmp_path / 'share'},mount_tag=job,security_model=none,id=job" in cmd
    assert "-accel kvm" in shlex.join(vmguest.qemu_command(img, tmp_path, tmp_path / "c", kvm=True))


def test_build_problems_name_the_missing_tools():
    problems = "\n".join(vmguest.build_problems(which=lambda tool: None))
    assert "qemu-system-x86_64" in problems and "debootstrap" in problems and "scripts/bootstrap.sh" in problems


def test_bring_up_steps_issue_the_plan_of_link_plan_through_tc_batch():
    script = job.script()
    for params, qdisc in ((job.NETEM, "htb"), (job.NETEM, "tbf"), (job.GOODPUT, "htb"), (job.GOODPUT, "tbf")):
        for intf, host in zip(job.INTFS, job.HOSTS):
            cmds = shaping.tc_commands(intf, params, qdisc)
            assert any("netem" in a for a in cmds)
            for line in batch_lines(f"ip netns exec {host} tc -batch -", [" ".join(a) for a in cmds]):
                assert shlex.quote(line) in script


def test_fault_steps_issue_the_fault_actions_operations():
    script = job.script()
    ctx = job.context()      # one, as the applier keeps it: it knows what is in force
    for action in ("set_delay", "set_loss"):
        for ops in (faults.ACTIONS[action].apply(ctx, job.FAULTS[action]),
                    faults.ACTIONS[action].undo(ctx, job.FAULTS[action])):
            assert ops
            for op in ops:
                line = f"ip netns exec {op.where} {shlex.join(op.arg)}"
                assert shlex.quote(line if op.check else f"{line} || true") in script
    assert "netem delay 40000us" in script and "loss 10.0%" in script


def test_a_change_in_the_builder_reaches_the_job(monkeypatch):
    """No copy of the command builder: what shaping builds is what the VM runs."""
    monkeypatch.setattr(shaping, "netem_args", lambda params: ["delay", "12345us"])
    script = job.script()
    assert "netem delay 12345us" in script and "netem delay 50000us" not in script


def test_every_step_measures_and_the_order_leaves_faults_undone():
    steps = job.steps()
    assert [s.name for s in steps][0] == "base" and len({s.name for s in steps}) == len(steps)
    assert all(s.ping or s.iperf for s in steps)
    assert steps[-1].name == "set_loss_undone" and steps[-1].params == job.FAULTED
    script = job.script()
    assert script.index("log set_delay") < script.index("log set_loss")


def test_ping_reader():
    got = job.PingStats.parse(PING)
    assert got.sent == 4 and got.rtt_ms == 100.0 and got.loss_pct == 25.0
    assert math.isclose(got.sd_ms, 1.0801, rel_tol=1e-3)


def test_expected_figures():
    p = LinkParams(bw="10mbit", delay="50ms", jitter="5ms", loss="5%")
    assert job.expected_rtt_ms(p, 0.5) == 100.5
    assert math.isclose(job.rtt_tolerance_ms(p), 4.5)
    assert job.expected_rtt_ms(p, 0.5, links=2) == 200.5 and math.isclose(job.rtt_tolerance_ms(p, links=2), 9.0)
    assert math.isclose(job.round_trip_loss(p), 0.0975)
    lo, hi = job.loss_bounds_pct(p, 400)
    assert math.isclose(hi - 9.75, 9.75 - lo) and math.isclose(hi - lo, 8 * math.sqrt(0.0975 * 0.9025 / 400) * 100)
    assert job.loss_bounds_pct(LinkParams(delay="5ms"), 100) == (0.0, 0.0)
    assert math.isclose(job.jitter_sd_ms(p), 5 * math.sqrt(2 / 3))
    lo, hi = job.goodput_bounds_bps(p)
    assert math.isclose(hi, 1.01 * 1448 / 1514 * 10e6) and lo < 0.9 * 10e6 < hi
    assert math.isclose(job.bdp_frames(job.GOODPUT), 10e6 / 8 * 0.04 / 1514)


def _fake_qemu(monkeypatch, script: str) -> list:
    """QEMU replaced by `sh -c script` (SHARE: the share folder); returns the shares used."""
    shares = []

    def command(img, share, console, **_):
        shares.append(share)
        return ["sh", "-c", script.replace("SHARE", str(share)), vmguest.QEMU_NAME]
    monkeypatch.setattr(vmguest, "qemu_command", command)
    return shares


def test_run_reads_out_and_removes_its_folder(monkeypatch, tmp_path):
    shares = _fake_qemu(monkeypatch, "cat SHARE/job.sh > SHARE/out/seen; echo 0 > SHARE/out/rc")
    result = vmguest.run(vmguest.VmImage(tmp_path), "echo hi\n", timeout=30)
    assert result.text("seen") == "echo hi\n" and result.text("rc") == "0\n"
    assert not shares[0].exists()


def test_run_kills_a_vm_that_overstays_and_leaves_nothing(monkeypatch, tmp_path):
    shares = _fake_qemu(monkeypatch, "sleep 30")
    t0 = time.monotonic()
    with pytest.raises(TimeoutError, match="did not power off"):
        vmguest.run(vmguest.VmImage(tmp_path), "true\n", timeout=1)
    assert time.monotonic() - t0 < 10 and not shares[0].exists()
    assert not {p for p in snapshot()["processes"] if vmguest.QEMU_NAME in p}


def test_run_says_when_the_job_did_not_finish(monkeypatch, tmp_path):
    _fake_qemu(monkeypatch, "echo 'Kernel panic' > SHARE/console.log; exit 0")
    with pytest.raises(RuntimeError, match="(?s)did not finish.*Kernel panic"):
        vmguest.run(vmguest.VmImage(tmp_path), "true\n", timeout=30)


def test_the_bring_up_in_the_guest_uses_the_shared_repository_and_venv():
    script = job.script(venv="/var/cache/dltestbed/venv-x")
    assert "repo /repo" in script and "venv /var/cache/dltestbed/venv-x" in script
    assert "/var/cache/dltestbed/venv-x/bin/python /job/bringup.py /job/bringup.yaml" in script
    assert "bringup" not in job.script()
    assert set(job.share_files()) == {"bringup.py", "bringup.yaml"}
    compile(job.BRINGUP_PY, "bringup.py", "exec")


def test_the_bring_up_file_is_valid_and_asks_for_the_delay_the_test_expects(tmp_path):
    from testbed.spec import load_spec
    path = tmp_path / "bringup.yaml"
    path.write_text(job.BRINGUP_SPEC)
    spec = load_spec(path)
    assert spec.topology.hosts == 2 and spec.topology.link.delay == job.BRINGUP_DELAY_S
