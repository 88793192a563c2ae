"""Byte scaling of replayed points (emulation.byte_scale), without a network: the shapes sent, the factor auto
picks with the dilation, the links' wall rates, a point resolved from a GPU server's profile (job, columns,
switch demand, contention charges), the figures recorded in emulated bytes, DDP's buckets, and the refusals."""
import math

import pytest

from testbed.emulation import byte_scale as bs
from testbed.spec.rules import byte_scale as rules
from testbed.emulation import replayed_compute as replay
from testbed.emulation.dilation import wall_graph, wall_spec
from testbed.run.point import point as rp
from testbed.spec import build_graph, expand_points
from spec_helpers import issues, load
from workloads.profiling import fileformat

CAL = {"real_step_s": 0.060, "real_cpu_s": 0.061, "stand_in_step_s": 0.002, "stand_in_cpu_s": 0.002,
       "overshoot_s": 0.0, "layers": [[0.004, 0.006]] * 161}
MBIT = 1_000_000
GPU = """
name: g
topology: {{hosts: {hosts}, link: {{bw: {bw}}}, host: {{profile: builtin/h200/resnet50-b32}}}}
emulation: {{dilation: {k}, compute: replay, byte_scale: {f}}}
workload: {{engine: pytorch, model: torchvision/resnet50, batch_per_worker: 32}}
checks: {{iperf: false, ping: false}}
"""


def gpu(hosts=2, bw="10gbit", k="auto", f="auto"):
    return GPU.format(hosts=hosts, bw=bw, k=k, f=f)


def resolved(tmp_path, text, switch=lambda kind: 10_000 * MBIT):
    (point,) = expand_points(load(tmp_path, text))
    return rp.resolve(point, 2, calibrate_profile=lambda *a, **how: CAL, switch=switch)


def test_each_tensor_keeps_its_place_and_dtype_with_a_fth_of_its_elements_and_at_least_one():
    shapes = [[([64, 3, 7, 7], "float32"), ([64], "float32")], [([10], "bfloat16")]]
    assert fileformat.scaled_shapes(shapes, 1) == (((([64, 3, 7, 7], "float32"), ([64], "float32"))), (([10], "bfloat16"),))
    assert fileformat.scaled_shapes(shapes, 8) == ((([1176], "float32"), ([8], "float32")), (([2], "bfloat16"),))
    assert fileformat.scaled_shapes(shapes, 1024) == ((([10], "float32"), ([1], "float32")), (([1], "bfloat16"),))
    with pytest.raises(ValueError):
        fileformat.scaled_shapes(shapes, 0)


def test_auto_is_the_smallest_power_of_2_that_needs_no_more_k_than_the_largest_within_the_floor():
    need = lambda f: max(1.0, 16 / f)                      # noqa: E731 - the bytes' term halves with F
    assert bs.choose(need, 10_000 * MBIT) == (1.0, 16)
    assert bs.choose(need, 10_000 * MBIT, fixed_k=2.0) == (2.0, 8)      # a fixed K stays; F covers the bytes at it
    assert bs.choose(lambda f: 1.0, 10_000 * MBIT) == (1.0, 1)          # nothing to gain: every byte sent
    # 10 Mbit/s: F = 2 at x8 would pace it at 0.625 Mbit/s, under the 10 Mbit/s floor: every byte sent
    assert bs.choose(need, 10 * MBIT) == (16.0, 1)
    # never down to K's floor: the largest F that keeps 100 Mbit/s at 10 Mbit/s or more (8 at x1: 12.5 Mbit/s)
    assert bs.choose(lambda f: max(1.0, 8 / f), 100 * MBIT) == (1.0, 8)
    assert bs.choose(need, 1_000_000 * MBIT) == (1.0, 16)
    assert bs.choose(lambda f: 50.0, 10**12) == (50.0, 1)                # no F lowers K: every byte sent
    assert bs.choose(lambda f: max(1.0, 1024 / f), 10**12, cap=64) == (16.0, 64)     # the shapes' cap
    # the stand-ins' own CPU falls with their tensors too: K in steps of 0.25, 1.25 from F = 32 on
    assert bs.choose(lambda f: math.ceil((1 + 8 / f) * 4) / 4, 10**12) == (1.25, 32)
    assert rules.floor_problem(10 * MBIT, 2.0, 8).startswith("a link of 10 Mbit/s at dilation 2 and byte_scale 8")
    assert rules.floor_problem(100 * MBIT, 2.0, 4) is None and rules.floor_problem(10, 1000.0, 1) is None


def test_every_link_rate_is_divided_by_k_and_f_and_its_delay_by_k_alone(tmp_path):
    exp = load(tmp_path, "name: w\ntopology: {hosts: 2, link: {bw: 100mbit, delay: 5ms}}\n")
    link = wall_spec(exp, 2, 4).topology.link
    assert link.bw == 12_500_000 and link.delay == pytest.approx(0.010)
    assert wall_spec(exp, 1, 1) is exp
    edge = wall_graph(build_graph(exp.topology), 2, 4).links[0]
    assert edge.params.bw == 12_500_000 and edge.params.delay == pytest.approx(0.010)


def test_a_gpu_servers_point_is_resolved_with_k_and_f_together_and_sends_a_fth_of_each_tensor(tmp_path):
    plain = resolved(tmp_path, gpu(f=1))
    scaled = resolved(tmp_path, gpu())
    assert plain.byte_scale == 1 and plain.k > scaled.k
    f = scaled.byte_scale
    assert f > 1 and f & (f - 1) == 0 and scaled.spec.emulation.byte_scale == f
    assert scaled.wall_graph.links[0].params.bw == pytest.approx(10_000 * MBIT / (scaled.k * f), abs=1)
    assert scaled.graph.links[0].params.bw == 10_000 * MBIT                 # the emulated world as written
    full, job = plain.replay_job(), scaled.replay_job()
    assert len(job["shapes"]) == len(full["shapes"]) and "emulated" not in full
    sent = fileformat.shapes_bytes(tuple(job["shapes"]))
    whole = fileformat.shapes_bytes(tuple(full["shapes"]))
    assert whole / f <= sent <= whole / f * 1.01                            # 161 tensors, each rounded up
    assert job["emulated"] == {"params": whole // 4, "gradient_bytes": whole, "byte_scale": f}
    assert [p[1] for layer in job["shapes"] for p in layer] == [p[1] for layer in full["shapes"] for p in layer]
    assert scaled.switch[0] == pytest.approx(plain.switch[0] / f, rel=0.01)  # the demand of the bytes sent
    assert scaled.columns()["byte_scale"] == f and plain.columns()["byte_scale"] == 1


def test_a_fixed_byte_scale_keeps_its_dilation_and_waits_what_the_bytes_not_sent_would_have_cost(tmp_path):
    four = resolved(tmp_path, gpu(f=4, bw="1gbit"))
    assert four.byte_scale == 4 and four.spec.emulation.byte_scale == 4
    # 2 workers, 1 MB of which 125 kB sent: 875 kB not sent each way, at 12 ns a byte
    unsent = replay.unsent_cpu_s("pytorch", "allreduce", 2, 1_000_000, 125_000)
    assert unsent == pytest.approx(2 * 875_000 * replay.COMM_CPU_PER_BYTE_S["pytorch"])
    cpu = replay.from_profile(CAL, 2, "cpu.json").job(4, unsent)
    assert cpu["charge"] == 2 and cpu["after_charge"] == 1 and cpu["unsent_wait_s"] == pytest.approx(unsent * 4 / 2)
    gpus = four.replay_job()["hosts"]["h1"]      # 16 cores: a sixteenth of it a core, x K
    sent = fileformat.shapes_bytes(tuple(four.replay_job()["shapes"]))
    assert gpus["unsent_wait_s"] == pytest.approx(replay.unsent_cpu_s("pytorch", "allreduce", 2, 102228128, sent)
                                                  * four.k / 16)
    assert "unsent_wait_s" not in resolved(tmp_path, gpu(f=1)).replay_job()["hosts"]["h1"] or \
        resolved(tmp_path, gpu(f=1)).replay_job()["hosts"]["h1"]["unsent_wait_s"] == 0
    fixed = resolved(tmp_path, gpu(k=3, f="auto", bw="25gbit"))
    assert fixed.k == 3 and fixed.byte_scale > 1


def test_the_recorded_bytes_and_the_checks_rates_are_the_emulated_gradients(tmp_path):
    point = resolved(tmp_path, gpu(f=4, k=2, bw="1gbit"))

    class Observed:
        faults, steps, usage = [], [], []
        checks = [{"configured_bps": 125 * MBIT, "measured_bps": 120 * MBIT}]
    row = point.to_emulated({"net_bytes_total": 100, "net_throughput_mean_bps": 10.0, "gradient_bytes": 7,
                             "steady_bytes_per_worker_step": 3, "time_per_step_s": 2.0}, Observed)
    assert row["net_bytes_total"] == 400 and row["steady_bytes_per_worker_step"] == 12 and row["gradient_bytes"] == 7
    assert row["net_throughput_mean_bps"] == 10.0 * 4 * 2 and row["time_per_step_s"] == 1.0
    assert Observed.checks[0]["configured_bps"] == 1000 * MBIT             # 1 Gbit/s, paced at 125 Mbit/s


def test_ddp_buckets_of_scaled_gradients_are_a_fth_of_the_defaults_and_restored():
    import torch.distributed as dist
    from torch.nn.parallel import distributed as ddp

    from workloads.replay import scaled_buckets
    with scaled_buckets(8):
        assert dist._DEFAULT_FIRST_BUCKET_BYTES == 2**20 // 8 and ddp._DEFAULT_BUCKET_CAP_MB == 25 / 8
    assert dist._DEFAULT_FIRST_BUCKET_BYTES == 2**20 and ddp._DEFAULT_BUCKET_CAP_MB == 25


@pytest.mark.parametrize("text, said", [
    (gpu().replace("compute: replay, ", ""), "byte scaling shrinks replayed gradients: set emulation.compute: replay"),
    (gpu().replace("host: {profile: builtin/h200/resnet50-b32}", "host: {cores: 1}").replace(
        "torchvision/resnet50", "mlp"), "byte scaling scales the gradients of a PyTorch compute profile"),
    (gpu(k=2, f=16, bw="10mbit"), "is paced at 0.312 Mbit/s on this machine, under the 10 Mbit/s"),
])
def test_byte_scaling_is_refused_where_it_cannot_hold_at_its_key(tmp_path, text, said):
    found = [str(e) for e in issues(tmp_path, text)]
    assert any(":3: emulation.byte_scale:" in e and said in e for e in found), found


@pytest.mark.parametrize("value", ["0", "2.5", "-4", "true", "fast"])
def test_a_byte_scale_is_a_whole_factor_of_at_least_1_or_auto(tmp_path, value):
    found = [str(e) for e in issues(tmp_path, gpu(f=value))]
    assert any("byte_scale is a whole factor of at least 1" in e for e in found), found


def test_the_replayed_note_says_k_and_f_together(tmp_path):
    note = rp._replay_note([resolved(tmp_path, gpu(f=4))], 2)
    assert "byte scale 4 for 2 node(s)" in note and "bw / (K x F)" in note


def test_the_stand_ins_own_step_is_calibrated_on_the_tensors_it_sends(tmp_path):
    """A fixed F: the stand-ins are calibrated at that F alone (a calibration of the whole tensors is minutes
    of a large model's step, for nothing)."""
    asked = []

    def calibrate_profile(engine, path, progress, f=1, ddp=False):
        asked.append(f)
        return {**CAL, "stand_in_step_s": 0.002 * 4 / f}
    (point,) = expand_points(load(tmp_path, gpu(f=4)))
    scaled = rp.resolve(point, 2, calibrate_profile=calibrate_profile, switch=lambda kind: None)
    assert asked == [4] and all(h.stand_in_s == 0.002 for h in scaled.replay.values())


def test_auto_sends_at_least_a_mebibyte_a_step_and_keeps_the_rounding_within_a_percent():
    shapes = [[([1024, 1024], "float32")]] * 4 + [[([3], "float32")]] * 10     # 16 MiB in 4 tensors, 10 tiny ones
    assert bs.shapes_cap(shapes, fileformat.shapes_bytes) == 16                   # 16 MiB / 16 = 1 MiB sent
    small = [[([1000, 250], "float32")]]                                          # 1 MB: every byte
    assert bs.shapes_cap(small, fileformat.shapes_bytes) == 1
    many = [[([300], "float32")]] * 40_000                                        # 48 MB in tensors of 300
    assert bs.shapes_cap(many, fileformat.shapes_bytes) == 4                     # 300 / 8 rounds up 1.3 %


def test_the_report_says_the_byte_scale_where_the_dilation_is_said():
    import pandas as pd

    from analysis.tables import faithful
    runs = pd.DataFrame(dict(run_id=["a", "b"], hosts=[2, 4], status="ok", compute="replay", cores=16.0,
                             dilation=[1.25, 2.0], byte_scale=[64, 1], node_cores="", machine_cores=2))
    said = faithful.setup_sentence(runs)
    assert "dilation ×1.25 to ×2" in said and "gradients byte-scaled ×64 (1/F of the elements" in said
    assert "byte-scaled" not in faithful.setup_sentence(runs.drop(columns="byte_scale"))    # older results: F 1


def test_auto_shrinks_the_stand_ins_until_k_falls_no_further_and_k_is_theirs(tmp_path):
    """The stand-in's own CPU falls with its tensors: a one-server point (the speedup's baseline, which sends
    nothing) still takes the smallest F past which K falls no further, and auto's K is that stand-in's."""
    def calibrate_profile(engine, path, progress, f=1, ddp=False):
        return {**CAL, "stand_in_cpu_s": 0.08 / f, "stand_in_step_s": 0.08 / f}

    def at(f="auto"):
        (point,) = expand_points(load(tmp_path, gpu(hosts=1, bw="10gbit", f=f)))
        return rp.resolve(point, 2, calibrate_profile=calibrate_profile, switch=lambda kind: None)
    one, whole = at(), at(1)
    assert one.byte_scale > 1 and one.k < whole.k
    assert at(one.byte_scale // 2).k > one.k and at(one.byte_scale * 2).k == one.k
    assert all(h.stand_in_cpu_s == pytest.approx(0.08 / one.byte_scale) for h in one.replay.values())


def test_a_point_that_needs_the_largest_k_at_every_f_still_takes_the_f_that_lightens_it_most():
    """16 servers whose stand-ins alone ask more than x16: K is held to x16 at any F, and F is still chosen on
    the load itself (K not held), so the bytes and the stand-ins are as light as the floors allow."""
    need = lambda f: math.ceil((40 + 4000 / f) * 4) / 4    # noqa: E731 - x40 at best, above the most of x16
    assert bs.choose(need, 10**12, cap=256, most=16.0) == (16.0, 256)
    assert bs.choose(need, 10**12, cap=256) == (need(256), 256)
