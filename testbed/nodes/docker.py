"""The docker kind: a container joined to the emulated links, as Containernet does.

The container starts with `network_mode: none`; its Mininet host is a shell in the container's
network namespace, so Mininet creates the veth pair there, addresses it and shapes it exactly as
for a netns host. Processes of the node run in the container's namespaces (network, mount, PID)
and cgroups, so Docker's CPU and memory limits (`cpu_quota`/`cpu_period`, `mem_limit`, cgroup v1 or v2) apply
to them, and removing the container ends them all. The workload code
is mounted read-only at the same path as on this machine."""
from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

from testbed.emulation.budgets import UNLIMITED, cpuset_text, held_by
from testbed.nodes import cgroups
from testbed.nodes.base import REPO, Node, NodeError, Usage, in_namespaces, netns_counters
from testbed.owner import identity

LABEL = "dltestbed"
STAGE_DIR = "/tmp/dltestbed"


def _cpu_limit(fraction: float, cpus: list[int] | None = None) -> dict[str, int]:
    """Docker's quota and period for a fraction of the whole machine (as the graph's cpu counts it),
    over the short period the budgets use; none for a node pinned to as many whole CPUs of its own
    (testbed.emulation.budgets.held_by)."""
    limit = held_by(fraction * (os.cpu_count() or 1), cpus)
    return {} if limit == UNLIMITED else limit.docker()


def container_name(host_name: str) -> str:
    return f"dltestbed-{os.getpid()}-{host_name}"


class DockerNode(Node):
    kind = "docker"
    records = "containers"       # container names

    @classmethod
    def problems(cls, hosts, progress=lambda msg: None, engine: str = "tensorflow"):
        """Docker installed and running (started if need be), every image present; the project's
        worker image is built here when it is missing (minutes, with progress)."""
        from testbed.nodes import docker_engine, image
        key = hosts[0].key
        if not docker_engine.docker_installed():
            return [(f"{key}.kind", "docker nodes need the Docker engine, which is not installed: "
                     "run scripts/bootstrap.sh (installs Debian's docker.io)")]
        try:
            docker_engine.ensure_dockerd(progress)
        except docker_engine.DockerUnavailable as err:
            return [(f"{key}.kind", str(err))]
        found = []
        for name in sorted({h.setting("image") or image.default_image() for h in hosts}):
            where = next(h.key for h in hosts if (h.setting("image") or image.default_image()) == name)
            if image.image_present(name):
                continue
            if name == image.default_image():
                why = image.build_problems()
                if not why:
                    try:
                        image.ensure_image(name, progress)
                        continue
                    except Exception as err:  # noqa: BLE001 - any build failure refuses the run, with its reason
                        why = [str(err)]
                found += [(f"{where}.kind", f"the worker image {name} is missing and cannot be built: {w}")
                          for w in why]
            else:
                found.append((f"{where}.image", f"image {name} is not present on this machine and no registry "
                              "is reachable: load it with `docker load`, or leave image unset for the "
                              "project's worker image"))
        return found

    def prepare(self, progress=lambda msg: None) -> None:
        from testbed.nodes import docker_engine, image
        self.image = image.ensure_image(self.host.setting("image"), progress)
        name = container_name(self.name)
        self._registry.add(self.records, name)
        limits = {}
        if self.host.cpu is not None:
            limits.update(_cpu_limit(self.host.cpu, self.host.cpus))
        if self.host.memory is not None:
            limits["mem_limit"] = self.host.memory
        if self.host.cpus is not None:
            limits["cpuset_cpus"] = cpuset_text(self.host.cpus)
        self.container = docker_engine.client().containers.run(
            self.image, ["sleep", "infinity"], name=name, hostname=self.name, detach=True,
            network_mode="none", labels={LABEL: "1", f"{LABEL}.owner": identity(),
                                         f"{LABEL}.host": self.name},
            volumes={str(REPO): {"bind": str(REPO), "mode": "ro"}}, init=False, **limits)
        self.container.reload()
        self.anchor_pid = self.container.attrs["State"]["Pid"]
        if not self.anchor_pid:
            raise NodeError(f"container {name} for {self.name} did not start: {self.container.status}")
        self.cgroup_dirs = cgroups.process_dirs(self.anchor_pid)

    def mininet_host(self):
        return _container_host_class(), {"container_pid": self.anchor_pid}

    def stop(self) -> None:
        container = getattr(self, "container", None)
        if container is not None:
            try:
                container.remove(force=True)
            except Exception:  # noqa: BLE001 - the registry removes it by name at teardown
                pass

    def set_cpu(self, fraction):
        """Docker's own limit, updated in place (the Engine API's CpuQuota and CpuPeriod; all cores for None)."""
        api = self.container.client.api
        limit = _cpu_limit(fraction or 1.0)
        reply = api.post(f"{api.base_url}/v{api.api_version}/containers/{self.container.id}/update",
                         json={"CpuQuota": limit["cpu_quota"], "CpuPeriod": limit["cpu_period"]})
        if reply.status_code != 200:
            raise NodeError(f"{self.name}: docker update of the CPU limit failed: {reply.text.strip()}")

    @property
    def python(self) -> str:
        return "python3"       # found on the image's own PATH (the worker image's is its venv)

    def env(self, extra):
        """The image's environment (its PATH first of all) plus `extra`."""
        image_env = dict(item.split("=", 1) for item in self.container.attrs["Config"].get("Env") or [] if "=" in item)
        return {**super().env({}), **image_env, **extra}

    def stage(self, path: Path) -> str:
        """Copy a file into the container (docker SDK put_archive); its path there."""
        return self.stage_files(Path(path).parent, [Path(path)]) + f"/{Path(path).name}"

    def stage_files(self, folder: Path, files: list[Path]) -> str:
        there = f"{STAGE_DIR}/{Path(folder).name}"
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            for f in files:
                tar.add(str(f), arcname=f"{there.lstrip('/')}/{Path(f).relative_to(folder).as_posix()}",
                        recursive=False)
        self.container.put_archive("/", buf.getvalue())
        return there

    def _command(self, argv, cwd):
        # The PID namespace too: TensorFlow reads /proc/self/exe, which the container's /proc only
        # shows to its own processes. nsenter then forks; GroupPopen signals both.
        enter = ["nsenter", "--target", str(self.anchor_pid), "--net", "--mount", "--pid", "--"]
        return in_namespaces(enter, argv, cwd, self.cgroup_dirs)

    @classmethod
    def usage(cls, nodes) -> dict[str, Usage]:
        """From each container's cgroup (CPU, resident memory) and its namespace's interfaces."""
        out = {}
        for n in nodes:
            try:
                cpu_s, rss = cgroups.counters(n.cgroup_dirs)
                tx, rx = netns_counters(n.anchor_pid)
            except OSError:
                continue
            out[n.name] = Usage(cpu_s, rss, tx, rx)
        return out

    @classmethod
    def remove_records(cls, names):
        """Remove the recorded containers (gone with the engine: nothing is kept)."""
        return remove_containers(names), []

    @classmethod
    def destroy_leftovers(cls, run_alive):
        """Node containers (labelled dltestbed.host) whose run is over."""
        client = _docker()
        if client is None:
            return []
        stale = [c.name for c in client.containers.list(all=True, filters={"label": [f"{LABEL}=1", f"{LABEL}.host"]})
                 if not run_alive(c.labels.get(f"{LABEL}.owner", ""))]
        return remove_containers(stale)


def _docker():
    """A Docker client when the engine is installed and answering, else None (nothing to remove then)."""
    from testbed.nodes import docker_engine
    if not docker_engine.docker_installed() or not docker_engine.dockerd_running():
        return None
    return docker_engine.client()


def remove_containers(names) -> list[str]:
    client = _docker() if names else None
    actions = []
    for name in names if client else []:
        try:
            client.containers.get(name).remove(force=True)
            actions.append(f"removed container {name}")
        except Exception:  # noqa: BLE001 - already gone (docker.errors.NotFound) or the engine went away
            pass
    return actions


def _container_host_class():
    """A Mininet Host whose shell runs in a container's network namespace (but this machine's file
    system, so Mininet's own ip/tc/ethtool calls work whatever the image holds)."""
    from mininet.node import Host

    class ContainerHost(Host):
        def __init__(self, name, container_pid, **params):
            self.container_pid = container_pid
            super().__init__(name, **params)

        def startShell(self, mnopts=None):
            self.inNamespace = False          # do not let mnexec make a new namespace ...
            try:
                super().startShell(mnopts)
            finally:
                self.inNamespace = True       # ... but treat the node as namespaced for its links

        def _popen(self, cmd, **params):
            if self.shell is None and cmd[:1] == ["mnexec"]:     # the shell itself
                cmd = ["nsenter", f"--net=/proc/{self.container_pid}/ns/net", *cmd]
            return super()._popen(cmd, **params)

    return ContainerHost
