"""The reference for bench/overhead.py: an all-reduce job on plain Mininet, written by hand, no testbed.

What a user would write without the testbed: N hosts on one Open vSwitch bridge (userspace datapath,
the only one this kernel has; TX checksum offload off as Mininet needs there, unless OVS's userspace
TSO is on, as the testbed turns it on, so that both keep the same link settings), TCLink bandwidth,
then workloads/train.py started in every host with TF_CONFIG, waited for, network stopped.
Prints one JSON line: wall_s (network up to down) and the chief's `done` event figures.

Run as root:  .venv/bin/python bench/plain_allreduce.py [--hosts 2] [--bw 100] [--steps 50] [--epochs 2]
If it is killed (SIGKILL) `mn -c` removes what it made (the testbed's `cleanup` does not know it).
"""
from __future__ import annotations

import argparse
import fcntl
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mininet.link import TCLink
from mininet.log import setLogLevel
from mininet.net import Mininet
from mininet.node import OVSBridge

REPO = Path(__file__).resolve().parent.parent
PORT = 50501


def job(hosts: int, steps: int, epochs: int, width: int) -> dict:
    """workloads/train.py's job file (docs/developer/contracts.md), the same job the testbed writes."""
    return {"strategy": "allreduce", "model": "mlp", "model_params": {"width": width}, "batch_per_worker": 32,
            "epochs": epochs, "steps_per_epoch": steps, "seed": 0,
            "cluster": {"worker": [f"10.0.0.{i + 1}:{PORT}" for i in range(hosts)]},
            "allreduce": {"implementation": "auto", "bytes_per_pack": 0}, "data": {"kind": "synthetic"}}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hosts", type=int, default=2)
    ap.add_argument("--bw", type=float, default=100, help="Mbit/s per link (0: unshaped)")
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--width", type=int, default=256)
    ap.add_argument("--threads", type=int, default=1, help="TF_NUM_INTRAOP_THREADS per task (0: TF's default)")
    args = ap.parse_args()
    # The testbed's own lock file: a testbed run at the same time would clash on the names h1, s1.
    Path("/run/dltestbed").mkdir(parents=True, exist_ok=True)
    lock = os.open("/run/dltestbed/lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(lock, fcntl.LOCK_EX)
    setLogLevel("error")
    t0 = time.monotonic()
    net = Mininet(topo=None, controller=None, link=TCLink, switch=OVSBridge, autoSetMacs=True)
    procs = []
    with tempfile.TemporaryDirectory() as tmp:
        try:
            s1 = net.addSwitch("s1", datapath="user")
            hosts = [net.addHost(f"h{i + 1}", ip=f"10.0.0.{i + 1}/24") for i in range(args.hosts)]
            for h in hosts:
                net.addLink(h, s1, **({"bw": args.bw} if args.bw else {}))
            net.start()
            tso = subprocess.run(["ovs-vsctl", "get", "Open_vSwitch", ".", "other_config:userspace-tso-enable"],
                                 capture_output=True, text=True).stdout.strip().strip('"') == "true"
            for h in hosts if not tso else []:
                h.cmd(f"ethtool -K {h.defaultIntf()} tx off")
            path = Path(tmp) / "job.json"
            spec = job(args.hosts, args.steps, args.epochs, args.width)
            path.write_text(json.dumps(spec))
            for i, h in enumerate(hosts):
                env = {**os.environ, "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "2",
                       "TF_CONFIG": json.dumps({"cluster": spec["cluster"], "task": {"type": "worker", "index": i}})}
                if args.threads:
                    env["TF_NUM_INTRAOP_THREADS"] = str(args.threads)
                out = open(Path(tmp) / f"{h.name}.jsonl", "w")
                procs.append(h.popen([sys.executable, "-u", str(REPO / "workloads/train.py"), "--job", str(path),
                                      "--task-type", "worker", "--task-index", str(i), "--host", h.name],
                                     stdout=out, stderr=open(Path(tmp) / f"{h.name}.log", "w"), env=env))
            codes = [p.wait() for p in procs]
            events = [json.loads(line) for line in (Path(tmp) / "h1.jsonl").read_text().splitlines()
                      if line.startswith("{")]
            if any(codes):
                log = (Path(tmp) / f"h{codes.index(next(c for c in codes if c)) + 1}.log").read_text()
                raise SystemExit(f"a task failed (exit codes {codes}): {log[-500:]}")
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
            net.stop()
    done = next(e for e in events if e.get("event") == "done")
    print(json.dumps({"wall_s": round(time.monotonic() - t0, 3), "tx_offload": tso, "training_time_s": done["training_time_s"],
                      "time_per_step_s": done.get("time_per_step_s")}))


if __name__ == "__main__":
    main()
