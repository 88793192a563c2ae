"""Balancing methods: how synchronous training shares the global batch between workers of different speeds
(workload.balance, docs/mixed-machines.md). Each method is one module of this package that declares itself;
`METHODS` finds them, so adding a method is adding a module. The spec, validate, the runner, the training loops
and the docs read these declarations and name no method.

A method module declares:

- NAME, TITLE, ORDER: its name (how a file chooses it: `balance: NAME`, or `balance: {NAME: VALUE}` for a
  method that takes a value), how prose names it, and its place in lists;
- VALUE: what its mapping form takes ("" when it takes none; OPTIONAL: the name alone takes its default), and
  `parse(value)` -> its settings (a dict; value None: the name alone), raising ValueError with the reason;
- ENGINES, STRATEGIES: where it is built; REFUSAL: why it is refused elsewhere (formatted with engine and
  strategy); optionally `run_problems(setting, run)` -> (message, related keys) pairs (run: engine, strategy,
  compute);
- its worker-side plan: `plan(setting, global_batch, speeds)` -> the job document's `balance` section (each
  worker's batch and its gradient's weight), None where every worker keeps the plain batch;
- its theory: `balanced` (whether a step is set by the mean speed rather than the slowest node);
- DOC: its docs entry (its row of docs/mixed-machines.md's table of methods, which a test holds to it).

Standard library only: the engines never import this package's worker side at import."""
from __future__ import annotations

import importlib
import math
import pkgutil
from types import ModuleType

PLAIN = "none"


def _discover() -> dict[str, ModuleType]:
    found = [importlib.import_module(f"{__name__}.{info.name}") for info in pkgutil.iter_modules(__path__)]
    found = [m for m in found if hasattr(m, "NAME")]
    return {m.NAME: m for m in sorted(found, key=lambda m: (getattr(m, "ORDER", 100), m.NAME))}


METHODS: dict[str, ModuleType] = _discover()


def names() -> list[str]:
    return list(METHODS)


def forms() -> str:
    """How a file writes each method: 'none | static | dynamic | {backup: k}'."""
    return " | ".join(f"{{{m.NAME}: {m.VALUE}}}" if m.VALUE and not getattr(m, "OPTIONAL", False) else m.NAME
                      for m in METHODS.values())


def parse(value) -> dict:
    """workload.balance as the file writes it (a name, or a mapping of one method's name to its value) ->
    {"method": NAME, **its settings}; ValueError with the reason where it names no method or its value is wrong."""
    if value is None:
        value = PLAIN
    if isinstance(value, dict) and "method" in value:            # already parsed (a spec dumped and read again)
        value = {value["method"]: {k: v for k, v in value.items() if k != "method"} or None}
    if isinstance(value, str):
        name, arg = value, None
    elif isinstance(value, dict) and len(value) == 1:
        name, arg = next(iter(value.items()))
    else:
        raise ValueError(f"balance is one of {forms()}")
    method = METHODS.get(name) if isinstance(name, str) else None
    if method is None:
        raise ValueError(f"balance is one of {forms()}, not {name!r}")
    if arg is None and method.VALUE and not getattr(method, "OPTIONAL", False):
        raise ValueError(f"balance {name} needs its value: {{{name}: {method.VALUE}}}")
    if arg is not None and not method.VALUE:
        raise ValueError(f"balance {name} takes no value: write balance: {name}")
    return {"method": name, **method.parse(arg)}


def method_of(setting: dict | str | None) -> ModuleType:
    """The method of a setting, parsed or as the file writes it."""
    if not isinstance(setting, dict) or "method" not in setting:
        setting = parse(setting)
    return METHODS[setting["method"]]


def label(setting: dict | str | None) -> str:
    """How the report and run ids name a setting: none, static, dynamic, backup1."""
    m = method_of(setting)
    setting = setting if isinstance(setting, dict) and "method" in setting else parse(setting)
    return m.label(setting) if hasattr(m, "label") else m.NAME


def written(setting: dict | str | None):
    """A setting as a file writes it: 'static', {'backup': 1}."""
    setting = setting if isinstance(setting, dict) and "method" in setting else parse(setting)
    rest = {k: v for k, v in setting.items() if k != "method"}
    if not rest:
        return setting["method"]
    return {setting["method"]: rest[next(iter(rest))] if len(rest) == 1 else rest}


# -- the shares ------------------------------------------------------------------------------------
def batches(global_batch: int, speeds: list[float], minimum: int = 1) -> list[int]:
    """Each worker's batch, proportional to its speed, summing to the global batch (largest remainders), each
    at least `minimum`. Speeds that are missing or not positive count as the mean of the others (all equal
    when none is known)."""
    n = len(speeds)
    if n == 0:
        return []
    known = [s for s in speeds if isinstance(s, (int, float)) and math.isfinite(s) and s > 0]
    fill = sum(known) / len(known) if known else 1.0
    s = [x if isinstance(x, (int, float)) and math.isfinite(x) and x > 0 else fill for x in speeds]
    floor_total = max(global_batch, minimum * n)
    exact = [floor_total * x / sum(s) for x in s]
    out = [max(minimum, int(e)) for e in exact]
    while sum(out) < floor_total:       # the largest remainders first
        out[max(range(n), key=lambda k: exact[k] - out[k])] += 1
    while sum(out) > floor_total:       # the minimums took more than their share: take it from the largest
        j = max(range(n), key=lambda k: out[k])
        out[j] -= 1
    return out


def weights(batch_list: list[int]) -> list[float]:
    """Each worker's loss weight, b_i x N / B: the engines average the workers' gradients of their mean losses
    (sum / N), so weighting each by its share of the global batch makes the update the plain mean over it."""
    total, n = sum(batch_list), len(batch_list)
    return [b * n / total for b in batch_list] if total else [1.0] * n


def worker(section: dict | None, host: str, default_batch: int) -> tuple[int, float]:
    """(batch, loss weight) of the worker on `host` under the job's `balance` section (the plain batch and 1
    where it has none)."""
    if not section or host not in (section.get("batches") or {}):
        return default_batch, 1.0
    return int(section["batches"][host]), float(section["weights"][host])


def resizer(section: dict | None, rank: int):
    """The worker's re-sizer of a method that re-sizes the batches while training (its `Resizer`), else None."""
    method = METHODS.get((section or {}).get("method", PLAIN))
    return method.Resizer(section, rank) if hasattr(method, "Resizer") else None


def in_force(section: dict | None, batch: int, weight: float) -> dict:
    """What the `start` event says of a balanced worker: its method, batch and weight ({} without)."""
    if not section:
        return {}
    return {"balance": section.get("method"), "batch": batch, "batch_weight": round(weight, 6)}


def scale_waits(layers: list, batch: int, default_batch: int) -> list:
    """A replayed worker's (forward, backward) waits for its own batch: a step's compute is proportional to the
    samples it computes."""
    f = batch / default_batch if default_batch else 1.0
    return [[a * f, b * f] for a, b in layers]
