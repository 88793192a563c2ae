"""The profile file: versioned JSON, written by the profiler and read back by the testbed. Standard
library only. docs/profiles.md documents every field."""
from __future__ import annotations

import json
import math
import os
import tempfile

FORMAT = "dltestbed-profile"
VERSION = 1
MAX_BYTES = 16 * 2**20          # a profile of a thousand layers is well under a megabyte
MAX_LAYERS = 100_000

TOP_KEYS = {
    "format": str, "version": int, "engine": str, "model": str, "model_params": dict, "batch": int,
    "dtype": str, "device": str, "cores": (int, float), "machine": dict, "versions": dict, "date": str,
    "warmup": int, "steps": int, "step_s": (int, float), "step_spread_s": list, "cycle_s": (int, float),
    "input_s": (int, float), "forward_s": (int, float), "backward_s": (int, float),
    "optimizer_s": (int, float), "cpu_s": (int, float), "parameters": int, "gradient_bytes": int,
    "peak_memory_bytes": int, "layers": list, "buckets": list,
}
MAX_IDLE_POINTS = 100
LAYER_KEYS = {"name": str, "forward_s": (int, float), "backward_s": (int, float), "grad_ready_s": (int, float),
              "params": list}
PARAM_KEYS = {"name": str, "shape": list, "dtype": str}
DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8, "int64": 8, "int32": 4}


class ProfileError(ValueError):
    """A profile that cannot be used: the message names the file and what is wrong."""


def _typed(doc, keys: dict, where: str) -> None:
    if not isinstance(doc, dict):
        raise ProfileError(f"{where}: expected an object")
    for key, kind in keys.items():
        if key not in doc:
            raise ProfileError(f"{where}: no {key!r}")
        value = doc[key]
        if isinstance(value, bool) or not isinstance(value, kind):
            raise ProfileError(f"{where}.{key}: expected {getattr(kind, '__name__', 'a number')}, "
                               f"got {type(value).__name__}")
        if isinstance(value, float) and not math.isfinite(value):
            raise ProfileError(f"{where}.{key}: not a finite number")
        if key.endswith("_s") and isinstance(value, (int, float)) and value < 0:
            raise ProfileError(f"{where}.{key}: negative time")


def check(doc) -> dict:
    """The profile document if it is one of this format and version, else ProfileError."""
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ProfileError(f"not a profile (its 'format' is not {FORMAT!r})")
    if doc.get("version") != VERSION:
        raise ProfileError(f"profile format version {doc.get('version')!r}; this testbed reads version {VERSION}: "
                           "take the profile again with this testbed's profiler")
    _typed(doc, TOP_KEYS, "profile")
    if doc["engine"] not in ("pytorch", "tensorflow"):
        raise ProfileError(f"profile.engine: {doc['engine']!r} is not pytorch or tensorflow")
    if doc["step_s"] <= 0 or doc["batch"] < 1 or not 0 < doc["cores"] <= 1e6:
        raise ProfileError("profile: step_s, batch and cores must be positive")
    _check_idle(doc.get("idle", []))
    if not doc["layers"] or len(doc["layers"]) > MAX_LAYERS:
        raise ProfileError(f"profile.layers: 1 to {MAX_LAYERS} layers expected, got {len(doc['layers'])}")
    for i, layer in enumerate(doc["layers"]):
        _typed(layer, LAYER_KEYS, f"profile.layers[{i}]")
        for j, param in enumerate(layer["params"]):
            _typed(param, PARAM_KEYS, f"profile.layers[{i}].params[{j}]")
            if param["dtype"] not in DTYPE_BYTES:
                raise ProfileError(f"profile.layers[{i}].params[{j}].dtype: {param['dtype']!r} is not one of "
                                   f"{', '.join(DTYPE_BYTES)}")
            if not all(isinstance(d, int) and not isinstance(d, bool) and 0 <= d <= 2**40 for d in param["shape"]):
                raise ProfileError(f"profile.layers[{i}].params[{j}].shape: whole numbers expected")
    return doc


def _check_idle(idle) -> None:
    """The optional `idle`: [pause, extra] pairs of seconds, pauses increasing (profiles before it lack it)."""
    if not isinstance(idle, list) or len(idle) > MAX_IDLE_POINTS:
        raise ProfileError(f"profile.idle: a list of at most {MAX_IDLE_POINTS} [pause, extra] pairs expected")
    last = 0.0
    for i, pair in enumerate(idle):
        if not (isinstance(pair, list) and len(pair) == 2
                and all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x >= 0
                        for x in pair)):
            raise ProfileError(f"profile.idle[{i}]: expected [pause, extra], two seconds of at least 0")
        if pair[0] <= last:
            raise ProfileError(f"profile.idle[{i}]: the pauses must be positive and increasing")
        last = pair[0]


def idle_points(doc: dict) -> tuple[tuple[float, float], ...]:
    """The profile's (pause, extra seconds) points; none in a profile taken before they were measured."""
    return tuple((float(gap), float(extra)) for gap, extra in doc.get("idle", []))


def load(path) -> dict:
    """The checked profile at `path`; ProfileError naming the file otherwise."""
    path = os.fspath(path)
    try:
        if os.path.getsize(path) > MAX_BYTES:
            raise ProfileError(f"{path}: over {MAX_BYTES // 2**20} MiB, not a profile")
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except OSError as err:
        raise ProfileError(f"{path}: cannot read it ({err.strerror or err})") from err
    except (ValueError, UnicodeDecodeError) as err:
        raise ProfileError(f"{path}: not JSON ({err})") from err
    try:
        return check(doc)
    except ProfileError as err:
        raise ProfileError(f"{path}: {err}") from err


def write(path, doc: dict) -> None:
    """Write the profile atomically; refuses a target that exists and is not a regular file."""
    path = os.fspath(path)
    if os.path.lexists(path) and not os.path.isfile(path):
        raise ProfileError(f"{path}: exists and is not a regular file; name a file to write the profile to")
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".profile-", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(check(doc), f, indent=1)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def replay_layers(doc: dict) -> list[dict]:
    """The layers in the order a replay chains them: the last gradient ready first, so that replayed
    gradients become ready in the profiled order (forward order where grad_ready_s was not measured)."""
    layers = doc["layers"]
    return [layers[i] for i in sorted(range(len(layers)), key=lambda i: -layers[i]["grad_ready_s"])]


def param_shapes(doc: dict) -> list[list[tuple[list[int], str]]]:
    """Each layer's parameters as (shape, dtype), in replay order (replay_layers)."""
    return [[(p["shape"], p["dtype"]) for p in layer["params"]] for layer in replay_layers(doc)]


def scaled_shapes(shapes, f: int) -> tuple:
    """Each parameter of `shapes` ((shape, dtype) per parameter, per layer) as a flat tensor of 1/F its
    elements (rounded up: at least 1), in the same order and dtype: what a byte-scaled replay sends
    (emulation.byte_scale, testbed/emulation/byte_scale.py)."""
    if f < 1:
        raise ValueError(f"byte_scale must be >= 1 (got {f})")
    if f == 1:
        return tuple(tuple((list(shape), dtype) for shape, dtype in layer) for layer in shapes)
    return tuple(tuple(([max(1, math.ceil(math.prod(shape) / f))], dtype) for shape, dtype in layer)
                 for layer in shapes)


def parameter_count(doc: dict) -> int:
    return sum(math.prod(p["shape"]) for layer in doc["layers"] for p in layer["params"])


def shapes_bytes(shapes) -> int:
    """Bytes of a gradient of these parameters: (shape, dtype) per parameter, per layer (param_shapes)."""
    return sum(math.prod(shape) * DTYPE_BYTES[dtype] for layer in shapes for shape, dtype in layer)


def gradient_bytes(doc: dict) -> int:
    return shapes_bytes(param_shapes(doc))
