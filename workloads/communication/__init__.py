"""Gradient communication methods: how the workers of an all-reduce exchange their gradients
(workload.communication, docs/communication.md). Each method is one module of this package that declares
itself; `METHODS` finds them, so adding a method is adding a module, and `register` adds one from
elsewhere (a test's). The spec, validate, the training loops, runs.csv, the report and `predict` read
these declarations and name no method.

A method module declares:

- NAME, TITLE, ORDER: its name (the value of `compression` that chooses it, or its own), how prose
  names it, and its place in lists;
- KEY: the key of workload.communication that chooses it: `compression` (its NAME is the value) or a
  key of its own, with `chosen(c)` saying whether a setting asks for it; CHOOSE: how a file asks for it
  ("compression: NAME");
- KEYS: its own keys of workload.communication (name -> Key: default, bounds, description);
- ENGINES, STRATEGIES: where it works; optionally `engine_refusal(engine)`, `problems(c)` (settings
  it needs) and `run_problems(c, run)` (what the rest of the file must be), each problem a
  (key, message, related keys) triple;
- its worker-side code: `ddp_options(c, model)`, `torch_setup(model, c)` (returns after_step or None),
  `tf_setup(model, strategy, c)` (returns Keras callbacks), `in_force(c)` (what the start event says);
- its theory: `theory(c, full, ring, shapes)` -> (bytes a step after the start, start steps, steps per
  sync) given `full` (a plain all-reduce step's bytes per worker), `ring` (2(N-1)/N) and `shapes()` (the
  model's tensor shapes, read only by a method that needs them; MODELS: the models it can read);
- its names: `label(c)` (the report's), `run_label(value)` (a run id's), PREDICT (predict's
  --communication form) and `predict_settings(arg)`; UPDATE_EFFECT: what it does to an update, in a few
  words (why its runs learn another amount from a sample; "changes what each update carries" without one);
- DOC: its docs entry (its row of docs/communication.md's table of methods, which a test holds to it).

Standard library only at import: the engines are imported by the worker-side functions."""
from __future__ import annotations

import importlib
import math
import pkgutil
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

COMPRESSION = "compression"     # the key whose value names a method (the others are chosen by a key of their own)
_NOT_METHODS = {"tf_step"}


@dataclass(frozen=True)
class Key:
    """One key of workload.communication: its default, type (int, float, bool, or section: a mapping of `keys`, null by
    default), bounds (a number, or the name of a cap of testbed/spec/limits.py) and description (`doc`: a
    section's own). runs.csv records it where the method in force owns it (NaN elsewhere), or always; `column`
    turns its value into the cell. `orphan`: the message when it is set without a method that owns it ({owners}
    and {choose} filled in from those that do)."""
    default: Any
    description: str = ""
    kind: str = "int"
    ge: float | str | None = None
    gt: float | str | None = None
    le: float | str | None = None
    lt: float | str | None = None
    keys: dict[str, Key] = field(default_factory=dict)
    always: bool = False
    column: Any = None
    orphan: str = "{key} belongs to {owners}: set {choose}, or remove {key}"
    doc: str = ""


START_STEP = Key(10, "the steps of plain all-reduce before the method starts", ge=0, le="MAX_COUNT",
                 orphan="{key} delays {owners}: set {choose}, or remove {key}")


def text(value) -> str:
    """A setting's value as text ('' for None, NaN and blanks): runs.csv's cells read like the spec's."""
    return "" if value is None or (isinstance(value, float) and math.isnan(value)) else str(value).strip()


def number(value, default: float = math.nan) -> float:
    """A setting's value as a number (`default` where it is none)."""
    try:
        out = float(text(value))
    except ValueError:
        return default
    return default if math.isnan(out) else out


def _discover() -> dict[str, ModuleType]:
    found = []
    for info in pkgutil.iter_modules(__path__):
        if info.name in _NOT_METHODS:
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        if hasattr(module, "NAME"):
            found.append(module)
    return {m.NAME: m for m in sorted(found, key=lambda m: (getattr(m, "ORDER", 100), m.NAME))}


METHODS: dict[str, ModuleType] = _discover()
PLAIN = "none"
_keys_read = False


def register(module) -> None:
    """Add a method declared elsewhere (a module or any object with the attributes above). Its keys must be
    known ones once the spec has read them (the experiment file's model is built when it is imported)."""
    new = set(getattr(module, "KEYS", {})) - set(keys())
    if new and _keys_read:
        raise ValueError(f"method {module.NAME!r}: new keys {sorted(new)} after the spec read the keys")
    METHODS[module.NAME] = module


def unregister(name: str) -> None:
    METHODS.pop(name, None)


def keys() -> dict[str, Key]:
    """Every key of workload.communication in order (compression first), each declared once."""
    out = {COMPRESSION: Key(PLAIN, "the gradient compression method by name (none: float32 gradients; "
                            "docs/communication.md lists the methods)", kind="name", always=True)}
    for m in METHODS.values():
        for name, key in getattr(m, "KEYS", {}).items():
            if name in out and out[name] is not key:
                raise ValueError(f"method {m.NAME!r} declares key {name!r} again, differently")
            out[name] = key
    return out


def spec_keys() -> dict[str, Key]:
    """keys(), for the spec's model: after this a method registered with new keys is refused."""
    global _keys_read
    _keys_read = True
    return keys()


def defaults() -> dict[str, Any]:
    """workload.communication left at its defaults: plain all-reduce."""
    return {name: key.default for name, key in keys().items()}


def names() -> list[str]:
    """The values `compression` takes, in order (none first)."""
    return [m.NAME for m in METHODS.values() if m.KEY == COMPRESSION]


# -- choosing ---------------------------------------------------------------------------------------
def chosen_all(c: dict) -> list[ModuleType]:
    """The methods a setting asks for, the compression's first (more than one do not combine); [] for plain
    all-reduce and for a compression no method names."""
    name = text(c.get(COMPRESSION)) or PLAIN
    out = [METHODS[name]] if name != PLAIN and name in METHODS else []
    return out + [m for m in METHODS.values() if m.KEY != COMPRESSION and m.chosen(c)]


def method_of(c: dict) -> ModuleType:
    """The method in force: the compression's, else one chosen by its own key, else plain all-reduce."""
    found = chosen_all(c)
    return found[0] if found else METHODS[PLAIN]


def owners(key: str) -> list[ModuleType]:
    """The methods that declare `key`."""
    return [m for m in METHODS.values() if key in getattr(m, "KEYS", {})]


def orphan_message(key: str) -> str:
    """What validate says of `key` set without any method that owns it."""
    who = owners(key)
    return keys()[key].orphan.format(key=key, owners=" or ".join(m.TITLE for m in who),
                                     choose=" or ".join(m.CHOOSE for m in who))


# -- runs.csv and the report -----------------------------------------------------------------------
def columns(c: dict) -> dict[str, Any]:
    """runs.csv's workload.communication columns of a setting (its keys, each NaN where the method in force
    does not own it unless it is recorded always)."""
    own = set(getattr(method_of(c), "KEYS", {}))
    out = {}
    for name, key in keys().items():
        value = c.get(name, key.default)
        if not (key.always or name in own):
            out[name] = math.nan
        else:
            out[name] = key.column(value) if key.column else value
    return out


def label(c: dict) -> str:
    """How the report names a setting ('none' for plain all-reduce and for results without the columns);
    a compression no method names reads as itself."""
    name = text(c.get(COMPRESSION)) or PLAIN
    if name != PLAIN and name not in METHODS:
        return name
    m = method_of(c)
    return m.label(c) if hasattr(m, "label") else m.NAME


def run_label(value: dict) -> str:
    """A workload.communication value (as the file writes it) in a run id: 'plain', 'sync8', ..."""
    name = value.get(COMPRESSION, PLAIN)
    if name not in (None, PLAIN) and name not in METHODS:
        return str(name)
    m = method_of(value)
    return m.run_label(value) if hasattr(m, "run_label") else m.NAME


# -- predict ------------------------------------------------------------------------------------
def predict_forms(explained: bool = False) -> list[str]:
    """How `predict --communication` names each method (none, sync:H, ...), with its PREDICT_HELP if asked."""
    return [getattr(m, "PREDICT", m.NAME) + (f" ({m.PREDICT_HELP})" if explained and hasattr(m, "PREDICT_HELP") else "")
            for m in METHODS.values()]


def predict_setting(text_: str) -> tuple[ModuleType, dict] | None:
    """(method, setting) of a `predict --communication` value, None where no method reads it."""
    kind, sep, arg = text_.partition(":")
    for m in METHODS.values():
        form = getattr(m, "PREDICT", m.NAME)
        if form.partition(":")[0] != kind or bool(sep) != (":" in form):
            continue
        c = m.predict_settings(arg) if hasattr(m, "predict_settings") else {COMPRESSION: m.NAME}
        if c is not None:
            return m, {**defaults(), **c}
    return None
