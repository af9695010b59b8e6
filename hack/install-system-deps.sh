#!/usr/bin/env bash
# Installs the Debian packages the fabric and its lab need. Idempotent: does nothing when all are present.
set -euo pipefail
PKGS=(wireguard-go wireguard-tools nftables python3-nftables iproute2 iputils-ping iperf3 curl openssl
      bridge-utils procps psmisc netcat-openbsd)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "installing Debian packages: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
