"""The worker image's names, inputs and host discovery: no Docker, no root."""
import ast
import importlib.metadata as md
import re
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from testbed.cli.machine import image as image_command
from testbed.nodes import image
from testbed.nodes.image import build_host

REPO = Path(__file__).resolve().parents[2]
DIGEST = "sha256:" + "ab" * 32


@pytest.mark.parametrize("name", [
    "dltestbed-worker:49ff8c5d057f", "ubuntu", "library/ubuntu:22.04", "localhost/x", "localhost:5000/x/y:tag",
    "Registry.Example.com/team/img@" + DIGEST, "a/b:c@" + DIGEST, "a__b-c/e---f.g", "x:Latest_1.0-rc"])
def test_valid_references(name):
    assert image.reference_problem(name) is None


@pytest.mark.parametrize("name, says", [
    ("", "empty"), ("Ubuntu", "lowercase"), ("team/MyImage:1", "lowercase ('MyImage')"),
    ("ubuntu:", "tag ''"), ("ubuntu:-x", "tag '-x'"), ("a//b", "empty path component"), ("foo/", "empty path"),
    ("my image", "white space"), ("img@sha256:xyz", "digest"), ("-abc", "'-abc'"), (":tag", "missing"),
    ("bad_host.:5000/x", "registry"), ("a" * 256, "255")])
def test_invalid_references(name, says):
    problem = image.reference_problem(name)
    assert problem and says in problem and "[registry/]repository[:tag][@digest]" in problem


def test_default_image_is_stable_and_named_by_its_inputs():
    name = image.default_image()
    assert name == image.default_image()
    assert re.fullmatch(r"dltestbed-worker:[0-9a-f]{12}", name)
    assert image.reference_problem(name) is None
    assert name.split(":")[1] == image.image_hash(image.REQUIREMENTS.read_text())


def test_image_hash_changes_with_every_input():
    req = image.REQUIREMENTS.read_text()
    same = image.image_hash(req)
    changed = [image.image_hash(req.replace("numpy==2.4.6", "numpy==2.4.7")),
               image.image_hash(req, suite="trixie"),
               image.image_hash(req, packages=image.DEBIAN_PACKAGES + ("curl",)),
               image.image_hash(req, script=image.BUILD_SCRIPT + "\necho extra\n"),
               image.image_hash(req, env=image.IMAGE_ENV + ("X=1",)),
               image.image_hash(req, base="debian:bookworm sha256:1")]
    assert same == image.image_hash(req)
    assert len(set(changed + [same])) == len(changed) + 1
    assert image.rootfs_hash() != image.rootfs_hash(suite="trixie")
    assert image.rootfs_hash(arch="x86_64") != image.rootfs_hash(arch="aarch64")


DEB822 = """\
Types: deb
URIs: http://security.example.org/debian-security
Suites: bookworm-security
Components: main

Types: deb
URIs: http://off.example.org/debian
Suites: bookworm
Components: main
Enabled: no

# a comment
Types: deb-src deb
URIs: http://mirror.example.org/debian
  http://second.example.org/debian
Suites: bookworm bookworm-updates
Components: main contrib
"""


def test_mirror_from_deb822_sources(tmp_path):
    (tmp_path / "sources.list.d").mkdir()
    (tmp_path / "sources.list.d" / "debian.sources").write_text(DEB822)
    (tmp_path / "sources.list.d" / "x.list.disabled").write_text("deb http://wrong.example.org/d bookworm main\n")
    sources = [tmp_path / "sources.list", tmp_path / "sources.list.d"]
    assert build_host.debian_mirror("bookworm", sources) == "http://mirror.example.org/debian"
    assert build_host.debian_mirror("trixie", sources) is None


def test_mirror_from_one_line_sources(tmp_path):
    (tmp_path / "sources.list").write_text(
        "# deb http://commented.example.org/debian bookworm main\n"
        "deb-src http://src.example.org/debian bookworm main\n"
        "deb http://nomain.example.org/debian bookworm contrib\n"
        "deb [arch=amd64 signed-by=/usr/share/keyrings/k.gpg] https://mirror.example.org/debian/ bookworm main\n")
    assert build_host.debian_mirror("bookworm", [tmp_path / "sources.list"]) == "https://mirror.example.org/debian/"
    assert build_host.debian_mirror("bookworm", [tmp_path / "missing.list"]) is None


def test_build_problems_name_what_to_do(tmp_path, monkeypatch):
    monkeypatch.delenv(image.MIRROR_ENV, raising=False)
    (tmp_path / "debian.sources").write_text(DEB822)
    no_debootstrap = image.build_problems(which=lambda cmd: None if cmd == "debootstrap" else "/usr/bin/" + cmd,
                                          sources=[tmp_path / "debian.sources"])
    assert any("debootstrap, which is not installed" in p and "apt-get install debootstrap" in p
               and "--base IMAGE" in p for p in no_debootstrap)
    assert not any("mirror" in p for p in no_debootstrap)
    no_mirror = image.build_problems(which=lambda cmd: "/usr/bin/" + cmd, sources=[tmp_path / "none.list"])
    assert any("no Debian mirror for bookworm" in p and image.MIRROR_ENV in p for p in no_mirror)
    monkeypatch.setenv(image.MIRROR_ENV, "http://deb.debian.org/debian")
    assert not any("mirror" in p for p in image.build_problems(sources=[tmp_path / "none.list"]))
    # a base image needs neither debootstrap nor a mirror, only a valid name
    with_base = image.build_problems("My/Base", which=lambda cmd: None, sources=[])
    assert any("lowercase" in p for p in with_base)
    assert not any("debootstrap" in p or "mirror" in p for p in with_base)


def test_build_problems_without_docker(monkeypatch):
    monkeypatch.setattr(image.docker_engine, "dockerd_path", lambda: None)
    assert any("./testbed.sh test" in p and "docker.io" in p for p in image.build_problems())


def test_host_pip_settings_are_carried_into_the_build(tmp_path):
    (tmp_path / "pypi" / "simple").mkdir(parents=True)
    (tmp_path / "pypi" / "files").mkdir()
    (tmp_path / "wheels").mkdir()
    (tmp_path / "ca.pem").write_text("cert")
    conf = tmp_path / "pip.conf"
    conf.write_text(f"[global]\nfind-links = {tmp_path}/wheels\ncache-dir = /somewhere\n"
                    f"extra-index-url = file://{tmp_path}/pypi/simple https://example.org/simple\n"
                    "[install]\ntarget = /elsewhere\ntimeout = 60\n")
    env = {"PIP_CERT": str(tmp_path / "ca.pem"), "PIP_TARGET": "/x", "HOME": str(tmp_path),
           "PIP_INDEX_URL": "https://idx.example.org/simple"}
    text, variables, mounts = build_host.host_pip_settings(env=env, files=[conf])
    host = image.HOST_DIR
    assert f"find-links = {host}{tmp_path}/wheels" in text
    assert f"extra-index-url = file://{host}{tmp_path}/pypi/simple https://example.org/simple" in text
    assert "timeout = 60" in text and "cache-dir" not in text and "target" not in text
    assert variables == {"PIP_CERT": f"{host}{tmp_path}/ca.pem", "PIP_INDEX_URL": "https://idx.example.org/simple"}
    # the index folder is mounted with its parent: its pages link to ../../files/
    assert mounts == {f"{tmp_path}/wheels": f"{host}{tmp_path}/wheels",
                      f"{tmp_path}/pypi": f"{host}{tmp_path}/pypi",
                      f"{tmp_path}/ca.pem": f"{host}{tmp_path}/ca.pem"}
    assert build_host.host_pip_settings(env={}, files=[]) == ("", {}, {})


def _pins(path: Path) -> dict[str, str]:
    pins = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            req = Requirement(line)
            pins[canonicalize_name(req.name)] = str(req.specifier)
    return pins


def test_image_pins_follow_the_project_pins():
    ours, project = _pins(image.REQUIREMENTS), _pins(REPO / "requirements.txt")
    assert all(spec.startswith("==") for spec in ours.values())
    assert {name: spec for name, spec in ours.items() if name in project} == \
        {name: project[name] for name in ours if name in project}
    assert set(ours) - set(project) == {"setuptools", "six", "wheel"}
    assert "tensorflow" not in ours and "tensorflow-cpu" in ours


def test_image_packages_are_closed_under_their_dependencies():
    """Installed with --no-deps, so every dependency must be listed (checked on the host's venv)."""
    ours = _pins(image.REQUIREMENTS)
    missing = []
    for name in ours:
        try:
            dist = md.distribution(name)
        except md.PackageNotFoundError:
            pytest.skip(f"{name} is not installed here")
        for text in dist.requires or []:
            req = Requirement(text)
            if req.marker and not req.marker.evaluate({"extra": ""}):
                continue
            dep = canonicalize_name(req.name)
            if dep == "tensorflow":
                dep = "tensorflow-cpu"  # the same module, without the GPU code
            if dep not in ours:
                missing.append(f"{name} needs {req}")
    assert not missing


def test_image_has_what_the_workloads_import():
    modules = set()
    for path in [*(REPO / "workloads").glob("*.py"), *(REPO / "workloads/caption").glob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                modules |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules.add(node.module.split(".")[0])
    third_party = {m for m in modules if m not in sys.stdlib_module_names and m not in ("workloads", "__future__")}
    assert {"tensorflow", "tf_keras", "numpy", "nltk", "torch"} <= third_party
    ours = _pins(image.REQUIREMENTS)
    by_module = md.packages_distributions()
    for module in third_party:
        assert any(canonicalize_name(d) in ours for d in by_module.get(module, [])), module


def test_build_script_and_paths():
    assert image.IMAGE_PYTHON == "/opt/dltestbed/venv/bin/python"
    assert f"python3 -m venv {image.VENV}" in image.BUILD_SCRIPT
    assert "{" + "recipe}" not in image.BUILD_SCRIPT and "{" + "venv}" not in image.BUILD_SCRIPT
    assert str(image.CACHE_DIR).startswith("/") and not str(image.CACHE_DIR).startswith(str(REPO))


def test_command_line_names_the_image(capsys):
    assert image_command.main(["name"]) == 0
    assert capsys.readouterr().out.strip() == image.default_image()
    with pytest.raises(SystemExit):
        image_command.main(["build", "--bogus"])


def test_engine_not_installed_says_how_to_install(monkeypatch):
    from testbed.nodes import docker_engine
    monkeypatch.setattr(docker_engine, "dockerd_running", lambda timeout=2: False)
    monkeypatch.setattr(docker_engine.shutil, "which", lambda cmd: None)
    monkeypatch.setattr(docker_engine.os, "access", lambda path, mode: False)
    assert not docker_engine.docker_installed()
    with pytest.raises(docker_engine.DockerUnavailable, match=r"not installed: run ./testbed.sh test or scripts/bootstrap"):
        docker_engine.ensure_dockerd()
    with pytest.raises(image.DockerUnavailable, match="not installed"):
        image.build_image()


def test_file_lock_makes_the_second_holder_wait(tmp_path):
    import threading
    from testbed.nodes.docker_engine import file_lock
    path, events = tmp_path / "sub" / "x.lock", []

    def second_holder():
        with file_lock(path, waiting=lambda: events.append("waiting")):
            events.append("held")

    with file_lock(path):
        second = threading.Thread(target=second_holder)
        second.start()
        second.join(0.3)
        assert events == ["waiting"] and second.is_alive()
    second.join(5)
    assert events == ["waiting", "held"]
