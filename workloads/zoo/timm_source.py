"""timm's image models (timm/vit_small_patch16_224, timm/resnet18, ...), random weights."""
from __future__ import annotations

from workloads.zoo import tasks

PREFIX = "timm"
ENGINE = "pytorch"
PACKAGES = ("timm",)
FIXED_SIZE = ("vit", "deit", "swin", "eva", "beit", "cait", "xcit")     # built for one input size


def names() -> list[str]:
    import timm

    return sorted(timm.list_models())


PARAMS = tasks.IMAGE_PARAMS


def defaults(name: str) -> dict:
    return dict(PARAMS)


def build(name: str, p: dict):
    import timm

    extra = {"img_size": p["image_size"]} if name.startswith(FIXED_SIZE) else {}
    return timm.create_model(name, pretrained=False, num_classes=p["classes"], in_chans=p["channels"], **extra)


def batch(name: str, p: dict, seed: int, batch_id: int, batch_size: int):
    return tasks.torch_image_batch(p, seed, batch_id, batch_size)


loss = tasks.classification_loss
