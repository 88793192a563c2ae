"""Local "servers" for Mininet's cluster edition: `run_experiment.py cluster up N | status | down`.

Each server is a privileged container of the server image (the worker image plus sshd, Open
vSwitch, Mininet and the tools cluster.py runs there), with its own network namespace on a docker
network the project creates (NETWORK, SUBNET, internal: the servers reach each other and this
machine, nothing else). In it sshd runs with `PermitTunnel yes` (cluster.py's `ssh -w` tunnels),
Open vSwitch runs with the userspace datapath (no kernel module here), and root logs in with the
project's key. The key pair lives outside the repository in KEY_DIR (mode 600); its private half is
installed on every server too, since cluster.py opens tunnels FROM one server TO another. Each
server makes its own host keys at start; they are read through the Docker engine (not over the
network) into KEY_DIR/known_hosts, installed on every server as well, and every login checks them.

Containers and the network carry labels (LABEL.role = server / cluster-network), so `down` and
`status` find them even after a crash. `up` reuses servers that already run from the current image.
"""
from __future__ import annotations

import contextlib
import io
import ipaddress
import os
import shutil
import subprocess
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from testbed.nodes import docker_engine, image
from testbed.nodes.docker_engine import DockerUnavailable

SERVER_REPO = "dltestbed-server"
NETWORK = "dltestbed-cluster"
BRIDGE = "dltbcluster0"                 # the network's bridge on this machine (<= 15 characters)
SUBNET = os.environ.get("DLTB_CLUSTER_SUBNET", "172.31.250.0/24")
# VXLAN adds 50 bytes: on a 1550 underlay a VXLAN device carries the emulated hosts' 1500-byte frames
# (on 1500 the kernel gives it 1450 and refuses more); SSH tunnels carry frames in TCP, any MTU works
MTU = int(os.environ.get("DLTB_CLUSTER_MTU", "1550"))
KEY_DIR = Path(os.environ.get("DLTB_CLUSTER_DIR", "/var/lib/dltestbed/cluster"))
KEY_FILE = KEY_DIR / "id_ed25519"
KNOWN_HOSTS = KEY_DIR / "known_hosts"
PREFIX = "dltestbed-"                   # container name = PREFIX + server name
ROLE = f"{image.LABEL}.role"
LOCK_FILE = docker_engine.STATE_DIR / "cluster.lock"
MAX_SERVERS = 64
READY_TIMEOUT_S = 90.0

# cluster.py runs `sudo -E mnexec ...`, `ip tuntap`, `ssh -w`, `ovs-vsctl` and `mn -c` on servers
SERVER_PACKAGES = ("openssh-server", "openssh-client", "openvswitch-switch", "mininet", "sudo", "iperf3",
                   "ethtool", "iproute2", "iputils-ping", "procps", "cgroup-tools", "psmisc", "kmod")
SSHD_CONFIG = """\
PermitTunnel yes
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UseDNS no
MaxSessions 64
MaxStartups 64:30:128
"""
# Linux capabilities by number, as far as Docker 20.10 knows them. `privileged` would ask for all
# of them, and this machine's root lacks SYS_RESOURCE (runc then refuses to start the container):
# a server gets every one the engine's own bounding set holds instead.
CAPABILITIES = ("CHOWN", "DAC_OVERRIDE", "DAC_READ_SEARCH", "FOWNER", "FSETID", "KILL", "SETGID", "SETUID",
                "SETPCAP", "LINUX_IMMUTABLE", "NET_BIND_SERVICE", "NET_BROADCAST", "NET_ADMIN", "NET_RAW",
                "IPC_LOCK", "IPC_OWNER", "SYS_MODULE", "SYS_RAWIO", "SYS_CHROOT", "SYS_PTRACE", "SYS_PACCT",
                "SYS_ADMIN", "SYS_BOOT", "SYS_NICE", "SYS_RESOURCE", "SYS_TIME", "SYS_TTY_CONFIG", "MKNOD",
                "LEASE", "AUDIT_WRITE", "AUDIT_CONTROL", "SETFCAP", "MAC_OVERRIDE", "MAC_ADMIN", "SYSLOG",
                "WAKE_ALARM", "BLOCK_SUSPEND", "AUDIT_READ")
# PID 1's child (docker's init reaps zombies): its own cgroups made writable (a private cgroup
# namespace: what Mininet's CPU limits create stays inside this server's cgroup), host keys,
# Open vSwitch (userspace datapath), then sshd in the foreground
START_SCRIPT = """#!/bin/sh
set -e
for d in /sys/fs/cgroup/*/; do
  mount -o remount,bind,rw "$d" 2>/dev/null || echo "cgroup $d stays read-only" >&2
done
mount -o remount,bind,rw /proc/sys 2>/dev/null || echo "/proc/sys stays read-only" >&2
ssh-keygen -A >/dev/null
mkdir -p /run/sshd /root/.ssh
chmod 700 /root/.ssh
/usr/share/openvswitch/scripts/ovs-ctl start --system-id=random >/var/log/dltestbed-ovs.log 2>&1 \\
  || { cat /var/log/dltestbed-ovs.log >&2; exit 1; }
echo "dltestbed server ready"
exec /usr/sbin/sshd -D -e
"""
BUILD_SCRIPT = r"""set -eu
start=$(date +%s)
say() { echo "==> $* ($(( $(date +%s) - start )) s)"; }
export DEBIAN_FRONTEND=noninteractive
say "apt-get update"
apt-get update -qq
say "installing {packages}"
apt-get install -y -qq --no-install-recommends {packages} >/dev/null
rm -rf /var/lib/apt/lists/* /etc/ssh/ssh_host_*
mkdir -p /etc/ssh/sshd_config.d
cat > /etc/ssh/sshd_config.d/dltestbed.conf <<'EOF'
{sshd}EOF
cat > /usr/local/sbin/dltestbed-server <<'EOF'
{start}EOF
chmod 755 /usr/local/sbin/dltestbed-server
command -v mnexec ovs-vsctl sshd sudo iperf3 ethtool cgcreate >/dev/null
say "server packages installed"
""".replace("{packages}", " ".join(SERVER_PACKAGES)).replace("{sshd}", SSHD_CONFIG).replace("{start}", START_SCRIPT)

Progress = Callable[[str], None]


class ClusterError(RuntimeError):
    """The local servers cannot be made; the message says why and what to do."""


@dataclass(frozen=True)
class Server:
    name: str
    address: str
    container: str
    state: str = "running"
    image: str = ""


# ---------------------------------------------------------------- pure parts

def server_name(i: int) -> str:
    return f"srv{i}"


def server_address(i: int, subnet: str = SUBNET) -> str:
    """srv1 gets the subnet's second address (the first is the bridge on this machine)."""
    net = ipaddress.ip_network(subnet)
    if i < 1 or i + 1 >= net.num_addresses - 1:
        raise ClusterError(f"{subnet} has no address for server {i}: set DLTB_CLUSTER_SUBNET to a larger subnet")
    return str(net.network_address + 1 + i)


def gateway(subnet: str = SUBNET) -> str:
    return str(ipaddress.ip_network(subnet).network_address + 1)


def capabilities(status: str | None = None) -> list[str]:
    """The capabilities in this process's bounding set that Docker knows (from /proc/self/status)."""
    if status is None:
        status = Path("/proc/self/status").read_text()
    bounding = next(int(line.split()[1], 16) for line in status.splitlines() if line.startswith("CapBnd:"))
    return [name for bit, name in enumerate(CAPABILITIES) if bounding >> bit & 1]


def server_image_tag(worker_tag: str) -> str:
    """dltestbed-server:<12 hex>, a hash of everything that goes into the image."""
    return f"{SERVER_REPO}:{image._digest(['server', worker_tag, ' '.join(SERVER_PACKAGES), BUILD_SCRIPT])}"


def known_hosts_lines(keys: dict[str, str]) -> str:
    """known_hosts text from {address: the server's ssh_host_*_key.pub files, concatenated}."""
    lines = []
    for address, pubs in keys.items():
        for pub in pubs.splitlines():
            words = pub.split()
            if len(words) >= 2 and words[0].startswith(("ssh-", "ecdsa-")):
                lines.append(f"{address} {words[0]} {words[1]}")
    return "".join(line + "\n" for line in lines)


def cluster_yaml(servers: list[Server], key_file: Path = KEY_FILE, known_hosts: Path = KNOWN_HOSTS) -> str:
    """The experiment file's `cluster:` section that reaches these servers."""
    rows = "".join(f"    - {{name: {s.name}, address: {s.address}, user: root, key_file: {key_file}}}\n"
                   for s in servers)
    return f"cluster:\n  servers:\n{rows}  known_hosts: {known_hosts}\n  placement: auto\n"


# ---------------------------------------------------------------- the image

def build_server_image(progress: Progress = lambda msg: None, force: bool = False) -> str:
    """The server image (built FROM the worker image when its tag is missing); returns its tag."""
    worker = image.build_image(progress=progress)
    tag = server_image_tag(worker)
    cli = docker_engine.client(timeout=900, progress=progress)
    try:
        if not force and image._get_image(cli, tag) is not None:
            return tag
        with docker_engine.file_lock(image.STATE_DIR / "server-image.lock",
                               lambda: progress("waiting for another build of the server image to end")):
            old = image._get_image(cli, tag)
            if old is not None and not force:
                return tag
            _build(cli, worker, tag, progress)
            if old is not None:
                image._remove_quietly(cli, old.id)
            _prune(cli, tag, progress)
        return tag
    finally:
        cli.close()


def _build(cli, worker: str, tag: str, progress: Progress) -> None:
    repo, _, inputs = tag.rpartition(":")
    t0 = time.monotonic()
    image.CACHE_DIR.mkdir(parents=True, exist_ok=True)
    log_path = image.CACHE_DIR / f"server-build-{inputs}.log"
    for stale in cli.containers.list(all=True, filters={"label": f"{ROLE}=server-build"}):
        stale.remove(force=True)          # left by a killed build (we hold the lock: none runs)
    progress(f"building the server image {tag} from {worker} (Debian packages from the mirror apt "
             f"names; log {log_path})")
    container = cli.containers.run(worker, entrypoint=["/bin/sh", "-c", BUILD_SCRIPT], command=[],
                                   detach=True, network_mode="host", user="0",
                                   labels=image._labels("server-build", inputs),
                                   name=f"{PREFIX}server-build-{inputs}-{os.getpid()}")
    try:
        with open(log_path, "wb") as log:
            for line in container.logs(stream=True, follow=True):
                log.write(line)
                if line.startswith(b"==> "):
                    progress(line[4:].decode(errors="replace").rstrip())
        code = container.wait(timeout=image.BUILD_TIMEOUT_S).get("StatusCode", -1)
        if code != 0:
            tail = "\n".join(log_path.read_text(errors="replace").splitlines()[-15:])
            raise ClusterError(f"building {tag} failed (exit {code}); the end of {log_path}:\n{tail}")
        container.commit(repository=repo, tag=inputs, conf={
            "Labels": image._labels("server", inputs, worker=worker), "Env": list(image.IMAGE_ENV),
            "Entrypoint": ["/usr/local/sbin/dltestbed-server"], "Cmd": [], "WorkingDir": "/root"})
        built = image._get_image(cli, tag)
        progress(f"server image {tag} built in {time.monotonic() - t0:.0f} s ({image._size_mb(built):.0f} MB)")
    finally:
        container.remove(force=True)


def _prune(cli, keep: str, progress: Progress) -> None:
    for old in cli.images.list(filters={"label": f"{ROLE}=server"}):
        if keep not in old.tags and image._remove_quietly(cli, old.id):
            progress(f"removed the superseded server image {', '.join(old.tags) or old.short_id}")


# ---------------------------------------------------------------- keys

def ensure_key(key_file: Path = KEY_FILE) -> Path:
    """The project's SSH key pair (made once, kept as a cache); returns the private key's path."""
    key_file.parent.mkdir(parents=True, exist_ok=True)
    os.chmod(key_file.parent, 0o700)
    if not key_file.exists() or not key_file.with_suffix(".pub").exists():
        if shutil.which("ssh-keygen") is None:
            raise ClusterError("ssh-keygen is not installed (it makes the servers' key): apt-get install openssh-client")
        key_file.unlink(missing_ok=True)
        key_file.with_suffix(".pub").unlink(missing_ok=True)
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "dltestbed-cluster",
                        "-f", str(key_file)], check=True, capture_output=True, stdin=subprocess.DEVNULL)
    os.chmod(key_file, 0o600)
    return key_file


def _ssh_tar(files: dict[str, tuple[bytes, int]]) -> bytes:
    """A tar of /root/.ssh/<name> files (content, mode), owned by root."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo(".ssh")
        info.type, info.mode = tarfile.DIRTYPE, 0o700
        tar.addfile(info)
        for name, (data, mode) in files.items():
            info = tarfile.TarInfo(f".ssh/{name}")
            info.size, info.mode, info.mtime = len(data), mode, int(time.time())
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


# ---------------------------------------------------------------- docker objects

def _client(progress: Progress = lambda msg: None):
    try:
        return docker_engine.client(progress=progress)
    except DockerUnavailable as err:
        raise ClusterError(str(err)) from None


def _network(cli, progress: Progress):
    found = cli.networks.list(filters={"label": f"{ROLE}=cluster-network"})
    if found:
        mtu = found[0].attrs.get("Options", {}).get("com.docker.network.driver.mtu", "1500")
        if mtu != str(MTU):
            raise ClusterError(f"the docker network {found[0].name} has MTU {mtu}, not {MTU}: run "
                               "`run_experiment.py cluster down` first (it removes the servers too)")
        return found[0]
    import docker.errors
    import docker.types
    ipam = docker.types.IPAMConfig(pool_configs=[docker.types.IPAMPool(subnet=SUBNET, gateway=gateway())])
    progress(f"creating the docker network {NETWORK} ({SUBNET}, bridge {BRIDGE}, MTU {MTU}, internal)")
    try:
        return cli.networks.create(NETWORK, driver="bridge", ipam=ipam, internal=True,
                                   labels={image.LABEL: "1", ROLE: "cluster-network"},
                                   options={"com.docker.network.bridge.name": BRIDGE,
                                            "com.docker.network.driver.mtu": str(MTU)})
    except docker.errors.APIError as err:
        raise ClusterError(f"cannot create the docker network {NETWORK} on {SUBNET}: {err.explanation or err}. "
                           "If that subnet is used here, set DLTB_CLUSTER_SUBNET to a free one "
                           "(e.g. DLTB_CLUSTER_SUBNET=172.31.251.0/24) and run cluster up again") from None


def _containers(cli) -> list:
    return sorted(cli.containers.list(all=True, filters={"label": f"{ROLE}=server"}),
                  key=lambda c: int(c.labels.get(f"{image.LABEL}.index", "0")))


def _as_server(c) -> Server:
    return Server(c.labels.get(f"{image.LABEL}.server", c.name), c.labels.get(f"{image.LABEL}.address", ""),
                  c.name, c.status, (c.image.tags or [c.image.short_id])[0] if c.image else "")


def _start(cli, tag: str, i: int, net):
    import docker.errors
    name, address = server_name(i), server_address(i)
    labels = image._labels("server", tag.rsplit(":", 1)[1], server=name, address=address, index=str(i))
    labels[ROLE] = "server"
    try:
        c = cli.containers.create(tag, name=PREFIX + name, hostname=name, detach=True, init=True,
                                  cap_add=capabilities(), devices=["/dev/net/tun:/dev/net/tun:rwm"],
                                  security_opt=["seccomp=unconfined", "apparmor=unconfined"],
                                  labels=labels, network=net.name, cgroupns="private",
                                  networking_config={net.name: cli.api.create_endpoint_config(ipv4_address=address)},
                                  tmpfs={"/run": "rw,exec", "/tmp": "rw,exec"})
        try:
            c.start()
        except docker.errors.APIError:
            c.remove(force=True)
            raise
    except docker.errors.APIError as err:
        raise ClusterError(f"cannot start the server container {PREFIX + name}: {err.explanation or err}") from None
    return c


def _wait_started(c, deadline: float) -> None:
    while time.monotonic() < deadline:
        c.reload()
        if c.status != "running":
            raise ClusterError(f"server container {c.name} stopped while starting; its log:\n"
                               f"{c.logs(tail=15).decode(errors='replace')}")
        if b"dltestbed server ready" in c.logs():
            return
        time.sleep(0.3)
    raise ClusterError(f"server container {c.name} did not start Open vSwitch and sshd within "
                       f"{READY_TIMEOUT_S:.0f} s; see `docker logs {c.name}`")


def _host_keys(c) -> str:
    code, out = c.exec_run(["sh", "-c", "cat /etc/ssh/ssh_host_*_key.pub"])
    if code != 0:
        raise ClusterError(f"cannot read the host keys of {c.name}: {out.decode(errors='replace')}")
    return out.decode()


def _install_ssh(c, key_file: Path, known_hosts: str) -> None:
    pub = key_file.with_suffix(".pub").read_bytes()
    config = b"StrictHostKeyChecking yes\nUserKnownHostsFile /root/.ssh/known_hosts\nBatchMode yes\n"
    tar = _ssh_tar({"authorized_keys": (pub, 0o600), "id_ed25519": (key_file.read_bytes(), 0o600),
                    "id_ed25519.pub": (pub, 0o644), "known_hosts": (known_hosts.encode(), 0o644),
                    "config": (config, 0o600)})
    if not c.put_archive("/root", tar):
        raise ClusterError(f"cannot install the SSH key on {c.name}")


def verify(servers: list[Server], key_file: Path = KEY_FILE, known_hosts: Path = KNOWN_HOSTS,
           timeout: float = 20.0) -> None:
    """Log in to each server over SSH, host key checked against known_hosts; OVS and mnexec must answer."""
    from testbed.nodes.base import NodeError
    from testbed.nodes.ssh_connection import Connection, Target
    for s in servers:
        deadline = time.monotonic() + timeout
        while True:
            try:
                conn = Connection(Target(s.address, 22, "root", str(key_file), str(known_hosts), timeout=5.0))
                break
            except NodeError as err:
                if time.monotonic() > deadline or "host key" in str(err):
                    raise ClusterError(f"server {s.name}: {err}") from None
                time.sleep(0.5)
        try:
            code, out = conn.exec(["sh", "-c", "ovs-vsctl show >/dev/null && command -v mnexec"])
        finally:
            conn.close()
        if code != 0:
            raise ClusterError(f"server {s.name} ({s.address}): Open vSwitch or mnexec does not answer: {out.strip()}")


# ---------------------------------------------------------------- the verbs

@contextlib.contextmanager
def _exclusive(progress: Progress):
    """One `up` or `down` at a time on this machine; the engine's errors as ClusterError."""
    import docker.errors
    with docker_engine.file_lock(LOCK_FILE, lambda: progress("waiting for another cluster up/down to end")):
        try:
            yield
        except DockerUnavailable as err:
            raise ClusterError(str(err)) from None
        except docker.errors.DockerException as err:
            raise ClusterError(f"the Docker engine refused: {err}; `run_experiment.py cluster down` removes what "
                               "was started") from None


def up(n: int, progress: Progress = lambda msg: None) -> list[Server]:
    """Make servers srv1..srvN run (reusing the ones that do), keys installed and checked."""
    if not 1 <= n <= MAX_SERVERS:
        raise ClusterError(f"cluster up N: N must be 1 to {MAX_SERVERS}, not {n}")
    with _exclusive(progress):
        return _up(n, progress)


def _up(n: int, progress: Progress) -> list[Server]:
    tag = build_server_image(progress)
    key_file = ensure_key()
    cli = _client(progress)
    try:
        net = _network(cli, progress)
        existing = {c.labels.get(f"{image.LABEL}.server"): c for c in _containers(cli)}
        deadline = time.monotonic() + READY_TIMEOUT_S
        started = []
        for i in range(1, n + 1):
            c = existing.get(server_name(i))
            if c is not None and c.status == "running" and tag in c.image.tags:
                progress(f"{server_name(i)} ({server_address(i)}) runs already: reused")
                continue
            if c is not None:
                progress(f"{server_name(i)}: replacing its container ({c.status}, image "
                         f"{(c.image.tags or ['?'])[0]})")
                c.remove(force=True)
            progress(f"starting {server_name(i)} at {server_address(i)}")
            started.append(_start(cli, tag, i, net))
        for c in started:
            _wait_started(c, deadline)
        running = [c for c in _containers(cli) if c.status == "running" or c in started]
        keys = {c.labels[f"{image.LABEL}.address"]: _host_keys(c) for c in running}
        text = known_hosts_lines(keys)
        tmp = KNOWN_HOSTS.with_suffix(".tmp")
        tmp.write_text(text)
        os.replace(tmp, KNOWN_HOSTS)
        for c in running:
            _install_ssh(c, key_file, text)
        extra = [s for s in map(_as_server, running) if s.name not in {server_name(i) for i in range(1, n + 1)}]
        if extra:
            progress(f"also running (not asked for, left as they are): {', '.join(s.name for s in extra)}")
        by_name = {s.name: s for s in map(_as_server, _containers(cli))}
        servers = [by_name[server_name(i)] for i in range(1, n + 1)]
        verify(servers, key_file)
        progress(f"{n} server(s) answer over SSH with verified host keys; Open vSwitch and mnexec run")
        return servers
    finally:
        cli.close()


def status() -> list[Server]:
    if not docker_engine.docker_installed() or not docker_engine.dockerd_running():
        return []
    cli = _client()
    try:
        return [_as_server(c) for c in _containers(cli)]
    finally:
        cli.close()


def down(progress: Progress = lambda msg: None) -> list[str]:
    """Remove every server container and the cluster network (found by their labels)."""
    if not docker_engine.docker_installed() or not docker_engine.dockerd_running():
        return []
    with _exclusive(progress):
        return _down(progress)


def _down(progress: Progress) -> list[str]:
    actions = []
    cli = _client()
    try:
        for c in _containers(cli):
            c.remove(force=True)
            actions.append(f"removed server container {c.name}")
            progress(actions[-1])
        for net in cli.networks.list(filters={"label": f"{ROLE}=cluster-network"}):
            net.remove()
            actions.append(f"removed docker network {net.name}")
            progress(actions[-1])
    finally:
        cli.close()
    if actions:
        KNOWN_HOSTS.unlink(missing_ok=True)
    return actions
