"""Which training task runs on which host, and the TensorFlow cluster they form. Pure logic."""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass


@dataclass(frozen=True)
class Task:
    host: str
    task_type: str      # single | worker | chief | ps
    index: int
    port: int

    @property
    def label(self) -> str:
        return f"{self.task_type} {self.index} on {self.host}"

    @property
    def log_stem(self) -> str:
        return f"{self.host}-{self.task_type}{self.index}"


class PlacementError(ValueError):
    pass


def assign_tasks(workload, host_names: list[str]) -> list[Task]:
    """single: the first host. allreduce: one worker per host (worker 0 is the chief).
    ps: chief, then `ps.servers` parameter servers, then workers, one per host unless
    `ps.placement` says otherwise (tasks sharing a host get distinct ports)."""
    port = workload.port
    if workload.strategy == "single":
        return [Task(host_names[0], "single", 0, port)]
    if workload.strategy == "allreduce":
        return [Task(h, "worker", i, port) for i, h in enumerate(host_names)]
    placement = workload.ps.placement or _default_ps_placement(workload.ps.servers, host_names)
    unknown = sorted({h for hosts in placement.values() for h in hosts} - set(host_names))
    if unknown:
        raise PlacementError(f"workload.ps.placement names hosts not in the topology: {', '.join(unknown)}")
    if len(placement.get("chief", [])) != 1 or not placement.get("ps") or not placement.get("worker"):
        raise PlacementError("workload.ps.placement needs exactly one chief, at least one ps and one worker")
    tasks, used = [], {}
    for task_type in ("chief", "ps", "worker"):
        for i, host in enumerate(placement[task_type]):
            used[host] = used.get(host, -1) + 1
            tasks.append(Task(host, task_type, i, port + used[host]))
    return tasks


def _default_ps_placement(servers: int, hosts: list[str]) -> dict[str, list[str]]:
    if len(hosts) < servers + 2:
        raise PlacementError(f"strategy ps with {servers} server(s) needs at least {servers + 2} hosts "
                             f"(chief, servers, one worker) but the topology has {len(hosts)}")
    return {"chief": hosts[:1], "ps": hosts[1:1 + servers], "worker": hosts[1 + servers:]}


def cluster_spec(tasks: list[Task], ips: dict[str, str]) -> dict[str, list[str]]:
    """TF cluster dict: task type -> ['ip:port', ...] in index order (single tasks form no cluster)."""
    cluster: dict[str, list[str]] = {}
    for t in tasks:
        if t.task_type != "single":
            cluster.setdefault(t.task_type, []).append(f"{ips[t.host]}:{t.port}")
    return cluster


def threads_per_task(tasks: list[Task], machines: dict[str, tuple]) -> dict[Task, int]:
    """TensorFlow intra-op threads per task: its share of its machine's cores, within its
    host's CPU limit (shared by the tasks on that host), at least 1, so that N tasks on C cores do
    not run more busy threads than cores. `machines`: host -> (machine, its cores, the host's CPU
    fraction of that machine or None[, the cores of the machine the host emulates or None]).

    A host that emulates a machine of `cores` cores runs as that machine would: its share of those
    cores, whatever dilation slows them to, so the program is the same at every dilation."""
    on_machine = Counter(machines[t.host][0] for t in tasks)
    on_host = Counter(t.host for t in tasks)
    threads = {}
    for t in tasks:
        machine, cores, cpu, *emulated = machines[t.host]
        if emulated and emulated[0] is not None:
            threads[t] = max(1, math.ceil(emulated[0] / on_host[t.host] - 1e-9))
            continue
        share = cores / on_machine[machine]
        if cpu is not None:
            share = min(share, cpu * cores / on_host[t.host])
        threads[t] = max(1, int(share))
    return threads


def tf_config(cluster: dict[str, list[str]], task: Task) -> dict:
    """The TF_CONFIG of one task: the whole cluster (task lists in index order) and the task's place in it."""
    return {"cluster": cluster, "task": {"type": task.task_type, "index": task.index}}


def torchrun_env(cluster: dict[str, list[str]], task: Task, interface: str | None) -> dict[str, str]:
    """What torchrun would set for one task of a PyTorch job (env:// rendezvous at the first worker,
    one process per host), and gloo's interface: the host's emulated one, which its hostname does
    not resolve to (Mininet hosts share this machine's hostname)."""
    workers = cluster.get("worker") or []
    env = {"RANK": str(task.index if workers else 0), "WORLD_SIZE": str(max(1, len(workers))),
           "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1"}
    address, port = workers[0].rsplit(":", 1) if workers else ("127.0.0.1", str(task.port))   # single: itself
    env.update(MASTER_ADDR=address, MASTER_PORT=port)
    if interface:
        env["GLOO_SOCKET_IFNAME"] = interface
    return env


def workers(tasks: list[Task]) -> list[Task]:
    """The worker tasks in index order (the order of an all-reduce's ranks and of the ps strategy's workers)."""
    return sorted((t for t in tasks if t.task_type == "worker"), key=lambda t: t.index)


def final_tasks(tasks: list[Task]) -> list[Task]:
    """Tasks whose exit means training is over; the others (ps strategy servers) are ended by us."""
    if any(t.task_type == "chief" for t in tasks):
        return [t for t in tasks if t.task_type == "chief"]
    return list(tasks)


def restart_group(tasks: list[Task], lost: Task, strategy: str) -> list[Task]:
    """The tasks to start again when `lost` ended early: under ps a lost worker alone (the coordinator
    retries its steps elsewhere and takes it back); otherwise every task, since all-reduce peers, a
    coordinator and its servers fail together and restart from the last backup together."""
    if strategy == "ps" and lost.task_type == "worker":
        return [lost]
    return list(tasks)
