"""torchvision's classification models (torchvision/resnet50, torchvision/vit_b_16, ...), random weights."""
from __future__ import annotations

from workloads.zoo import tasks

PREFIX = "torchvision"
ENGINE = "pytorch"
PACKAGES = ("torchvision",)
FIXED_SIZE = ("vit_", "swin_", "maxvit_")     # built for one input size: image_size sets it


def names() -> list[str]:
    from torchvision import models

    return sorted(models.list_models(module=models))


PARAMS = tasks.IMAGE_PARAMS


def defaults(name: str) -> dict:
    return dict(PARAMS)


def build(name: str, p: dict):
    from torchvision import models

    extra = {"image_size": p["image_size"]} if name.startswith(FIXED_SIZE) else {}
    if p["channels"] != 3:
        raise ValueError(f"torchvision/{name} takes 3 channels")
    return models.get_model(name, weights=None, num_classes=p["classes"], **extra)


def batch(name: str, p: dict, seed: int, batch_id: int, batch_size: int):
    return tasks.torch_image_batch(p, seed, batch_id, batch_size)


loss = tasks.classification_loss
