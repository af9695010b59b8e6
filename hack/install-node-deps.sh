#!/usr/bin/env bash
# Installs the Debian packages that real lab nodes and `make image` need. Idempotent: does nothing when all
# are present. (Kept apart from install-system-deps.sh: only real-node labs and the image build need them.)
#
#   containerd, runc                  the container runtime of every real lab node (no daemon is started here)
#   containernetworking-plugins       bridge, host-local, loopback, portmap in /usr/lib/cni
#   iptables, conntrack               kube-proxy (iptables mode; Debian's iptables is iptables-nft)
#   mmdebstrap                        the image's Debian rootfs (deploy/image/build.sh)
set -euo pipefail
PKGS=(containerd runc containernetworking-plugins iptables conntrack mmdebstrap)
export DEBIAN_FRONTEND=noninteractive

is_installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
missing=()
for p in "${PKGS[@]}"; do
  is_installed "$p" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing Debian packages for real lab nodes: ${missing[*]}"
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
