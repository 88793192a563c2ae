"""The node and switch kinds: the one registry of each. A node kind's row says its name, what it is (a
machine of its own, or emulated here with a CPU budget that can be pinned), its own host setting with
that setting's type and rules, and its run-time class; a switch kind's row its name, the cleanup list
of its bridges and its run-time class. Pure: pydantic and the standard library; the classes are named
as "module:Class" and imported on first use (testbed.nodes.node_class, testbed.net.switches), so the
spec, validate, bring-up and cleanup all read these rows and nothing else lists the kinds."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from pydantic import BeforeValidator, Field, WithJsonSchema

from testbed.spec.rules.image_reference import reference_problem
from testbed.spec.settings import (Address, Interface, KindSettings, RemotePath, Strict, User, example_address,
                                   merge_fields)


# ---- docker: the image ------------------------------------------------------------------------------

def check_image(value: object) -> str:
    """A Docker image reference such as debian:bookworm or registry:5000/team/worker:1.0."""
    problem = reference_problem(value)
    if problem:
        raise ValueError(problem)
    return value


Image = Annotated[str, BeforeValidator(check_image),
                  WithJsonSchema({"type": "string", "examples": ["dltestbed-worker:latest", "registry:5000/team/worker:1.0"]})]
DOCKER = KindSettings("image", Image, "container image of a docker node "
                        "(default: the project's worker image, built here)")


# ---- remote: the machine ----------------------------------------------------------------------------

class RemoteConf(Strict):
    """A real machine reached over SSH (kind remote). Unset fields inherit topology.host.remote."""

    address: Address | None = Field(None, description="IPv4 address or host name, reachable from here and "
                                    "from the other machines (TF_CONFIG uses it)")
    port: Annotated[int, Field(ge=1, le=65535)] | None = Field(None, description="SSH port (default 22)")
    user: User | None = Field(None, description="login name (default: your user name here)")
    key_file: str | None = Field(None, description="private key file on this machine (default: the ssh "
                                 "agent and ~/.ssh/id_*); never a passphrase or key text")
    python: RemotePath | None = Field(None, description="interpreter on the machine that imports "
                                      "tensorflow and tf_keras")
    interface: Interface | None = Field(None, description="the NIC the training traffic uses "
                                        "(traffic counters; shaping)")
    workdir: RemotePath | None = Field(None, description="where the workload code is copied "
                                       "(default dltestbed, in the user's home)")
    shape: bool | None = Field(None, description="shape the link's bandwidth with tc on interface, "
                               "removed at the end (needs user root); default false")

    def merged(self, override: "RemoteConf | None") -> "RemoteConf":
        return RemoteConf.model_construct(**merge_fields(self, override, RemoteConf))


NEEDS = {"address": "the machine's address", "python": "the interpreter with TensorFlow there",
         "interface": "the NIC the training traffic uses"}
KIND = ("topology.host.kind",)


def settings_problems(hosts, others: list[str]):
    """Remote hosts: the settings they need, no limits, one machine each, no emulated peers."""
    out, seen = [], {}
    for host in hosts:
        name, key, conf = host.name, host.path, host.conf
        settings = conf.remote or RemoteConf()
        for field, what in NEEDS.items():
            if getattr(settings, field) is None:
                out.append((key + ("remote", field), f"{name} is kind remote and needs remote.{field} ({what})", KIND))
        for limit in ("cores", "cpu", "memory"):
            if getattr(conf, limit) is not None:
                out.append((key + (limit,), f"{limit} limits are not applied on real machines "
                            f"({name} is kind remote); remove it", KIND))
        machine = (settings.address, settings.port or 22)
        if settings.address is not None and machine in seen:
            out.append((key + ("remote", "address"), f"{name} and {seen[machine]} are the same machine "
                        f"({settings.address}); one host per machine", ()))
        seen.setdefault(machine, name)
        if settings.address is not None and example_address(settings.address):
            out.append((key + ("remote", "address"), f"{settings.address} is an example address (RFC 5737 "
                        f"documentation range, nobody's machine): put {name}'s real address here", ()))
    if hosts and others:
        out.append((hosts[0].path + ("kind",), f"remote hosts cannot share a topology with emulated ones "
                    f"({', '.join(others)}): the machines cannot reach this machine's emulated network", KIND))
    return out


REMOTE = KindSettings("remote", RemoteConf, "the machine of a remote node (field by field: unset fields "
                        "inherit topology.host.remote)", settings_problems, lambda remote: remote.address)


# ---- the table --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Kind:
    """A node kind: its name, its own host setting (None: none), and what it is. A real machine runs in
    real time on a network of its own: it has no CPU budget, is not pinned, and its link is not the
    testbed's to shape or fault."""
    name: str
    runtime: str                       # its class, "module:Class" (a subclass of testbed.nodes.base.Node)
    settings: KindSettings | None = None
    real_machine: bool = False

    @property
    def budgets(self) -> bool:
        """Whether its nodes are held to their cores by a CPU budget (and may be pinned to CPUs)."""
        return not self.real_machine


KINDS: dict[str, Kind] = {
    # a Mininet host: a shell in its own network namespace
    "netns": Kind("netns", "testbed.nodes.netns:NetnsNode"),
    # a container joined to the emulated links by a veth
    "docker": Kind("docker", "testbed.nodes.docker:DockerNode", DOCKER),
    # a real machine driven over SSH (its own network)
    "remote": Kind("remote", "testbed.nodes.remote:RemoteNode", REMOTE, real_machine=True),
}
DEFAULT_KIND = "netns"


def kind_names() -> list[str]:
    return list(KINDS)


def kind(name: str | None) -> Kind:
    """The table's entry of a kind name (None: the default kind)."""
    return KINDS[name or DEFAULT_KIND]


def load_runtime(path: str):
    """The class a row names as "module:Class", imported now."""
    import importlib
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


def real_machine(name: str | None) -> bool:
    """Whether nodes of this kind are machines of their own (not emulated here)."""
    return kind(name).real_machine


# ---- switch kinds ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class SwitchKind:
    """A kind of switch: its name, the cleanup list its bridges are recorded in (testbed.cleanup removes
    them) and its run-time class, "module:Class" (a subclass of testbed.net.switches.SwitchKind)."""
    name: str
    records: str
    runtime: str


SWITCH_KINDS: dict[str, SwitchKind] = {
    "ovs": SwitchKind("ovs", "bridges", "testbed.net.switches:OvsKind"),       # Open vSwitch bridges
    "linuxbridge": SwitchKind("linuxbridge", "linux_bridges", "testbed.net.switches:LinuxBridgeKind"),
}


def kind_settings() -> dict[str, KindSettings]:
    """kind -> its own host setting, for the kinds that have one."""
    return {name: k.settings for name, k in KINDS.items() if k.settings is not None}
