"""Start the training tasks on the nodes (any kind), supervise them, collect their JSON events."""
from __future__ import annotations

import json
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from testbed.run import phases
import workloads.balance as balance
from testbed.roles import (Task, assign_tasks, cluster_spec, final_tasks, restart_group, tf_config,
                           threads_per_task, torchrun_env, workers)

TRAIN_PY = {"tensorflow": "workloads/train.py",     # relative to the project's code in the node (Node.repo)
            "pytorch": "workloads/torch_train.py"}
LAUNCHER_PY = "workloads/script_launcher.py"


@dataclass
class Outcome:
    ok: bool
    reason: str | None
    events: dict[Task, list[dict]] = field(default_factory=dict)
    restarts: list[dict] = field(default_factory=list)    # Training.restart: t, tasks, reason
    switches: list[dict] = field(default_factory=list)    # strategy switch: t, epoch, from, to, reason
    leads: list[Task] = field(default_factory=list)       # the lead task of each strategy in turn


def job_document(workload, cluster: dict) -> dict:
    """The JOB.json that workloads/train.py reads (docs/developer/contracts.md): steps_per_epoch is this
    point's (workload.fixed: under fixed data, the epoch's samples over this cluster's samples per step);
    learning_rate this point's (workload.lr_scaling: scaled with its global batch);
    communication: workload.communication, which both training loops apply (workloads/lowcomm.py)."""
    return {
        "strategy": workload.strategy, "model": workload.model, "model_params": dict(workload.model_params),
        "batch_per_worker": workload.batch_per_worker, "epochs": workload.epochs,
        "steps_per_epoch": workload.steps_at(len(cluster.get("worker") or ()) or 1), "seed": workload.seed,
        "learning_rate": workload.learning_rate_at(len(cluster.get("worker") or ()) or 1),
        "cluster": cluster,
        "allreduce": workload.allreduce.model_dump(),
        "communication": workload.communication.model_dump(),    # workloads/lowcomm.py applies it
        "ps": {"partition": workload.ps.partition, "steps_per_execution": workload.ps.steps_per_execution},
        "data": workload.data.model_dump(), "eval": workload.eval,
    }


def balance_plan(workload, tasks: list[Task], speeds: dict | None) -> dict | None:
    """The job's `balance` section (workloads/balance/): each all-reduce worker's batch and gradient weight from
    its node's speed (`speeds`: host -> cores, or 1 / its replayed step time); None for balance none and for
    the strategies without a global batch to share."""
    method = balance.method_of(workload.balance)
    ranked = workers(tasks)
    if workload.strategy != "allreduce" or not ranked or method.NAME == balance.PLAIN:
        return None
    speeds = speeds or {}
    return method.plan(workload.balance, workload.batch_per_worker * len(ranked),
                       {t.host: speeds.get(t.host) for t in ranked})


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
                 script: str | None = None, faults=None, switcher=None, script_files: list[str] = (), tracer=None,
                 replay: dict | None = None, speeds: dict | None = None):
        self.net, self.workload, self.tasks, self.run_dir = net, workload, tasks, run_dir
        self.speeds = speeds            # workload.balance: each host's speed (balance_plan)
        self.balance: dict | None = None   # the job's balance section, once written
        self.replay = replay            # compute: replay, each host's waits (ResolvedPoint.replay_job), or None
        self.progress = progress
        self.script = script            # the user's own script (absolute path), or None for the built-in
        self.script_files = list(script_files) or ([script] if script else [])   # what it stages on a node
        self.faults = faults            # faults.Applier (ticked while training, closed before the end) or None
        self.switcher = switcher        # strategy switch: testbed.run.training.strategy_switch.Switcher (checked at epoch ends) or None
        self.tracer = tracer            # links that follow a trace: traces.Tracer (ticked while training) or None
        self.procs: dict[Task, subprocess.Popen] = {}
        self.restarts: list[dict] = []
        self.switches: list[dict] = []
        self.ran: list[Task] = list(tasks)     # every task started, over all strategies
        self.leads: list[Task] = [final_tasks(tasks)[0]]

    def run(self) -> Outcome:
        self.backup_dir = None
        if self.workload.recovery == "backup" or self.switcher is not None:
            try:
                self.backup_dir = self._backup_dir()
            except NotImplementedError as err:
                why = "workload.recovery backup" if self.switcher is None else "strategy switch"
                return Outcome(False, f"{why} needs a folder every task can write: {err}")
        self.job_path = self._write_job("job.json")
        self.launched = launched = time.time()     # strategy switch: the tasks' start-up is what a switch costs again
        try:
            for task in self.tasks:
                self.procs[task] = self._start(task, self.job_path)
            ok, reason = self._supervise()
        finally:
            if self.faults is not None:
                self.faults.close(self)
            self.stop_all()
        ended = time.time()
        events = {}
        for t in reversed(self.ran):     # a log file shared by two tasks (same host, type, index) counts once
            if all(t.log_stem != seen.log_stem for seen in events):
                events[t] = read_events(self.run_dir / f"{t.log_stem}.events.jsonl")
        lead = self.leads[0].log_stem
        self._phases(next((evs for t, evs in events.items() if t.log_stem == lead), []), launched, ended)
        return Outcome(ok, reason, dict(reversed(events.items())), self.restarts, self.switches, self.leads)

    @staticmethod
    def _phases(lead_events: list[dict], launched: float, ended: float) -> None:
        """The engine's start (the first launch to the first lead's first start or script_start event; all
        of it when there was none) and the training (that event to the end of every task) for the point's
        phases (testbed/run/phases.py)."""
        began = next((e["t"] for e in lead_events if e.get("event") in ("start", "script_start")
                      and isinstance(e.get("t"), (int, float))), None)
        phases.add("engine start", (began if began is not None else ended) - launched)
        if began is not None:
            phases.add("training", ended - began)

    def _write_job(self, name: str) -> Path:
        """The job document of the current workload and tasks (cluster, threads, backups) in the run folder."""
        ips = {t.host: self.net.nodes[t.host].address for t in self.tasks}
        self.cluster = cluster_spec(self.tasks, ips)
        machines = {h: (n.machine, n.machine_cores, n.limits["cpu"], n.limits.get("cores")) for h, n in self.net.nodes.items()}
        self.threads = (threads_per_task(self.tasks, machines) if self.workload.threads == "auto"
                        else {t: self.workload.threads for t in self.tasks})
        replayed = (self.replay or {}).get("hosts", {})
        for t in self.tasks:        # a stand-in runs with the threads it was calibrated with, not the machine's
            if (self.workload.threads == "auto" and t.task_type in ("single", "worker") and t.host in replayed
                    and "threads" in replayed[t.host]):
                self.threads[t] = replayed[t.host]["threads"]
        job = job_document(self.workload, self.cluster)
        plan = balance_plan(self.workload, self.tasks, self.speeds)
        if plan is not None:
            job["balance"] = plan
        self.balance = plan
        if self.backup_dir:      # a switch resumes from the backup of the epoch it decided at
            every = "epoch" if self.switcher is not None else self.workload.backup_every_steps
            job["recovery"] = {"backup_dir": self.backup_dir, "every_steps": every}
        if self.replay is not None:     # the ps strategy's workers wait by index: their hosts' waits in that order
            job["replay"] = {**self.replay, "workers": [self.replay["hosts"][t.host]["layers"]
                                                        for t in workers(self.tasks)]}
        saved = self._model_dir()
        if saved:
            job["save_model"] = saved
        path = self.run_dir / name
        path.write_text(json.dumps(job, indent=2))
        return path

    def _model_dir(self) -> str | None:
        """Where the lead task saves a trained caption model (the run folder's model/, as its node
        sees it), or None: another model, a script, or a node that cannot write here (then the
        `caption` command has nothing to read, and says so)."""
        if self.script is not None or self.workload.model != "caption":
            return None
        local = self.run_dir / "model"
        try:
            seen = self.net.nodes[self.leads[0].host].shared_dir(local)
        except NotImplementedError:
            return None
        local.mkdir(exist_ok=True)
        return seen

    def _backup_dir(self) -> str:
        """The run folder's backup/ as the tasks' nodes see it (one path: they share one job file)."""
        local = self.run_dir / "backup"
        local.mkdir(exist_ok=True)
        seen = {self.net.nodes[t.host].shared_dir(local) for t in self.tasks}
        if len(seen) > 1:
            raise NotImplementedError(f"the nodes see it at different paths ({', '.join(sorted(seen))})")
        return seen.pop()

    def _runs_script(self, task: Task) -> bool:
        """The user's script runs in every task, except that under ps the testbed runs the servers
        itself unless script_roles says all."""
        return self.script is not None and (self.workload.strategy != "ps" or self.workload.script_roles == "all"
                                            or task.task_type == "chief")

    def _start(self, task: Task, job_path: Path, mode: str = "w") -> subprocess.Popen:
        node = self.net.nodes[task.host]
        identity = ["--task-type", task.task_type, "--task-index", str(task.index), "--host", task.host]
        env = {"PYTHONPATH": node.repo, "TF_CPP_MIN_LOG_LEVEL": "2", "DLTESTBED_HOST": task.host}
        engine = self.workload.engine
        if self.threads[task]:     # 0: the engine's own default
            # Intra-op only: a one-thread inter-op pool deadlocks blocking ops (ps closures hung with it).
            env["TF_NUM_INTRAOP_THREADS"] = str(self.threads[task])
            if engine == "pytorch":
                env["OMP_NUM_THREADS"] = str(self.threads[task])
        if engine == "pytorch":
            env.update(torchrun_env(self.cluster, task, node.interface))
        if self._runs_script(task):
            folder = node.stage_files(Path(self.script).parent, [Path(f) for f in self.script_files])
            cmd = [node.python, "-u", f"{node.repo}/{LAUNCHER_PY}", "--engine", engine, *identity,
                   f"{folder}/{Path(self.script).name}", *self.workload.args]
            if engine == "tensorflow":
                env.update(TF_USE_LEGACY_KERAS="1", GRPC_FAIL_FAST="use_caller")
                if self.cluster:
                    env["TF_CONFIG"] = json.dumps(tf_config(self.cluster, task))
            if self.backup_dir:        # for the script's own BackupAndRestore
                env["DLTESTBED_BACKUP_DIR"] = self.backup_dir
            cwd = folder
        else:
            cmd = [node.python, "-u", f"{node.repo}/{TRAIN_PY[engine]}", "--job", node.stage(job_path), *identity]
            cwd = node.repo
        env = node.env({**env, **self.workload.env})
        stdout = open(self.run_dir / f"{task.log_stem}.events.jsonl", mode)
        stderr = open(self.run_dir / f"{task.log_stem}.log", mode)
        proc = node.popen(cmd, cwd=cwd, stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr, env=env)
        stdout.close()
        stderr.close()
        return proc

    def _supervise(self) -> tuple[bool, str | None]:
        deadline = time.monotonic() + self.workload.timeout
        seen_epochs: dict[str, int] = {}
        while True:
            finals = set(final_tasks(self.tasks))       # the tasks change with a strategy switch
            lead = final_tasks(self.tasks)[0]
            ended = [(t, p.poll()) for t, p in self.procs.items() if p.poll() is not None]
            # A task killed by a signal is the cause; peers that then fail their collectives are the effect.
            broken = sorted(((t, c) for t, c in ended if c != 0 or t not in finals), key=lambda tc: tc[1] >= 0)
            if broken:
                task, code = broken[0]
                cause = self.faults.cause(task) if self.faults is not None else None
                reason = (f"{task.label} {_describe_exit(code)}{f' ({cause})' if cause else ''}: "
                          f"{_last_words(task, self.run_dir)}")
                if not self._recover(task, reason):
                    return False, reason + (f" (after {len(self.restarts)} restart(s))" if self.restarts else "")
                continue
            if all(self.procs[t].poll() == 0 for t in finals):
                return True, None
            if time.monotonic() > deadline:
                waiting = ", ".join(t.label for t in finals if self.procs[t].poll() is None)
                return False, f"timed out after {self.workload.timeout:g} s waiting for {waiting}"
            events = read_events(self.run_dir / f"{lead.log_stem}.events.jsonl")
            seen_epochs[lead.log_stem] = self._report_progress(events, seen_epochs.get(lead.log_stem, 0))
            problem = self.faults.tick(self, events) if self.faults is not None else None
            problem = problem or (self.tracer.tick(self, events) if self.tracer is not None else None)
            if problem:
                return False, problem
            verdict = self.switcher.check(self, events) if self.switcher is not None else None
            if verdict is not None:
                self.switch(verdict.to, verdict.epoch, verdict.reason)
                continue
            time.sleep(0.2 if self.faults is None and self.tracer is None else 0.05)   # act within a step or two

    def _report_progress(self, events: list[dict], seen: int) -> int:
        epochs = [e for e in events if e.get("event") == "epoch"]
        for e in epochs[seen:]:
            loss = e.get("loss")
            said = f", loss {loss:.4f}" if isinstance(loss, (int, float)) else ""     # none: replayed, or not logged
            self.progress(f"epoch {e.get('epoch')}: {e.get('time_s') or 0:.2f} s{said}")
        return len(epochs)

    def _recover(self, lost: Task, reason: str) -> bool:
        """With workload.recovery backup and restarts left: start the tasks that must go again."""
        if self.workload.recovery != "backup" or len(self.restarts) >= self.workload.max_restarts:
            return False
        group = restart_group(self.tasks, lost, self.workload.strategy)
        self.progress(f"{reason[:200]}; restarting {', '.join(t.label for t in group)} from the last backup")
        self.restart(group, reason)
        return True

    def restart(self, tasks: list[Task], reason: str = "", workload=None) -> None:
        """Stop `tasks` (SIGTERM, a grace period, SIGKILL) and start each again with the same identity
        (type, index, host, port) and job, appending to its log and events; counted in `restarts`.
        The built-in workload resumes from the last backup when the job has recovery on.
        With `workload` (a strategy switch): stop every task and start `tasks`, the new strategy's,
        under a new job document; they resume from the same backup (counted in `switches`)."""
        if workload is None:
            self._stop([self.procs[t] for t in tasks])
            for task in tasks:
                self.procs[task] = self._start(task, self.job_path, mode="a")
            self.restarts.append({"t": time.time(), "tasks": [t.label for t in tasks], "reason": reason})
            return
        self.stop_all()
        self.workload, self.tasks, self.procs = workload, list(tasks), {}
        self.ran += [t for t in tasks if t not in self.ran]
        self.leads.append(final_tasks(tasks)[0])
        self.job_path = self._write_job(f"job-switch{len(self.switches) + 1}.json")
        self.launched = time.time()
        for task in tasks:
            self.procs[task] = self._start(task, self.job_path, mode="a")

    def switch(self, strategy: str, epoch: int, reason: str = "") -> None:
        """strategy switch: the tasks of `strategy` on the same hosts, resuming after `epoch`."""
        before = self.workload.strategy
        workload = self.workload.model_copy(update={"strategy": strategy})
        tasks = assign_tasks(workload, [h.name for h in self.net.graph.hosts])
        self.progress(f"switching from {before} to {strategy} after epoch {epoch}")
        self.restart(tasks, reason, workload=workload)
        self.switches.append({"t": time.time(), "epoch": epoch, "from": before, "to": strategy, "reason": reason})

    def signal(self, task: Task, sig: str) -> bool:
        """Send a signal (e.g. 'SIGSTOP') to a task's process group; False when it is not running."""
        proc = self.procs.get(task)
        if proc is None or proc.poll() is not None:
            return False
        proc.send_signal(getattr(signal, sig))
        return True

    def stop_all(self) -> None:
        """SIGTERM, a grace period, then SIGKILL for every task still alive."""
        self._stop(list(self.procs.values()))

    @staticmethod
    def _stop(procs) -> None:
        alive = [p for p in procs if p.poll() is None]
        for p in alive:
            p.terminate()
        end = time.monotonic() + 3
        for p in alive:
            try:
                p.wait(max(0.1, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
