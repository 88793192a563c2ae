"""What a profile ran on: device, CPU, cores, driver, versions, date. Standard library only."""
from __future__ import annotations

import datetime
import os
import platform
import subprocess
from importlib import metadata

LIBRARIES = ("torch", "torchvision", "timm", "transformers", "tensorflow", "tf_keras", "numpy")


def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo), else the platform's processor string."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def gpu_driver() -> str | None:
    try:
        with open("/proc/driver/nvidia/version", encoding="utf-8") as f:
            first = f.readline()
        for word in first.split():
            if word[:1].isdigit() and "." in word:
                return word
    except OSError:
        pass
    try:
        done = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=20)
        return done.stdout.strip().splitlines()[0] if done.returncode == 0 and done.stdout.strip() else None
    except (OSError, subprocess.SubprocessError):
        return None


def versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for name in LIBRARIES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out


def describe(device_name: str, device_count: int, cpus_used: int, extra: dict | None = None) -> dict:
    """The machine section of a profile."""
    return {"device_name": device_name, "device_count": device_count, "cpu_model": cpu_model(),
            "cpus": os.cpu_count() or 1, "cpus_used": cpus_used, "driver": gpu_driver(),
            "platform": platform.platform(), **(extra or {})}


def today() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
