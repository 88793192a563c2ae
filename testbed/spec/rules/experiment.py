"""Cross-field rules of a structurally valid Experiment (one resolved point, no sweep): the entry
(experiment_problems), the workload, emulation and cluster rules here; the topology's in
topology.py, the faults' and traces' in faults.py.

Each rule yields a Problem at the key path to blame, plus the other key paths it depends on,
so a problem caused by a sweep value can be reported at that sweep axis.
"""

from __future__ import annotations

import os

from testbed.roles import PlacementError, assign_tasks
import testbed.limits as limits
from testbed.spec.graph import Graph, graph_of
from testbed.spec.keypaths import parse_path, suggest
from testbed.spec.models import AllreduceConf, Experiment
from testbed.spec.rules.model import model_problems, profile_problems, profiles
from testbed.spec.rules.problems import Problem, host_kinds, real_machines
from testbed.spec.settings import example_address
from testbed.spec.rules.topology import shape_problems, topology_problems
from testbed.spec.rules.faults import fault_problems, trace_problems
from testbed.spec.rules.balance import balance_problems
from testbed.spec.rules.communication import communication_problems
from testbed.spec.rules.byte_scale import byte_scale_problems


def experiment_problems(exp: Experiment, graphs: dict | None = None) -> list[Problem]:
    """Every cross-field problem of one resolved point; its graph is built once, when its topology holds
    (`graphs`: the file's, graph.graph_of), and handed to the rules that need it."""
    shape = shape_problems(exp.topology)
    if shape:
        return shape
    topology = topology_problems(exp.topology)
    if topology:
        return topology + workload_problems(exp)
    graph = graph_of(exp.topology, graphs)
    return (workload_problems(exp) + fault_problems(exp, graph) + trace_problems(exp, graph)
            + emulation_problems(exp, graph) + ([] if exp.cluster is None else cluster_problems(exp, graph)))


def emulation_problems(exp: Experiment, graph: Graph) -> list[Problem]:
    """A budget is cores or cpu, not both; dilation slows emulated nodes only, never real machines, and
    is a number with a cluster (auto knows this machine's cores only)."""
    topo, out, both = exp.topology, [], {}
    for name in topo.host_names():
        conf = topo.host_conf(name)
        if conf.cores is not None and conf.cpu is not None:
            both.setdefault(topo.host_own(name)[0], []).append(name)
    out += [Problem(parse_path(key) + ("cpu",), f"{', '.join(names)}: set cores (the emulated machine's cores) "
                    "or cpu (a fraction of this machine), not both") for key, names in both.items()]
    k = exp.emulation.factor
    if exp.emulation.compute == "replay":
        out += _replay_problems(exp)
    out += byte_scale_problems(exp, graph)
    small = {}
    for name in topo.host_names():
        cores = topo.host_conf(name).cores
        if cores is not None and cores / k < limits.MIN_CORES and exp.emulation.compute == "real":
            small.setdefault(topo.host_own(name)[0], []).append(name)
    out += [Problem(parse_path(key) + ("cores",), f"{', '.join(names)}: {topo.host_conf(names[0]).cores:g} core "
                    f"at dilation {k:g} is under the {limits.MIN_CORES:g} core a CPU quota can hold: give it more "
                    "cores or a smaller emulation.dilation", ("emulation.dilation",)) for key, names in small.items()]
    slow = sorted({e.params.bw for e in graph.links if e.params.bw is not None and e.params.bw / k <
                   limits.MIN_BANDWIDTH})
    if slow and k > 1:
        out.append(Problem(("emulation", "dilation"), f"a link of {slow[0]} bit/s at dilation {k:g} is paced at "
                           f"{slow[0] / k:.0f} bit/s on this machine, under the {limits.MIN_BANDWIDTH} bit/s tc paces: "
                           "a smaller dilation, or faster links", ("topology.link.bw",)))
    if exp.emulation.dilation == 1:
        return out
    remote = [name for name in topo.host_names() if name in real_machines(topo)]
    if remote:
        out.append(Problem(("emulation", "dilation"), f"{', '.join(remote)}: remote machines are real and run in "
                           "real time; dilation slows emulated nodes only (set emulation.dilation: 1)",
                           ("topology",)))
    if exp.cluster is not None and exp.emulation.dilation == "auto":
        out.append(Problem(("emulation", "dilation"), "dilation auto sizes the factor for this machine's cores; "
                           "with cluster: set a number K at which every server holds its hosts' cores / K plus "
                           "emulation.reserve", ("cluster",)))
    return out


def _replay_problems(exp: Experiment) -> list[Problem]:
    """compute: replay replays a built-in model's step on emulated nodes of a known size, for timing."""
    topo, w, key = exp.topology, exp.workload, ("emulation", "compute")
    out, say = [], "; or compute: real"
    profiled = profiles(exp)
    if w.script is not None and len(profiled) < len(topo.host_names()):
        out.append(Problem(key, "a workload.script is replayed from its profile: set topology.host.profile to one "
                           "taken with `run_experiment.py profile SCRIPT` (docs/profiles.md)" + say,
                           ("workload.script", "topology.host.profile")))
    if w.script is not None and w.engine != "pytorch":
        out.append(Problem(key, "a TensorFlow script cannot be replayed (its model is its own); profile and replay "
                           "a built-in or keras/ model" + say, ("workload.script",)))
    if w.data.kind != "synthetic" or w.eval:
        out.append(Problem(key, "replayed steps train nothing, so they give no BLEU: use data.kind synthetic and "
                           "eval: false" + say, ("workload.data.kind", "workload.eval")))
    real = [name for name in topo.host_names() if name in real_machines(topo)]
    if real or exp.cluster is not None:
        where = f"{', '.join(real)} are real machines" if real else "the cluster's hosts run on other servers"
        out.append(Problem(key, f"replay calibrates each node's step on this machine's CPUs; {where}" + say,
                           ("topology", "cluster")))
    sizeless = [name for name in topo.host_names() if name not in real and name not in profiled
                and topo.host_conf(name).cores is None]
    fraction = [name for name in topo.host_names() if topo.host_conf(name).cpu is not None]
    if sizeless or fraction:
        who = sizeless or fraction
        out.append(Problem(key, f"{', '.join(who[:3])}{', ...' if len(who) > 3 else ''}: replay waits the step time "
                           "of a machine of the node's cores: set topology.host.cores (not cpu)",
                           ("topology.host.cores",)))
    return out


def workload_problems(exp: Experiment) -> list[Problem]:
    w, hosts = exp.workload, exp.topology.host_names()
    found = profiles(exp)
    every = bool(found) and len(found) == len(hosts)
    out = model_problems(exp, every) + profile_problems(exp, found) + communication_problems(exp)
    out += balance_problems(exp)
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
    out += _work_problems(exp) + _port_problems(exp, hosts) + _check_problems(exp, hosts)
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
    if w.script is None and w.model == "caption":
        out.append(Problem(("workload", "model"), "engine pytorch trains the built-in mlp and cnn and PyTorch zoo "
                           "models, not caption (TensorFlow's)", related))
    if w.recovery != "none":
        out.append(Problem(("workload", "recovery"), "recovery is not built for engine pytorch yet: a killed "
                           "worker fails the run, naming the fault (set recovery: none)", related))
    changed = [f"allreduce.{k}" for k, v in w.allreduce.model_dump().items()
               if v != AllreduceConf.model_fields[k].default]
    if changed:
        out.append(Problem(("workload", "allreduce"), f"{', '.join(changed)} tune TensorFlow's collectives; "
                           "PyTorch's DDP buckets its own gradients (remove them; to send fewer bytes: "
                           "workload.communication)", related))
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


def _port_problems(exp: Experiment, hosts: list[str]) -> list[Problem]:
    """Tasks sharing a host take the ports after workload.port: the last must be a port."""
    try:
        tasks = assign_tasks(exp.workload, hosts)
    except PlacementError:
        return []                 # said by the strategy's own rules
    top = max(tasks, key=lambda t: t.port)
    if top.port <= 65535:
        return []
    return [Problem(("workload", "port"), f"the tasks on {top.host} take the ports {exp.workload.port} to {top.port}, "
                    f"past 65535: set workload.port at most {65535 - (top.port - exp.workload.port)}",
                    ("workload.ps.placement",))]


def _check_problems(exp: Experiment, hosts: list[str]) -> list[Problem]:
    """checks.pairs all: one iperf3 test per ordered pair of hosts, at most limits.MAX_CHECK_PAIRS of them."""
    pairs = len(hosts) * (len(hosts) - 1)
    if not (exp.checks.iperf and exp.checks.pairs == "all") or pairs <= limits.MAX_CHECK_PAIRS:
        return []
    return [Problem(("checks", "pairs"), f"all ordered pairs of {len(hosts)} hosts are {pairs:,} iperf3 tests, more "
                    f"than {limits.MAX_CHECK_PAIRS:,}: check pairs: first (every host to the first), or iperf: false",
                    ("topology.hosts", "checks.iperf"))]


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


def cluster_problems(exp: Experiment, graph: Graph) -> list[Problem]:
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
    for name, kind in host_kinds(topo).items():
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
