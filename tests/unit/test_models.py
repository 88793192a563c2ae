"""Parameter counts of the workload models, by hand formula and by Keras."""
import os

import pytest

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from workloads import models  # noqa: E402


def dense(i, o):
    return (i + 1) * o


def test_mlp_defaults_by_hand():
    want = dense(784, 256) + dense(256, 256) + dense(256, 10)
    assert models.param_count("mlp") == want == 269322


def test_mlp_width_depth_scale():
    want = dense(784, 32) + 3 * dense(32, 32) + dense(32, 10)
    assert models.param_count("mlp", {"width": 32, "depth": 4}) == want


def test_cnn_defaults_by_hand():
    conv1 = (3 * 3 * 1 + 1) * 16          # 28 -> 26 -> pool 13
    conv2 = (3 * 3 * 16 + 1) * 32         # 13 -> 11 -> pool 5
    want = conv1 + conv2 + dense(5 * 5 * 32, 64) + dense(64, 10)
    assert models.param_count("cnn") == want


def test_caption_by_hand():
    v, e, u, f = 50, 8, 16, 32
    lstm = 4 * (e * u + u * u + u)
    want = dense(f, u) + v * e + lstm + dense(u, u) + dense(u, v)
    p = {"vocab_size": v, "embed_dim": e, "units": u, "feature_dim": f, "max_len": 7}
    assert models.param_count("caption", p) == want
    assert models.gradient_bytes("caption", p) == 4 * want


def test_caption_thesis_size():
    # merge model with 4096 features, 256 units and a 7579-word Flickr8k vocabulary:
    # the well-known Keras summary total of this architecture
    assert models.param_count("caption", {"vocab_size": 7579}) == 5_527_963


def test_unknown_model_and_param():
    with pytest.raises(ValueError, match="unknown model"):
        models.param_count("resnet")
    with pytest.raises(ValueError, match="unknown model_params"):
        models.param_count("mlp", {"widht": 3})


@pytest.mark.parametrize("name,params", [
    ("mlp", {"width": 16, "depth": 3}),
    ("cnn", {"filters": 4, "dense": 8}),
    ("caption", {"vocab_size": 40, "embed_dim": 8, "units": 8, "feature_dim": 24, "max_len": 6}),
])
def test_keras_count_matches_formula(name, params):
    m = models.build_model(name, params)
    assert m.count_params() == models.param_count(name, params)
    trainable = sum(v.shape.num_elements() for v in m.trainable_variables)
    assert trainable == models.param_count(name, params)
    models.compile_model(m)
    assert m.optimizer is not None
