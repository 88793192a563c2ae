"""analysis/model/communication.py and the methods' theory (workloads/communication/) against figures worked out
by hand for the built-in models, and the training loops' pure helpers (workloads/lowcomm.py)."""
import math

import pytest

from analysis.model import communication as comm
from workloads import lowcomm
from workloads.communication import local_sgd, powersgd
from workloads.models import param_count, tensor_shapes

MLP = 1_077_288        # 4 x 269,322 parameters: 784-256-256-10
CNN = 4 * 56_714


def test_shapes_are_the_models_parameters():
    assert tensor_shapes("mlp") == [(256, 784), (256,), (256, 256), (256,), (10, 256), (10,)]
    assert tensor_shapes("cnn") == [(16, 1, 3, 3), (16,), (32, 16, 3, 3), (32,), (64, 800), (64,), (10, 64), (10,)]
    for model in ("mlp", "cnn"):
        assert sum(math.prod(s) for s in tensor_shapes(model)) == param_count(model)


def test_powersgd_floats_by_hand():
    # rank 4, mlp: 784x256 -> 4(256+784) = 4160; 256x256 -> 2048; 10x256 -> 4(10+256) = 1064 (under half of
    # 2560); biases 256 + 256 + 10 whole
    assert powersgd.floats(tensor_shapes("mlp"), 4) == 4160 + 2048 + 1064 + 256 + 256 + 10
    # rank 1: 1040 + 512 + 266 and the biases
    assert powersgd.floats(tensor_shapes("mlp"), 1) == 1040 + 512 + 266 + 522
    # cnn rank 4: conv1 16x9 stays whole (4 x 25 x 2 = 200 > 144); conv2 32x144 -> 704; dense 64x800 -> 3456;
    # out 10x64 -> 296; biases 16 + 32 + 64 + 10
    assert powersgd.floats(tensor_shapes("cnn"), 4) == 144 + 704 + 3456 + 296 + 122


def test_plans_per_setting():
    plain = comm.plan("mlp", None, "allreduce", 4)
    assert plain.step_bytes(1) == plain.step_bytes(40) == 1.5 * MLP
    half = comm.plan("mlp", None, "allreduce", 4, {"compression": "fp16"})
    assert half.mean(1, 40) == pytest.approx(0.75 * MLP)
    assert comm.plan("mlp", None, "allreduce", 4, {"compression": "bf16"}) == half
    psgd = comm.plan("mlp", {}, "allreduce", 2, {"compression": "powersgd", "rank": 4, "start_step": 10})
    assert (psgd.full, psgd.after) == (MLP, 4 * 7794)
    assert psgd.mean(1, 40) == pytest.approx((10 * MLP + 30 * 31_176) / 40)     # 292,704
    assert psgd.mean(11, 40) == 31_176
    assert comm.plan("mlp", None, "ps", 3) == comm.Plan(2 * MLP, 2 * MLP)
    assert comm.plan("mlp", None, "single", 1).mean(1, 10) == 0
    assert comm.plan("caption", None, "allreduce", 2, {"compression": "fp16"}, gradient_bytes=1000).after == 500


def test_local_sgd_averages_on_pytorchs_schedule():
    """start 4, every 8: plain steps 1-4, the model averaged after steps 5, 13, 21, 29, 37."""
    local = comm.plan("mlp", None, "allreduce", 2, {"sync_every": 8, "start_step": 4})
    assert [k for k in range(1, 41) if local.step_bytes(k) and k > 4] == [5, 13, 21, 29, 37]
    assert [k for k in range(1, 41) if local_sgd.synced(k, 4, 8)] == [5, 13, 21, 29, 37]
    assert local.mean(1, 40) == pytest.approx(9 * MLP / 40)
    assert local.mean(5, 36) == pytest.approx(4 * MLP / 32)
    assert local.sends(6, 12) == 0
    every4 = comm.plan("mlp", None, "allreduce", 4, {"sync_every": 4, "start_step": 0})
    assert every4.mean(1, 400) == pytest.approx(1.5 * MLP / 4)          # 1/H of the model on average
    assert comm.factor(every4) == (1.0, 4)
    assert comm.factor(comm.plan("mlp", None, "allreduce", 4, {"compression": "fp16"})) == (0.5, 1)


def test_plan_sums_equal_step_by_step():
    p = comm.plan("cnn", None, "allreduce", 3, {"compression": "powersgd", "rank": 2, "start_step": 3})
    for first, last in ((1, 1), (1, 3), (2, 9), (4, 20), (5, 4)):
        assert p.sends(first, last) == pytest.approx(sum(p.step_bytes(k) for k in range(first, last + 1)))
    q = comm.plan("cnn", None, "allreduce", 3, {"sync_every": 3, "start_step": 2})
    for first, last in ((1, 30), (3, 3), (4, 17), (9, 10)):
        assert q.sends(first, last) == pytest.approx(sum(q.step_bytes(k) for k in range(first, last + 1)))


def test_labels_and_older_results():
    assert comm.label({"compression": "fp16"}) == "fp16" and comm.label({"compression": float("nan")}) == "none"
    assert comm.label({"compression": "", "rank": 4, "sync_every": 1}) == "none"
    assert comm.label({"compression": "powersgd", "rank": 4.0}) == "powersgd rank 4"
    assert comm.label({"compression": "none", "rank": float("nan"), "sync_every": 8.0, "outer": "lr 0.7"}) == \
        "local SGD every 8, DiLoCo outer"
    assert comm.label({"compression": "none", "rank": None, "sync_every": 8, "outer": ""}) == "local SGD every 8"


def test_wire_per_step_between_two_step_ends():
    series = [(1, 100), (2, 1100), (3, 2100), (4, None), (5, 4100)]
    assert comm.wire_per_step(series, 1, 5) == 1000
    assert math.isnan(comm.wire_per_step(series, 1, 4))
    assert math.isnan(comm.wire_per_step([(1, 500), (3, 100)], 1, 3))       # a counter that went back


def test_the_start_event_says_what_is_in_force():
    assert lowcomm.in_force(lowcomm.settings({})) == {}
    assert lowcomm.in_force(lowcomm.settings({"communication": {"compression": "fp16"}})) == {"compression": "fp16"}
    assert lowcomm.in_force(lowcomm.settings({"communication": {"compression": "powersgd", "rank": 2,
                                                                "start_step": 3}})) == \
        {"compression": "powersgd", "rank": 2, "start_step": 3}
    outer = {"lr": 0.7, "momentum": 0.9, "nesterov": True}
    assert lowcomm.in_force(lowcomm.settings({"communication": {"sync_every": 8, "outer": outer}})) == \
        {"sync_every": 8, "start_step": 10, "outer": outer}


def test_sent_bytes_reads_this_namespace(monkeypatch, tmp_path):
    dev = tmp_path / "dev"
    dev.write_text("Inter-|   Receive   |  Transmit\n face |bytes packets|bytes\n"
                   "    lo: 900 9 0 0 0 0 0 0 900 9 0 0 0 0 0 0\n"
                   "h1-eth0: 5000 50 0 0 0 0 0 0 7000 70 0 0 0 0 0 0\n")
    real = open
    monkeypatch.setattr("builtins.open", lambda path, *a, **k: real(dev if path == "/proc/net/dev" else path, *a, **k))
    assert lowcomm.sent_bytes() == 7000


def test_on_the_wire_a_full_segment_is_a_frame_and_half_an_acknowledgement():
    # 1448 bytes of payload: a 1514-byte frame, and half of a 66-byte acknowledgement of what comes back
    assert comm.on_the_wire(1448) == pytest.approx(1514 + 33)
    assert comm.WIRE_PER_PAYLOAD_BYTE == pytest.approx(1.068, abs=0.001)
