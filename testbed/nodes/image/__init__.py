"""The worker image that docker nodes run: built here, from Debian packages and PyPI only.

No image registry is needed. The base is a Debian bookworm minbase root filesystem made with
`debootstrap` from the mirror apt already uses, imported into Docker through the SDK (or, for users
whose registry works, any image they already have: `--base IMAGE`). A build container from that base
then makes a venv with the pinned packages of `image/requirements.txt` (pip reaches the same index as
the host: its pip config, certificates and cache are handed in) and is committed as
`dltestbed-worker:<hash>`, the hash of everything that goes into the image, so a changed recipe or pin
is a new tag and an unchanged one is reused. The workload code is not in the image: it is bind-mounted
at run time.

Cached outside the repository, in /var/cache/dltestbed ($DLTB_CACHE): the root filesystem tarball
(rootfs-bookworm-<hash>.tar), every downloaded wheel (wheels/: pip's own HTTP cache keeps nothing
when an index sends no caching headers) and the last build's log (build-<hash>.log).

    run_experiment.py image build [--base IMAGE] [--force]     (testbed/cli/machine/image.py)
"""
from __future__ import annotations

import hashlib
import os
import platform
import shlex
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Callable, Iterable

from testbed.nodes import docker_engine
from testbed.nodes.image.build_host import (APT_SOURCES, DEBIAN_SUITE, HOST_DIR, MIRROR_ENV,  # noqa: F401  (this module's API too)
                                      debian_mirror, find_mirror, host_pip_cache, host_pip_settings)
from testbed.nodes.docker_engine import DockerUnavailable
from testbed.spec.rules.image_reference import reference_problem  # noqa: F401  (also this module's API)

IMAGE_REPO = "dltestbed-worker"
BASE_REPO = "dltestbed-base"
LABEL = "dltestbed"
# what the image runs besides Python: the link checks (iperf3, ping), addresses and routes
# (iproute2), process tools (procps, coreutils); python3-venv brings ensurepip for the venv
DEBIAN_PACKAGES = ("python3", "python3-venv", "ca-certificates", "iperf3", "iproute2", "iputils-ping",
                   "procps", "coreutils")
VENV = "/opt/dltestbed/venv"
IMAGE_PYTHON = f"{VENV}/bin/python"
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
IMAGE_ENV = (f"PATH={VENV}/bin:{SYSTEM_PATH}", "TF_USE_LEGACY_KERAS=1", "LANG=C.UTF-8")
REQUIREMENTS = Path(__file__).parent / "requirements.txt"
CACHE_DIR = Path(os.environ.get("DLTB_CACHE", "/var/cache/dltestbed"))
WHEELHOUSE = CACHE_DIR / "wheels"  # every wheel the builds downloaded, so none is downloaded twice
STATE_DIR = docker_engine.STATE_DIR
LOCK_FILE = STATE_DIR / "image-build.lock"
DEBIAN_KEYRING = Path("/usr/share/keyrings/debian-archive-keyring.gpg")
BUILD_TIMEOUT_S = 3600
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"

# Inside the build container everything handed in lives under a tmpfs on /tmp, so the committed
# image keeps no trace of it (not even an empty mount point).
BUILD_DIR = "/tmp/dltestbed-build"
RECIPE_DIR = f"{BUILD_DIR}/recipe"
PIP_CACHE_IN = f"{BUILD_DIR}/pip-cache"
WHEELS_IN = f"{BUILD_DIR}/wheels"

# Runs in the build container (POSIX sh, any base image). The base made here already has every
# Debian package; a user's base gets the missing ones from its own apt sources, if it has apt.
BUILD_SCRIPT = r"""set -eu
start=$(date +%s)
say() { echo "==> $* ($(( $(date +%s) - start )) s)"; }
. {recipe}/pip-env.sh
missing=""
for tool in python3 iperf3 ip ping ps; do
  command -v "$tool" >/dev/null 2>&1 || missing="$missing $tool"
done
python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || missing="$missing python3-venv"
if [ -n "$missing" ]; then
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "the base image lacks$missing and has no apt-get to install it" >&2
    exit 3
  fi
  say "installing Debian packages (missing:$missing)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends {packages} >/dev/null
  rm -rf /var/lib/apt/lists/*
fi
say "creating the venv {venv} with $(python3 --version)"
python3 -m venv {venv}
say "installing $(grep -c '==' {recipe}/requirements.txt) pinned Python packages"
install() {
  {venv}/bin/python -m pip install --no-deps --no-index --find-links {wheels} --no-input \
    --progress-bar off -r {recipe}/requirements.txt
}
if ! install; then
  # PyTorch's CPU build is on its own index (used when it answers within 5 s, as bootstrap.sh does)
  extra=""
  if python3 -c "import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=5)" \
      {torch_index}/torch/ >/dev/null 2>&1; then
    extra="--extra-index-url {torch_index}"
  fi
  say "downloading the wheels that the wheelhouse lacks"
  {venv}/bin/python -m pip download --no-deps --no-input --progress-bar off -d {wheels} $extra \
    -r {recipe}/requirements.txt
  install
fi
say "checking that the workloads' imports load"
TF_USE_LEGACY_KERAS=1 {venv}/bin/python -c 'import tensorflow, tf_keras, numpy, nltk, torch; print("tensorflow", tensorflow.__version__, "torch", torch.__version__)'
rm -rf /root/.cache /root/.keras
say "python packages ready"
"""
for _key, _value in (("recipe", RECIPE_DIR), ("wheels", WHEELS_IN), ("venv", VENV),
                     ("packages", " ".join(DEBIAN_PACKAGES)), ("torch_index", TORCH_CPU_INDEX)):
    BUILD_SCRIPT = BUILD_SCRIPT.replace("{" + _key + "}", _value)
del _key, _value


Progress = Callable[[str], None]


# ---------------------------------------------------------------- names and hashes

def _digest(parts: Iterable[str]) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:12]


def image_hash(requirements: str, suite: str = DEBIAN_SUITE, packages: Iterable[str] = DEBIAN_PACKAGES,
               script: str = BUILD_SCRIPT, env: Iterable[str] = IMAGE_ENV, base: str | None = None) -> str:
    """12 hex digits naming one set of build inputs; `base` is the base image's name and id, if any."""
    return _digest(["worker", suite, " ".join(packages), script, " ".join(env), requirements,
                    base or "debootstrap"])


def rootfs_hash(suite: str = DEBIAN_SUITE, packages: Iterable[str] = DEBIAN_PACKAGES,
                arch: str | None = None) -> str:
    return _digest(["rootfs", suite, " ".join(packages), arch or platform.machine(), _ROOTFS_RECIPE])


def default_image() -> str:
    return f"{IMAGE_REPO}:{image_hash(REQUIREMENTS.read_text())}"


def _base_tag(base: str, base_id: str) -> str:
    return f"{IMAGE_REPO}:{image_hash(REQUIREMENTS.read_text(), base=f'{base} {base_id}')}"


def build_problems(base: str | None = None, which: Callable[[str], str | None] = shutil.which,
                   sources: Iterable[Path] = APT_SOURCES) -> list[str]:
    """Why building the worker image cannot work on this machine, each with what to do."""
    problems = []
    if not docker_engine.docker_installed():
        problems.append(docker_engine.NOT_INSTALLED)
    if os.geteuid() != 0:
        problems.append("building the worker image needs root (it starts the Docker engine and runs "
                        "debootstrap): run it as root")
    if base is not None:
        problem = reference_problem(base)
        if problem:
            problems.append(problem)
        return problems
    also = "; or build FROM an image you already have: run_experiment.py image build --base IMAGE"
    if which("debootstrap") is None:
        problems.append("the worker image's root filesystem is made with debootstrap, which is not installed: "
                        "run scripts/bootstrap.sh or apt-get install debootstrap" + also)
    if which("tar") is None:
        problems.append("tar is not installed: apt-get install tar" + also)
    if not (os.environ.get(MIRROR_ENV) or debian_mirror(sources=sources)):
        problems.append(f"no Debian mirror for {DEBIAN_SUITE} is named in /etc/apt/sources.list or "
                        f"/etc/apt/sources.list.d/: set {MIRROR_ENV}=http://deb.debian.org/debian (or a "
                        f"mirror you reach)" + also)
    if not DEBIAN_KEYRING.exists():
        problems.append(f"{DEBIAN_KEYRING} is missing (debootstrap checks Debian's signatures with it): "
                        "apt-get install debian-archive-keyring" + also)
    return problems


# ---------------------------------------------------------------- Docker images

def _labels(role: str, inputs: str, **more: str) -> dict[str, str]:
    return {LABEL: "1", f"{LABEL}.role": role, f"{LABEL}.inputs": inputs,
            **{f"{LABEL}.{k}": v for k, v in more.items()}}


def _get_image(cli, name: str):
    import docker.errors
    try:
        return cli.images.get(name)
    except docker.errors.ImageNotFound:
        return None


def image_present(name: str) -> bool:
    cli = docker_engine.client()
    try:
        return _get_image(cli, name) is not None
    finally:
        cli.close()


def _elapsed(t0: float) -> str:
    return f"{time.monotonic() - t0:.0f} s"


def _size_mb(image) -> float:
    return image.attrs.get("Size", 0) / 1e6


def _unmount_below(path: Path) -> None:
    """Unmount whatever an interrupted debootstrap left mounted inside `path` (proc, sys...)."""
    try:
        mounts = [line.split()[1].replace("\\040", " ") for line in Path("/proc/mounts").read_text().splitlines()]
    except OSError:
        return
    prefix = str(path.resolve()) + "/"
    for mnt in sorted((m for m in mounts if m.startswith(prefix)), key=len, reverse=True):
        subprocess.run(["umount", "-l", mnt], stdin=subprocess.DEVNULL, capture_output=True)


def _remove_tree(path: Path) -> None:
    if path.exists():
        _unmount_below(path)
        shutil.rmtree(path, ignore_errors=True)


# Applied to the debootstrap tree before it is packed: what an image never needs.
_ROOTFS_RECIPE = "slim: apt archives and lists, man, info, docs but copyright; v1"


def _slim(root: Path) -> None:
    for sub in ("var/cache/apt/archives", "var/lib/apt/lists"):
        for p in (root / sub).glob("*"):
            if p.is_file() and p.name != "lock":
                p.unlink()
    for sub in ("usr/share/man", "usr/share/info"):
        for p in (root / sub).glob("*"):
            shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()
    for pkg in (root / "usr/share/doc").glob("*"):
        if pkg.is_dir() and not pkg.is_symlink():
            for p in pkg.iterdir():
                if p.name != "copyright":
                    shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()


def _debootstrap(tarball: Path, progress: Progress) -> None:
    mirror = find_mirror()
    work = Path(tempfile.mkdtemp(prefix="rootfs-tmp-", dir=CACHE_DIR))
    root, log = work / "root", work / "debootstrap.out"
    t0 = time.monotonic()
    progress(f"debootstrap {DEBIAN_SUITE} (minbase + {', '.join(DEBIAN_PACKAGES)}) from {mirror}: "
             "about a minute")
    try:
        cmd = ["debootstrap", "--variant=minbase", f"--include={','.join(DEBIAN_PACKAGES)}"]
        if DEBIAN_KEYRING.exists():
            cmd.append(f"--keyring={DEBIAN_KEYRING}")
        cmd += [DEBIAN_SUITE, str(root), mirror]
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive", LC_ALL="C")
        with open(log, "wb") as out:
            code = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                  env=env).returncode
        if code != 0:
            tail = "\n".join(log.read_text(errors="replace").splitlines()[-12:])
            raise DockerUnavailable(f"debootstrap failed (exit {code}) with {mirror}:\n{tail}")
        _slim(root)
        progress(f"root filesystem ready ({_elapsed(t0)}); packing {tarball}")
        partial = tarball.with_suffix(".partial")
        subprocess.run(["tar", "--numeric-owner", "--xattrs", "-C", str(root), "-cf", str(partial), "."],
                       stdin=subprocess.DEVNULL, check=True, capture_output=True)
        os.replace(partial, tarball)
    finally:
        _remove_tree(work)
        tarball.with_suffix(".partial").unlink(missing_ok=True)


def _ensure_base(cli, progress: Progress, force: bool) -> str:
    """The debootstrap-made base image (cached as a tarball and as an image), built if needed."""
    key = rootfs_hash()
    ref = f"{BASE_REPO}:{key}"
    old = _get_image(cli, ref)
    if old is not None and not force:
        progress(f"base image {ref} is present")
        return ref
    tarball = CACHE_DIR / f"rootfs-{DEBIAN_SUITE}-{key}.tar"
    if force or not tarball.exists():
        _debootstrap(tarball, progress)
    t0 = time.monotonic()
    progress(f"importing {tarball.name} as {ref}")
    changes = [f"LABEL {k}={v}" for k, v in _labels("base", key, base="debootstrap").items()]
    changes += [f"ENV PATH={SYSTEM_PATH}", 'CMD ["/bin/bash"]']
    out = cli.api.import_image(src=str(tarball), repository=BASE_REPO, tag=key, changes=changes)
    image = _get_image(cli, ref)
    if image is None:
        raise DockerUnavailable(f"importing {tarball} as {ref} failed: {str(out)[-500:]}")
    if old is not None and old.id != image.id:
        _remove_quietly(cli, old.id)
    progress(f"base image {ref} imported ({_elapsed(t0)}, {_size_mb(image):.0f} MB)")
    return ref


def _remove_quietly(cli, image_id: str) -> bool:
    import docker.errors
    try:
        cli.images.remove(image_id, noprune=False)
        return True
    except docker.errors.APIError:
        return False  # still used by a container (or an image built on it): it stays


def _remove_build_containers(cli) -> None:
    """Build containers left by a build that was killed (we hold the build lock: none is running)."""
    for c in cli.containers.list(all=True, filters={"label": f"{LABEL}.role=build"}):
        c.remove(force=True)
    for leftover in CACHE_DIR.glob("build-tmp-*"):
        _remove_tree(leftover)
    for leftover in CACHE_DIR.glob("rootfs-tmp-*"):
        _remove_tree(leftover)


def _write_recipe(recipe: Path) -> dict[str, str]:
    """Write what the build container reads; return the extra mounts {host path: container path}."""
    conf, variables, mounts = host_pip_settings()
    exports = dict(variables)
    if conf:
        (recipe / "pip.conf").write_text(conf)
        exports["PIP_CONFIG_FILE"] = f"{RECIPE_DIR}/pip.conf"
    exports.update(PIP_CACHE_DIR=PIP_CACHE_IN, PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_ROOT_USER_ACTION="ignore")
    (recipe / "pip-env.sh").write_text("".join(f"export {k}={shlex.quote(v)}\n" for k, v in exports.items()))
    (recipe / "requirements.txt").write_text(REQUIREMENTS.read_text())
    (recipe / "build.sh").write_text(BUILD_SCRIPT)
    return mounts


def _install_python(cli, base_ref: str, tag: str, labels: dict[str, str], progress: Progress) -> None:
    repo, _, inputs = tag.rpartition(":")
    recipe = Path(tempfile.mkdtemp(prefix="build-tmp-", dir=CACHE_DIR))
    log_path = CACHE_DIR / f"build-{inputs}.log"
    container = None
    t0 = time.monotonic()
    try:
        mounts = _write_recipe(recipe)
        from docker.types import Mount
        cache = host_pip_cache()
        for folder in (cache, WHEELHOUSE):
            folder.mkdir(parents=True, exist_ok=True)
        # Mounts, not volumes=: those would also declare VOLUMEs that the commit keeps
        binds = [Mount(RECIPE_DIR, str(recipe), type="bind", read_only=True),
                 Mount(PIP_CACHE_IN, str(cache), type="bind"),
                 Mount(WHEELS_IN, str(WHEELHOUSE), type="bind")]
        binds += [Mount(dst, src, type="bind", read_only=True) for src, dst in mounts.items()]
        progress(f"installing the pinned Python packages in a build container from {base_ref} "
                 f"(wheels kept in {WHEELHOUSE}; log {log_path}): a few minutes the first time")
        container = cli.containers.run(
            base_ref, entrypoint=["/bin/sh", f"{RECIPE_DIR}/build.sh"], command=[], detach=True,
            network_mode="host", mounts=binds, tmpfs={"/tmp": "rw,exec"}, user="0",
            labels=_labels("build", inputs), name=f"dltestbed-build-{inputs}-{os.getpid()}")
        with open(log_path, "wb") as log:
            pending = b""
            for chunk in container.logs(stream=True, follow=True):
                log.write(chunk)
                log.flush()
                *lines, pending = (pending + chunk).split(b"\n")
                for line in lines:
                    if line.startswith(b"==> "):
                        progress(line[4:].decode(errors="replace"))
        code = container.wait(timeout=BUILD_TIMEOUT_S).get("StatusCode", -1)
        if code != 0:
            tail = "\n".join(log_path.read_text(errors="replace").splitlines()[-15:])
            raise DockerUnavailable(f"building {tag} failed (exit {code}); the end of {log_path}:\n{tail}")
        progress(f"committing {tag}")
        container.commit(repository=repo, tag=inputs, conf={
            "Labels": labels, "Env": list(IMAGE_ENV), "Entrypoint": [],
            "Cmd": ["/bin/bash"], "WorkingDir": "/"})
        progress(f"python packages installed and committed ({_elapsed(t0)})")
    finally:
        if container is not None:
            try:
                container.remove(force=True)
            except Exception:
                pass
        _remove_tree(recipe)


def _prune_superseded(cli, keep: str, keep_base: str, progress: Progress) -> None:
    """Remove the default worker and base images of earlier inputs (unless a container uses them)."""
    for role, current in (("worker", keep), ("base", keep_base)):
        filters = {"label": [f"{LABEL}.role={role}", f"{LABEL}.base=debootstrap"]}
        for old in cli.images.list(filters=filters):
            if current not in old.tags:
                names = ", ".join(old.tags) or old.short_id
                if _remove_quietly(cli, old.id):
                    progress(f"removed the superseded {role} image {names}")
    for tarball in CACHE_DIR.glob("rootfs-*.tar"):
        if tarball.name != f"rootfs-{DEBIAN_SUITE}-{keep_base.rsplit(':', 1)[1]}.tar":
            tarball.unlink(missing_ok=True)
    for log in CACHE_DIR.glob("build-*.log"):
        if log.name != f"build-{keep.rsplit(':', 1)[1]}.log" and not _tag_exists(cli, log.stem[len("build-"):]):
            log.unlink(missing_ok=True)


def _tag_exists(cli, inputs: str) -> bool:
    return _get_image(cli, f"{IMAGE_REPO}:{inputs}") is not None


def build_image(base: str | None = None, progress: Progress = lambda msg: None, force: bool = False) -> str:
    """Build the worker image (or reuse it when its tag exists and not `force`); returns its tag."""
    if not docker_engine.docker_installed():
        raise DockerUnavailable(docker_engine.NOT_INSTALLED)
    if base is not None and reference_problem(base):
        raise ValueError(reference_problem(base))
    cli = docker_engine.client(timeout=900, progress=progress)
    try:
        if base is None:
            tag = default_image()
        else:
            found = _get_image(cli, base)
            if found is None:
                raise DockerUnavailable(_missing_message(base, "build FROM it"))
            tag = _base_tag(base, found.id)
        if not force and _get_image(cli, tag) is not None:
            return tag
        problems = build_problems(base)
        if problems:
            raise DockerUnavailable("cannot build the worker image:\n  - " + "\n  - ".join(problems))
        def waiting() -> None:
            progress("waiting for another build of the worker image to end")
        with docker_engine.file_lock(LOCK_FILE, waiting):  # a concurrent build of the same tag waits, then reuses it
            old = _get_image(cli, tag)
            if old is not None and not force:
                return tag
            t0 = time.monotonic()
            progress(f"building the worker image {tag}")
            CACHE_DIR.mkdir(parents=True, exist_ok=True)
            _remove_build_containers(cli)
            base_ref = _ensure_base(cli, progress, force) if base is None else base
            labels = _labels("worker", tag.rsplit(":", 1)[1], base=base_ref if base else "debootstrap")
            _install_python(cli, base_ref, tag, labels, progress)
            if old is not None:
                _remove_quietly(cli, old.id)
            if base is None:
                _prune_superseded(cli, tag, base_ref, progress)
            image = _get_image(cli, tag)
            progress(f"worker image {tag} built in {_elapsed(t0)} ({_size_mb(image):.0f} MB)")
            return tag
    finally:
        cli.close()


def _missing_message(name: str, purpose: str) -> str:
    return (f"image {name!r} is not present in the local Docker engine, and the testbed never pulls "
            f"from a registry: `docker pull` it where a registry is reachable, or `docker load -i FILE` "
            f"it, before you {purpose}; or leave `image:` unset to use the project's worker image "
            f"(built here: run_experiment.py image build)")


def ensure_image(name: str | None, progress: Progress = lambda msg: None) -> str:
    """The image to run docker nodes from: the project's worker image (built on first use) or
    a user's image, which must already be in the local engine."""
    if name is None or name == default_image():
        return build_image(progress=progress)
    problem = reference_problem(name)
    if problem:
        raise ValueError(problem)
    if not image_present(name):
        raise DockerUnavailable(_missing_message(name, "use it"))
    return name

