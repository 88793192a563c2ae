"""Compute profiles replayed on real Mininet, OVS, tc and PyTorch's gloo: the built-in CNN profiled here with
`run_experiment.py profile` replays 2 and 4 one-core nodes at the steady step of real compute at the same K,
and an unmodified torchrun script, profiled, replays 4 nodes with no code of its own on them. The profile's
compute after a pause is what lets a node of this communication-bound step (10 Mbit/s: 220 ms, 7 of them
compute) compute as slowly as a real one after each wait for the network: without it, 2 and 4 nodes read
0.96-0.98 and 0.96-1.03 of real compute, 0.98-1.02 and 0.95-1.04 with it. At 100 Mbit/s, where compute and
the exchange's CPU are most of the step, 2 replayed nodes read `degraded` at most factors here (x2 `ok` in 3 of 5
runs), and real compute at its own (x1.5): docs/profiles.md."""
import json
from pathlib import Path

import pytest

from cli import REPO, cli, run_one, steady_ratio

pytestmark = pytest.mark.integration
TOLERANCE = 0.05        # replay within 5 % of real compute; a machine whose speed moved as much explains a miss

SPEC = """name: {name}
topology: {{template: star, hosts: {hosts}, link: {{bw: {bw}}}, host: {{cores: {cores}{profile}}}}}
emulation: {{dilation: {dilation}, compute: {compute}}}
workload: {{engine: pytorch, strategy: allreduce, model: cnn, batch_per_worker: 32, epochs: 1, steps_per_epoch: 25,
           fixed: steps, timeout: 15m{script}}}
checks: {{iperf: false, ping: true}}
monitor: {{interval: 2s}}
"""


def run(tmp_path: Path, name: str, hosts: int, compute: str, profile: Path | None = None, script: Path | None = None,
        cores: float = 1, bw: str = "10mbit", dilation="auto"):
    spec = tmp_path / f"{name}.yaml"
    spec.write_text(SPEC.format(name=name, hosts=hosts, compute=compute, cores=cores, bw=bw, dilation=dilation,
                                profile=f", profile: {profile}" if profile else "",
                                script=f", script: {script}" if script else ""))
    return run_one(spec, tmp_path / name, timeout=1200)


def profile(tmp_path: Path, target, *extra, cores: float = 1) -> Path:
    tmp_path.mkdir(exist_ok=True)
    out = tmp_path / f"{Path(str(target)).stem}.json"
    proc = cli("profile", target, "--engine", "pytorch", "--batch", "32", "--cores", cores, "--out", out, *extra,
               timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


@pytest.mark.parametrize("hosts, bw", [(2, "10mbit"), (4, "10mbit")])
def test_a_profile_of_the_cnn_replays_the_steady_step_of_real_compute(tmp_path, root, no_leftovers, hosts, bw):
    """The CNN profiled (a one-core node, batch 32) right before its runs, its compute after a pause over 8
    repeats: on a shared VM that term follows the host's load from minute to minute, and real nodes feel
    it as the profile does, so a profile from minutes before would compare two different hours."""
    taken = profile(tmp_path, "cnn", "--idle-repeats", "8")
    real = run(tmp_path, "real", hosts, "real", bw=bw)
    replayed = run(tmp_path, "replayed", hosts, "replay", profile=taken, bw=bw, dilation=real["dilation"])
    assert replayed["compute"] == "replay" and replayed["profile"] == ";".join(f"h{i}={taken}"
                                                                               for i in range(1, hosts + 1))
    ratio = steady_ratio(f"{hosts} one-core nodes at {bw}, replayed from the profile", real, replayed)
    if abs(ratio - 1) > TOLERANCE:
        same_machine(taken, profile(tmp_path / "after", "cnn", "--idle-repeats", "8"))
    assert ratio == pytest.approx(1, abs=TOLERANCE)


def same_machine(before: Path, after: Path) -> None:
    """Skip, naming both, where the CNN profiled again after the runs took a step over 5 % apart from the profile
    they replayed: on a shared VM this machine's speed swings from minute to minute (10.7 and 16.9 ms one minute
    apart), and a real run then computed on another machine than its replayed twin."""
    steps = [json.loads(path.read_text())["step_s"] for path in (before, after)]
    if abs(steps[1] / steps[0] - 1) > TOLERANCE:
        pytest.skip(f"this machine's speed changed during the test: the CNN's profiled step took "
                    f"{steps[0] * 1000:.1f} ms before the runs and {steps[1] * 1000:.1f} ms after")


def test_an_unmodified_script_is_profiled_and_replayed_on_four_nodes(tmp_path, root, no_leftovers):
    script = REPO / "tests/fixtures/scripts/ddp_tutorial.py"
    taken = profile(tmp_path, script, "--warmup", "3", "--steps", "8", "--", "--epochs", "5")
    row = run(tmp_path, "script", 4, "replay", profile=taken, script=script)
    assert row["compute"] == "replay" and row["model"] == f"script:{script}" and row["workers"] == 4
    assert row["profile"] == ";".join(f"h{i}={taken}" for i in range(1, 5))
    assert row["gradient_bytes"] == 4 * (64 * 256 + 256 + 256 * 4 + 4)     # the script's own model, replayed
    assert row["steady"] == "ok" and row["steady_step_s"] > 0
