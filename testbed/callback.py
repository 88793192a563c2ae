"""The testbed's Keras callback for your own tf_keras script: one line gives per-step rows.

    from testbed.callback import TestbedCallback
    model.fit(dataset, epochs=3, steps_per_epoch=100, callbacks=[TestbedCallback(global_batch=64)])

It prints the step, epoch, eval and done events of docs/developer/contracts.md as JSON lines on stdout,
which the orchestrator collects into steps.csv and runs.csv; role and task index come from
TF_CONFIG. Needs only tf_keras (the implementation is workloads/events.py).

A PyTorch script (or any hand-written loop) gets the same rows from `StepClock`: `clock.step(loss)`
after each optimizer step, `clock.epoch_end()` after each epoch, `clock.done()` at the end; role and
task index come from RANK and WORLD_SIZE there. It needs only the standard library.
"""
from workloads import events
from workloads.events import Emitter, StepClock, task_identity

__all__ = ["Emitter", "StepClock", "TestbedCallback", "task_identity"]


def __getattr__(name):      # TestbedCallback imports tf_keras: only when it is asked for
    if name == "TestbedCallback":
        return events.TestbedCallback
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
