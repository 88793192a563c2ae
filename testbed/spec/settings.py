"""What a node kind declares for the spec: its per-host setting (one YAML key under topology.host,
its pydantic type) and the problems of a topology's hosts of that kind, plus the shared types such
settings are made of. Pure: pydantic and the standard library only, so the spec imports it (through
the registry) without any run-time code."""
from __future__ import annotations

import ipaddress
import os
import re
import stat
from dataclasses import dataclass
from typing import Annotated, Any, Callable

from pydantic import BaseModel, BeforeValidator, ConfigDict, WithJsonSchema

# Remote machines: what reaches TF_CONFIG, ssh and remote argv (quoted anyway; these catch typos).
ADDRESS = r"^[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?$"      # IPv4 address or host name
USER = r"^[A-Za-z_][A-Za-z0-9_.-]{0,31}$"
INTERFACE = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,14}$"                    # Linux IFNAMSIZ
REMOTE_PATH = r"^[^-\s=][^\s=]*$"   # no option-like start, no blanks, no '=' (env would read NAME=VALUE)


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, allow_inf_nan=False)


def pattern(regex: str, what: str):
    """A string type checked against `regex`, with `what` in its error message."""
    def check(value: object) -> str:
        if isinstance(value, str) and re.fullmatch(regex, value):
            return value
        raise ValueError(f"{value!r} is not a valid {what}")
    return Annotated[str, BeforeValidator(check), WithJsonSchema({"type": "string", "pattern": regex})]


def check_address(value: object) -> str:
    """An IP address, or a host name of dot-separated labels (1-63 of letters, digits and '-', not
    starting or ending with '-'), not all digits (999.1.1.1 is a mistyped address, not a name)."""
    what = "address: an IPv4 address or host name such as 192.168.1.10 or pc2.lan"
    if not isinstance(value, str) or not re.fullmatch(ADDRESS, value):
        raise ValueError(f"{str(value)[:60]!r} is not a valid {what}")
    try:
        ipaddress.ip_address(value)
        return value
    except ValueError:
        pass
    labels = value.split(".")
    if re.fullmatch(r"[0-9.]+", value) or not all(re.fullmatch(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?", label)
                                                  for label in labels):
        raise ValueError(f"{value!r} is neither an IP address nor a valid host name; write an {what}")
    return value


Address = Annotated[str, BeforeValidator(check_address), WithJsonSchema({"type": "string", "pattern": ADDRESS})]
User = pattern(USER, "user name")
Interface = pattern(INTERFACE, "interface name (1-15 of letters, digits, _ . : -)")
RemotePath = pattern(REMOTE_PATH, "path on the machine (no blanks or '=', not starting with '-')")
EXAMPLE_NETWORKS = [ipaddress.ip_network(n) for n in ("192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24")]


def missing_key_file(path: str | None) -> str | None:
    """Why a private key file (path, ~ expanded) cannot be used, or None: there is a file, or this
    user cannot tell (validate runs without root; /root is not readable then)."""
    if not path:
        return None
    try:
        found = os.stat(os.path.expanduser(path))
    except FileNotFoundError:
        return f"no such key file: {path} (a private key file on this machine)"
    except OSError:
        return None
    return None if stat.S_ISREG(found.st_mode) else f"{path} is not a file (key_file names a private key file)"


def example_address(address: str) -> bool:
    """An RFC 5737 documentation address, as example files use, so they cannot contact anyone's machine."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in net for net in EXAMPLE_NETWORKS)


def merge_fields(base: BaseModel, override: BaseModel | None, model: type[BaseModel]) -> dict:
    """base's fields, with the non-null fields of `override` replacing them (null = inherit)."""
    values = {k: getattr(base, k) for k in model.model_fields}
    if override is not None:
        values.update({k: getattr(override, k) for k in model.model_fields
                       if getattr(override, k) is not None})
    return values


@dataclass(frozen=True)
class KindHost:
    """One host of a kind, as its settings problems see it."""

    name: str
    path: tuple      # key path of the host's own settings: topology.host, its override or its item
    conf: Any        # its resolved spec.models.HostConf: kind, cpu, memory and every kind's setting


Problem = tuple[tuple, str, tuple]     # (key path to blame, message, key paths it depends on)


@dataclass(frozen=True)
class KindSettings:
    """A kind's own host setting. Set on a host of another kind, the spec refuses it; a model with a
    `merged(override)` method is merged field by field with the host's own (else replaced)."""

    key: str                     # under topology.host (and its overrides, custom items): e.g. image
    type: Any                    # its pydantic type (None is always allowed: unset)
    description: str
    problems: Callable[[list[KindHost], list[str]], list[Problem]] = lambda hosts, others: []
    # The host's own address if the setting gives it one (a real machine), else None: the subnet's.
    address: Callable[[Any], str | None] = lambda value: None
