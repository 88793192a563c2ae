"""Model builders (tf_keras) and their parameter counts.

`build_model` must run inside the strategy scope chosen by train.py; it returns an
uncompiled model, `compile_model` compiles it. `param_count` is pure Python (no
TensorFlow import) so the orchestrator can size runs cheaply.
"""
from __future__ import annotations

MODELS = ("mlp", "cnn", "caption")

DEFAULTS = {
    "mlp": {"input_dim": 784, "width": 256, "depth": 2, "classes": 10},
    "cnn": {"height": 28, "width": 28, "channels": 1, "filters": 16, "kernel": 3,
            "dense": 64, "classes": 10},
    "caption": {"feature_dim": 4096, "max_len": 34, "vocab_size": 2000,
                "embed_dim": 256, "units": 256, "dropout": 0.5},
}


def resolve_params(name: str, params: dict | None = None) -> dict:
    """Defaults for `name` updated with `params`; unknown keys are an error. A zoo model (SOURCE/NAME):
    its source's (workloads/zoo)."""
    if "/" in name:
        from workloads import zoo
        return zoo.resolve_params(name, params)
    if name not in DEFAULTS:
        raise ValueError(f"unknown model {name!r}; expected one of {', '.join(MODELS)}")
    params = dict(params or {})
    unknown = sorted(set(params) - set(DEFAULTS[name]))
    if unknown:
        raise ValueError(f"unknown model_params for {name}: {', '.join(unknown)}; "
                         f"known: {', '.join(sorted(DEFAULTS[name]))}")
    out = dict(DEFAULTS[name])
    out.update(params)
    return out


def _cnn_shapes(p: dict) -> tuple[int, int]:
    """Spatial size after the two conv(valid)+pool(2) blocks."""
    h, w = p["height"], p["width"]
    for _ in range(2):
        h, w = (h - p["kernel"] + 1) // 2, (w - p["kernel"] + 1) // 2
    if h < 1 or w < 1:
        raise ValueError("cnn input too small for two conv+pool blocks")
    return h, w


def param_count(name: str, params: dict | None = None) -> int:
    """Trainable parameter count by formula (equals model.count_params()); a zoo model's, counted on
    the model built without memory (workloads/zoo)."""
    if "/" in name:
        from workloads import zoo
        return zoo.parameter_count(name, params)
    p = resolve_params(name, params)
    if name == "mlp":
        dims = [p["input_dim"]] + [p["width"]] * p["depth"] + [p["classes"]]
        return sum((a + 1) * b for a, b in zip(dims, dims[1:]))
    if name == "cnn":
        k, f, c = p["kernel"], p["filters"], p["channels"]
        h, w = _cnn_shapes(p)
        conv1 = (k * k * c + 1) * f
        conv2 = (k * k * f + 1) * 2 * f
        dense = (h * w * 2 * f + 1) * p["dense"]
        return conv1 + conv2 + dense + (p["dense"] + 1) * p["classes"]
    # caption (merge model); the image branch and the LSTM share `units`
    v, e, u = p["vocab_size"], p["embed_dim"], p["units"]
    image = (p["feature_dim"] + 1) * u
    embed = v * e
    lstm = 4 * (e * u + u * u + u)
    return image + embed + lstm + (u + 1) * u + (u + 1) * v


def tensor_shapes(name: str, params: dict | None = None) -> list[tuple[int, ...]]:
    """The parameter tensors of the built-in mlp or cnn in PyTorch's layout (weights (out, in[, k, k]),
    then their biases), in the order of workloads/torch_models.py: what a method that compresses each
    matrix reads (workloads/communication/)."""
    p = resolve_params(name, params)
    if name == "mlp":
        dims = [p["input_dim"]] + [p["width"]] * p["depth"] + [p["classes"]]
        return [shape for a, b in zip(dims, dims[1:]) for shape in ((b, a), (b,))]
    if name == "cnn":
        h, w = _cnn_shapes(p)
        f, k, c = p["filters"], p["kernel"], p["channels"]
        return [(f, c, k, k), (f,), (2 * f, f, k, k), (2 * f,), (p["dense"], h * w * 2 * f), (p["dense"],),
                (p["classes"], p["dense"]), (p["classes"],)]
    raise ValueError(f"no tensor layout for model {name!r} (the built-in mlp and cnn have one)")


def gradient_bytes(name: str, params: dict | None = None) -> int:
    """Bytes of one full float32 gradient."""
    return 4 * param_count(name, params)


def build_model(name: str, params: dict | None = None):
    """Build the named tf_keras model (uncompiled)."""
    import tf_keras as keras
    from tf_keras import layers

    p = resolve_params(name, params)
    if "/" in name:
        from workloads import zoo
        return zoo.build(name, p)
    if name == "mlp":
        inp = keras.Input(shape=(p["input_dim"],), name="x")
        x = inp
        for i in range(p["depth"]):
            x = layers.Dense(p["width"], activation="relu", name=f"dense{i}")(x)
        out = layers.Dense(p["classes"], activation="softmax", name="out")(x)
        return keras.Model(inp, out, name="mlp")
    if name == "cnn":
        inp = keras.Input(shape=(p["height"], p["width"], p["channels"]), name="x")
        x = layers.Conv2D(p["filters"], p["kernel"], activation="relu")(inp)
        x = layers.MaxPooling2D(2)(x)
        x = layers.Conv2D(2 * p["filters"], p["kernel"], activation="relu")(x)
        x = layers.MaxPooling2D(2)(x)
        x = layers.Flatten()(x)
        x = layers.Dense(p["dense"], activation="relu")(x)
        out = layers.Dense(p["classes"], activation="softmax", name="out")(x)
        return keras.Model(inp, out, name="cnn")
    # caption: the thesis "merge" model
    feats = keras.Input(shape=(p["feature_dim"],), name="image")
    fe = layers.Dropout(p["dropout"])(feats)
    fe = layers.Dense(p["units"], activation="relu", name="image_dense")(fe)
    seq = keras.Input(shape=(p["max_len"],), name="text", dtype="int32")
    se = layers.Embedding(p["vocab_size"], p["embed_dim"], mask_zero=True, name="embed")(seq)
    se = layers.Dropout(p["dropout"])(se)
    se = layers.LSTM(p["units"], name="lstm")(se)
    x = layers.add([fe, se])
    x = layers.Dense(p["units"], activation="relu", name="decoder")(x)
    out = layers.Dense(p["vocab_size"], activation="softmax", name="out")(x)
    return keras.Model([feats, seq], out, name="caption")


def compile_model(model, steps_per_execution: int = 1, learning_rate: float = 1e-3):
    """Compile with Adam and sparse categorical cross-entropy (all models)."""
    import tf_keras as keras

    model.compile(optimizer=keras.optimizers.Adam(learning_rate),
                  loss="sparse_categorical_crossentropy",
                  steps_per_execution=steps_per_execution)
    return model
