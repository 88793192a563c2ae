#!/usr/bin/env bash
# Install what the testbed needs on a fresh Debian/Ubuntu machine (as root), idempotently:
# Debian packages, then a venv from /usr/bin/python3 with --system-site-packages (so Debian's
# Mininet is importable) holding the pinned pip packages. The venv lives in a cache folder
# keyed by requirements.txt and is linked as .venv, so fresh clones reuse it.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(
  mininet openvswitch-switch iperf3 iperf ethtool bridge-utils net-tools iproute2 iputils-ping
  cgroup-tools psmisc procps python3-venv python3-pip docker.io debootstrap openssh-server
  qemu-system-x86 e2fsprogs   # the VM that runs the netem tests on Debian's own kernel (tests/vmguest.py)
)
CACHE_DIR=${DLTB_CACHE:-/var/cache/dltestbed}

say() { printf '[bootstrap] %s\n' "$*" >&2; }

if [ "$(id -u)" -ne 0 ]; then
  say "must run as root (Mininet, Open vSwitch and tc need it): try sudo $0"
  exit 1
fi

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  say "installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

key=$( (cat requirements.txt; /usr/bin/python3 --version) | sha256sum | cut -c1-12)
venv="$CACHE_DIR/venv-$key"
if [ ! -x "$venv/bin/python" ] || [ ! -f "$venv/.complete" ]; then
  say "creating venv $venv (pinned packages from requirements.txt; several minutes the first time)"
  rm -rf "$venv"
  mkdir -p "$CACHE_DIR"
  /usr/bin/python3 -m venv --system-site-packages "$venv"
  # PyTorch's CPU-only build (about 200 MB, not the CUDA build's gigabytes) is on its own index, used
  # when it answers within 5 s; a machine without it finds torch where pip finds the rest.
  torch_index=https://download.pytorch.org/whl/cpu
  extra=()
  if /usr/bin/python3 -c "import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=5)" \
      "$torch_index/torch/" >/dev/null 2>&1; then
    extra=(--extra-index-url "$torch_index")
  fi
  "$venv/bin/pip" install -q --disable-pip-version-check "${extra[@]}" -r requirements.txt
  touch "$venv/.complete"
fi
if [ "$(readlink .venv 2>/dev/null)" != "$venv" ]; then
  rm -rf .venv
  ln -s "$venv" .venv
fi
