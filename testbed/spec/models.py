"""The experiment spec as pydantic v2 models: the reference for every YAML key.

Units are parsed on the way in (bandwidth -> int bits/s, time -> float s, size -> int bytes,
percent -> float percent) and formatted back on `model_dump(mode="json")`, so a dump is valid YAML
input again. Cross-field rules live in `rules/`; loading in `load.py`.
"""

from __future__ import annotations

import os
import pathlib
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, NamedTuple, Optional, Union

from pydantic import (BeforeValidator, Discriminator, Field, create_model,
                      PrivateAttr, Tag, WithJsonSchema, model_serializer, model_validator)

import testbed.limits as limits
from testbed.spec.expect import Expectation
from testbed.spec.faults.grammar import ACTIONS, parse_task, parse_trigger
from testbed.spec.kinds import DEFAULT_KIND, SWITCH_KINDS, kind_names, kind_settings
from testbed.spec.settings import Address, RemotePath, Strict, User, merge_fields as _merge
from testbed.spec.keypaths import Path, canonical, get_in, parse_path
from testbed.spec.values import (EXPERIMENT_NAME, NODE_NAME, Bandwidth, Count, Kind, NodeName,  # noqa: F401
                                 Percent, PositiveTime, Scaled, Size, Subnet, Time, TraceStart, Whole,
                                 _count_or_list, check_experiment_name)
from testbed.spec.workload import (DEFAULT_STEPS_PER_EPOCH, MODEL_PARAMS, AdvisorConf, AllreduceConf,  # noqa: F401
                                   CommunicationConf,
                                   DataConf, PsConf, StrategySwitchConf, Workload)

class SpecIssue(NamedTuple):
    """One problem in a spec, located at FILE:LINE and a dotted KEY."""

    file: str
    line: int
    key: str
    message: str

    def __str__(self) -> str:
        key = f" {self.key}:" if self.key else ""
        return f"{self.file}:{self.line}:{key} {self.message}"


class SpecError(Exception):
    """Every problem found in a spec; str() prints one FILE:LINE: KEY: MESSAGE per issue."""

    def __init__(self, errors: list[SpecIssue]):
        self.errors = list(errors)
        super().__init__(str(self))

    def __str__(self) -> str:
        return "\n".join(str(issue) for issue in self.errors)


@dataclass
class Source:
    """Where each key path came from: (file, line) per path, parents as fallback."""

    file: str = "<spec>"
    locations: dict = field(default_factory=dict)

    def location(self, path: Path) -> tuple[str, int]:
        for end in range(len(path), -1, -1):
            if path[:end] in self.locations:
                return self.locations[path[:end]]
        return (self.file, 1)

    def copy(self) -> "Source":
        return Source(self.file, dict(self.locations))


TRACE_KEYS = ("trace", "trace_format", "trace_mode", "trace_start", "trace_granularity")


class LinkParams(Strict):
    """Shaping of a link. null = not shaped in that respect (in an override: inherit)."""

    bw: Bandwidth | None = None
    delay: Time | None = None
    jitter: Time | None = Field(None, description="needs delay")
    loss: Percent | None = None
    max_queue: Count | None = Field(None, description="queue limit in packets")
    trace: str | None = Field(None, description="a trace file the link follows while training runs, relative "
                              "to this file: its rate (and delay, loss) over time, instead of bw (docs/changing-links.md)")
    trace_format: Literal["csv", "mahimahi"] | None = Field(
        None, description="csv (default): t[s],bw[mbit][,delay[ms],loss[%]] rows; mahimahi: one packet-delivery "
        "opportunity per line, in ms")
    trace_mode: Literal["hold", "loop"] | None = Field(
        None, description="at the trace's end: hold (default) its last values, or loop: start over")
    trace_start: TraceStart | None = Field(
        None, description="'start' (default: when training starts), 'step N', 'epoch N' or a time after training "
        "starts (15s); before it the link has the trace's first values")
    trace_granularity: Annotated[Time, Field(ge=limits.MIN_TRACE_GRANULARITY)] | None = Field(
        None, description="trace_format mahimahi: the width of each rate step (default 1s)")

    def merged(self, override: "LinkParams | None") -> "LinkParams":
        """These params with the non-null fields of `override` replacing them (null = inherit); an
        override with a bw of its own and no trace keeps that bw (it does not follow the inherited trace)."""
        values = _merge(self, override, LinkParams)
        if override is not None and override.bw is not None and override.trace is None:
            values.update(dict.fromkeys(TRACE_KEYS))
        return LinkParams.model_construct(**values)


BUILTIN_PROFILE = "builtin/"
PROFILES_DIR = pathlib.Path(__file__).resolve().parents[2] / "profiles"


class SwitchConf(Strict):
    """Switch implementation. datapath auto = kernel if available, else user space."""

    kind: Literal[tuple(SWITCH_KINDS)] = "ovs"
    datapath: Literal["auto", "kernel", "user"] = "auto"


class _HostLimits(Strict):
    """HostConf without the node kinds' own settings (added to it below, from the registry)."""

    kind: Kind | None = Field(None, description=f"node kind (default {DEFAULT_KIND}): " + ", ".join(kind_names()))
    cores: Annotated[float, Field(ge=limits.MIN_CORES, le=limits.MAX_CORES)] | None = Field(
        None, description="the cores of the machine this node emulates (e.g. 1, 0.5, 4): its processes get "
        "exactly that much CPU, divided by emulation.dilation; null: no budget (the nodes share this machine)")
    cpu: Annotated[float, Field(gt=0, le=1)] | None = Field(
        None, description="older form of a budget: a fraction of THIS machine's cores (cpu 0.5 on 2 cores "
        "is cores 1); prefer cores")
    memory: Size | None = None
    profile: Annotated[str, Field(min_length=1, max_length=4096)] | None = Field(
        None, description="emulation.compute replay: the compute profile this node replays (a file written by "
        "`run_experiment.py profile`, relative to this file, or builtin/NAME for one under profiles/): the node "
        "stands for the machine profiled, a GPU server say; null: the step calibrated on this machine")

    def merged(self, override: "HostConf | None") -> "HostConf":
        """These settings with the non-null fields of `override` replacing them (null = inherit); a
        kind's setting that is a model (remote) is merged field by field."""
        values = _merge(self, override, HostConf)
        for key in _KIND_KEYS:
            mine, theirs = getattr(self, key), getattr(override, key, None)
            if hasattr(mine, "merged") and theirs is not None:
                values[key] = mine.merged(theirs)
        return HostConf.model_construct(**values)


# Every node kind's own host setting (docker: image, remote: remote), declared by the kind (nodes/).
_KIND_KEYS = [s.key for s in kind_settings().values()]
HostConf = create_model(
    "HostConf", __base__=_HostLimits, __module__=__name__,
    __doc__="A host's kind and resource limits. cpu is a fraction of the WHOLE machine (0 < cpu <= 1).",
    **{s.key: (Optional[s.type], Field(None, description=s.description)) for s in kind_settings().values()})


class HostItem(HostConf):
    """A host of a custom topology; unset kind/image/cpu/memory inherit topology.host."""

    name: NodeName


class SwitchItem(Strict):
    """A switch of a custom topology."""

    name: NodeName


class LinkItem(LinkParams):
    """A link of a custom topology between nodes a and b; unset params inherit topology.link."""

    a: str
    b: str


Hosts = Annotated[Union[Annotated[Count, Tag("count")],
                        Annotated[list[HostItem], Field(max_length=limits.MAX_HOSTS), Tag("list")]],
                  Discriminator(_count_or_list)]
Switches = Annotated[Union[Annotated[Count, Tag("count")],
                           Annotated[list[SwitchItem], Field(max_length=limits.MAX_SWITCHES), Tag("list")]],
                     Discriminator(_count_or_list)]


class Topology(Strict):
    """Network: a template (star, linear, tree, dumbbell) or custom hosts/switches/links."""

    template: Literal["star", "linear", "tree", "dumbbell", "custom", "graph"] = "star"
    hosts: Hosts = Field(2, description="number of hosts; a list of {name, cpu, memory} for custom")
    subnet: Subnet | None = Field(None, description="the hosts' addresses, in host order (null: 10.0.0.0/24, "
                                  "or the smallest 10.0.0.0/N that holds more hosts)")
    switches: Switches | None = Field(None, description="linear: number of switches (2); custom: list")
    fanout: Annotated[int, Field(ge=2, le=limits.MAX_HOSTS)] = Field(2, description="tree only")
    switch: SwitchConf = Field(default_factory=SwitchConf)
    link: LinkParams = Field(default_factory=LinkParams, description="defaults for every link")
    bottleneck: LinkParams | None = Field(None, description="dumbbell's middle link; unset fields = link")
    shaping: Literal["tc", "ovs"] = "tc"
    qdisc: Literal["htb", "tbf"] = Field("htb", description="tbf needs shaping tc")
    host: HostConf = Field(default_factory=HostConf, description="defaults for every host")
    host_overrides: dict[NodeName, HostConf] = Field(default_factory=dict, description="templates only")
    links: Annotated[list[LinkItem], Field(max_length=limits.MAX_LINKS)] | None = Field(None, description="custom only")
    graph: str | None = Field(None, description="template graph: a GraphML (.graphml) or GML (.gml) file, e.g. "
                              "from the Topology Zoo, relative to this file; every node is a switch (s1..sN)")
    graph_delay: Literal["distance", "none"] = Field(
        "distance", description="template graph: distance: each link's delay is the great-circle distance between "
        "its ends' Latitude/Longitude over the speed of light in fibre (2e8 m/s; needs netem); none: no delay")
    graph_hosts: Annotated[list[str], Field(min_length=1, max_length=limits.MAX_SWITCHES)] | None = Field(
        None, description="template graph: the nodes (labels or ids of the file) hosts are spread over, in this "
        "order; null: every node in file order")

    def host_names(self) -> list[str]:
        """Host names in order: h1..hN for templates, as declared for custom."""
        if isinstance(self.hosts, list):
            return [h.name for h in self.hosts]
        return [f"h{i}" for i in range(1, self.hosts + 1)]

    def switch_count(self) -> int:
        """Number of switches for templates (linear default 2); len(switches) for custom."""
        if isinstance(self.switches, list):
            return len(self.switches)
        return (self.switches or 2) if self.template == "linear" else 1

    def host_own(self, name: str) -> tuple[str, HostConf | None]:
        """(key path, settings) a host has of its own: its item (custom) or override, else none."""
        if isinstance(self.hosts, list):
            return next((f"topology.hosts[{i}]", h) for i, h in enumerate(self.hosts) if h.name == name)
        if name in self.host_overrides:
            return f"topology.host_overrides.{name}", self.host_overrides[name]
        return "topology.host", None

    def host_conf(self, name: str) -> HostConf:
        """Resolved kind/image/cpu/memory of one host (defaults + its own settings)."""
        return self.host.merged(self.host_own(name)[1])


def _text_of(parse, pattern: str, example: str):
    """A string checked (and normalised) by `parse` at load time, kept as written for dumps."""
    def check(value: object) -> str:
        parse(value)
        return " ".join(value.split())
    return Annotated[str, BeforeValidator(check),
                     WithJsonSchema({"type": "string", "pattern": pattern, "examples": [example]})]


Trigger = Annotated[_text_of(parse_trigger, r"^\s*((step|epoch)\s+[0-9]+|[0-9.]+\s*(us|ms|s|m))\s*$", "step 20"),
                    Scaled("time")]      # a time trigger x K; 'step N' and 'epoch N' count, and stay
TaskName = _text_of(parse_task, r"^\s*(single|worker|chief|ps)(\s+[0-9]+)?\s*$", "worker 1")


class Fault(Strict):
    """A fault during training: at a trigger, an action on a link, a task or a host, undone after
    duration (and at the end of the run, whatever happened)."""

    at: Trigger = Field(description="'step N' (after the N-th step), 'epoch N' (when it begins) or a time "
                        "after training starts, e.g. 15s")
    action: Literal[tuple(ACTIONS)] = Field(description="; ".join(f"{k}: {a.doc}" for k, a in ACTIONS.items()))
    link: Annotated[list[NodeName], Field(min_length=2, max_length=2)] | None = Field(
        None, description="the link's two ends, e.g. [h3, s1]")
    task: TaskName | None = Field(None, description="a training task, e.g. 'worker 1'")
    host: NodeName | None = None
    bw: Bandwidth | None = Field(None, description="set_bw: the new rate")
    delay: Time | None = Field(None, description="set_delay: netem delay")
    loss: Percent | None = Field(None, description="set_loss: netem loss")
    cpu: Annotated[float, Field(gt=0, le=1)] | None = Field(None, description="set_cpu: fraction of the machine")
    duration: PositiveTime | None = Field(None, description="undo the fault after this long")


class Checks(Strict):
    """Network checks before training: iperf3 bandwidth within tolerance, ping."""

    iperf: bool = True
    ping: bool = True
    tolerance: Annotated[float, Field(ge=0, le=1)] = 0.10
    # not stretched x K with the emulated times: a check is sized by round trips where it runs
    # (testbed.run.bringup.checks.wall_duration)
    duration: Annotated[PositiveTime, Field(le=limits.MAX_CHECK_DURATION), Scaled("wall")] = Field(
        3.0, json_schema_extra={"default": "3s"})
    attempts: Annotated[int, Field(ge=1, le=10)] = Field(
        3, description="iperf3 runs per pair; the best counts (a VM that stalls only ever lowers a reading)")
    pairs: Literal["first", "all"] = Field("first", description="first: every other host to the first")
    fail_run: bool = True


class Monitor(Strict):
    """Per-node CPU, memory and network sampling."""

    enabled: bool = True
    interval: Annotated[PositiveTime, Field(ge=limits.MIN_MONITOR_INTERVAL, le=limits.MAX_MONITOR_INTERVAL)] = Field(
        0.5, json_schema_extra={"default": "0.5s"})


def check_dilation(value: object) -> str | float:
    """'auto' or a factor >= 1."""
    if value == "auto" or (isinstance(value, (int, float)) and not isinstance(value, bool)
                           and 1 <= value <= limits.MAX_DILATION):
        return value if value == "auto" else float(value)
    raise ValueError(f"{value!r}: dilation is a factor of at least 1 and at most {limits.MAX_DILATION:g} (1 = real time, 2 = twice as "
                     "slow) or auto")


Dilation = Annotated[Union[Literal["auto"], float], BeforeValidator(check_dilation),
                     WithJsonSchema({"oneOf": [{"const": "auto"}, {"type": "number", "minimum": 1}]})]


def check_byte_scale(value: object) -> str | int:
    """'auto' or a whole factor >= 1."""
    if value == "auto" or (isinstance(value, int) and not isinstance(value, bool)
                           and 1 <= value <= limits.MAX_BYTE_SCALE):
        return value
    raise ValueError(f"{value!r}: byte_scale is a whole factor of at least 1 and at most {limits.MAX_BYTE_SCALE} "
                     "(1 = every byte sent, 4 = a quarter of the gradient's elements over links a quarter as fast) "
                     "or auto")


ByteScale = Annotated[Union[Literal["auto"], int], BeforeValidator(check_byte_scale),
                      WithJsonSchema({"oneOf": [{"const": "auto"}, {"type": "integer", "minimum": 1}]})]


class Emulation(Strict):
    """How the emulated machines are held to their size: time dilation and the CPU kept outside the budgets."""

    dilation: Dilation = Field(
        1.0, description="K: the emulated world runs K times slower than the wall clock (each node gets "
        "cores/K, each link bw/K, every time is x K); auto: for each point the smallest K at which it fits "
        "this machine; 1: real time")
    reserve: Annotated[float, Field(ge=0, le=limits.MAX_CORES)] = Field(
        0.5, description="cores kept for the switch, the orchestrator and the monitor (not given to nodes)")
    compute: Literal["real", "replay"] = Field(
        "real", description="real: every node computes its steps; replay: each node waits the compute time of a "
        "step on a machine of its cores (calibrated on this machine) and sends gradients of the model's real shapes "
        "through the engine's collective: timing only, no loss")

    byte_scale: ByteScale = Field(
        1, description="F, replayed compute only: each node sends gradients of 1/F the elements and each link's "
        "rate is / F as well (beyond the dilation), so a transfer's time on the wire stays while this machine's CPU "
        "per exchange falls F-fold; auto: for each point the smallest power of 2 at which the exchange's CPU and the "
        "switch no longer raise the dilation; 1: every byte sent")

    @property
    def factor(self) -> float:
        """The dilation as a number (auto, before a sweep resolves it, counts as 1)."""
        return 1.0 if self.dilation == "auto" else float(self.dilation)

    @property
    def scale(self) -> int:
        """The byte scale as a number (auto, before a point resolves it, counts as 1)."""
        return 1 if self.byte_scale == "auto" else int(self.byte_scale)


class TrainingJob(Strict):
    """A training job the report projects to: a number of samples, or epochs of a data set's size."""

    samples: Annotated[int, Field(ge=1, le=10**15)] | None = Field(None, description="samples to train")
    epochs: Count | None = Field(None, description="epochs over samples_per_epoch")
    samples_per_epoch: Annotated[int, Field(ge=1, le=10**15)] | None = Field(
        None, description="the data set's size (default: the workload's samples per epoch)")

    @model_validator(mode="after")
    def _one_way(self):
        if self.samples is not None and (self.epochs is not None or self.samples_per_epoch is not None):
            raise ValueError("give samples, or epochs (with samples_per_epoch), not both")
        if self.samples is None and self.epochs is None:
            raise ValueError("give samples: N, or epochs: E (with samples_per_epoch: the data set's size)")
        return self


class ReportConf(Strict):
    """What the report measures against: settings of the analysis, not of the run."""

    target_loss: Annotated[float, Field(gt=0)] | None = Field(
        None, description="the loss a run counts as trained at: the report's time to target, per strategy "
        "(null: the highest final loss of the runs compared, which every run reached)")
    job: TrainingJob | None = Field(
        None, description="the training you plan, which the report projects each point's time to train for: "
        "{samples: N} or {epochs: E, samples_per_epoch: D} (null: the file's own workload, epochs x its samples "
        "per epoch)")


class SshConf(Strict):
    """How remote machines are reached: host keys and the connect time-out."""

    known_hosts: str = Field("~/.ssh/known_hosts", description="host keys the machines' keys are checked against")
    accept_unknown_host_keys: bool = Field(False, description="run against a machine whose key is not in "
                                           "known_hosts (the key is recorded in topology.json); a changed key "
                                           "is always refused")
    connect_timeout: Annotated[PositiveTime, Field(le=limits.MAX_CONNECT_TIMEOUT), Scaled("wall")] = Field(
        10.0, json_schema_extra={"default": "10s"})


LOCAL = "local"     # a cluster server's address meaning this machine


class ServerConf(Strict):
    """One server of a cluster: where Mininet's cluster edition runs part of the network."""

    name: Annotated[str, Field(pattern=r"^[a-z][a-z0-9-]{0,15}$")] = Field(
        description="the server's name in placement (1-16 of a-z, 0-9, -)")
    address: Address = Field(description=f"IPv4 address or host name reachable from here and from the other "
                             f"servers (the tunnels' ends); {LOCAL!r}: this machine")
    port: Annotated[int, Field(ge=1, le=65535)] = Field(22, description="SSH port")
    user: User = Field("root", description="login name (the network needs root there)")
    key_file: str | None = Field(None, description="private key file on this machine (default: the ssh agent "
                                 "and ~/.ssh/id_*)")


class ClusterConf(Strict):
    """One emulated network spread over several servers (Mininet's cluster edition)."""

    servers: list[ServerConf] = Field(min_length=1, max_length=limits.MAX_SERVERS, description="the first may be this machine (address local)")
    known_hosts: str = Field("~/.ssh/known_hosts", description="the servers' host keys (checked, never "
                             "accepted blindly)")
    placement: Literal["auto"] | dict[NodeName, str] = Field(
        "auto", description="auto: hosts balanced over the servers, each switch with most of its hosts; or "
        "node (host or switch) -> server name (nodes left out are placed automatically)")
    python: RemotePath = Field("/opt/dltestbed/venv/bin/python", description="interpreter on the servers that "
                               "imports tensorflow and tf_keras")
    workdir: RemotePath = Field("dltestbed", description="where the workload code is copied on each server")
    connect_timeout: Annotated[PositiveTime, Field(le=limits.MAX_CONNECT_TIMEOUT), Scaled("wall")] = Field(
        10.0, json_schema_extra={"default": "10s"})
    max_link_share: Annotated[float, Field(gt=0, le=1)] = Field(
        0.9, description="fidelity guard: a link crossing a tunnel may be shaped to at most this share of the "
        "tunnel's measured capacity")


SWEEP_SCHEMA = {
    "type": ["object", "null"],
    "description": "dotted key path (as --set takes; aliases hosts, bw, strategy, model) -> values",
    "properties": {"repeats": {"type": "integer", "minimum": 1, "default": 1},
                   "include": {"type": "array", "description": "more points: each item maps key paths to values "
                               "and is crossed with the axes it does not name", "items": {"type": "object",
                                                                                         "minProperties": 1}}},
    "additionalProperties": {"type": "array", "minItems": 1},
}
INCLUDE = "include"      # sweep.include: points beside the axes' product


class Sweep(Strict):
    """Axes (canonical key path -> values, in file order), points of their own (include: each item's key
    paths -> values, crossed with the axes it does not name) and repeats per point."""

    axes: dict[str, list[Any]] = Field(default_factory=dict)
    include: list[dict[str, Any]] = Field(default_factory=list)
    repeats: Count = 1

    @model_validator(mode="before")
    @classmethod
    def _from_mapping(cls, data: Any) -> Any:
        if isinstance(data, dict) and "axes" not in data:
            axes = {canonical(k): v for k, v in data.items() if k not in ("repeats", INCLUDE)}
            items = data.get(INCLUDE) or []
            include = [{canonical(k): v for k, v in item.items()} if isinstance(item, dict) else item
                       for item in (items if isinstance(items, list) else [items])]
            return {"axes": axes, "include": include, "repeats": data.get("repeats", 1)}
        return data

    @model_serializer
    def _to_mapping(self) -> dict:
        return {**self.axes, **({INCLUDE: self.include} if self.include else {}), "repeats": self.repeats}


class Experiment(Strict):
    """One YAML file: a named experiment, its network, workload, checks, monitor, sweep and expectations."""

    name: Annotated[str, BeforeValidator(check_experiment_name),
                    WithJsonSchema({"type": "string", "pattern": EXPERIMENT_NAME})]
    description: str = ""
    topology: Topology = Field(default_factory=Topology)
    workload: Workload = Field(default_factory=Workload)
    checks: Checks = Field(default_factory=Checks)
    monitor: Monitor = Field(default_factory=Monitor)
    emulation: Emulation = Field(default_factory=Emulation, description="time dilation and the CPU reserve "
                                 "(see topology.host.cores)")
    ssh: SshConf = Field(default_factory=SshConf, description="remote nodes: host keys, time-out")
    faults: Annotated[list[Fault], Field(max_length=limits.MAX_FAULTS)] = Field(default_factory=list, description="faults during training, in any order")
    cluster: ClusterConf | None = Field(None, description="spread the emulated network over several servers "
                                        "(Mininet's cluster edition); null: everything on this machine")
    sweep: Annotated[Sweep | None, WithJsonSchema(SWEEP_SCHEMA)] = None
    report: ReportConf = Field(default_factory=ReportConf, description="what the report measures against")
    expect: Annotated[list[Expectation], Field(max_length=limits.MAX_EXPECTATIONS)] = Field(
        default_factory=list, description="what the results must show, judged after each point and after the sweep "
        "into expectations.csv; run exits 101 when one fails (docs/ci.md)")
    _source: Source = PrivateAttr(default_factory=Source)

    def location(self, key_path: str | Path) -> tuple[str, int]:
        """(file, line) where key_path was set; nearest parent key, else line 1."""
        path = parse_path(key_path) if isinstance(key_path, str) else tuple(key_path)
        return self._source.location(path)

    def script_path(self) -> str | None:
        """The workload script as an absolute path, relative to the file that named it."""
        if self.workload.script is None:
            return None
        file = self.location(("workload", "script"))[0]
        base = os.path.dirname(os.path.abspath(file)) if os.path.isfile(file) else os.getcwd()
        return os.path.normpath(os.path.join(base, self.workload.script))

    def profile_path(self, host: str) -> tuple[str, str] | None:
        """(key path, absolute path) of the compute profile a host replays, None without one: builtin/NAME
        is profiles/NAME.json of the testbed, any other path is relative to the file that named it."""
        own_key, own = self.topology.host_own(host)
        key = f"{own_key}.profile" if own is not None and own.profile is not None else "topology.host.profile"
        value = self.topology.host_conf(host).profile
        if value is None:
            return None
        if value.startswith(BUILTIN_PROFILE):
            return key, str(PROFILES_DIR / (value[len(BUILTIN_PROFILE):] + ".json"))
        file = self.location(key)[0]
        base = os.path.dirname(os.path.abspath(file)) if os.path.isfile(file) else os.getcwd()
        return key, os.path.normpath(os.path.join(base, os.path.expanduser(value)))

    def script_files(self) -> list[str]:
        """The files a script run stages on a node: the script, then every file under `workload.files`
        (folders walked, caches skipped); absolute paths. Empty without a script."""
        script = self.script_path()
        if script is None:
            return []
        folder, out = os.path.dirname(script), [script]
        for item in self.workload.files:
            path = os.path.normpath(os.path.join(folder, item))
            if os.path.isdir(path):
                out += sorted(os.path.join(top, name) for top, dirs, names in os.walk(path)
                              if "__pycache__" not in top.split(os.sep) for name in names)
            else:
                out.append(path)
        return list(dict.fromkeys(out))

    def value(self, key_path: str | Path) -> Any:
        """Value at a key path in the JSON form (units as text, e.g. '10mbit')."""
        path = parse_path(key_path) if isinstance(key_path, str) else tuple(key_path)
        return get_in(self.model_dump(mode="json"), path)
