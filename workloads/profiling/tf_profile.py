"""Profiles a TensorFlow (tf_keras) training step of a built-in or keras/ zoo model: Keras's train_step
as a tf.function, timed step by step, and each parameter layer's forward and backward time measured on
prefixes of the model (workloads/replay.py tf_layer_times)."""
from __future__ import annotations

import resource
import statistics
import time

from workloads import zoo


def _model_and_data(model: str, params: dict, batch: int, seed: int):
    import tensorflow as tf

    from workloads import data as wdata
    from workloads import models

    tf.random.set_seed(seed)
    if zoo.is_zoo(model):
        net = models.compile_model(zoo.build(model, params))
        p = zoo.resolve_params(model, params)

        def batches():
            batch_id = 0
            while True:
                x, y = zoo.batch(model, p, seed, batch_id, batch)
                batch_id += 1
                yield tf.constant(x), tf.constant(y)
        return net, batches()
    p = models.resolve_params(model, params)
    net = models.compile_model(models.build_model(model, p))
    return net, iter(wdata.synthetic_dataset(model, p, seed, batch).repeat())


def profile(target: str, params: dict, batch: int, device: str, dtype: str, warmup: int, steps: int,
            script_args: list[str]) -> dict:
    import tensorflow as tf

    from workloads.replay import tf_layer_times, tf_parameter_layers

    if target.endswith(".py"):
        raise ValueError("the TensorFlow profiler takes a built-in or keras/ model; a script is profiled with "
                         "--engine pytorch")
    if dtype != "float32":
        tf.keras.mixed_precision.set_global_policy("mixed_" + dtype)
    net, data = _model_and_data(target, params, batch, 0)
    run = tf.function(net.train_step)           # Keras fit's step, fed one batch at a time (its input timed apart)
    inputs, times, cpus = [], [], []
    for i in range(warmup + steps):
        t0 = time.perf_counter()
        x, y = next(data)
        t1, c1 = time.perf_counter(), time.process_time()
        run((x, y))
        t2, c2 = time.perf_counter(), time.process_time()
        if i >= warmup:
            inputs.append(t1 - t0)
            times.append(t2 - t1)
            cpus.append(c2 - c1)
    layers = tf_parameter_layers(net)
    split = tf_layer_times(net, x, steps=max(3, steps // 2))
    step = statistics.median(times)
    forward, backward = sum(f for f, _ in split), sum(b for _, b in split)
    ordered = sorted(times)
    gpus = tf.config.list_physical_devices("GPU")
    return {
        "step_s": step, "cycle_s": step + statistics.median(inputs), "input_s": statistics.median(inputs),
        "step_spread_s": [ordered[len(ordered) // 10], ordered[-1 - len(ordered) // 10]],
        "forward_s": min(forward, step), "backward_s": min(backward, max(0.0, step - forward)),
        "optimizer_s": max(0.0, step - forward - backward), "cpu_s": statistics.median(cpus),
        "layers": [{"name": layer.name, "forward_s": f, "backward_s": b, "grad_ready_s": 0.0,
                    "params": [{"name": v.name, "shape": list(v.shape), "dtype": v.dtype.name}
                               for v in layer.trainable_weights]}
                   for layer, (f, b) in zip(layers, split)],
        "buckets": [],
        "peak_memory_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "device_name": tf.config.experimental.get_device_details(gpus[0]).get("device_name", "GPU") if gpus
        else "cpu", "device_count": len(gpus),
    }
