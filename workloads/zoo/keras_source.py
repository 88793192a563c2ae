"""keras.applications (tf_keras) models for TensorFlow (keras/ResNet50, keras/MobileNetV2, ...), built with
weights=None."""
from __future__ import annotations

from workloads.zoo import tasks

PREFIX = "keras"
ENGINE = "tensorflow"
PACKAGES: tuple[str, ...] = ()       # tf_keras comes with the TensorFlow engine


def names() -> list[str]:
    import os

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tf_keras

    apps = tf_keras.applications
    return sorted(n for n in dir(apps) if n[:1].isupper() and callable(getattr(apps, n)))


PARAMS = tasks.IMAGE_PARAMS


def defaults(name: str) -> dict:
    return dict(PARAMS)


def build(name: str, p: dict):
    import tf_keras

    app = getattr(tf_keras.applications, name)
    return app(weights=None, input_shape=(p["image_size"], p["image_size"], p["channels"]), classes=p["classes"])


def batch(name: str, p: dict, seed: int, batch_id: int, batch_size: int):
    return tasks.image_batch(p, seed, batch_id, batch_size, channels_last=True)


def loss(net, inputs, targets):
    raise NotImplementedError("keras models train through Keras fit (workloads/train.py)")
