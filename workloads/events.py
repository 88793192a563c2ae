"""JSON events of a training task, one object per line on stdout (docs/developer/contracts.md, "Workload").

`TestbedCallback` is the tf_keras callback that writes the step, epoch, eval and done events. The
built-in workload (workloads/train.py) uses it, and so can any tf_keras script the testbed starts:

    from testbed.callback import TestbedCallback
    model.fit(dataset, epochs=3, steps_per_epoch=100, callbacks=[TestbedCallback(global_batch=64)])

The role and task index come from TF_CONFIG when it is set (else `single`, 0). This module imports
only the standard library; tf_keras is imported when `TestbedCallback` is first looked up.
"""
from __future__ import annotations

import json
import math
import os
import shutil
import socket
import sys
import tempfile
import threading
import time

HOST_ENV = "DLTESTBED_HOST"  # the emulated host's name (Mininet hosts share one hostname)
TASK_TMP_PREFIX = "dltb-task-"   # + the run's identity (DLTESTBED_OWNER): `cleanup` removes a dead run's


def _tf_config() -> dict:
    return json.loads(os.environ.get("TF_CONFIG") or "{}")


def task_identity() -> tuple[str, int]:
    """(role, task index) from TF_CONFIG, else from torchrun's RANK and WORLD_SIZE (PyTorch);
    ('single', 0) without either."""
    task = _tf_config().get("task")
    if not task and int(os.environ.get("WORLD_SIZE") or 1) > 1:
        return "worker", int(os.environ.get("RANK") or 0)
    task = task or {}
    return str(task.get("type", "single")), int(task.get("index", 0))


def cluster_shape() -> tuple[str, int]:
    """(strategy, parameter servers) from TF_CONFIG: ps, allreduce (a cluster) or single."""
    cluster = _tf_config().get("cluster") or {}
    servers = len(cluster.get("ps") or [])
    return ("ps" if servers else "allreduce" if cluster else "single"), servers


class Emitter:
    """Writes one flushed JSON line per event, tagged with the task identity."""

    def __init__(self, role: str | None = None, task_index: int | None = None,
                 host: str | None = None, stream=None):
        default_role, default_index = task_identity()
        self.base = {"role": role or default_role,
                     "task_index": default_index if task_index is None else task_index,
                     "host": host or os.environ.get(HOST_ENV) or socket.gethostname()}
        self.stream = stream
        self.lock = threading.Lock()

    def __call__(self, event: str, **fields):
        self.write(self.line(event, **fields))

    def line(self, event: str, **fields) -> str:
        """The event's JSON line, stamped with the time now (write it later with `write`)."""
        rec = {"event": event, **self.base, "t": time.time()}
        rec.update({k: _plain(v) for k, v in fields.items()})
        return json.dumps(rec, allow_nan=False)

    def write(self, line: str) -> None:
        out = self.stream or sys.stdout
        with self.lock:
            out.write(line + "\n")
            out.flush()


def holding_done(emit: Emitter, held: list):
    """An emit that passes every event but `done`, which it stamps now and keeps in `held`: the task
    writes it after the compute probe, so that `done` stays the last event with training's end time."""
    def hold(event: str, **fields):
        if event == "done":
            held.append(emit.line(event, **fields))
        else:
            emit(event, **fields)
    return hold


def private_tmp() -> str:
    """Point this task's temporary files (tempfile, and TMPDIR for its children) at a folder of its
    own, which exit_task removes: TensorFlow's autograph writes its generated code there and
    deletes it only in an atexit hook, which os._exit skips."""
    owner = os.environ.get("DLTESTBED_OWNER", "none")
    path = tempfile.mkdtemp(prefix=f"{TASK_TMP_PREFIX}{owner}-")
    tempfile.tempdir = os.environ["TMPDIR"] = path
    return path


def exit_task(code: int) -> None:
    """Leave now, without the engine's teardown (gRPC, the coordination service, a process group),
    which can hang waiting for peers; the task's temporary folder goes first."""
    sys.stdout.flush()
    sys.stderr.flush()
    folder = tempfile.tempdir or ""
    if os.path.basename(folder).startswith(TASK_TMP_PREFIX):
        shutil.rmtree(folder, ignore_errors=True)
    os._exit(code)


def run_task(emit: Emitter, body) -> None:
    """Run a training task's body() in its own temporary folder: any failure becomes an `error`
    event (its traceback on stderr) and exit code 1; the process exits either way (exit_task)."""
    private_tmp()
    try:
        body()
    except BaseException as exc:  # noqa: BLE001 - every failure becomes an event
        import traceback
        traceback.print_exc(file=sys.stderr)
        emit("error", message="interrupted" if isinstance(exc, KeyboardInterrupt) else f"{type(exc).__name__}: {exc}")
        exit_task(1)
    exit_task(0)


class StepClock:
    """Step, epoch and done events of a hand-written training loop (a PyTorch one, or any): call
    `step(loss)` after each optimizer step, `epoch_end()` after each epoch and `done()` at the end.

        from testbed.callback import StepClock
        clock = StepClock(global_batch=64)
        for epoch in range(epochs):
            for x, y in loader:
                ...
                optimizer.step()
                clock.step(loss.item())
            clock.epoch_end()
        clock.done()

    The clock starts when it is made: make it just before the loop. An epoch's loss is the mean of
    its steps' losses unless `epoch_end(loss)` says otherwise. `counter`: a function giving the bytes
    the node has sent so far, put in each step event as tx_bytes (the built-in loops' lowcomm.sent_bytes);
    `batch`: this worker's own batch, put in each step event (a balanced worker's, workloads/balance/)."""

    def __init__(self, global_batch: int | None = None, emit: Emitter | None = None, counter=None,
                 batch: int | None = None):
        self.emit = emit or Emitter()
        self.global_batch, self.counter, self.batch = global_batch, counter, batch
        self.t0 = self.last = self.epoch_t0 = time.time()
        self.epoch, self.steps, self.first, self.losses, self.final_loss = 1, 0, 0, [], None

    def _per_s(self, steps: int, seconds: float):
        return steps * self.global_batch / seconds if self.global_batch and seconds > 0 else None

    def step(self, loss=None, **fields) -> None:
        """`fields`: more of the step event's (balance dynamic's compute_s)."""
        now = time.time()
        self.steps += 1
        loss = None if loss is None else float(loss)
        if loss is not None:
            self.losses.append(loss)
        sent = {"tx_bytes": self.counter()} if self.counter is not None else {}
        sent.update(fields)
        if self.batch is not None:
            sent["batch"] = self.batch
        self.emit("step", epoch=self.epoch, step=self.steps, time_s=now - self.last, loss=loss, **sent)
        self.last = now

    def epoch_end(self, loss=None) -> None:
        dt = time.time() - self.epoch_t0
        steps = self.steps - self.first
        self.final_loss = float(loss) if loss is not None else (sum(self.losses) / len(self.losses)
                                                                 if self.losses else None)
        self.emit("epoch", epoch=self.epoch, time_s=dt, loss=self.final_loss, steps=steps,
                  samples_per_s=self._per_s(steps, dt))
        self.epoch, self.losses, self.first = self.epoch + 1, [], self.steps
        self.epoch_t0 = self.last = time.time()

    def done(self) -> None:
        total = time.time() - self.t0
        self.emit("done", training_time_s=total, time_per_step_s=total / self.steps if self.steps else None,
                  samples_per_s=self._per_s(self.steps, total), final_loss=self.final_loss, steps=self.steps,
                  asynchronous=False)


def _plain(v):
    """JSON-safe scalar: numpy -> python, non-finite floats -> None."""
    if hasattr(v, "item") and getattr(v, "ndim", 1) == 0:
        v = v.item()
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def model_sizes(model) -> dict:
    """The `start` event's params and gradient_bytes (float32 gradient of the trainable variables)."""
    trainable = sum(v.shape.num_elements() for v in model.trainable_variables)
    return {"params": int(model.count_params()), "gradient_bytes": 4 * int(trainable)}


def _loss(v):
    """The loss of a batch/epoch log: a number, a tensor, or (ps) a RemoteValue or a dict of them."""
    if isinstance(v, dict):
        v = v.get("loss")
    if hasattr(v, "fetch"):
        v = v.fetch()
        if isinstance(v, dict):
            v = v.get("loss")
    return None if v is None else float(v)


def _is_ready(rv) -> bool:
    """Non-blocking readiness of a ps RemoteValue (logs may be a dict of them)."""
    if isinstance(rv, dict):
        rv = rv.get("loss")
    event = getattr(rv, "_status_available_event", None)
    return event is None or event.is_set()


class _TestbedTiming:
    """Step, epoch, eval and done events of `model.fit` (see the module docstring).

    global_batch: samples per step over all workers (per worker under ps), for samples_per_s;
    eval_fn: called after each epoch, returns {metric: value} for an `eval` event (its time is
    left out of the training time); start: also emit a `start` event from the model (the
    built-in workload emits its own); emit: an Emitter (default: stdout, identity from
    TF_CONFIG); asynchronous/replicas: default from the model's distribution strategy; counter: a
    function giving the bytes the node has sent so far, put in each step event as tx_bytes; batch: this
    worker's own batch, put in each step event (a balanced worker's, workloads/balance/).
    """

    __test__ = False  # not a pytest test class, despite its name

    def __init__(self, global_batch: int | None = None, eval_fn=None, start: bool = True,
                 emit: Emitter | None = None, asynchronous: bool | None = None,
                 replicas: int | None = None, counter=None, batch: int | None = None):
        super().__init__()
        self.counter, self.batch = counter, batch
        self._supports_tf_logs = True  # lets it see RemoteValues under ps
        self.emit = emit or Emitter()
        self.global_batch, self.eval_fn, self.announce = global_batch, eval_fn, start
        self.asynchronous, self.replicas = asynchronous, replicas
        self.pending = []              # ps: (epoch, step, RemoteValue)
        self.cond = threading.Condition()
        self.stop = False
        self.poller = None

    # --- step events ------------------------------------------------------------------
    def _step_event(self, epoch, step, loss):
        now = time.time()
        sent = {"tx_bytes": self.counter()} if self.counter is not None else {}
        if self.batch is not None:
            sent["batch"] = self.batch
        self.emit("step", epoch=epoch, step=step, time_s=now - self.last, loss=loss, **sent)
        self.last = now
        self.emitted += 1

    def _poll(self):
        """ps: emit steps as their closures finish, without blocking fit()."""
        while True:
            with self.cond:
                if self.stop and not self.pending:
                    return
                ready = [p for p in self.pending if _is_ready(p[2])]
                for p in ready:
                    self.pending.remove(p)
                if not ready:
                    self.cond.wait(0.005)
                    continue
            for epoch, step, rv in sorted(ready, key=lambda p: p[1]):
                self._step_event(epoch, step, _loss(rv))

    def _drain(self):
        with self.cond:
            rest = sorted(self.pending, key=lambda p: p[1])
            self.pending.clear()
        for epoch, step, rv in rest:
            self._step_event(epoch, step, _loss(rv))

    def _samples_per_s(self, steps, seconds):
        return steps * self.global_batch / seconds if self.global_batch and seconds > 0 else None

    # --- keras hooks ------------------------------------------------------------------
    def on_train_begin(self, logs=None):
        strategy = self.model.distribute_strategy
        if self.asynchronous is None:
            self.asynchronous = "ParameterServer" in type(strategy).__name__
        if self.replicas is None:
            self.replicas = strategy.num_replicas_in_sync
        if self.announce:
            name, servers = cluster_shape()
            self.emit("start", strategy=name, model=self.model.name, **model_sizes(self.model),
                      global_batch=self.global_batch, workers=self.replicas, servers=servers,
                      epochs=self.params.get("epochs"), steps_per_epoch=self.params.get("steps"))
        self.steps = self.queued = self.emitted = self.ran = 0
        self.resumed = None            # set at the first batch: where this fit starts
        self.eval_s, self.final_loss = 0.0, None
        self.t0 = self.last = time.time()
        if self.asynchronous:
            self.poller = threading.Thread(target=self._poll, daemon=True)
            self.poller.start()

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch_t0 = time.time()
        self.epoch_n = epoch + 1
        self.epoch_steps = 0

    def on_train_batch_begin(self, batch, logs=None):
        if self.resumed is None:       # a fit restored from a backup (BackupAndRestore) starts later
            per_epoch = self.params.get("steps") or 0
            self.resumed = (self.epoch_n - 1) * per_epoch + batch
            self.steps, self.epoch_steps = self.resumed, batch
            if self.resumed:
                self.emit("resume", epoch=self.epoch_n, step=self.resumed)

    def on_train_batch_end(self, batch, logs=None):
        done = batch + 1  # Keras passes the last batch index of the execution
        self.ran += done - self.epoch_steps
        self.steps += done - self.epoch_steps
        self.epoch_steps = done
        if self.asynchronous:
            with self.cond:
                self.pending.append((self.epoch_n, self.steps, logs))
                self.queued += 1
                self.cond.notify()
        else:  # Keras sums per-replica batch losses off TPU: report their mean, as epochs do
            loss = _loss(logs)
            self._step_event(self.epoch_n, self.steps,
                             None if loss is None else loss / self.replicas)

    def on_epoch_end(self, epoch, logs=None):
        if self.asynchronous:  # fit() has joined: every closure is done
            while self.emitted < self.queued and self.poller.is_alive():
                time.sleep(0.005)
        dt = time.time() - self.epoch_t0
        self.final_loss = _loss(logs or {})
        self.emit("epoch", epoch=epoch + 1, time_s=dt, loss=self.final_loss,
                  steps=self.epoch_steps, samples_per_s=self._samples_per_s(self.epoch_steps, dt))
        if self.eval_fn is not None:
            t = time.time()
            self.emit("eval", epoch=epoch + 1, **self.eval_fn())
            self.eval_s += time.time() - t
        self.last = time.time()

    def on_train_end(self, logs=None):
        total = time.time() - self.t0 - self.eval_s
        if self.poller:
            with self.cond:
                self.stop = True
                self.cond.notify()
            self.poller.join(timeout=30)
            self._drain()
        self.emit("done", training_time_s=total,
                  time_per_step_s=total / self.ran if self.ran else None,
                  samples_per_s=self._samples_per_s(self.ran, total),
                  final_loss=self.final_loss, steps=self.steps,
                  asynchronous=bool(self.asynchronous))


def _callback_class():
    """TestbedCallback: _TestbedTiming on tf_keras' Callback, made when first looked up (tf_keras loads then)."""
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")   # tf.keras = tf_keras in the user's script too
    import tf_keras as keras
    return type("TestbedCallback", (_TestbedTiming, keras.callbacks.Callback),
                {"__doc__": _TestbedTiming.__doc__, "__module__": __name__, "__qualname__": "TestbedCallback"})


def __getattr__(name):  # PEP 562: build the Keras class on first use only
    if name == "TestbedCallback":
        globals()[name] = _callback_class()
        return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
