#!/usr/bin/env bash
# Builds kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kube-proxy and kubectl v1.20.2 from
# Debian bookworm's `kubernetes` source package with Debian's Go 1.19 and caches them. Prints the directory
# holding the binaries. (kube-scheduler, kubelet and kube-proxy serve real-node labs: tests.lab with
# real_nodes=True; kubectl is the tests' fallback where none is installed.)
#
# KUBE_APISERVER_BIN=/path/to/kube-apiserver skips the build (e.g. envtest binaries).
# LIQO_FABRIC_CACHE (default ~/.cache/liqo-fabric) is where sources, toolchain and binaries live.
set -euo pipefail

if [ -n "${KUBE_APISERVER_BIN:-}" ]; then
  [ -x "$KUBE_APISERVER_BIN" ] || { echo "KUBE_APISERVER_BIN=$KUBE_APISERVER_BIN is not an executable" >&2; exit 1; }
  dirname "$KUBE_APISERVER_BIN"
  exit 0
fi

CACHE=${LIQO_FABRIC_CACHE:-$HOME/.cache/liqo-fabric}
VERSION=v1.20.2
SRCVER=1.20.5+really1.20.2-1.1+deb12u1
OUT=$CACHE/kube-$VERSION/bin
BINARIES=(kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl)
missing_bins() { for c in "${BINARIES[@]}"; do [ -x "$OUT/$c" ] || echo "$c"; done; }
if [ -z "$(missing_bins)" ]; then
  echo "$OUT"
  exit 0
fi

WORK=$CACHE/kube-$VERSION/build
LOG=$CACHE/kube-$VERSION/build.log
mkdir -p "$WORK" "$OUT"
: >"$LOG"
step() { echo "[build-kube-apiserver] $*" >&2; echo "=== $*" >>"$LOG"; }
fail() {
  echo "[build-kube-apiserver] FAILED during: $CURRENT_STEP" >&2
  echo "[build-kube-apiserver] full log: $LOG (last lines below)" >&2
  tail -n 25 "$LOG" >&2
  exit 1
}
trap fail ERR
CURRENT_STEP="start"

CURRENT_STEP="Go 1.19 toolchain (Debian golang-1.19-go)"
step "$CURRENT_STEP"
GOROOT=/usr/lib/go-1.19
if [ ! -x "$GOROOT/bin/go" ]; then
  export DEBIAN_FRONTEND=noninteractive
  dpkg-query -W golang-1.19-go >/dev/null 2>&1 || apt-get update -qq >>"$LOG" 2>&1
  apt-get install -y -qq --no-install-recommends golang-1.19-go golang-1.19-src >>"$LOG" 2>&1
fi

CURRENT_STEP="kubernetes source package $SRCVER (apt-get source, private APT_CONFIG)"
step "$CURRENT_STEP"
SRC=$WORK/src
if [ ! -d "$SRC/cmd/kube-apiserver" ]; then
  APTDIR=$WORK/apt
  mkdir -p "$APTDIR/lists/partial" "$APTDIR/archives/partial" "$WORK/dl"
  printf 'deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bookworm main\ndeb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian-security bookworm-security main\n' >"$APTDIR/sources.list"
  cat >"$APTDIR/apt.conf" <<CONF
Dir::Etc::SourceList "$APTDIR/sources.list";
Dir::Etc::SourceParts "/nonexistent";
Dir::State::Lists "$APTDIR/lists";
Dir::Cache::Archives "$APTDIR/archives";
Dir::Cache "$APTDIR/cache";
CONF
  mkdir -p "$APTDIR/cache"
  APT_CONFIG=$APTDIR/apt.conf apt-get update -qq >>"$LOG" 2>&1
  (cd "$WORK/dl" && APT_CONFIG=$APTDIR/apt.conf apt-get source --download-only -qq "kubernetes=$SRCVER" >>"$LOG" 2>&1)
  rm -rf "$SRC.tmp" && mkdir -p "$SRC.tmp"
  tar -xzf "$WORK"/dl/kubernetes_*.orig.tar.gz -C "$SRC.tmp" --strip-components=1 >>"$LOG" 2>&1
  mv "$SRC.tmp" "$SRC"
fi

CURRENT_STEP="vendored modern-go/reflect2 replaced by Debian's 1.0.2"
step "$CURRENT_STEP"
R2=$SRC/vendor/github.com/modern-go/reflect2
if [ ! -f "$R2/.liqo-replaced" ]; then
  (cd "$WORK/dl" && apt-get download -qq golang-github-modern-go-reflect2-dev >>"$LOG" 2>&1)
  rm -rf "$WORK/reflect2" && mkdir -p "$WORK/reflect2"
  dpkg-deb -x "$WORK"/dl/golang-github-modern-go-reflect2-dev_*.deb "$WORK/reflect2"
  rm -rf "$R2" && cp -r "$WORK/reflect2/usr/share/gocode/src/github.com/modern-go/reflect2" "$R2"
  rm -f "$R2/go.mod" "$R2/go.sum"
  touch "$R2/.liqo-replaced"
fi

export GOROOT PATH=$GOROOT/bin:$PATH GOPATH=$WORK/gopath GO111MODULE=off CGO_ENABLED=0 GOFLAGS=
export GOCACHE=$WORK/gocache
mkdir -p "$GOPATH/src/k8s.io"
ln -sfn "$SRC" "$GOPATH/src/k8s.io/kubernetes"
cd "$GOPATH/src/k8s.io/kubernetes"

CURRENT_STEP="openapi-gen and pkg/generated/openapi/zz_generated.openapi.go"
step "$CURRENT_STEP"
if [ ! -f pkg/generated/openapi/zz_generated.openapi.go ]; then
  go build -o "$WORK/openapi-gen" ./vendor/k8s.io/kube-openapi/cmd/openapi-gen >>"$LOG" 2>&1
  pkgs=$(grep -rl --include='*.go' '+k8s:openapi-gen=' pkg staging/src/k8s.io vendor/k8s.io 2>/dev/null \
    | grep -v -e 'k8s.io/code-generator' -e 'sample-apiserver' \
    | xargs -n1 dirname | sort -u \
    | sed 's#^staging/src/##; s#^vendor/##; s#^pkg/#k8s.io/kubernetes/pkg/#' | sort -u | paste -sd, -)
  "$WORK/openapi-gen" --input-dirs "$pkgs" --output-package k8s.io/kubernetes/pkg/generated/openapi \
    -O zz_generated.openapi --go-header-file vendor/k8s.io/code-generator/hack/boilerplate.go.txt \
    --output-base "$GOPATH/src" >>"$LOG" 2>&1
fi

V=k8s.io/kubernetes/vendor/k8s.io/component-base/version
LDF="-s -w -X $V.gitVersion=$VERSION -X $V.gitMajor=1 -X $V.gitMinor=20 -X $V.gitTreeState=clean"
for c in $(missing_bins); do
  CURRENT_STEP="go build ./cmd/$c"
  step "$CURRENT_STEP (all six: ~8 min on 2 cores)"
  go build -ldflags "$LDF" -o "$OUT/$c.tmp" "./cmd/$c" >>"$LOG" 2>&1
  mv "$OUT/$c.tmp" "$OUT/$c"
done
trap - ERR
step "done: $OUT"
echo "$OUT"
