"""Cross-field rules of a structurally valid Experiment (one resolved point, no sweep).

Each rule yields a Problem at the key path to blame, plus the other key paths it depends on,
so a problem caused by a sweep value can be reported at that sweep axis.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from testbed.spec.capabilities import SHAPERS, needs_netem
from testbed.spec.faults import ACTIONS, parse_start
from testbed.spec import limits, traces
from testbed.spec.graph import build_graph, host_count, subnet, switch_total, usable
from testbed.spec.graphfile import GraphFileError, read_graph
from testbed.spec.kinds import DEFAULT_KIND, kind_settings, real_machine
from testbed.spec.settings import KindHost, example_address
from testbed.roles import PlacementError, assign_tasks
from testbed.spec.keypaths import format_path, parse_path, suggest
from testbed.spec.models import MODEL_PARAMS, TRACE_KEYS, AllreduceConf, Experiment, LinkParams, Topology



@dataclass(frozen=True)
class Problem:
    path: tuple
    message: str
    related: tuple[str, ...] = ()


def experiment_problems(exp: Experiment) -> list[Problem]:
    """Every cross-field problem of one resolved point."""
    shape = _shape_problems(exp.topology)
    if shape:
        return shape
    topology = topology_problems(exp.topology)
    return (topology + workload_problems(exp)
            + ([] if topology else fault_problems(exp) + trace_problems(exp) + emulation_problems(exp))
            + ([] if topology or exp.cluster is None else cluster_problems(exp)))


def emulation_problems(exp: Experiment) -> list[Problem]:
    """A budget is cores or cpu, not both; dilation slows emulated nodes only, never real machines, and
    is a number with a cluster (auto knows this machine's cores only)."""
    topo, out, both = exp.topology, [], {}
    for name in topo.host_names():
        conf = topo.host_conf(name)
        if conf.cores is not None and conf.cpu is not None:
            both.setdefault(topo.host_own(name)[0], []).append(name)
    out += [Problem(parse_path(key) + ("cpu",), f"{', '.join(names)}: set cores (the emulated machine's cores) "
                    "or cpu (a fraction of this machine), not both") for key, names in both.items()]
    if exp.emulation.dilation == 1:
        return out
    remote = [name for name in topo.host_names() if name in _real_machines(topo)]
    if remote:
        out.append(Problem(("emulation", "dilation"), f"{', '.join(remote)}: remote machines are real and run in "
                           "real time; dilation slows emulated nodes only (set emulation.dilation: 1)",
                           ("topology",)))
    if exp.cluster is not None and exp.emulation.dilation == "auto":
        out.append(Problem(("emulation", "dilation"), "dilation auto sizes the factor for this machine's cores; "
                           "with cluster: set a number K at which every server holds its hosts' cores / K plus "
                           "emulation.reserve", ("cluster",)))
    return out


def topology_problems(topo: Topology) -> list[Problem]:
    shape = _shape_problems(topo)
    if shape:
        return shape
    problems = _shaping_problems(topo) + _link_param_problems(topo) + _kind_problems(topo)
    if topo.template == "custom":
        problems += _custom_problems(topo)
    else:
        problems += _override_problems(topo)
    return problems


def _shape_problems(topo: Topology) -> list[Problem]:
    """Which keys each template takes, and in which form."""
    t, out, related = topo.template, [], ("topology.template",)
    if t == "custom":
        for key in ("hosts", "switches", "links"):
            if not isinstance(getattr(topo, key), list):
                out.append(Problem(("topology", key), f"template custom needs {key} as a list "
                                   f"(e.g. {key}: [{{name: ...}}])", related))
        if topo.host_overrides:
            out.append(Problem(("topology", "host_overrides"), "template custom sets cpu/memory on "
                               "each host item instead of host_overrides", related))
    else:
        if isinstance(topo.hosts, list):
            out.append(Problem(("topology", "hosts"), f"template {t} takes a number of hosts; "
                               "a list of hosts needs template: custom", related))
        if topo.switches is not None and (t != "linear" or isinstance(topo.switches, list)):
            out.append(Problem(("topology", "switches"), "switches is a number for template linear "
                               "and a list for template custom; remove it", related))
        if topo.links is not None:
            out.append(Problem(("topology", "links"), "links are only for template custom", related))
    if topo.fanout != Topology.model_fields["fanout"].default and t != "tree":
        out.append(Problem(("topology", "fanout"), "fanout is only used by template tree", related))
    if topo.bottleneck is not None and t != "dumbbell":
        out.append(Problem(("topology", "bottleneck"), "bottleneck is only used by template dumbbell",
                           related))
    out += _graph_file_problems(topo)
    count = host_count(topo)   # not host_names(): 10**9 names
    switches = switch_total(topo) if not out else 0     # counted, not built
    if not out and count > limits.MAX_HOSTS:
        out.append(Problem(("topology", "hosts"), f"at most {limits.MAX_HOSTS} hosts on one machine (got {count})"))
    elif not out and switches > limits.MAX_SWITCHES:
        key = "fanout" if topo.template == "tree" else "switches"
        out.append(Problem(("topology", key), f"template {topo.template} would build {switches:,} switches; at "
                           f"most {limits.MAX_SWITCHES} on one machine", ("topology.hosts", "topology.template")))
    elif not out and count + switches > limits.MAX_NODES:
        out.append(Problem(("topology", "hosts"), f"{count} hosts and {switches} switches are {count + switches:,} "
                           f"nodes; at most {limits.MAX_NODES} on one machine (a larger fanout needs fewer switches)",
                           ("topology.template", "topology.fanout")))
    elif not out and usable(subnet(topo)) < count:
        net = subnet(topo)
        out.append(Problem(("topology", "subnet"), f"{count} hosts do not fit {net} ({usable(net)} addresses); "
                           "use a larger network, e.g. 10.0.0.0/"
                           f"{32 - (count + 1).bit_length()}, or remove subnet to get one that fits",
                           ("topology.hosts",)))
    return out


def _graph_file_problems(topo: Topology) -> list[Problem]:
    """template graph: a graph file that reads (graphfile.py names its line), the sites hosts go to, and
    distance delays only where they can be shaped; its keys only with it."""
    related = ("topology.template",)
    if topo.template != "graph":
        given = [k for k in ("graph", "graph_hosts") if getattr(topo, k) is not None]
        given += ["graph_delay"] if topo.graph_delay != "distance" else []
        return [Problem(("topology", k), f"{k} is only used by template graph", related) for k in given]
    if topo.graph is None:
        return [Problem(("topology", "graph"), "template graph needs graph: FILE, a GraphML (.graphml) or GML "
                        "(.gml) file relative to this file", related)]
    try:
        wan = read_graph(topo.graph)
    except GraphFileError as err:
        return [Problem(("topology", "graph"), str(err))]
    try:
        wan.sites(topo.graph_hosts)
    except LookupError as err:
        index, message = err.args
        return [Problem(("topology", "graph_hosts", index), message, ("topology.graph",))]
    if not SHAPERS[topo.shaping].netem and topo.graph_delay == "distance" and any(w.delay for w in wan.wires):
        return [Problem(("topology", "graph_delay"), "OVS QoS shapes bandwidth only; the delays from the graph's "
                        "distances need shaping: tc (or graph_delay: none for bandwidth only)", ("topology.shaping",))]
    return []


def _shaping_problems(topo: Topology) -> list[Problem]:
    out = []
    netem = [("topology", "link")] if needs_netem(topo.link) else []
    netem += [("topology", "bottleneck")] if topo.bottleneck is not None and needs_netem(topo.bottleneck) else []
    netem += [("topology", "links", i) for i, item in enumerate(topo.links or []) if needs_netem(item)]
    if not SHAPERS[topo.shaping].netem and netem:
        out.append(Problem(("topology", "shaping"), f"{SHAPERS[topo.shaping].what}; the delay, jitter or loss of "
                           f"{format_path(netem[0])} needs shaping: tc", (format_path(netem[0]),)))
    if topo.shaping == "ovs" and topo.switch.kind != "ovs":
        out.append(Problem(("topology", "shaping"), "shaping ovs needs switch kind ovs "
                           f"(got {topo.switch.kind})", ("topology.switch.kind",)))
    if topo.shaping != "tc" and topo.qdisc == "tbf":
        out.append(Problem(("topology", "qdisc"), "qdisc tbf needs shaping: tc "
                           "(OVS shaping uses its own linux-htb queues)", ("topology.shaping",)))
    return out


def _jitter_problem(params: LinkParams, path: tuple, own: LinkParams | None = None) -> list[Problem]:
    if params.jitter is None or params.delay is not None:
        return []
    where = path + ("jitter",) if own is None or own.jitter is not None else path
    return [Problem(where, "jitter needs a delay on the same link (netem varies the delay by the "
                    "jitter)", ("topology.link.delay", "topology.link.jitter"))]


def _link_param_problems(topo: Topology) -> list[Problem]:
    out = _jitter_problem(topo.link, ("topology", "link"))
    if topo.bottleneck is not None:
        out += _jitter_problem(topo.link.merged(topo.bottleneck), ("topology", "bottleneck"),
                               topo.bottleneck)
    for i, item in enumerate(topo.links or []):
        out += _jitter_problem(topo.link.merged(item), ("topology", "links", i), item)
    return out


def _kinds(topo: Topology) -> dict[str, str]:
    return {name: topo.host_conf(name).kind or DEFAULT_KIND for name in topo.host_names()}


def _real_machines(topo: Topology) -> set[str]:
    """The hosts that are machines of their own (spec.kinds: real time, no budget, their own link)."""
    return {name for name, k in _kinds(topo).items() if real_machine(k)}


def _kind_problems(topo: Topology) -> list[Problem]:
    """Each kind's own setting set only where it means something, then the kinds' own rules."""
    settings = kind_settings()
    out = [p for kind, s in settings.items() for p in _kind_setting_problems(topo, s.key, kind)]
    of_host = _kinds(topo)
    for kind, s in settings.items():
        hosts = [KindHost(name, parse_path(topo.host_own(name)[0]), topo.host_conf(name))
                 for name, has in of_host.items() if has == kind]
        others = [name for name, has in of_host.items() if has != kind]
        out += [Problem(path, message, related) for path, message, related in s.problems(hosts, others)]
    return out


def _kind_setting_problems(topo: Topology, setting: str, kind: str) -> list[Problem]:
    """A kind's own setting (image: docker, remote: remote) only means something on a node of that kind."""
    of_host, out = _kinds(topo), []
    if getattr(topo.host, setting) is not None and kind not in of_host.values():
        out.append(Problem(("topology", "host", setting), f"{setting} is for {kind} nodes, and no host is "
                           f"kind {kind} (set kind: {kind})", ("topology.host.kind",)))
    for name, has in of_host.items():
        key, own = topo.host_own(name)
        if own is not None and getattr(own, setting) is not None and has != kind:
            out.append(Problem(parse_path(key) + (setting,), f"{setting} is for {kind} nodes, and {name} is "
                               f"kind {has} (set kind: {kind})", ("topology.host.kind",)))
    return out


def _override_problems(topo: Topology) -> list[Problem]:
    names = topo.host_names()
    span = f"h1..h{len(names)}" if len(names) > 1 else "h1"
    return [Problem(("topology", "host_overrides", name), f"no host {name!r} in this topology "
                    f"(hosts are {span})", ("topology.hosts",))
            for name in topo.host_overrides if name not in names]


def _custom_problems(topo: Topology) -> list[Problem]:
    out, kinds = [], {}
    for key, items in (("hosts", topo.hosts), ("switches", topo.switches)):
        for i, item in enumerate(items):
            if item.name in kinds:
                out.append(Problem(("topology", key, i, "name"), f"duplicate node name {item.name!r}"))
            kinds.setdefault(item.name, key)
    if not topo.hosts:
        out.append(Problem(("topology", "hosts"), "a custom topology needs at least one host"))
    return out or _link_problems(topo, kinds)


def _link_problems(topo: Topology, kinds: dict[str, str]) -> list[Problem]:
    out, adjacent = [], {name: set() for name in kinds}
    for i, link in enumerate(topo.links):
        ends = [(end, getattr(link, end)) for end in ("a", "b")]
        bad = [(end, n) for end, n in ends if n not in kinds]
        for end, name in bad:
            out.append(Problem(("topology", "links", i, end), f"link to unknown node {name!r}"
                               f"{suggest(name, kinds)} (nodes: {', '.join(kinds)})"))
        if not bad and link.a == link.b:
            out.append(Problem(("topology", "links", i), f"link from {link.a!r} to itself"))
        elif not bad:
            adjacent[link.a].add((link.b, i))
            adjacent[link.b].add((link.a, i))
    if out:
        return out
    return (_host_link_problems(topo, kinds, adjacent) or _parallel_link_problems(topo)
            or _loop_problems(topo, kinds) or _connectivity_problems(adjacent))


def _parallel_link_problems(topo: Topology) -> list[Problem]:
    """Links are keyed by their two ends: a second link between the same nodes would go unshaped."""
    first, out = {}, []
    for i, link in enumerate(topo.links):
        j = first.setdefault(frozenset((link.a, link.b)), i)
        if j != i:
            out.append(Problem(("topology", "links", i), f"a second link between {link.a} and {link.b} (the first is "
                               f"links[{j}]); one link per pair of nodes: set its bw to the sum instead"))
    return out


def _loop_problems(topo: Topology, kinds: dict) -> list[Problem]:
    """Switches without a spanning tree flood broadcasts around a cycle forever: no loops among them."""
    group = {name: name for name, kind in kinds.items() if kind == "switches"}

    def root(name):
        while group[name] != name:
            group[name] = group[group[name]]
            name = group[name]
        return name
    for i, link in enumerate(topo.links):
        if link.a in group and link.b in group:
            a, b = root(link.a), root(link.b)
            if a == b:
                return [Problem(("topology", "links", i), f"the link {link.a}-{link.b} closes a loop among switches; "
                                "the switches run no spanning tree, so broadcasts would circle forever: remove it")]
            group[a] = b
    return []


def _host_link_problems(topo: Topology, kinds: dict, adjacent: dict) -> list[Problem]:
    out = []
    for i, host in enumerate(topo.hosts):
        peers = sorted(peer for peer, _ in adjacent[host.name])
        if len(peers) == 1 and kinds[peers[0]] == "switches":
            continue
        found = f"links to {', '.join(peers)}" if peers else "has no link"
        out.append(Problem(("topology", "hosts", i), f"host {host.name!r} {found}; a host needs "
                           "exactly one link, to a switch (one interface, one IP)"))
    return out


def _connectivity_problems(adjacent: dict) -> list[Problem]:
    names = list(adjacent)
    seen, todo = {names[0]}, [names[0]]
    while todo:
        for peer, _ in adjacent[todo.pop()]:
            if peer not in seen:
                seen.add(peer)
                todo.append(peer)
    cut = [n for n in names if n not in seen]
    if not cut:
        return []
    return [Problem(("topology", "links"), f"the topology is not connected: {', '.join(cut)} "
                    f"cannot reach {names[0]}")]


def workload_problems(exp: Experiment) -> list[Problem]:
    w, hosts = exp.workload, exp.topology.host_names()
    out = _model_param_problems(w.model, w.model_params)
    if w.engine == "pytorch":
        out += _pytorch_problems(exp)
    if w.strategy == "ps":
        out += _ps_problems(exp, hosts)
    if w.strategy == "auto":
        out += _auto_problems(exp, hosts)
    if w.strategy == "switch":
        out += _switch_problems(exp, hosts)
    script = exp.script_path()
    if script is not None and not os.path.isfile(script):
        out.append(Problem(("workload", "script"), f"no such file: {script}"))
    elif script is not None and _system_folder(os.path.dirname(script)):
        out.append(Problem(("workload", "script"), f"the script's folder {os.path.dirname(script)} is where "
                           "workload.files are staged from; put the script in a folder of its own (not /, a "
                           "system folder or your home)"))
    elif script is not None:
        out += _stage_problems(exp, os.path.dirname(script))
    out += _env_problems(w)
    if w.script is None and (w.args or w.files or w.script_roles != "coordinator"):
        key = "args" if w.args else "files" if w.files else "script_roles"
        out.append(Problem(("workload", key), f"{key} is for workload.script, which is not set"))
    out += _work_problems(exp)
    if w.data.kind == "flickr8k":
        if w.model != "caption":
            out.append(Problem(("workload", "data", "kind"), "flickr8k data is for model caption "
                               f"(model is {w.model})", ("workload.model",)))
        if not w.data.path:
            out.append(Problem(("workload", "data", "path"), "data kind flickr8k needs a path"))
    return out


def _work_problems(exp: Experiment) -> list[Problem]:
    """workload.fixed: samples_per_epoch only under fixed data, instead of steps_per_epoch, and not for a
    script (it decides its own steps)."""
    w = exp.workload
    if w.samples_per_epoch is None:
        return []
    at = ("workload", "samples_per_epoch")
    if w.script is not None:
        return [Problem(at, "your script decides how many steps it trains: samples_per_epoch is for the built-in "
                        "models", ("workload.script",))]
    if w.fixed == "steps":
        return [Problem(at, "samples_per_epoch is for fixed: data; under fixed: steps every worker runs "
                        "steps_per_epoch", ("workload.fixed",))]
    if w.steps_per_epoch is not None:
        return [Problem(at, "set samples_per_epoch or steps_per_epoch, not both: under fixed: data the steps "
                        "follow from the samples (samples_per_epoch / global batch)", ("workload.steps_per_epoch",))]
    return []


def _pytorch_problems(exp: Experiment) -> list[Problem]:
    """engine pytorch: DistributedDataParallel's strategies (single, allreduce), the mlp and cnn models,
    no TensorFlow-only settings, and what is not built for it yet (recovery)."""
    w, related, out = exp.workload, ("workload.engine",), []
    if w.strategy not in ("single", "allreduce"):
        out.append(Problem(("workload", "strategy"), f"engine pytorch runs strategies single and allreduce "
                           f"(DistributedDataParallel over gloo), not {w.strategy}: the parameter-server "
                           "strategy is TensorFlow's here (set engine: tensorflow)", related))
    if w.script is None and w.model not in ("mlp", "cnn"):
        out.append(Problem(("workload", "model"), f"engine pytorch trains the built-in mlp and cnn, not {w.model} "
                           "(the caption model is TensorFlow's)", related))
    if w.recovery != "none":
        out.append(Problem(("workload", "recovery"), "recovery is not built for engine pytorch yet: a killed "
                           "worker fails the run, naming the fault (set recovery: none)", related))
    changed = [f"allreduce.{k}" for k, v in w.allreduce.model_dump().items()
               if v != AllreduceConf.model_fields[k].default]
    if changed:
        out.append(Problem(("workload", "allreduce"), f"{', '.join(changed)} tune TensorFlow's collectives; "
                           "PyTorch's DDP buckets its own gradients (remove them)", related))
    return out


# set by the testbed for every task, as is DLTESTBED_* (TensorFlow's cluster, or torchrun's variables)
RESERVED_ENV = ("TF_CONFIG", "PYTHONPATH", "MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK",
                "LOCAL_WORLD_SIZE", "GLOO_SOCKET_IFNAME")
SYSTEM_FOLDERS = ("/etc", "/usr", "/bin", "/sbin", "/lib", "/boot", "/proc", "/sys", "/dev", "/var", "/run")


def _system_folder(folder: str) -> bool:
    """/, the home folder itself, or a system folder (/lib* included) or anything inside one."""
    folder = os.path.realpath(folder)
    top = "/" + folder.split("/")[1]
    return folder in ("/", os.path.realpath(os.path.expanduser("~"))) or top in SYSTEM_FOLDERS or top.startswith("/lib")


def _env_problems(w) -> list[Problem]:
    out = []
    for key, value in w.env.items():
        if key in RESERVED_ENV or key.startswith("DLTESTBED_"):
            out.append(Problem(("workload", "env", key), f"{key} is set by the testbed for every task; "
                               "choose another name"))
        elif "\0" in value:
            out.append(Problem(("workload", "env", key), "a NUL byte cannot be part of an environment value"))
    out += [Problem(("workload", "args", i), "a NUL byte cannot be part of a command-line argument")
            for i, arg in enumerate(w.args) if "\0" in arg]
    return out


def advisor_results_paths(exp: Experiment) -> list[str]:
    """workload.advisor.results as paths: as given when absolute; else relative to the file that
    named them when they exist there, else to the working directory."""
    results = exp.workload.advisor.results
    file = exp.location(("workload", "advisor", "results"))[0]
    out = []
    for item in [results] if isinstance(results, str) else results or []:
        near = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(file)), item))
        out.append(item if os.path.isabs(item) else near if os.path.isfile(file) and os.path.isdir(near)
                   else os.path.abspath(item))
    return out


def _auto_problems(exp: Experiment, hosts: list[str]) -> list[Problem]:
    """strategy auto: a results folder with runs.csv, a gradient size for a script, and a valid
    ps.placement if one is given (too few hosts for ps is no error: the advisor picks allreduce)."""
    w, out = exp.workload, []
    for results in advisor_results_paths(exp):
        if not os.path.isfile(os.path.join(results, "runs.csv")):
            out.append(Problem(("workload", "advisor", "results"), f"no runs.csv in {results}: name a results "
                               "folder to fit the cost model on, or null for its rough defaults"))
    if w.script is not None and w.advisor.gradient_size is None:
        out.append(Problem(("workload", "advisor", "gradient_size"), "strategy auto with workload.script needs "
                           "the gradient size per step, e.g. 20mb (the testbed cannot count a script's "
                           "parameters before it runs)", ("workload.strategy",)))
    if w.ps.placement is not None:
        out += _placement_problems(w.ps.placement, w.ps.servers, hosts,
                                   ("topology.hosts", "workload.ps.servers", "workload.strategy"))
    return out


def _switch_problems(exp: Experiment, hosts: list[str]) -> list[Problem]:
    """strategy switch: the built-in workload (its weights are saved and restored), an epoch's end
    before the last to switch at, hosts for both strategies, and the cost model's results folder."""
    w, related = exp.workload, ("workload.strategy",)
    out = [p for p in _auto_problems(exp, hosts) if p.path == ("workload", "advisor", "results")]
    out += _ps_problems(exp, hosts)
    if w.script is not None:
        out.append(Problem(("workload", "script"), "strategy switch restarts the built-in workload from its "
                           "saved weights; a script cannot be switched: use strategy allreduce, ps or auto",
                           related))
    if w.epochs < 2:
        out.append(Problem(("workload", "epochs"), "strategy switch decides at the end of an epoch before the "
                           f"last: set epochs to 2 or more (it is {w.epochs})", related))
    return out


def _model_param_problems(model: str, params: dict) -> list[Problem]:
    allowed, out = MODEL_PARAMS[model], []
    for key, value in params.items():
        path, rel = ("workload", "model_params", key), ("workload.model",)
        if key not in allowed:
            out.append(Problem(path, f"unknown model_params key {key!r} for model {model}"
                               f"{suggest(key, allowed)} (allowed: {', '.join(allowed)})", rel))
        elif isinstance(value, bool) or not isinstance(value, int) or value < 1:
            out.append(Problem(path, f"{key} must be a positive integer (got {value!r})", rel))
    return out


def _ps_problems(exp: Experiment, hosts: list[str]) -> list[Problem]:
    ps = exp.workload.ps
    related = ("topology.hosts", "workload.ps.servers", "workload.strategy")
    if ps.placement is None:
        if len(hosts) < ps.servers + 2:
            return [Problem(("workload", "strategy"), f"strategy ps with {ps.servers} server(s) needs "
                            f"at least {ps.servers + 2} hosts (1 chief, 1+ worker, {ps.servers} ps) "
                            f"with the default placement; the topology has {len(hosts)}", related)]
        return []
    return _placement_problems(ps.placement, ps.servers, hosts, related)


def _placement_problems(placement: dict, servers: int, hosts: list[str], related) -> list[Problem]:
    base, out = ("workload", "ps", "placement"), []
    wanted = {"chief": (1, "exactly 1"), "ps": (servers, f"exactly {servers} (ps.servers)"),
              "worker": (None, "at least 1")}
    for role, (count, text) in wanted.items():
        names = placement.get(role, [])
        if (count is None and not names) or (count is not None and len(names) != count):
            out.append(Problem(base + (role,), f"placement {role} needs {text} host(s), "
                               f"got {len(names)}", related))
        for i, name in enumerate(names):
            if name not in hosts:
                out.append(Problem(base + (role, i), f"no host {name!r} in this topology"
                                   f"{suggest(name, hosts)}", related))
    return out


FAULT_VALUES = ("bw", "delay", "loss", "cpu")


def fault_problems(exp: Experiment) -> list[Problem]:
    """Each fault: the target and value its action takes and no other, a link, host or task that
    exists, a trigger before the end of training, a duration only where the action can be undone."""
    if not exp.faults:
        return []
    graph = build_graph(exp.topology)          # names and links only
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
        out += _fault_target_problems(at, fault, graph, hosts, tasks) + _trigger_problems(at, fault, exp.workload, hosts=len(hosts))
        out += _fault_support_problems(exp, at, fault, busy)
    return out


def _fault_support_problems(exp: Experiment, at: tuple, fault, busy: set | None) -> list[Problem]:
    """What the applier cannot do: shape a real machine's link, change its (or a cluster node's) CPU
    limit, netem under OVS QoS; a pause of a host no task runs on would do nothing."""
    real, action = _real_machines(exp.topology), ACTIONS[fault.action]
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
    if fault.host is not None and busy is not None and fault.host in exp.topology.host_names() and fault.host not in busy:
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


def trace_problems(exp: Experiment) -> list[Problem]:
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
        g = params.trace_granularity or traces.DEFAULT_GRANULARITY
        try:
            trace = traces.load(traces.trace_file(exp, at), params.trace_format, g)
        except traces.TraceError as err:
            out.append(Problem(parse_path(at) + ("trace",), f"trace file {err}"))
            continue
        if trace.needs_netem and not SHAPERS[topo.shaping].netem:
            out.append(Problem(parse_path(at) + ("trace",), f"this trace has delay or loss; {SHAPERS[topo.shaping].what}: "
                               "set shaping: tc", ("topology.shaping",)))
        if params.trace_mode == "loop" and len(trace.rows) < 2:
            out.append(Problem(path + ("trace_mode",), "a trace of one row cannot loop: add a last row at the "
                               "time it ends (the loop starts over there)"))
    return out + (_trace_link_problems(topo) if not out else [])


def _trace_link_problems(topo: Topology) -> list[Problem]:
    """A real machine's link is its own network's: a trace acts on emulated links only."""
    real = _real_machines(topo)
    for edge in build_graph(topo).links if any(p.trace for _, p in traces.owners(topo)) else []:
        remote = [n for n in (edge.a, edge.b) if n in real]
        if edge.params.trace is not None and remote:
            key = traces.owner_of(topo, edge)
            return [Problem(parse_path(key) + ("trace",), f"{remote[0]} is a real machine (kind remote): its link "
                            f"{edge.a}-{edge.b} is its own network's, not an emulated one; a trace acts on emulated "
                            "links only", ("topology",))]
    return []


def cluster_problems(exp: Experiment) -> list[Problem]:
    """cluster: distinct servers, a placement naming known nodes and servers, and what the cluster
    edition builds here (netns hosts on Open vSwitch bridges, tc shaping, budgets in cores)."""
    from testbed.spec.models import LOCAL
    cluster, topo, out = exp.cluster, exp.topology, []
    names, machines = {}, {}
    for i, server in enumerate(cluster.servers):
        at = ("cluster", "servers", i)
        if server.name in names:
            out.append(Problem(at + ("name",), f"duplicate server name {server.name!r} (also servers[{names[server.name]}])"))
        names.setdefault(server.name, i)
        machine = (server.address, server.port)
        if machine in machines:
            out.append(Problem(at + ("address",), f"{server.address}:{server.port} is also servers[{machines[machine]}]: "
                               "one entry per server"))
        machines.setdefault(machine, i)
        if server.address == LOCAL and i != 0:
            out.append(Problem(at + ("address",), f"only the first server may be this machine ({LOCAL})"))
        if example_address(server.address):
            out.append(Problem(at + ("address",), f"{server.address} is an example address (RFC 5737 documentation "
                               f"range, nobody's machine): put {server.name}'s real address here"))
    graph = build_graph(topo)
    nodes = [h.name for h in graph.hosts] + [s.name for s in graph.switches]
    if isinstance(cluster.placement, dict):
        for node, server in cluster.placement.items():
            if node not in nodes:
                out.append(Problem(("cluster", "placement", node), f"no host or switch {node!r} in this topology"
                                   f"{suggest(node, nodes)} (nodes: {', '.join(nodes)})", ("topology",)))
            if server not in names:
                out.append(Problem(("cluster", "placement", node), f"unknown server {server!r}{suggest(server, list(names))} "
                                   f"(servers: {', '.join(names)})"))
    found: dict[tuple, list[str]] = {}       # one problem per key (hosts of a template share topology.host)
    for name, kind in _kinds(topo).items():
        key, conf = parse_path(topo.host_own(name)[0]), topo.host_conf(name)
        if kind != "netns":
            found.setdefault((key + ("kind",), f"kind {kind}: a cluster places netns hosts only (remove "
                              "cluster: to run docker or remote nodes)"), []).append(name)
        if conf.cpu is not None:
            found.setdefault((key + ("cpu",), "cpu is a fraction of this machine, which the cluster's servers "
                              "are not: give the host's budget as cores (the cores of the machine it emulates)"),
                             []).append(name)
    out += [Problem(key, f"{', '.join(names)}: {message}", ("cluster",)) for (key, message), names in found.items()]
    if topo.switch.kind != "ovs" or topo.switch.datapath == "kernel":
        out.append(Problem(("topology", "switch"), "a cluster builds Open vSwitch bridges with the userspace "
                           "datapath (switch kind ovs, datapath auto or user)", ("cluster",)))
    if topo.shaping != "tc":
        out.append(Problem(("topology", "shaping"), "a cluster shapes with tc on the hosts' interfaces "
                           "(shaping: tc); OVS QoS on the servers' bridges is not done yet", ("cluster",)))
    return out


STAGE_MAX_BYTES = 256 * 2**20      # what a script run may copy to each docker or remote node


def _stage_problems(exp: Experiment, folder: str) -> list[Problem]:
    """workload.files: each inside the script's folder and there; all of it at most STAGE_MAX_BYTES."""
    out = []
    for i, item in enumerate(exp.workload.files):
        path = os.path.normpath(os.path.join(folder, item))
        if os.path.isabs(item) or os.path.commonpath([folder, path]) != folder:
            out.append(Problem(("workload", "files", i), f"{item!r} is not inside the script's folder {folder}: "
                               "name files or folders below it, relative to it"))
        elif not os.path.exists(path):
            out.append(Problem(("workload", "files", i), f"no such file or folder: {path}"))
    if not out:
        size = sum(os.path.getsize(f) for f in exp.script_files())
        if size > STAGE_MAX_BYTES:
            out.append(Problem(("workload", "files"), f"the script and its files come to {size / 2**20:.0f} MiB, "
                               f"more than the {STAGE_MAX_BYTES // 2**20} MiB copied to each node: leave data "
                               "sets out and let the script read or download them on the node"))
    return out
