"""Start the training tasks on the nodes (any kind), supervise them, collect their JSON events."""
from __future__ import annotations

import json
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from testbed.roles import Task, cluster_spec, final_tasks, tf_config

TRAIN_PY = "workloads/train.py"     # relative to the project's code in the node (Node.repo)
LAUNCHER_PY = "workloads/script_launcher.py"


@dataclass
class Outcome:
    ok: bool
    reason: str | None
    events: dict[Task, list[dict]] = field(default_factory=dict)


def job_document(workload, cluster: dict) -> dict:
    """The JOB.json that workloads/train.py reads (docs/contracts.md)."""
    return {
        "strategy": workload.strategy, "model": workload.model, "model_params": dict(workload.model_params),
        "batch_per_worker": workload.batch_per_worker, "epochs": workload.epochs,
        "steps_per_epoch": workload.steps_per_epoch, "seed": workload.seed, "cluster": cluster,
        "allreduce": workload.allreduce.model_dump(),
        "ps": {"partition": workload.ps.partition, "steps_per_execution": workload.ps.steps_per_execution},
        "data": workload.data.model_dump(), "eval": workload.eval,
    }


def read_events(path: Path) -> list[dict]:
    events = []
    if path.exists():
        for line in path.read_text(errors="replace").splitlines():
            line = line.strip()
            if line.startswith("{"):
                try:
                    events.append(json.loads(line))
                except ValueError:
                    pass
    return events


def _last_words(task: Task, run_dir: Path) -> str:
    """The task's own error event, else the last line of its log, for a failure reason."""
    errors = [e for e in read_events(run_dir / f"{task.log_stem}.events.jsonl") if e.get("event") == "error"]
    if errors:
        return errors[-1].get("message", "")[:300]
    log = run_dir / f"{task.log_stem}.log"
    lines = [ln for ln in log.read_text(errors="replace").splitlines() if ln.strip()] if log.exists() else []
    return lines[-1][:300] if lines else "no output"


def _describe_exit(code: int) -> str:
    if code < 0:
        return f"was killed by signal {signal.Signals(-code).name}"
    return f"exited with code {code}"


class Training:
    """Runs one workload across the network's hosts; `run()` returns an Outcome and ends every task."""

    def __init__(self, net, workload, tasks: list[Task], run_dir: Path, progress=lambda msg: None,
                 script: str | None = None):
        self.net, self.workload, self.tasks, self.run_dir = net, workload, tasks, run_dir
        self.progress = progress
        self.script = script            # the user's own script (absolute path), or None for the built-in
        self.procs: dict[Task, subprocess.Popen] = {}

    def run(self) -> Outcome:
        ips = {t.host: self.net.nodes[t.host].address for t in self.tasks}
        self.cluster = cluster_spec(self.tasks, ips)
        job_path = self.run_dir / "job.json"
        job_path.write_text(json.dumps(job_document(self.workload, self.cluster), indent=2))
        try:
            for task in self.tasks:
                self.procs[task] = self._start(task, job_path)
            ok, reason = self._supervise()
        finally:
            self.stop_all()
        events = {t: read_events(self.run_dir / f"{t.log_stem}.events.jsonl") for t in self.tasks}
        return Outcome(ok, reason, events)

    def _runs_script(self, task: Task) -> bool:
        """The user's script runs in every task, except that under ps the testbed runs the servers
        itself unless script_roles says all."""
        return self.script is not None and (self.workload.strategy != "ps" or self.workload.script_roles == "all"
                                            or task.task_type == "chief")

    def _start(self, task: Task, job_path: Path) -> subprocess.Popen:
        node = self.net.nodes[task.host]
        identity = ["--task-type", task.task_type, "--task-index", str(task.index), "--host", task.host]
        env = {"PYTHONPATH": node.repo, "TF_CPP_MIN_LOG_LEVEL": "2", "DLTESTBED_HOST": task.host}
        if self._runs_script(task):
            folder = node.stage(Path(self.script).parent)
            cmd = [node.python, "-u", f"{node.repo}/{LAUNCHER_PY}", *identity,
                   f"{folder}/{Path(self.script).name}", *self.workload.args]
            env.update(TF_USE_LEGACY_KERAS="1", GRPC_FAIL_FAST="use_caller")
            if self.cluster:
                env["TF_CONFIG"] = json.dumps(tf_config(self.cluster, task))
            cwd = folder
        else:
            cmd = [node.python, "-u", f"{node.repo}/{TRAIN_PY}", "--job", node.stage(job_path), *identity]
            cwd = node.repo
        env = node.env({**env, **self.workload.env})
        stdout = open(self.run_dir / f"{task.log_stem}.events.jsonl", "w")
        stderr = open(self.run_dir / f"{task.log_stem}.log", "w")
        proc = node.popen(cmd, cwd=cwd, stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr, env=env)
        stdout.close()
        stderr.close()
        return proc

    def _supervise(self) -> tuple[bool, str | None]:
        finals = set(final_tasks(self.tasks))
        deadline = time.monotonic() + self.workload.timeout
        seen_epochs = 0
        while True:
            ended = [(t, p.poll()) for t, p in self.procs.items() if p.poll() is not None]
            # A task killed by a signal is the cause; peers that then fail their collectives are the effect.
            broken = sorted(((t, c) for t, c in ended if c != 0 or t not in finals), key=lambda tc: tc[1] >= 0)
            if broken:
                task, code = broken[0]
                return False, f"{task.label} {_describe_exit(code)}: {_last_words(task, self.run_dir)}"
            if all(self.procs[t].poll() == 0 for t in finals):
                return True, None
            if time.monotonic() > deadline:
                waiting = ", ".join(t.label for t in finals if self.procs[t].poll() is None)
                return False, f"timed out after {self.workload.timeout:g} s waiting for {waiting}"
            seen_epochs = self._report_progress(seen_epochs)
            time.sleep(0.2)

    def _report_progress(self, seen: int) -> int:
        first = final_tasks(self.tasks)[0]
        epochs = [e for e in read_events(self.run_dir / f"{first.log_stem}.events.jsonl") if e.get("event") == "epoch"]
        for e in epochs[seen:]:
            self.progress(f"epoch {e.get('epoch')}: {e.get('time_s', 0):.2f} s, loss {e.get('loss', float('nan')):.4f}")
        return len(epochs)

    def stop_all(self) -> None:
        """SIGTERM, a grace period, then SIGKILL for every task still alive."""
        alive = [p for p in self.procs.values() if p.poll() is None]
        for p in alive:
            p.terminate()
        end = time.monotonic() + 3
        for p in alive:
            try:
                p.wait(max(0.1, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
