"""What a worker-image build takes from this machine: the Debian mirror its apt sources name (for
debootstrap) and its pip settings, made usable inside the build container (testbed/nodes/image/)."""
from __future__ import annotations

import configparser
import os
import re
from pathlib import Path
from typing import Iterable
from urllib.parse import unquote, urlparse

DEBIAN_SUITE = "bookworm"
APT_SOURCES = (Path("/etc/apt/sources.list"), Path("/etc/apt/sources.list.d"))
MIRROR_ENV = "DLTB_DEBIAN_MIRROR"
HOST_DIR = "/tmp/dltestbed-build/host"     # where the host's local pip files are mounted in the build container
# pip settings that would send the install somewhere other than the venv
_PIP_ENV_DROPPED = {"PIP_CONFIG_FILE", "PIP_CACHE_DIR", "PIP_TARGET", "PIP_PREFIX", "PIP_ROOT", "PIP_USER",
                    "PIP_REQUIRE_VIRTUALENV", "PIP_BREAK_SYSTEM_PACKAGES"}
PIP_CONFIG_FILES = ("/etc/xdg/pip/pip.conf", "/etc/pip.conf", "~/.pip/pip.conf", "~/.config/pip/pip.conf")


def _deb822_stanzas(text: str) -> list[dict[str, str]]:
    stanzas, current, key = [], {}, None
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        if not line.strip():
            if current:
                stanzas.append(current)
            current, key = {}, None
        elif line[0] in " \t" and key:
            current[key] += " " + line.strip()
        elif ":" in line:
            key, value = line.split(":", 1)
            key = key.strip().lower()
            current[key] = value.strip()
    if current:
        stanzas.append(current)
    return stanzas


def _usable(uri: str) -> bool:
    return urlparse(uri).scheme in ("http", "https", "ftp", "file")


def debian_mirror(suite: str = DEBIAN_SUITE, sources: Iterable[Path] = APT_SOURCES) -> str | None:
    """The first archive URI that apt's sources use for `suite` (main), or None.

    `sources` are files or folders (a folder: its *.list and *.sources, in name order)."""
    files: list[Path] = []
    for src in sources:
        src = Path(src)
        if src.is_dir():
            files += sorted(p for p in src.iterdir() if p.suffix in (".list", ".sources"))
        elif src.is_file():
            files.append(src)
    for path in files:
        try:
            text = path.read_text(errors="replace")
        except OSError:
            continue
        if path.suffix == ".sources":
            for st in _deb822_stanzas(text):
                if st.get("enabled", "yes").lower() == "no":
                    continue
                if "deb" not in st.get("types", "").split() or suite not in st.get("suites", "").split():
                    continue
                if "main" not in st.get("components", "main").split():
                    continue
                for uri in st.get("uris", "").split():
                    if _usable(uri):
                        return uri
        else:
            for line in text.splitlines():
                words = re.sub(r"\[[^]]*\]", " ", line.split("#", 1)[0]).split()
                if len(words) >= 3 and words[0] == "deb" and words[2] == suite and _usable(words[1]):
                    if len(words) == 3 or "main" in words[3:]:
                        return words[1]
    return None


def find_mirror() -> str | None:
    return os.environ.get(MIRROR_ENV) or debian_mirror()


def _host_pip_files(env: dict[str, str]) -> list[Path]:
    files = [Path(os.path.expanduser(p)) for p in PIP_CONFIG_FILES]
    if env.get("XDG_CONFIG_HOME"):
        files.append(Path(env["XDG_CONFIG_HOME"]) / "pip" / "pip.conf")
    if env.get("PIP_CONFIG_FILE") and env["PIP_CONFIG_FILE"] != os.devnull:
        files.append(Path(env["PIP_CONFIG_FILE"]))
    return [f for f in files if f.is_file()]


def host_pip_settings(env: dict[str, str] | None = None, files: Iterable[Path] | None = None
                      ) -> tuple[str, dict[str, str], dict[str, str]]:
    """The host's pip configuration, made usable inside the build container.

    Returns (pip.conf text, PIP_* variables, mounts {host path: container path}). Local paths in
    either (find-links folders, file:// indexes, certificate files) are mounted read-only under
    HOST_DIR and rewritten to point there; a file:// index folder is mounted with its parent, since
    a PEP 503 index usually links to files beside it ("../../files/x.whl")."""
    env = dict(os.environ if env is None else env)
    parser = configparser.RawConfigParser()
    parser.optionxform = str
    parser.read([str(f) for f in (_host_pip_files(env) if files is None else files)])
    mounts: dict[str, str] = {}

    def rewrite(value: str) -> str:
        out = []
        for token in value.split():
            is_url = token.startswith("file://")
            path = unquote(urlparse(token).path) if is_url else token
            if not path.startswith("/") or not os.path.exists(path):
                out.append(token)
                continue
            path = os.path.normpath(path)
            parent = os.path.dirname(path)
            source = parent if is_url and os.path.isdir(path) and parent != "/" else path
            mounts[source] = HOST_DIR + source
            inner = HOST_DIR + path
            out.append("file://" + inner if is_url else inner)
        return " ".join(out) if value.strip() else value

    merged = configparser.RawConfigParser()
    merged.optionxform = str
    for section in parser.sections():
        merged.add_section(section)
        for key, value in parser.items(section):
            if key.replace("_", "-") in ("cache-dir", "target", "prefix", "root", "user", "require-virtualenv"):
                continue
            merged.set(section, key, rewrite(value))
    variables = {k: rewrite(v) for k, v in sorted(env.items())
                 if k.startswith("PIP_") and k not in _PIP_ENV_DROPPED}
    lines = []
    for section in merged.sections():
        lines.append(f"[{section}]")
        lines += [f"{k} = {v}" for k, v in merged.items(section)]
    return "\n".join(lines) + "\n" if lines else "", variables, mounts


def host_pip_cache(env: dict[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    if env.get("PIP_CACHE_DIR"):
        return Path(env["PIP_CACHE_DIR"])
    return Path(env.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")) / "pip"
