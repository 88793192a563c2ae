"""The testbed's Keras callback for your own tf_keras script: one line gives per-step rows.

    from testbed.callback import TestbedCallback
    model.fit(dataset, epochs=3, steps_per_epoch=100, callbacks=[TestbedCallback(global_batch=64)])

It prints the step, epoch, eval and done events of docs/developer/contracts.md as JSON lines on stdout,
which the orchestrator collects into steps.csv and runs.csv; role and task index come from
TF_CONFIG. Needs only tf_keras (the implementation is workloads/events.py).
"""
from workloads.events import Emitter, TestbedCallback, task_identity

__all__ = ["Emitter", "TestbedCallback", "task_identity"]
