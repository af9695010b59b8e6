#!/usr/bin/env bash
# Installs the Debian packages the fabric and its lab need. Idempotent: does nothing when all are present.
#
# wireguard-go comes from Debian's bookworm-backports suite (0.0.20231211): vectorized I/O, TUN TCP GSO/GRO
# and UDP GSO/GRO, socket buffers sized by itself; bookworm's 0.0.20220316 has none of these and is much
# slower (docs/wireguard-go.md). Backports are pinned at priority 100 by apt, so nothing else is taken from them.
set -euo pipefail
PKGS=(wireguard-tools nftables python3-nftables iproute2 iputils-ping iperf3 curl openssl
      bridge-utils procps psmisc netcat-openbsd)
WG_GO_MIN=0.0.20231211
BACKPORTS_LIST=/etc/apt/sources.list.d/liqo-fabric-bookworm-backports.sources
export DEBIAN_FRONTEND=noninteractive

installed_version() { dpkg-query -W -f='${Version}' "$1" 2>/dev/null || true; }
is_installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }

updated=0
apt_update() { [ $updated -eq 1 ] || { apt-get update -qq; updated=1; }; }

missing=()
for p in "${PKGS[@]}"; do
  is_installed "$p" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing Debian packages: ${missing[*]}"
  apt_update
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

wg_version=$(installed_version wireguard-go)
if [ -z "$wg_version" ] || dpkg --compare-versions "$wg_version" lt "$WG_GO_MIN"; then
  codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
  if [ "$codename" = bookworm ]; then
    if [ ! -f "$BACKPORTS_LIST" ] && ! grep -rqs 'bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/; then
      echo "adding Debian's bookworm-backports suite ($BACKPORTS_LIST) for wireguard-go >= $WG_GO_MIN"
      cat >"$BACKPORTS_LIST" <<'EOF'
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
      updated=0
    fi
    apt_update
    echo "installing wireguard-go from bookworm-backports (found: ${wg_version:-none})"
    apt-get install -y -qq --no-install-recommends -t bookworm-backports wireguard-go >/dev/null
  else
    # trixie and later ship the same upstream version in their main suite
    apt_update
    apt-get install -y -qq --no-install-recommends wireguard-go >/dev/null
  fi
  wg_version=$(installed_version wireguard-go)
  if dpkg --compare-versions "$wg_version" lt "$WG_GO_MIN"; then
    echo "install-system-deps: wireguard-go $wg_version is older than $WG_GO_MIN (no offloads)" >&2
    exit 1
  fi
fi
