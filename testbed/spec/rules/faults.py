"""The rules of what happens while training runs: faults (a target and value their action takes, a
trigger before the end of training, what the applier can do here) and links that follow a trace."""
from __future__ import annotations


from testbed.readers import traces as trace_files
from testbed.roles import PlacementError, assign_tasks
from testbed.spec.rules.capabilities import SHAPERS
from testbed.spec.faults import traces
from testbed.spec.faults.grammar import ACTIONS, parse_start, parse_task
from testbed.spec.graph import Graph
from testbed.spec.keypaths import parse_path, suggest
from testbed.spec.models import TRACE_KEYS, Experiment, Topology
from testbed.spec.rules.problems import Problem, real_machines

FAULT_VALUES = ("bw", "delay", "loss", "cpu")


def fault_problems(exp: Experiment, graph: Graph) -> list[Problem]:
    """Each fault: the target and value its action takes and no other, a link, host or task that
    exists, a trigger before the end of training, a duration only where the action can be undone."""
    if not exp.faults:
        return []
    hosts = [h.name for h in graph.hosts]
    try:
        placed = assign_tasks(exp.workload, hosts)
        tasks = [f"{t.task_type} {t.index}" for t in placed]
        busy = {t.host for t in placed}
    except PlacementError:
        tasks = busy = None           # reported by the workload rules
    out = []
    for i, fault in enumerate(exp.faults):
        at, action = ("faults", i), ACTIONS[fault.action]
        given = [k for k in ("link", "task", "host") if getattr(fault, k) is not None]
        used = [k for k in given if k in action.targets]
        out += [Problem(at + (k,), f"{k} is not used by {fault.action} (it acts on a "
                        f"{' or a '.join(action.targets)})") for k in given if k not in action.targets]
        if not used:
            out.append(Problem(at + ("action",), f"{fault.action} needs a {' or a '.join(action.targets)}"))
        elif len(used) > 1:
            out.append(Problem(at + (used[1],), f"{fault.action} takes a {used[0]} or a {used[1]}, not both"))
        for key in FAULT_VALUES:
            if key == action.value and getattr(fault, key) is None:
                out.append(Problem(at + ("action",), f"{fault.action} needs {key} (the new value)"))
            elif key != action.value and getattr(fault, key) is not None:
                out.append(Problem(at + (key,), f"{key} is not used by {fault.action}"))
        if action.duration == "no" and fault.duration is not None:
            out.append(Problem(at + ("duration",), f"{fault.action} has no duration: there is nothing to undo"))
        elif action.duration == "required" and fault.duration is None:
            out.append(Problem(at + ("action",), f"{fault.action} needs a duration (e.g. duration: 3s)"))
        out += _fault_target_problems(at, fault, graph, hosts, tasks)
        out += _trigger_problems(at, fault, exp.workload, hosts=len(hosts)) + _fault_support_problems(exp, at, fault, busy)
    return out


def _fault_support_problems(exp: Experiment, at: tuple, fault, busy: set | None) -> list[Problem]:
    """What the applier cannot do: shape a real machine's link, change its (or a cluster node's) CPU
    limit, netem under OVS QoS; a pause of a host no task runs on would do nothing."""
    real, action = real_machines(exp.topology), ACTIONS[fault.action]
    remote = [n for n in (fault.link or []) + [fault.host] if n in real]
    if fault.link is not None and remote:
        return [Problem(at + ("link",), f"{remote[0]} is a real machine (kind remote): its link is its own "
                        "network's, not an emulated one; link faults act on emulated links only", ("topology",))]
    if fault.action == "set_cpu" and remote:
        return [Problem(at + ("host",), f"{remote[0]} is a real machine (kind remote): its CPU cannot be limited; "
                        "set_cpu acts on emulated hosts only", ("topology",))]
    if fault.action == "set_cpu" and exp.cluster is not None:
        return [Problem(at + ("action",), "set_cpu is not applied on cluster servers yet (their hosts' budgets "
                        "are set once, at bring-up, from cores): remove it or remove cluster:", ("cluster",))]
    if action.netem and not SHAPERS[exp.topology.shaping].netem:
        return [Problem(at + ("action",), f"{fault.action} needs netem on tc-shaped links; "
                        f"{SHAPERS[exp.topology.shaping].what} (set topology.shaping: tc)", ("topology.shaping",))]
    if fault.task is not None and exp.workload.strategy in ("auto", "switch") and \
            parse_task(fault.task)[0] in ("ps", "chief"):
        return [Problem(at + ("task",), f"strategy {exp.workload.strategy} may run all-reduce, which has no "
                        f"{parse_task(fault.task)[0]} task: name a worker, or set strategy ps",
                        ("workload.strategy",))]
    if fault.host is not None and busy is not None and fault.host in exp.topology.host_names() and \
            fault.host not in busy:
        return [Problem(at + ("host",), f"no task runs on {fault.host}, so {fault.action} would do nothing "
                        f"(tasks run on {', '.join(sorted(busy))})", ("workload.strategy", "topology.hosts"))]
    return []


def _fault_target_problems(at: tuple, fault, graph, hosts: list[str], tasks: list[str] | None) -> list[Problem]:
    names = hosts + [s.name for s in graph.switches]
    related = ("topology",)
    if fault.link is not None:
        unknown = [(j, n) for j, n in enumerate(fault.link) if n not in names]
        if unknown:
            return [Problem(at + ("link", j), f"no node {n!r} in this topology{suggest(n, names)}", related)
                    for j, n in unknown]
        a, b = fault.link
        if {a, b} not in [{e.a, e.b} for e in graph.links]:
            return [Problem(at + ("link",), f"no link between {a} and {b} ({a} links to "
                            f"{', '.join(graph.neighbours(a)) or 'nothing'})", related)]
    if fault.host is not None and fault.host not in hosts:
        return [Problem(at + ("host",), f"no host {fault.host!r} in this topology{suggest(fault.host, hosts)}",
                        related)]
    if fault.task is not None and tasks is not None and " ".join(fault.task.split()) not in tasks:
        return [Problem(at + ("task",), f"no task {fault.task!r} in this run (tasks: {', '.join(tasks)})",
                        ("workload.strategy", "topology.hosts"))]
    return []


def point_steps(w, hosts: int) -> int:
    """Steps per epoch at this point (workload.fixed): the fewest of the strategies it may run (auto and
    switch run all-reduce or ps), so that a step trigger is checked against the shortest training."""
    strategies = ("allreduce", "ps") if w.strategy in ("auto", "switch") else (w.strategy,)
    return min(w.steps_at(hosts, s) for s in strategies)


def _trigger_problems(at: tuple, fault, w, key: str = "at", hosts: int = 1) -> list[Problem]:
    text = getattr(fault, key)
    per_epoch = point_steps(w, hosts)
    trigger, total = parse_start(text), w.epochs * per_epoch
    related = ("workload.epochs", "workload.steps_per_epoch", "workload.samples_per_epoch", "workload.fixed",
               "topology.hosts")
    if trigger.kind == "step" and trigger.value > total:
        return [Problem(at + (key,), f"step {trigger.value:g} is past the end of training ({total} steps: "
                        f"{w.epochs} epoch(s) of {per_epoch})", related)]
    if trigger.kind == "epoch" and trigger.value > w.epochs:
        return [Problem(at + (key,), f"epoch {trigger.value:g} is past the end of training "
                        f"({w.epochs} epoch(s))", related)]
    if trigger.kind == "time" and trigger.value >= w.timeout:
        return [Problem(at + (key,), f"{text} is past workload.timeout ({w.timeout:g} s)",
                        ("workload.timeout",))]
    return []


def trace_problems(exp: Experiment, graph: Graph) -> list[Problem]:
    """Each trace (docs/changing-links.md): its keys only with a trace (granularity only with mahimahi), not
    beside a bw of its own, a file that is there and reads (the file's own line named), delay and loss
    only under shaping tc, two rows or more to loop, a start before the end of training, emulated links."""
    topo, out = exp.topology, []
    for key, own in traces.owners(topo):
        path = parse_path(key)
        params = own if key == "topology.link" else topo.link.merged(own)
        if params.trace is None:
            out += [Problem(path + (k,), f"{k} is for a trace, and {key} follows none (set trace: FILE)")
                    for k in TRACE_KEYS[1:] if getattr(own, k) is not None]
            continue
        if own.trace is not None and own.bw is not None:
            out.append(Problem(path + ("bw",), "bw and trace are both set: the trace gives the link's rate (its "
                               "first row from bring-up on): remove bw", (f"{key}.trace",)))
        if params.trace_granularity is not None and params.trace_format != "mahimahi":
            out.append(Problem(path + ("trace_granularity",), "trace_granularity is for trace_format mahimahi "
                               "(a csv trace has its own steps)"))
        if params.trace_start is not None:
            out += _trigger_problems(path, params, exp.workload, "trace_start",
                                     len(exp.topology.host_names()))
        if not any(getattr(own, k) is not None for k in TRACE_KEYS):
            continue          # follows topology.link's trace, checked there
        at = key if own.trace is not None else "topology.link"
        g = params.trace_granularity or trace_files.DEFAULT_GRANULARITY
        try:
            trace = trace_files.load(traces.trace_file(exp, at), params.trace_format, g)
        except trace_files.TraceError as err:
            out.append(Problem(parse_path(at) + ("trace",), f"trace file {err}"))
            continue
        if trace.needs_netem and not SHAPERS[topo.shaping].netem:
            out.append(Problem(parse_path(at) + ("trace",), f"this trace has delay or loss; {SHAPERS[topo.shaping].what}: "
                               "set shaping: tc", ("topology.shaping",)))
        if params.trace_mode == "loop" and len(trace.rows) < 2:
            out.append(Problem(path + ("trace_mode",), "a trace of one row cannot loop: add a last row at the "
                               "time it ends (the loop starts over there)"))
    return out + (_trace_link_problems(topo, graph) if not out else [])


def _trace_link_problems(topo: Topology, graph: Graph) -> list[Problem]:
    """A real machine's link is its own network's: a trace acts on emulated links only."""
    real = real_machines(topo)
    for edge in graph.links if any(p.trace for _, p in traces.owners(topo)) else []:
        remote = [n for n in (edge.a, edge.b) if n in real]
        if edge.params.trace is not None and remote:
            key = traces.owner_of(topo, edge)
            return [Problem(parse_path(key) + ("trace",), f"{remote[0]} is a real machine (kind remote): its link "
                            f"{edge.a}-{edge.b} is its own network's, not an emulated one; a trace acts on emulated "
                            "links only", ("topology",))]
    return []
