"""The model zoo: models named `SOURCE/NAME` (torchvision/resnet50, timm/vit_small_patch16_224,
transformers/gpt2, keras/ResNet50) beside the built-in mlp, cnn and caption.

Each source is one module of this package that declares itself (PREFIX, ENGINE, PACKAGES, and its
functions: names, defaults, build, batch, loss); `SOURCES` finds them, so adding a source is adding a
module. No weights are ever downloaded: every model is built from its architecture with random
weights, and trains on synthetic data of its input shape with a learnable teacher (tasks.py).

Standard library only at import: the engine and the source's package are imported when a model is
built, so `python -m workloads.profiler` runs where only the engine is installed.
"""
from __future__ import annotations

import difflib
import functools
import importlib
import json
import pkgutil
from types import ModuleType

_NOT_SOURCES = {"tasks"}


def _discover() -> dict[str, ModuleType]:
    out = {}
    for info in pkgutil.iter_modules(__path__):
        if info.name in _NOT_SOURCES:
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        if hasattr(module, "PREFIX"):
            out[module.PREFIX] = module
    return out


SOURCES: dict[str, ModuleType] = _discover()


class UnknownModel(ValueError):
    """A model name no source resolves; its message names the closest names."""


def is_zoo(model: str) -> bool:
    """Whether `model` names a zoo model (SOURCE/NAME) rather than a built-in one."""
    return "/" in model


def split(model: str) -> tuple[ModuleType, str]:
    """(source module, name within it) of a model name; the built-in source for a plain name."""
    prefix, _, name = model.rpartition("/")
    source = SOURCES.get(prefix or "builtin")
    if source is None:
        prefixes = sorted(p for p in SOURCES if p != "builtin")
        raise UnknownModel(f"unknown model source {prefix!r} in {model!r}; sources: {', '.join(prefixes)} "
                           "(SOURCE/NAME), or a built-in model (mlp, cnn, caption)")
    return source, name


def engine_of(model: str) -> str | None:
    """The engine a model's source builds for (None: both, as the built-in mlp and cnn)."""
    return split(model)[0].ENGINE


def package_names(model: str) -> tuple[str, ...]:
    """The pip packages a model's source needs beside the engine."""
    return split(model)[0].PACKAGES


def check_name(model: str) -> None:
    """UnknownModel unless the source knows the name: the message lists the closest names."""
    source, name = split(model)
    known = source.names()
    if name in known:
        return
    close = difflib.get_close_matches(name, known, n=5, cutoff=0.5)
    if source.PREFIX == "builtin":
        zoos = ", ".join(sorted(p + "/" for p in SOURCES if p != "builtin"))
        raise UnknownModel(f"no built-in model {name!r} ({', '.join(known)}){'; closest: ' + close[0] if close else ''}"
                           f"; a zoo model is SOURCE/NAME ({zoos})")
    prefix = source.PREFIX + "/"
    hint = f"closest: {', '.join(prefix + c for c in close)}" if close else f"{len(known)} names, e.g. " + \
        ", ".join(prefix + k for k in known[:5])
    raise UnknownModel(f"{source.PREFIX} has no model {name!r}; {hint}")


def resolve_params(model: str, params: dict | None = None) -> dict:
    """The model's parameters (input size, sequence length, classes, ...): its source's defaults
    updated with `params`; an unknown key is a ValueError naming the known ones."""
    source, name = split(model)
    defaults = source.defaults(name)
    params = dict(params or {})
    unknown = sorted(set(params) - set(defaults))
    if unknown:
        raise ValueError(f"unknown model_params for {model}: {', '.join(unknown)}; known: "
                         f"{', '.join(sorted(defaults))}")
    return {**defaults, **params}


def build(model: str, params: dict | None = None):
    """The named model with random weights (a torch.nn.Module or a tf_keras Model)."""
    source, name = split(model)
    return source.build(name, resolve_params(model, params))


def batch(model: str, params: dict, seed: int, batch_id: int, batch_size: int):
    """One deterministic synthetic batch (inputs, targets) of the model's input shape."""
    source, name = split(model)
    return source.batch(name, resolve_params(model, params), seed, batch_id, batch_size)


def loss(model: str, net, inputs, targets):
    """The training loss of `net` on one batch (a torch scalar)."""
    source, name = split(model)
    return source.loss(net, inputs, targets)


def parameter_count(model: str, params: dict | None = None) -> int:
    """Trainable parameters of a zoo model, before any run: PyTorch models built on the meta device (no
    memory), Keras models built (once per process)."""
    return _count(model, json.dumps(resolve_params(model, params), sort_keys=True))


@functools.lru_cache(maxsize=64)
def _count(model: str, params_json: str) -> int:
    source, name = split(model)
    params = json.loads(params_json)
    if source.ENGINE == "tensorflow":
        net = source.build(name, params)
        return int(sum(int(w.shape.num_elements()) for w in net.trainable_weights))
    import torch

    with torch.device("meta"):
        net = source.build(name, params)
    return sum(p.numel() for p in net.parameters() if p.requires_grad)
