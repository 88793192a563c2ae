"""Entry point of every training task (see docs/developer/contracts.md, section Workload).

python workloads/train.py --job JOB.json --task-type single|worker|chief|ps --task-index I --host NAME

Prints one JSON event per line on stdout; TensorFlow logs go to stderr.
"""
from __future__ import annotations

import argparse
import importlib.abc
import json
import os
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from workloads import balance, cpuquota, lowcomm, models  # noqa: E402  (no TensorFlow import at module level)
from workloads.events import Emitter, holding_done, model_sizes, run_task  # noqa: E402

ROLES = ("single", "worker", "chief", "ps")


# --------------------------------------------------------------------------- setup

def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--job", required=True, help="job JSON file")
    ap.add_argument("--task-type", required=True, choices=ROLES)
    ap.add_argument("--task-index", type=int, default=0)
    ap.add_argument("--host", default=socket.gethostname())
    return ap.parse_args(argv)


def cluster_for(job: dict) -> dict:
    """The job's cluster with empty task lists removed."""
    return {k: list(v) for k, v in (job.get("cluster") or {}).items() if v}


HEARTBEAT_TIMEOUT_MS = 10_000     # TensorFlow's coordination service when none is asked (0)


def dilate_tf_timers(k: float) -> None:
    """Under time dilation K, TensorFlow's wall-clock timers between workers run in emulated time too
    (x K): the all-reduce health check (a ping of every peer each 30 s, 10 s time-out) and the
    coordination service's heartbeat time-out (10 s). Undilated, peers held to a small budget miss
    them and every collective is aborted (UnavailableError: "stopped sending heartbeats")."""
    if k <= 1:
        return
    from tensorflow.python.distribute import collective_all_reduce_strategy as cars
    from tensorflow.python.eager import context
    ext = cars.CollectiveAllReduceExtended
    ext._check_health_interval = 30 * k
    ext._check_health_timeout = 10 * k
    configure = context.Context.configure_coordination_service

    def dilated(self, service_type, *args, heartbeat_timeout_in_ms=0, **kwargs):
        timeout = heartbeat_timeout_in_ms or HEARTBEAT_TIMEOUT_MS
        return configure(self, service_type, *args, heartbeat_timeout_in_ms=int(timeout * k), **kwargs)
    context.Context.configure_coordination_service = dilated


def set_environment(job: dict, task_type: str, task_index: int) -> None:
    """Environment that must exist before TensorFlow is imported."""
    os.environ["TF_USE_LEGACY_KERAS"] = "1"
    os.environ["GRPC_FAIL_FAST"] = "use_caller"
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
    if task_type == "single":
        os.environ.pop("TF_CONFIG", None)
        return
    cluster = cluster_for(job)
    if job["strategy"] == "allreduce":
        cluster = {k: v for k, v in cluster.items() if k in ("worker", "chief")}
    os.environ["TF_CONFIG"] = json.dumps(
        {"cluster": cluster, "task": {"type": task_type, "index": task_index}})


def check_job(job: dict, task_type: str) -> None:
    strategy = job.get("strategy")
    if strategy not in ("single", "allreduce", "ps"):
        raise ValueError(f"unknown strategy {strategy!r}")
    if (task_type == "single") != (strategy == "single"):
        raise ValueError(f"task type {task_type!r} does not fit strategy {strategy!r}")
    cluster = cluster_for(job)
    if strategy == "allreduce" and not cluster.get("worker"):
        raise ValueError("allreduce needs cluster.worker")
    if strategy == "ps":
        for k in ("chief", "worker", "ps"):
            if not cluster.get(k):
                raise ValueError(f"ps strategy needs cluster.{k}")
        if task_type == "chief" and not job.get("steps_per_epoch"):
            raise ValueError("ps strategy needs steps_per_epoch")


def wait_for_ports(addresses, timeout: float) -> None:
    """Block until every host:port accepts TCP (servers of the ps strategy)."""
    deadline = time.time() + timeout
    for addr in addresses:
        host, port = addr.rsplit(":", 1)
        while True:
            try:
                with socket.create_connection((host, int(port)), timeout=2):
                    break
            except OSError:
                if time.time() > deadline:
                    raise TimeoutError(f"task {addr} not reachable after {timeout:.0f} s")
                time.sleep(0.2)


# --------------------------------------------------------------------------- roles

def run_server(job, task_type, task_index, emit) -> None:
    """ps-strategy worker/ps task: serve until killed."""
    import tensorflow as tf

    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    server = tf.distribute.Server(resolver.cluster_spec(), job_name=task_type,
                                  task_index=task_index, protocol=resolver.rpc_layer or "grpc",
                                  start=True)
    emit("server", address=cluster_for(job)[task_type][task_index])
    with usage_sampler(job, emit):
        server.join()


def usage_sampler(job, emit):
    """Under replayed compute, the task's CPU and CPU wait as `usage` events (usage.UsageSampler)."""
    from contextlib import nullcontext

    from workloads import usage
    return usage.UsageSampler(emit) if job.get("replay") else nullcontext()


def make_strategy(job):
    import tensorflow as tf

    if job["strategy"] == "single":
        return tf.distribute.get_strategy()
    if job["strategy"] == "allreduce":
        ar = job.get("allreduce") or {}
        impl = {"auto": tf.distribute.experimental.CommunicationImplementation.AUTO,
                "ring": tf.distribute.experimental.CommunicationImplementation.RING,
                "nccl": tf.distribute.experimental.CommunicationImplementation.NCCL}
        name = str(ar.get("implementation") or "auto").lower()
        if name not in impl:
            raise ValueError(f"allreduce.implementation must be auto|ring|nccl, not {name!r}")
        options = tf.distribute.experimental.CommunicationOptions(
            bytes_per_pack=int(ar.get("bytes_per_pack") or 0), implementation=impl[name])
        dilate_tf_timers(float(os.environ.get("DLTESTBED_DILATION") or 1))
        return tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
    ps = job.get("ps") or {}
    cluster = cluster_for(job)
    wait_for_ports(cluster["ps"] + cluster["worker"], float(job.get("startup_timeout", 180)))
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    return tf.distribute.ParameterServerStrategy(
        resolver, variable_partitioner=make_partitioner(ps, len(cluster["ps"])))


def make_partitioner(ps: dict, n_ps: int):
    """None, or a partitioner over the ps tasks (`partition`: true|min_size|fixed)."""
    import tensorflow as tf

    kind = ps.get("partition")
    if not kind or n_ps < 1:
        return None
    parts = tf.distribute.experimental.partitioners
    if kind == "fixed":
        return parts.FixedShardsPartitioner(num_shards=n_ps)
    if kind is True or kind == "min_size":
        return parts.MinSizePartitioner(
            min_shard_bytes=int(ps.get("min_shard_bytes", 256 << 10)), max_shards=n_ps)
    raise ValueError(f"ps.partition must be true, false, 'min_size' or 'fixed', not {kind!r}")


def run_training(job, task_type, task_index, emit) -> None:
    """single / allreduce worker / ps chief: build, fit, report."""
    from workloads import data as wdata

    strategy_name = job["strategy"]
    cluster = cluster_for(job)
    workers = 1 if strategy_name == "single" else len(cluster["worker"])
    servers = len(cluster.get("ps", [])) if strategy_name == "ps" else 0
    bpw = int(job.get("batch_per_worker", 32))
    global_batch = bpw * workers
    own, weight = balance.worker(job.get("balance"), emit.base["host"], bpw)   # balanced: its batch, its share
    samples_per_step = bpw if strategy_name == "ps" else global_batch
    seed = int(job.get("seed", 0))
    name = job["model"]
    data_cfg = job.get("data") or {"kind": "synthetic"}
    caption = None
    mparams = dict(job.get("model_params") or {})
    if data_cfg.get("kind", "synthetic") == "flickr8k":
        if name != "caption":
            raise ValueError("data.kind flickr8k needs model caption")
        caption = wdata.load_flickr8k(data_cfg["path"], seed=seed, **wdata.caption_options(data_cfg))
        mparams.update(caption.model_params())
    elif data_cfg.get("kind", "synthetic") != "synthetic":
        raise ValueError(f"unknown data.kind {data_cfg.get('kind')!r}")
    p = models.resolve_params(name, mparams)
    steps_per_epoch = job.get("steps_per_epoch")
    if not steps_per_epoch:
        if caption is None:
            raise ValueError("synthetic data needs steps_per_epoch")
        steps_per_epoch = max(1, len(caption.pairs[0]) // global_batch)
    spe = int((job.get("ps") or {}).get("steps_per_execution", 1)) if strategy_name == "ps" else 1

    strategy = make_strategy(job)  # must come before any other TensorFlow work
    import tensorflow as tf
    import tf_keras as keras

    tf.random.set_seed(seed)
    with strategy.scope():
        model = models.build_model(name, p)
        models.compile_model(model, steps_per_execution=spe, learning_rate=float(job.get("learning_rate", 1e-3)))
    replayed = job.get("replay")
    set_train_step(model, job, emit.base["host"], own, weight)

    def dataset_fn(ctx):
        if strategy_name == "ps":
            shard = tf.distribute.coordinator.experimental_get_current_worker_index()
            n, batch = workers, bpw
        else:
            shard, n = ctx.input_pipeline_id, ctx.num_input_pipelines
            batch = own if job.get("balance") else ctx.get_per_replica_batch_size(global_batch)
        if caption is not None:
            return wdata.flickr8k_dataset(caption, batch, seed, shard, n)
        return wdata.synthetic_dataset(name, p, seed, batch, shard, n)

    if strategy_name == "single":
        x = dataset_fn(tf.distribute.InputContext())
    else:
        x = keras.utils.experimental.DatasetCreator(dataset_fn)

    chief = task_type == "single" or (strategy_name == "ps" and task_type == "chief") or \
        (strategy_name == "allreduce" and task_index == 0 and "chief" not in cluster) or \
        (strategy_name == "allreduce" and task_type == "chief")
    eval_fn = None
    wanted = job.get("eval")  # None: on for Flickr8k data (it has a held-out split), else off
    if (caption is not None if wanted is None else wanted) and name == "caption" and chief:
        eval_fn = make_eval(model, p, caption, seed, job)

    comm = lowcomm.settings(job)
    lowcomm_callbacks = lowcomm.tf_setup(model, strategy, comm) if strategy_name == "allreduce" else []
    emit("start", strategy=strategy_name, model=name, **model_sizes(model),
         global_batch=global_batch, workers=workers, servers=servers,
         steps_per_epoch=int(steps_per_epoch), epochs=int(job.get("epochs", 1)),
         steps_per_execution=spe, compute="replay" if replayed else "real",
         communication=lowcomm.in_force(comm) if strategy_name == "allreduce" else {},
         **balance.in_force(job.get("balance"), own, weight))
    from workloads.events import TestbedCallback
    held = []           # `done`, stamped when training ended, written after the probe: it stays last

    timing = TestbedCallback(samples_per_step, eval_fn, start=False, emit=holding_done(emit, held),
                             asynchronous=strategy_name == "ps",
                             counter=lowcomm.sent_bytes if strategy_name != "ps" else None,
                             batch=own if strategy_name != "ps" else None)
    try:
        with usage_sampler(job, emit):
            model.fit(x, epochs=int(job.get("epochs", 1)), steps_per_epoch=int(steps_per_epoch),
                      callbacks=backup_callbacks(job) + lowcomm_callbacks + [timing], verbose=0)
        if chief and name == "caption" and job.get("save_model") and not replayed:
            from workloads.caption import model as caption_model
            tokenizer = (caption or wdata.synthetic_caption_data(p, seed)).tokenizer
            emit("saved", path=str(caption_model.save(job["save_model"], model, tokenizer, p)))
        if not replayed:        # a replayed step's compute was calibrated before the run
            compute_probe(lambda: models.build_model(name, p),
                          lambda: wdata.flickr8k_dataset(caption, own, seed) if caption is not None
                          else wdata.synthetic_dataset(name, p, seed, own), emit, lead=task_index == 0)
    finally:
        for line in held:
            emit.write(line)


def set_train_step(model, job: dict, host: str, own: int, weight: float) -> None:
    """Replayed compute's stand-in step (its waits for this worker's own batch), or under workload.balance the
    step whose gradient is weighted by the worker's share of the global batch (workloads/balance/)."""
    replayed = job.get("replay")
    if replayed:
        import tensorflow as tf

        from workloads import replay
        if job["strategy"] == "ps":
            replay.replay_tensorflow(model, replayed["workers"],
                                     tf.distribute.coordinator.experimental_get_current_worker_index)
        else:
            bpw = int(job.get("batch_per_worker", 32))
            replay.replay_tensorflow(model, balance.scale_waits(replayed["hosts"][host]["layers"], own, bpw))
    elif job.get("balance"):
        from workloads.balance import static
        static.tf_setup(model, weight)


PROBE_WARMUP, PROBE_STEPS = 2, 10     # the first steps trace the function: left out of the timing


def compute_probe(build, dataset, emit, warmup: int = PROBE_WARMUP, steps: int = PROBE_STEPS,
                  lead: bool = True) -> None:
    """Time `steps` local training steps of a fresh model (`build()`) on one worker's batches
    (`dataset()`) with no distribution strategy (no collective, no parameter server): the compute
    part of a step. It runs after training because MultiWorkerMirroredStrategy must be created
    before any other TensorFlow work. The `compute` event: cpuquota.compute_probe."""
    def setup():
        import tf_keras as keras

        ends = []

        class Clock(keras.callbacks.Callback):
            def on_train_batch_end(self, batch, logs=None):
                ends.append((time.perf_counter(), time.process_time()))

        model = build()
        models.compile_model(model)
        model.fit(dataset(), epochs=1, steps_per_epoch=1, verbose=0)     # traces the step; later fits reuse it

        def timed():
            ends.clear()
            model.fit(dataset(), epochs=1, steps_per_epoch=warmup + steps, callbacks=[Clock()], verbose=0)
            (t0, c0), (t1, c1) = ends[warmup - 1], ends[-1]
            return (t1 - t0) / steps, (c1 - c0) / steps
        return timed

    cpuquota.compute_probe(setup, steps, emit, lead)


def backup_callbacks(job) -> list:
    """tf_keras' BackupAndRestore when the job asks for recovery: a task started again resumes from the
    last backup. Under ps, tf_keras backs up at epoch ends only (it skips per-batch saves there);
    every_steps "epoch" (strategy switch) asks for that under all-reduce too."""
    recovery = job.get("recovery")
    if not recovery:
        return []
    import tf_keras as keras
    every = recovery["every_steps"]
    every = "epoch" if job["strategy"] == "ps" or every == "epoch" else int(every)
    return [keras.callbacks.BackupAndRestore(recovery["backup_dir"], save_freq=every)]


def make_eval(model, p, caption, seed, job):
    """Per-epoch BLEU on the held-out images (synthetic held-out set without data)."""
    from workloads.caption import bleu
    from workloads import data as wdata

    held = caption or wdata.synthetic_caption_data(p, seed, images=8)
    limit = job.get("eval_max_images") or 200
    return lambda: bleu.evaluate(model, held, max_images=limit)


def task_main(body, argv=None) -> None:
    """A task's entry (this engine's and torch_train.py's): its arguments, events and job, then
    body(job, args, emit) under run_task (every failure an `error` event; the process exits)."""
    args = parse_args(argv)
    emit = Emitter(args.task_type, args.task_index, args.host)
    cpuquota.shared_file = args.job         # the compute probes of this machine's nodes take turns on it

    def task():
        with open(args.job) as fh:
            job = json.load(fh)
        emit.base["strategy"] = job.get("strategy")    # every event says which strategy it ran under
        body(job, args, emit)
    run_task(emit, task)


class WithoutPlotsOrFrames(importlib.abc.MetaPathFinder):
    """Keras imports matplotlib and pandas whenever they are installed (for its plots and data frames),
    and goes on without them: a task of the built-in models uses neither, and they took a second of each
    TensorFlow task's CPU at its start, a quarter of the engine's import."""

    UNUSED = ("matplotlib", "pandas")

    def find_spec(self, fullname, path=None, target=None):
        if fullname.partition(".")[0] in self.UNUSED:
            raise ModuleNotFoundError(f"{fullname} is not loaded in a training task", name=fullname)
        return None


def load_tensorflow() -> None:
    """TensorFlow and tf_keras, with the quota lifted (cpuquota.load_engine), without matplotlib or pandas."""
    if not any(isinstance(finder, WithoutPlotsOrFrames) for finder in sys.meta_path):
        sys.meta_path.insert(0, WithoutPlotsOrFrames())
    cpuquota.load_engine("tensorflow", "tf_keras")


def tensorflow_task(job, args, emit) -> None:
    check_job(job, args.task_type)
    set_environment(job, args.task_type, args.task_index)
    load_tensorflow()
    if job["strategy"] == "ps" and args.task_type in ("worker", "ps"):
        run_server(job, args.task_type, args.task_index, emit)
    else:
        run_training(job, args.task_type, args.task_index, emit)


def main(argv=None) -> None:
    task_main(tensorflow_task, argv)


if __name__ == "__main__":
    main()
