"""A QEMU virtual machine that boots Debian's own kernel (linux-image-amd64: netem, fq, the OVS
module), for tests of what this machine's kernel cannot do (netem). Used by
tests/integration/test_netem_vm.py; the pure parts are checked by tests/unit/test_vmguest.py.

The image: `debootstrap --variant=minbase` of bookworm with the kernel, its initramfs and the
measuring tools, from the mirror apt already uses (as the worker image's root filesystem), packed
as an ext4 file with `mke2fs -d` (no loop mount). Kept in $DLTB_CACHE (/var/cache/dltestbed) as
netem-vm-<hash>/{vmlinuz,initrd.img,rootfs.ext4,manifest.json}: the hash covers the suite, the
package list, the architecture and this recipe (RECIPE, INIT), so a changed recipe is a new folder
and the old one is removed. The manifest records the kernel's version and the build's time.

A run: QEMU (KVM if usable, else TCG software emulation) boots the kernel with the image as a
throw-away snapshot (nothing written reaches the file) and a 9p share of a temporary folder;
/sbin/dltb-init (PID 1, no systemd) loads the modules, runs the share's job.sh, writes out/ and
powers off. Every run is bounded by a timeout and its QEMU killed on every path; the folder is
removed."""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import platform
import shutil
import signal
import subprocess
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from testbed.nodes import image as worker_image

CACHE_DIR = worker_image.CACHE_DIR
SUITE = worker_image.DEBIAN_SUITE
PACKAGES = ("linux-image-amd64", "initramfs-tools", "kmod", "iproute2", "iputils-ping", "iperf3",
            # a testbed bring-up in the guest: Mininet and Open vSwitch (the kernel datapath: Debian's
            # kernel has the module); the Python packages are the host's venv, shared read-only
            "mininet", "openvswitch-switch", "ethtool", "psmisc", "procps", "python3")
MODULES = ("9p", "9pnet_virtio", "veth", "sch_htb", "sch_tbf", "sch_netem")
QEMU_NAME = "dltb-netem-vm"      # QEMU's -name: how tests/leftovers.py finds a QEMU left running
MEMORY_MB = 1024
BUILD_TIMEOUT_S = 1800

# PID 1 of the guest. Debian's initramfs has mounted the root, /proc, /sys, /dev and /run already.
INIT = r"""#!/bin/sh
PATH=/usr/sbin:/usr/bin:/sbin:/bin
export PATH
mountpoint -q /proc || mount -t proc proc /proc
mountpoint -q /sys || mount -t sysfs sys /sys
mountpoint -q /run || mount -t tmpfs run /run
mount -t tmpfs tmp /tmp
mkdir -p /run/netns /job
for m in {modules}; do modprobe "$m" || echo "dltb-init: modprobe $m failed"; done
if mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 job /job; then
  mkdir -p /job/out
  cut -d' ' -f1 /proc/uptime > /job/out/boot_seconds
  uname -r > /job/out/kernel
  sh /job/job.sh > /job/out/job.log 2>&1
  echo $? > /job/out/rc
  sync
else
  echo "dltb-init: the job share did not mount"
fi
echo o > /proc/sysrq-trigger
sleep 30
""".replace("{modules}", " ".join(MODULES))

# What is done to the debootstrap tree before it is packed (changing it changes the hash): the
# kernel and initramfs go beside the image; what a guest never reads goes (docs, apt's files, module
# families of hardware a QEMU guest does not have), then the module index is rebuilt.
RECIPE = ("v3: debootstrap in two stages with policy-rc.d between; init; slim docs, apt, modules of absent "
          "hardware; depmod; mke2fs -d; the Python version in the manifest")
DROPPED_MODULES = ("sound", "drivers/gpu", "drivers/media", "drivers/net/wireless", "drivers/infiniband",
                   "drivers/staging", "drivers/net/ethernet", "drivers/scsi", "drivers/usb", "drivers/bluetooth",
                   "drivers/iio", "drivers/hid", "drivers/input", "drivers/isdn", "net/wireless", "net/mac80211",
                   "net/bluetooth")


def image_key(suite: str = SUITE, packages=PACKAGES, arch: str | None = None, init: str = INIT,
              recipe: str = RECIPE) -> str:
    """12 hex digits naming one set of build inputs."""
    h = hashlib.sha256()
    for part in ("netem-vm", suite, " ".join(packages), arch or platform.machine(), init, recipe,
                 " ".join(DROPPED_MODULES)):
        h.update(part.encode() + b"\0")
    return h.hexdigest()[:12]


@dataclass(frozen=True)
class VmImage:
    folder: Path

    @property
    def kernel(self) -> Path:
        return self.folder / "vmlinuz"

    @property
    def initrd(self) -> Path:
        return self.folder / "initrd.img"

    @property
    def rootfs(self) -> Path:
        return self.folder / "rootfs.ext4"

    @property
    def manifest(self) -> dict:
        return json.loads((self.folder / "manifest.json").read_text())

    def complete(self) -> bool:
        return all(p.is_file() for p in (self.kernel, self.initrd, self.rootfs, self.folder / "manifest.json"))


def image_folder(key: str | None = None) -> Path:
    return CACHE_DIR / f"netem-vm-{SUITE}-{key or image_key()}"


def build_problems(which=shutil.which) -> list[str]:
    """Why the VM cannot be built or run here, each with what to do."""
    problems = []
    for tool, package in (("qemu-system-x86_64", "qemu-system-x86"), ("debootstrap", "debootstrap"),
                          ("mke2fs", "e2fsprogs")):
        if which(tool) is None:
            problems.append(f"{tool} is not installed: run scripts/bootstrap.sh (or apt-get install {package})")
    if os.geteuid() != 0:
        problems.append("building the VM image runs debootstrap: run as root")
    if worker_image.find_mirror() is None:
        problems.append(f"no Debian mirror for {SUITE} in apt's sources: set {worker_image.MIRROR_ENV}")
    return problems


@contextmanager
def _locked(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def ensure_image(progress=lambda msg: None) -> VmImage:
    """The cached VM image, built first if missing (a few minutes; reused after)."""
    found = VmImage(image_folder())
    if found.complete():
        return found
    problems = build_problems()
    if problems:
        raise RuntimeError("cannot build the netem VM image:\n  - " + "\n  - ".join(problems))
    with _locked(CACHE_DIR / "netem-vm.lock"):
        if not found.complete():        # a concurrent build may have made it meanwhile
            _build(found.folder, progress)
            _prune(found.folder)
    return found


def _run(cmd: list[str], log: Path, timeout: float = BUILD_TIMEOUT_S) -> None:
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive", LC_ALL="C")
    with open(log, "ab") as out:
        out.write(("$ " + " ".join(cmd) + "\n").encode())
        out.flush()
        # a group of its own: on Ctrl-C or a timeout the whole of debootstrap stops (its dpkg too),
        # before the build folder is removed, so that nothing writes into it afterwards
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)
        try:
            code = proc.wait(timeout=timeout)
        except BaseException:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
    if code != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-15:])
        raise RuntimeError(f"{cmd[0]} failed (exit {code}); the end of {log}:\n{tail}")


def _build(folder: Path, progress) -> None:
    mirror = worker_image.find_mirror()
    t0 = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="netem-vm-tmp-", dir=CACHE_DIR))
    root, log = work / "root", CACHE_DIR / f"{folder.name}.log"
    log.unlink(missing_ok=True)
    progress(f"building the netem VM image {folder} (debootstrap {SUITE} + {', '.join(PACKAGES)} from "
             f"{mirror}; log {log}): a few minutes")
    try:
        # two stages, so that no package's maintainer script starts a service (Open vSwitch) on this
        # machine: the policy goes in between
        cmd = ["debootstrap", "--foreign", "--variant=minbase", f"--include={','.join(PACKAGES)}"]
        if worker_image.DEBIAN_KEYRING.exists():
            cmd.append(f"--keyring={worker_image.DEBIAN_KEYRING}")
        _run(cmd + [SUITE, str(root), mirror], log)
        policy = root / "usr/sbin/policy-rc.d"
        policy.write_text("#!/bin/sh\nexit 101\n")
        policy.chmod(0o755)
        try:
            _run(["chroot", str(root), "/debootstrap/debootstrap", "--second-stage"], log)
        finally:
            worker_image._unmount_below(root)
        version = _kernel_version(root)
        pythons = sorted(p.name[len("python"):] for p in (root / "usr/lib").glob("python3.*"))
        package = subprocess.run(["chroot", str(root), "dpkg-query", "-W", "-f=${Version}", "linux-image-amd64"],
                                 capture_output=True, text=True).stdout.strip()
        out = work / "out"
        out.mkdir()
        shutil.copy(root / "boot" / f"vmlinuz-{version}", out / "vmlinuz")
        shutil.copy(root / "boot" / f"initrd.img-{version}", out / "initrd.img")
        _slim(root, version)
        _run(["depmod", "-b", str(root), version], log)
        init = root / "sbin" / "dltb-init"
        init.write_text(INIT)
        init.chmod(0o755)
        size_mb = _du_mb(root) * 5 // 4 + 128
        _run(["mke2fs", "-q", "-t", "ext4", "-L", "dltb-netem-vm", "-d", str(root), str(out / "rootfs.ext4"),
              f"{size_mb}M"], log)
        (out / "manifest.json").write_text(json.dumps({
            "suite": SUITE, "kernel": version, "linux-image-amd64": package, "packages": list(PACKAGES),
            "python": pythons[-1] if pythons else None,
            "mirror": mirror, "key": folder.name, "built": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "build_seconds": round(time.monotonic() - t0), "rootfs_mb": size_mb}, indent=1))
        shutil.rmtree(folder, ignore_errors=True)
        os.replace(out, folder)
        progress(f"netem VM image built in {time.monotonic() - t0:.0f} s: kernel {version} ({package})")
    finally:
        worker_image._remove_tree(work)


def _kernel_version(root: Path) -> str:
    kernels = sorted(p.name[len("vmlinuz-"):] for p in (root / "boot").glob("vmlinuz-*"))
    if len(kernels) != 1 or not (root / "boot" / f"initrd.img-{kernels[0]}").is_file():
        raise RuntimeError(f"expected one kernel with its initramfs in {root}/boot, found {kernels}")
    return kernels[0]


def _slim(root: Path, version: str) -> None:
    for sub in ("usr/share/doc", "usr/share/man", "usr/share/info", "usr/share/locale", "var/cache/apt",
                "var/lib/apt/lists", "boot"):
        for p in (root / sub).glob("*"):
            shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()
    for sub in DROPPED_MODULES:
        shutil.rmtree(root / "lib/modules" / version / "kernel" / sub, ignore_errors=True)


def _du_mb(path: Path) -> int:
    out = subprocess.run(["du", "-sm", "--apparent-size", str(path)], capture_output=True, text=True, check=True)
    return int(out.stdout.split()[0])


def _prune(keep: Path) -> None:
    """Remove the images of earlier recipes and what an interrupted build left."""
    for old in CACHE_DIR.glob("netem-vm-*"):
        if old.is_dir() and old != keep:
            worker_image._remove_tree(old)
        elif old.suffix == ".log" and old.stem != keep.name:
            old.unlink(missing_ok=True)


# ---------------------------------------------------------------- a run

def kvm_usable() -> bool:
    """KVM works only with /dev/kvm and a CPU that exposes vmx or svm (here: neither, so TCG)."""
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return os.access("/dev/kvm", os.R_OK | os.W_OK) and (" vmx" in flags or " svm" in flags)


def qemu_command(img: VmImage, share: Path, console: Path, kvm: bool | None = None,
                 shares: dict | None = None) -> list[str]:
    """shares: more folders of this machine for the guest, read-only: {mount tag: path}."""
    kvm = kvm_usable() if kvm is None else kvm
    append = "root=/dev/vda rw console=ttyS0 init=/sbin/dltb-init panic=-1 loglevel=4"
    return ["qemu-system-x86_64", "-name", QEMU_NAME, "-machine", "q35",
            "-accel", "kvm" if kvm else "tcg", "-cpu", "host" if kvm else "max",
            "-m", str(MEMORY_MB), "-smp", "1", "-nodefaults", "-display", "none", "-no-reboot",
            "-serial", f"file:{console}", "-monitor", "none",
            "-kernel", str(img.kernel), "-initrd", str(img.initrd), "-append", append,
            "-drive", f"file={img.rootfs},format=raw,if=virtio,snapshot=on",
            "-virtfs", f"local,path={share},mount_tag=job,security_model=none,id=job",
            *(arg for tag, path in (shares or {}).items()
              for arg in ("-virtfs", f"local,path={path},mount_tag={tag},security_model=none,readonly=on,id={tag}"))]


@dataclass
class Result:
    """What a run brought back: out/<name> texts, the console, QEMU's wall time."""
    files: dict
    console: str
    seconds: float
    command: list

    def text(self, name: str) -> str:
        return self.files.get(name, "")


def run(img: VmImage, job: str, timeout: float = 600, shares: dict | None = None,
        files: dict | None = None) -> Result:
    """Boot the VM once with `job` (a POSIX sh script) as its job; returns its out/ files. `files`:
    more files for the share ({name: text}); `shares`: read-only folders ({mount tag: path})."""
    share = Path(tempfile.mkdtemp(prefix="dltb-netem-vm-"))
    try:
        (share / "out").mkdir()
        (share / "job.sh").write_text(job)
        for name, text in (files or {}).items():
            (share / name).write_text(text)
        console = share / "console.log"
        cmd = qemu_command(img, share, console, shares=shares)
        t0 = time.monotonic()
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            qemu_out, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise TimeoutError(f"the VM did not power off within {timeout:.0f} s; its console:\n"
                               + _tail(console)) from None
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        seconds = time.monotonic() - t0
        files = {p.name: p.read_text(errors="replace") for p in (share / "out").iterdir() if p.is_file()}
        text = console.read_text(errors="replace") if console.exists() else ""
        if proc.returncode != 0 or "rc" not in files:
            raise RuntimeError(f"the VM's job did not finish (QEMU exit {proc.returncode}: "
                               f"{qemu_out.decode(errors='replace').strip()[-500:]}); its console:\n" + _tail(console)
                               + "\njob.log:\n" + files.get("job.log", "")[-2000:])
        return Result(files, text, seconds, cmd)
    finally:
        shutil.rmtree(share, ignore_errors=True)


def _tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no console output)"
