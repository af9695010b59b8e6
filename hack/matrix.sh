#!/usr/bin/env bash
# The ansible-core matrix (`make matrix`): for each version, the contract of hack/run-tests.sh (lint, unit, sanity
# with that version's own ansible-test, connect/disconnect on a light lab and one controller reconcile) in a venv
# of that ansible-core. docs/ansible-versions.md says what it proves.
#   hack/matrix.sh [2.16 2.17 ...]    (default: every version below; LIQO_FABRIC_MATRIX="2.16 2.18" also chooses)
#   hack/matrix.sh --venv 2.17        only build (or find) that version's venv and print its path
# The suite's own ansible-core (requirements-dev.txt) runs in the project's .venv. The others get a venv under
# ~/.cache/liqo-fabric/venvs/core-<version>, built once and rebuilt when its digest changes: the digest of
# hack/matrix/core-<version>.txt (ansible-core, the `ansible` release bundling collections for it, ansible-lint),
# of the pins it shares with .venv (requirements-dev.txt and requirements-test.txt without those) and of the Python.
# A pins file may ask for another Python ("# python: 3.12": ansible-core 2.20 and later need it); without that
# Python the version is reported as not run, which fails nothing.
# Prints each version's result and wall time; exits non-zero if any version failed.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
CACHE=${LIQO_FABRIC_CACHE:-$HOME/.cache/liqo-fabric}/venvs
PYTHON=${PYTHON:-python3}
# the tools that depend on the ansible-core version come from hack/matrix/core-<version>.txt instead
PER_VERSION='^(ansible|ansible-core|ansible-lint|ansible-compat|molecule)==|^-r '

shared_pins() { grep -hvE "$PER_VERSION" requirements-dev.txt requirements-test.txt; }
dev_version() { sed -n 's/^ansible-core==\([0-9]*\.[0-9]*\).*/\1/p' requirements-dev.txt; }

python_for() {  # pins file: the interpreter its "# python: X.Y" line asks for ($PYTHON without one), or fails
  local want c
  want=$(sed -n 's/^# python: *\([0-9.]*\).*/\1/p' "$1")
  [ -n "$want" ] || { echo "$PYTHON"; return 0; }
  for c in "python$want" "$(pyenv root 2>/dev/null || echo /nonexistent)"/versions/"$want".*/bin/python"$want"; do
    if "$c" -c "import sys; sys.exit(sys.version_info[:2] != tuple(map(int, '$want'.split('.'))))" 2>/dev/null; then
      echo "$c"
      return 0
    fi
  done
  return 1
}

venv_for() {  # version: prints the venv's path, building it when missing or stale
  local ver=$1
  if [ "$ver" = "$(dev_version)" ]; then
    echo "$ROOT/.venv"
    return 0
  fi
  local pins=hack/matrix/core-$ver.txt
  [ -f "$pins" ] || { echo "no $pins: the matrix knows $(cd hack/matrix && ls core-*.txt | sed 's/core-//; s/.txt//' | tr '\n' ' ')" >&2; return 2; }
  local dir=$CACHE/core-$ver digest python
  python=$(python_for "$pins") || { echo "no Python $(sed -n 's/^# python: *//p' "$pins") here" >&2; return 3; }
  digest=$( { shared_pins; cat "$pins"; "$python" -VV; } | sha256sum | cut -c1-16)
  if [ "$(cat "$dir/.digest" 2>/dev/null)" != "$digest" ]; then
    mkdir -p "$CACHE"
    exec 8>"$CACHE/.core-$ver.lock"
    flock 8  # one build per version at a time, shared by every work tree
    if [ "$(cat "$dir/.digest" 2>/dev/null)" != "$digest" ]; then
      echo "[matrix] building the ansible-core $ver venv in $dir (once per digest)" >&2
      # built in place (a venv's scripts name their interpreter by path); the digest is written last, so a build
      # that stopped half-way is redone
      rm -rf "$dir" && "$python" -m venv "$dir" &&
        "$dir/bin/python" -m pip install -q --disable-pip-version-check -r <(shared_pins) -r "$pins" >&2 ||
        { echo "[matrix] the ansible-core $ver venv did not build" >&2; return 1; }
      echo "$digest" > "$dir/.digest"
    fi
    exec 8>&-
  fi
  echo "$dir"
}

if [ "${1:-}" = "--venv" ]; then
  venv_for "$2"
  exit $?
fi

ALL=$( { dev_version; ls hack/matrix | sed -n 's/^core-\(.*\)\.txt$/\1/p'; } | sort -u -t. -k1,1n -k2,2n)
VERSIONS=${*:-${LIQO_FABRIC_MATRIX:-$ALL}}
T0=$(date +%s)
declare -A RESULT TIME
rc=0
for ver in $VERSIONS; do
  t0=$(date +%s)
  echo "##### ansible-core $ver"
  venv=$(venv_for "$ver")
  case $? in
    0) ;;
    3) RESULT[$ver]="not run"; TIME[$ver]=0; continue ;;  # the Python it needs is not here (said above)
    *) RESULT[$ver]="no venv"; TIME[$ver]=$(($(date +%s) - t0)); rc=1; continue ;;
  esac
  echo "venv: $venv ($("$venv/bin/python" -c 'import sys, ansible.release as r; print("ansible-core", r.__version__, "on Python", sys.version.split()[0])'))"
  LIQO_FABRIC_VENV=$venv LIQO_FABRIC_BUILD=$ROOT/build/matrix/core-$ver bash hack/run-tests.sh contract
  if [ $? -eq 0 ]; then RESULT[$ver]=passed; else RESULT[$ver]=FAILED; rc=1; fi
  TIME[$ver]=$(($(date +%s) - t0))
done
echo "##### matrix"
for ver in $VERSIONS; do
  printf '  ansible-core %-5s %-8s %5d s  (build/matrix/core-%s/reports)\n' "$ver" "${RESULT[$ver]}" "${TIME[$ver]}" "$ver"
done
echo "  total $(($(date +%s) - T0)) s"
exit $rc
