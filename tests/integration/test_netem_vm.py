"""netem verified on a stock kernel: Debian's own (linux-image-amd64) booted in QEMU (software
emulation when KVM is not usable), since this machine's kernel lacks netem. One boot runs every
measurement (tests/netem_vm_job.py): the testbed's own tc commands (bring-up's link_plan under HTB
and TBF, the set_delay and set_loss faults' operations) on a veth link between two namespaces,
measured with ping and iperf3; then a testbed bring-up (Mininet, Open vSwitch's kernel datapath) of
a 2-host star with delay, the repository and its venv shared into the guest. Select them with
`pytest -k "netem and vm"`; `-s` prints what was measured.

Tolerances (netem_vm_job.py): mean RTT within 3 % of the configured delays, + 0.75 ms per netem qdisc
crossed, of the delays + the base RTT; loss within 4 binomial standard deviations of 1 - (1 - p)^2
over the pings; RTT spread 0.7-1.5 x jitter x sqrt(2/3) (netem's uniform jitter at both ends); TCP
goodput 0.85-1.01 x 0.956 x rate (the queue holds the bandwidth-delay product)."""
import json
import sys
import tempfile
import time
from pathlib import Path

import pytest

import netem_vm_job as job
import vmguest
from leftovers import snapshot
from testbed.spec.models import LinkParams

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
LOSSLESS_MAX_PCT = 1.0   # a step with no loss configured: at most 1 ping in 100 stalled past ping's 2 s wait


def bringup_venv(img) -> str | None:
    """This venv, to share with the repository for the bring-up in the guest: only a venv (never
    /usr), and only of the guest's Python version (its packages are this machine's)."""
    if sys.prefix == sys.base_prefix or img.manifest.get("python") != "%d.%d" % sys.version_info[:2]:
        return None
    return str(Path(sys.prefix).resolve())


@pytest.fixture(scope="module")
def guest(root):
    t0 = time.monotonic()
    img = vmguest.ensure_image(progress=print)    # minutes the first time, then cached
    built = time.monotonic() - t0
    venv = bringup_venv(img)
    result = vmguest.run(img, job.script(venv=venv), timeout=600, files=job.share_files(),
                         shares={"repo": str(REPO), "venv": venv} if venv else {})
    # all the VM can leave on this machine: its QEMU and its share folder (the namespaces are the guest's)
    qemus = {p for p in snapshot()["processes"] if vmguest.QEMU_NAME in p}
    assert not qemus, f"the VM run left QEMU running: {qemus}"
    assert not list(Path(tempfile.gettempdir()).glob("dltb-netem-vm-*")), "the VM's share folder was left behind"
    assert not list(vmguest.CACHE_DIR.glob("netem-vm-tmp-*")), "a build folder was left behind"
    print(f"\nnetem VM: image {img.folder.name} ({built:.0f} s to build or find), kernel "
          f"{img.manifest['kernel']}; run {result.seconds:.0f} s, boot {result.text('boot_seconds').strip()} s")
    for line in summary(result):
        print("  " + line)
    print("  where the run's time went (guest uptime, s): " + step_times(result))
    return img, result


def step_times(result) -> str:
    """The job log's `== STEP at UPTIME s` marks as `STEP SECONDS` each (the boot: up to the first mark)."""
    marks = [(line.split()[1], float(line.split()[3])) for line in result.text("job.log").splitlines()
             if line.startswith("== ") and len(line.split()) >= 4]
    if not marks:
        return "no marks in the job log"
    parts = [f"boot {marks[0][1]:.1f}"]
    parts += [f"{name} {end - start:.1f}" for (name, start), (_, end) in zip(marks, marks[1:])]
    return ", ".join(parts) + f"; QEMU's wall time {result.seconds:.0f}"


def summary(result) -> list[str]:
    """What each step measured, a line each (what cannot be read says so: the tests then fail on it)."""
    lines = []
    for step in job.steps():
        try:
            if step.ping:
                got = job.PingStats.parse(result.text(f"{step.name}.ping"))
                lines.append(f"{step.name}: {got.sent} pings, RTT {got.rtt_ms:.2f} ms, loss {got.loss_pct:g}%, "
                             f"spread {got.sd_ms:.2f} ms")
            if step.iperf:
                lines.append(f"{step.name}: {job.goodput_bps(result.text(f'{step.name}.json')) / 1e6:.2f} Mbit/s")
        except (ValueError, KeyError, RuntimeError) as err:
            lines.append(f"{step.name}: unreadable ({err})")
    if not result.text("bringup.json"):
        return lines + ["bring-up: not run, or printed nothing"]
    try:
        data = json.loads(result.text("bringup.json"))
        lines.append(f"bring-up: {data['up_s']:.0f} s up, {data['down_s']:.0f} s down; RTT base "
                     f"{job.PingStats.parse(data['base_ping']).rtt_ms:.2f} ms, delayed "
                     f"{job.PingStats.parse(data['ping']).rtt_ms:.2f} ms; checks: "
                     + "; ".join(f"{r['tool']} {r['detail']}" for r in data["checks"]))
    except (ValueError, KeyError) as err:
        lines.append(f"bring-up: unreadable ({err})")
    return lines


def stats(result, name: str) -> job.PingStats:
    return job.PingStats.parse(result.text(f"{name}.ping"))


@pytest.fixture(scope="module")
def base_ms(guest) -> float:
    base = stats(guest[1], "base")
    assert base.sent == 100 and base.loss_pct == 0, guest[1].text("base.ping")
    return base.rtt_ms


def test_netem_vm_boots_debian_kernel_and_every_command_is_accepted(guest):
    img, result = guest
    assert result.text("kernel").strip() == img.manifest["kernel"]
    assert result.text("rc").strip() == "0", result.text("job.log")
    for step in ["setup", *(s.name for s in job.steps())]:
        assert not result.text(f"{step}.errors"), (f"step {step}: a command failed:\n{result.text(f'{step}.errors')}"
                                                   f"\n{result.text(f'{step}.log')[-2000:]}")
    # what the kernel holds is what was asked, under the right parent
    htb, tbf = result.text("htb_netem.qdisc"), result.text("tbf_netem.qdisc")
    for text, parent in ((htb, "parent 1:1"), (tbf, "parent 1:")):
        netem = [line for line in text.splitlines() if line.startswith("qdisc netem 10:")]
        assert len(netem) == 2, text
        assert all(parent + " " in line and "delay 50ms  5ms loss 5%" in line for line in netem), text
    assert htb.count("qdisc htb 1: root") == 2 and tbf.count("qdisc tbf 1: root") == 2
    assert "delay 40ms" in result.text("set_delay.qdisc") and "loss 10%" in result.text("set_loss.qdisc")


@pytest.mark.parametrize("step", ["htb_netem", "tbf_netem", "faulted_link", "set_delay", "set_loss",
                                  "set_loss_undone"])
def test_netem_vm_delay_gives_the_rtt(guest, base_ms, step):
    params = next(s.params for s in job.steps() if s.name == step)
    got = stats(guest[1], step)
    want, tol = job.expected_rtt_ms(params, base_ms), job.rtt_tolerance_ms(params)
    assert abs(got.rtt_ms - want) <= tol, (f"{step}: mean RTT {got.rtt_ms:.2f} ms, configured 2 x "
                                           f"{params.delay * 1000:.0f} ms + base {base_ms:.2f} ms = {want:.2f} +- {tol:.2f}")


@pytest.mark.parametrize("step", ["htb_netem", "tbf_netem", "set_loss"])
def test_netem_vm_loss_within_the_binomial_spread(guest, step):
    params = next(s.params for s in job.steps() if s.name == step)
    got = stats(guest[1], step)
    lo, hi = job.loss_bounds_pct(params, got.sent)
    assert got.sent == next(s.ping for s in job.steps() if s.name == step)
    assert lo <= got.loss_pct <= hi, (f"{step}: {got.loss_pct}% of {got.sent} pings lost; {params.loss}% per end "
                                      f"gives {job.round_trip_loss(params) * 100:.2f}%, {job.LOSS_SIGMAS} sigma: "
                                      f"{lo:.2f}-{hi:.2f}%")


@pytest.mark.parametrize("step", ["faulted_link", "set_delay", "set_loss_undone"])
def test_netem_vm_no_loss_where_none_is_configured(guest, step):
    got = stats(guest[1], step)
    assert got.loss_pct <= LOSSLESS_MAX_PCT, guest[1].text(f"{step}.ping")[-500:]


@pytest.mark.parametrize("step", ["htb_netem", "tbf_netem"])
def test_netem_vm_jitter_spread_of_the_right_order(guest, step):
    params = next(s.params for s in job.steps() if s.name == step)
    got, unjittered = stats(guest[1], step), stats(guest[1], "set_delay")
    want = job.jitter_sd_ms(params)
    lo, hi = job.JITTER_RANGE
    assert lo * want <= got.sd_ms <= hi * want, (f"{step}: RTT standard deviation {got.sd_ms:.2f} ms, netem's "
                                                 f"+-{params.jitter * 1000:.0f} ms at both ends gives {want:.2f}")
    assert unjittered.sd_ms < lo * want, "without jitter the RTTs spread as much: the jitter is not what shows"


@pytest.mark.parametrize("step", ["htb_goodput", "tbf_goodput"])
def test_netem_vm_goodput_under_rate_and_delay(guest, step):
    params = next(s.params for s in job.steps() if s.name == step)
    assert job.bdp_frames(params) < 1000 / 2, "netem's queue (1000 frames) must hold the bandwidth-delay product"
    got = job.goodput_bps(guest[1].text(f"{step}.json"))
    lo, hi = job.goodput_bounds_bps(params)
    assert lo <= got <= hi, (f"{step}: {got / 1e6:.2f} Mbit/s over {params.bw / 1e6:.0f} Mbit/s with RTT "
                             f"{2 * params.delay * 1000:.0f} ms; expected {lo / 1e6:.2f}-{hi / 1e6:.2f}")


def test_netem_vm_testbed_bringup_with_delay(guest):
    """The testbed itself in the guest: Network (Mininet, OVS kernel datapath) shapes a 2-host star
    with 10 ms per link, the run's checks pass, and a ping crosses 4 delayed link ends."""
    img, result = guest
    if bringup_venv(img) is None:
        pytest.skip(f"the guest's Python is {img.manifest.get('python')}, this venv's "
                    f"{sys.version_info[0]}.{sys.version_info[1]} ({sys.prefix}): the venv cannot be shared")
    assert result.text("bringup.json"), "the bring-up in the guest printed nothing:\n" + result.text("bringup.log")[-3000:]
    data = json.loads(result.text("bringup.json"))
    assert data["datapath"] == "kernel", data["notes"]
    assert [r["tool"] for r in data["checks"]] == ["ping", "iperf3"]
    assert all(r["passed"] for r in data["checks"]), data["checks"]
    assert data["qdisc"].count("netem") >= 3 and "delay 10ms" in data["qdisc"], data["qdisc"]
    base, got = job.PingStats.parse(data["base_ping"]), job.PingStats.parse(data["ping"])
    params = LinkParams(delay=f"{job.BRINGUP_DELAY_S * 1000:g}ms")
    want, tol = job.expected_rtt_ms(params, base.rtt_ms, links=2), job.rtt_tolerance_ms(params, links=2)
    assert got.loss_pct <= LOSSLESS_MAX_PCT and base.loss_pct <= LOSSLESS_MAX_PCT
    assert abs(got.rtt_ms - want) <= tol, (f"mean RTT {got.rtt_ms:.2f} ms across the switch; 2 links x 2 ends x "
                                           f"10 ms + base {base.rtt_ms:.2f} ms = {want:.2f} +- {tol:.2f}")
