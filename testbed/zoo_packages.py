"""The model zoo's packages (torchvision, timm, transformers), installed into this venv with pip when an
experiment file first names a model of theirs (`run`), at the versions workloads/zoo/requirements.txt pins.
A package that installs but does not import here (torchvision beside PyTorch's CPU build) is left to
validate, which says so and how to replay a profile instead."""
from __future__ import annotations

import importlib
import importlib.util
import json
import os
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from workloads import zoo

PINS = Path(zoo.__file__).with_name("requirements.txt")
TIMEOUT_S = 900
# the pinned packages that installed but did not load beside this venv's torch, so that later runs do not
# install them again (keyed by the pins and torch's version)
UNLOADABLE = Path(os.environ.get("DLTB_CACHE", "/var/cache/dltestbed")) / "zoo-unloadable.json"


def _torch() -> str:
    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return "absent"


def unloadable() -> set[str]:
    """The pinned requirement lines known not to load beside this venv's torch."""
    try:
        doc = json.loads(UNLOADABLE.read_text())
        return set(doc["requirements"]) if doc.get("torch") == _torch() else set()
    except (OSError, ValueError, KeyError, TypeError):
        return set()


class InstallError(RuntimeError):
    pass


def pins() -> dict[str, str]:
    """package -> requirement line."""
    out = {}
    for line in PINS.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            out[re.split(r"[=<>!~ ]", line, 1)[0].lower()] = line
    return out


def wanted(text: str) -> list[str]:
    """The pinned requirements of the zoo sources a file's text names (SOURCE/NAME), whose package is not
    installed; the packages a source needs come first in the order of the pins."""
    named = {m.group(1) for m in re.finditer(r"(?<![\w/.-])([a-z][a-z0-9_]*)/[A-Za-z0-9]", text)}
    packages = {p for prefix in named & set(zoo.SOURCES) for p in zoo.SOURCES[prefix].PACKAGES}
    skip = unloadable()
    return [line for name, line in pins().items() if name in packages and importlib.util.find_spec(name) is None
            and line not in skip]


def _pip(*args: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "pip", *args, "-q", "--disable-pip-version-check"]
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired as err:
        raise InstallError(f"pip {' '.join(args)} took over {TIMEOUT_S} s") from err


def _loads(package: str) -> bool:
    """Whether the package imports in a fresh interpreter of this environment."""
    done = subprocess.run([sys.executable, "-c", f"import {package}"], capture_output=True, timeout=TIMEOUT_S)
    return done.returncode == 0


def install(requirements: list[str], progress=print) -> list[str]:
    """pip install the requirements into this interpreter's environment (InstallError with pip's last words),
    then remove again every zoo package it brought that does not import here, so that it breaks nothing
    that looks for it; the packages removed (validate then says what to do instead)."""
    if not requirements:
        return []
    before = {name for name in pins() if importlib.util.find_spec(name) is not None}
    progress(f"installing the model zoo's {', '.join(requirements)} (the file names a model of theirs) ...")
    done = _pip("install", *requirements)
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise InstallError(f"pip install {' '.join(requirements)} failed: {tail[:300]}")
    importlib.invalidate_caches()
    broken = [name for name in pins() if name not in before and importlib.util.find_spec(name) is not None
              and not _loads(name)]
    if broken:
        _pip("uninstall", "-y", *broken)
        importlib.invalidate_caches()
        try:
            UNLOADABLE.parent.mkdir(parents=True, exist_ok=True)
            UNLOADABLE.write_text(json.dumps({"torch": _torch(), "requirements": sorted(
                unloadable() | {pins()[name] for name in broken} | set(requirements))}) + "\n")
        except OSError:
            pass                    # (then the next run tries again)
        progress(f"{', '.join(broken)} installed but did not load beside this venv's torch: removed again "
                 "(a profile of the model, taken where it loads, replays it here: docs/profiles.md)")
    return broken
