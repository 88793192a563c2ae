"""Switch kinds (`topology.switch.kind`): one entry each, with its Mininet class, its port limit, its
start-up steps, the registry list that removes its bridges after a crash, and its notes.

A new kind is one SwitchKind subclass (here or in a module of its own) and its row in the spec's table
(testbed.spec.kinds.SWITCH_KINDS, which names the class). The network asks the entry; it never tests
which kind it has."""
from __future__ import annotations

import logging
import subprocess
from functools import partial
from pathlib import Path

from testbed import shaping
from testbed.net.errors import NetworkError
from testbed.cleanup import ovs_running
from testbed.owner import OVS_OWNER_KEY, identity
from testbed.spec.kinds import SWITCH_KINDS, load_runtime

log = logging.getLogger("testbed.net.switches")

OVS_CTL = "/usr/share/openvswitch/scripts/ovs-ctl"
BRIDGE_NF = "net.bridge.bridge-nf-call-iptables"
USERSPACE_MAX_PORTS = 57   # measured: one userspace-datapath bridge forwarded only its first 57 ports
LINUX_BRIDGE_MAX_PORTS = 1023   # the kernel's BR_MAX_PORTS (1024), port 0 being reserved


class SwitchKind:
    """What bring-up needs of one kind of switch; one instance per run (conf: the spec's SwitchConf)."""

    name = ""           # its spec name (spec.kinds.SWITCH_KINDS, which says its cleanup list)

    @property
    def records(self) -> str:
        """The testbed.cleanup Registry list its bridges are recorded in."""
        return SWITCH_KINDS[self.name].records

    def __init__(self, conf):
        self.conf = conf
        self.notes: list[str] = []
        self.datapath: str | None = None
        self.started = False         # start() ran: this machine has switches of this kind
        self.tso = False             # OVS userspace TSO on: links keep their TX offload

    def port_limit(self) -> tuple[int, str, str] | None:
        """(most ports a switch takes, why, another way out) for preflight, without side effects;
        None: no limit worth checking."""
        return None

    def start(self):
        """The start-up steps before this machine's switches are made; their Mininet class."""
        self.started = True
        return self._start()

    def _start(self):
        raise NotImplementedError

    def before_start(self, registry) -> None:
        """Once Mininet has built the network, before the switches start."""

    @property
    def tx_offload_off(self) -> bool:
        """The links need TX checksum offload off (this switch loses TCP otherwise)."""
        return False

    def problem(self) -> str | None:
        """What broke this machine's switches during the run, when it can tell; None: nothing known."""
        return None


class OvsKind(SwitchKind):
    """Open vSwitch bridges, standalone: kernel datapath when the module is there, else userspace."""

    name = "ovs"

    def port_limit(self):
        if ovs_datapath_guess(self.conf.datapath) != "user":
            return None
        return (USERSPACE_MAX_PORTS, f"an OVS userspace-datapath bridge forwarded only its first "
                f"{USERSPACE_MAX_PORTS} ports on this kind of machine", " or switch kind linuxbridge")

    def _start(self):
        ensure_ovs()
        self.datapath = ovs_datapath(self.conf.datapath)
        self.tso = self.datapath == "user" and shaping.ensure_userspace_tso(OVS_CTL)
        self.notes.append(f"switches: Open vSwitch, {self.datapath} datapath" + (
            " (no kernel module; userspace TSO on: links keep their TX offload)" if self.tso else
            " (no kernel module: TX checksum offload off on links; OVS's other_config:userspace-tso-enable is"
            " off and its bridges kept it from being restarted: at most about 0.9 Gbit/s per flow)"
            if self.datapath == "user" else ""))
        # batch: every bridge in one ovs-vsctl (Mininet only batches a switch class, not a partial of one)
        return partial(tagged_ovs_bridge(), datapath=self.datapath, batch=True)

    @property
    def tx_offload_off(self) -> bool:
        return self.datapath == "user" and not self.tso

    def problem(self):
        if not self.started or vswitchd_running():
            return None
        return ("Open vSwitch stopped during the run (ovs-vswitchd does not answer), so the switches "
                "forwarded nothing; the next run starts it again")


class LinuxBridgeKind(SwitchKind):
    """Linux bridges (bridge-utils), no STP."""

    name = "linuxbridge"

    def port_limit(self):
        return LINUX_BRIDGE_MAX_PORTS, f"a Linux bridge takes at most {LINUX_BRIDGE_MAX_PORTS} ports", ""

    def _start(self):
        from mininet.nodelib import LinuxBridge
        self.notes.append("switches: Linux bridge")
        return LinuxBridge

    def before_start(self, registry) -> None:
        """With dockerd running, bridged frames pass iptables' FORWARD chain (policy DROP)."""
        path = Path("/proc/sys/net/bridge/bridge-nf-call-iptables")
        if path.exists() and path.read_text().strip() == "1":
            registry.remember_sysctl(BRIDGE_NF, "1")
            path.write_text("0")
            self.notes.append(f"set {BRIDGE_NF}=0 for this run (iptables would drop bridged traffic); "
                              "restored after")


def switch_kind(conf) -> SwitchKind:
    """The registry entry for the spec's SwitchConf, ready for one run."""
    return load_runtime(SWITCH_KINDS[conf.kind].runtime)(conf)


OVS_TIMEOUT_S = 10    # ovs-vsctl waits for ovs-vswitchd to apply a change, forever if it is dead


def bridge_tags() -> str:
    """ovs-vsctl column settings that mark a bridge as the testbed's and as this run's (`cleanup`
    deletes a bridge only when its run is over)."""
    return f"{shaping.QOS_TAG} external_ids:{OVS_OWNER_KEY}={identity()}"


def tagged_ovs_bridge():
    """Mininet's OVSBridge whose bridges carry the testbed's tag from the moment they exist (in the
    same ovs-vsctl that makes them): `cleanup` finds them by it after a crash. Its teardown's
    ovs-vsctl calls give up after OVS_TIMEOUT_S (the ledger then removes what is left)."""
    from mininet.node import OVSBridge, Switch
    from mininet.util import errRun

    class TaggedOVSBridge(OVSBridge):
        def bridgeOpts(self):
            return f"{super().bridgeOpts()} {bridge_tags()}"

        @classmethod
        def batchShutdown(cls, switches, run=errRun):
            bounded = f"ovs-vsctl --timeout={OVS_TIMEOUT_S} "
            return super().batchShutdown(switches, run=lambda cmd: run(cmd.replace("ovs-vsctl ", bounded, 1)))

        def stop(self, deleteIntfs=True):
            self.cmd(f"ovs-vsctl --timeout={OVS_TIMEOUT_S} --if-exists del-br", self)
            if self.datapath == "user":
                self.cmd("ip link del", self)
            Switch.stop(self, deleteIntfs)
    return TaggedOVSBridge


# ---- Open vSwitch --------------------------------------------------------------------------------

def ensure_ovs() -> None:
    """Start ovsdb-server and ovs-vswitchd if they are not running (no systemd needed)."""
    if ovs_running():
        return
    log.info("starting Open vSwitch (ovs-ctl start)")
    proc = subprocess.run([OVS_CTL, "start", "--system-id=random"], capture_output=True, text=True)
    if not ovs_running():
        raise NetworkError(f"could not start Open vSwitch: {proc.stderr.strip() or proc.stdout.strip()}")


def vswitchd_running() -> bool:
    """ovs-vswitchd, which forwards for every bridge, answers (ovsdb-server alone forwards nothing)."""
    return subprocess.run(["ovs-appctl", "--timeout=2", "-t", "ovs-vswitchd", "version"],
                          capture_output=True).returncode == 0


def ovs_datapath(requested: str = "auto") -> str:
    """'kernel' when the openvswitch module is (or can be) loaded, else the userspace datapath."""
    if requested != "auto":
        if requested == "kernel" and not _kernel_datapath_available():
            raise NetworkError("switch.datapath: kernel asked for, but this kernel has no openvswitch module")
        return requested
    return "kernel" if _kernel_datapath_available() else "user"


def ovs_datapath_guess(requested: str) -> str:
    """The datapath `ovs_datapath` would pick, without loading modules (for preflight)."""
    if requested != "auto":
        return requested
    return "kernel" if _kernel_datapath_available(try_load=False) else "user"


def _kernel_datapath_available(try_load: bool = True) -> bool:
    if Path("/sys/module/openvswitch").exists() or not try_load:
        return Path("/sys/module/openvswitch").exists()
    subprocess.run(["modprobe", "-q", "openvswitch"], capture_output=True)
    return Path("/sys/module/openvswitch").exists()
