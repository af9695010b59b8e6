#!/usr/bin/env bash
# Runs one layer of the suite, or all of them (CONTRIBUTING.md lists the layers and their times):
#   fast         lint, unit and sanity side by side: no root, no lab
#   lint | unit | sanity
#   integration  root, throwaway network namespaces, real kernel dataplane
#   e2e          every e2e module in one pool of workers: the light labs, the real-node labs and the
#                speed-paths-off contract (tests/e2e/plain)
#   e2e-light | e2e-real | plain   the same three parts alone
#   molecule     the roles' scenarios
#   all          everything above (`make test`, CI): the fast layer beside integration, then e2e beside molecule
#   contract     lint, unit, sanity and the e2e contract of one ansible-core (hack/matrix.sh runs it per version)
# LIQO_FABRIC_VENV (default .venv) is the virtualenv whose ansible-core and tools run; LIQO_FABRIC_BUILD (default
# build) holds the reports, the sanity copy and ANSIBLE_HOME, so two venvs' runs do not share them.
# Prints each group's wall time, the 15 slowest tests and the skips by reason, and exits non-zero if any group
# failed. The last line is the total: "N passed, N failed, N skipped".
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
VENV=${LIQO_FABRIC_VENV:-$ROOT/.venv}
BUILD=${LIQO_FABRIC_BUILD:-$ROOT/build}
export PATH=$VENV/bin:$PATH
export ANSIBLE_HOME=$BUILD/ansible-home
export ANSIBLE_COLLECTIONS_PATH=$ROOT/build/collections
export PYTHONPATH=$ROOT${PYTHONPATH:+:$PYTHONPATH}
export PYTHONDONTWRITEBYTECODE=1
REPORTS=$BUILD/reports
mkdir -p "$REPORTS" && rm -f "$REPORTS"/*.xml "$REPORTS"/*.count "$REPORTS"/*.rc "$REPORTS"/*.time "$REPORTS"/*.log
# The integration and e2e groups in parallel workers (pytest-xdist): their tests wait on handshakes, pods,
# controllers and timeouts much of the time, so two workers fit two CPUs. A file stays on one worker (its
# module-scoped fixtures are made once), handed out in collection order (tests/e2e/conftest.py puts the longest
# first). LIQO_FABRIC_TEST_WORKERS=0 runs them in this process, one by one.
WORKERS=${LIQO_FABRIC_TEST_WORKERS:-2}
PARALLEL=()
[ "$WORKERS" -gt 0 ] && PARALLEL=(-n "$WORKERS" --dist loadfile --no-loadscope-reorder)
# the real-node (kubelet) modules: containerd, real pods, the project's image
KUBELET_MODULES=(tests/e2e/test_in_cluster.py tests/e2e/test_rolling_upgrade.py tests/e2e/test_real_lab.py
                 tests/e2e/test_three_clusters.py)

pytest_run() {  # name, pytest arguments...: one pytest group, its junit report beside the others
  local name=$1; shift
  pytest -q -p no:cacheprovider --durations=8 --junitxml="$REPORTS/$name.xml" "$@"
  local rc=$?
  [ $rc -eq 5 ] && rc=0  # "no tests collected" is not a failure of a group
  return $rc
}

sanity() {
  echo "=== changelog fragments (antsibull-changelog lint)"
  local rc=0
  antsibull-changelog lint || rc=1
  echo "=== ansible-test sanity"
  local ver
  ver=$("$VENV/bin/python" - <<'PY'
import re, ansible_test, os
src = open(os.path.join(os.path.dirname(ansible_test.__file__), "_internal", "python_requirements.py")).read()
print(re.search(r"pip='([0-9.]+)'", src).group(1))
PY
)
  mkdir -p ~/.ansible/test/cache
  cp hack/get_pip_shim.py ~/.ansible/test/cache/get_pip_${ver//./_}.py
  # ansible-test wants the tree at .../ansible_collections/liqo/fabric inside a git work tree: test a
  # copy of the tracked and untracked-but-not-ignored files there.
  local dst=$BUILD/sanity/ansible_collections/liqo/fabric
  rm -rf "$BUILD/sanity" && mkdir -p "$dst"
  git ls-files -z --cached --others --exclude-standard | xargs -0 -I{} cp --parents {} "$dst"/ 2>/dev/null
  local skip=() pyver
  pyver=$("$VENV/bin/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')  # the venv's own Python
  # ansible-test 2.16 still checks the Python 2 boilerplate of every file (2.17 dropped those tests with Python 2
  # module support); the collection runs on Python 3 only
  case $(ansible-test --version) in
    *" 2.16."*) skip=(--skip-test future-import-boilerplate --skip-test metaclass-boilerplate) ;;
  esac
  (cd "$dst" && git init -q && git add -A >/dev/null && \
     ansible-test sanity --python "$pyver" --requirements --color no "${skip[@]}" >"$REPORTS/sanity.txt" 2>&1) || rc=1
  grep -E "^(ERROR|FATAL)|^Running sanity test" "$REPORTS/sanity.txt" | sed 's/^/  /'
  echo "  (full output: ${REPORTS#$ROOT/}/sanity.txt)"
  local total failed
  total=$(grep -c "^Running sanity test" "$REPORTS/sanity.txt")
  failed=$(sed -n 's/^FATAL: The \([0-9]*\) sanity test(s) listed below.*/\1/p' "$REPORTS/sanity.txt")
  echo "$((total - ${failed:-0})) ${failed:-0} 0" > "$REPORTS/sanity.count"
  return $rc
}

# A copy of this collection under $ANSIBLE_HOME/collections (molecule's prerun made one before molecule.yml turned
# it off) comes before build/collections for ansible-lint: it would be linted instead of this tree.
drop_collection_copy() {
  rm -rf "$ANSIBLE_HOME/collections/ansible_collections/liqo/fabric"
}

lint() {
  echo "=== ansible-lint (production profile, .ansible-lint) over roles/ and playbooks/"
  drop_collection_copy
  ansible-lint --nocolor roles playbooks >"$REPORTS/lint.txt" 2>&1
  local rc=$?
  grep -vE "^\s*$|^WARNING  Directory expansion" "$REPORTS/lint.txt" | tail -40 | sed 's/^/  /'
  [ $rc -eq 0 ] && echo "1 0 0" > "$REPORTS/lint.count" || echo "0 1 0" > "$REPORTS/lint.count"
  return $rc
}

molecule_group() {
  echo "=== molecule scenarios"
  local rc=0 s ok=0 bad=0
  export PY_COLORS=0 ANSIBLE_FORCE_COLOR=0 NO_COLOR=1
  for s in molecule/*/molecule.yml; do
    s=$(basename "$(dirname "$s")")
    echo "--- molecule test -s $s"
    # a fresh lab per scenario, so two runs (or a crashed one) never collide
    LFAB_MOLECULE_LAB_ID=$(od -An -N2 -tx1 /dev/urandom | tr -d ' \n') molecule test -s "$s" && ok=$((ok + 1)) || { rc=1; bad=$((bad + 1)); }
  done
  drop_collection_copy
  echo "$ok $bad 0" > "$REPORTS/molecule.count"
  return $rc
}

unit() { echo "=== unit tests"; pytest_run unit tests/unit; }
integration() { echo "=== integration tests"; pytest_run integration "${PARALLEL[@]}" tests/integration; }
e2e() { echo "=== e2e tests (light labs, real-node labs, speed-paths-off contract)"; pytest_run e2e "${PARALLEL[@]}" tests/e2e; }
e2e_light() {
  echo "=== e2e tests on light labs"
  pytest_run e2e-light "${PARALLEL[@]}" tests/e2e --ignore=tests/e2e/plain "${KUBELET_MODULES[@]/#/--ignore=}"
}
e2e_real() { echo "=== e2e tests on real-node labs"; pytest_run e2e-real "${PARALLEL[@]}" "${KUBELET_MODULES[@]}"; }
plain() { echo "=== the speed-paths-off contract (tests/e2e/plain)"; pytest_run plain "${PARALLEL[@]}" tests/e2e/plain; }
# what every ansible-core of the matrix runs beside lint, unit and sanity: connect, traffic, rerun and disconnect
# on a light lab, and one controller reconcile (docs/ansible-versions.md)
CONTRACT=(tests/e2e/plain/test_gateway.py tests/e2e/plain/test_controller.py)
contract_e2e() { echo "=== e2e contract (${CONTRACT[*]})"; pytest_run contract "${PARALLEL[@]}" "${CONTRACT[@]}"; }

timed() {  # name, function: runs it, records its exit code and wall time
  local name=$1 fn=$2 t0 rc
  t0=$(date +%s%N)
  "$fn"
  rc=$?
  echo "$rc" > "$REPORTS/$name.rc"
  echo "$(( ($(date +%s%N) - t0) / 1000000 ))" > "$REPORTS/$name.time"  # milliseconds
  return $rc
}

side_by_side() {  # name:function ...: runs them at once, each into its own log, then prints the logs in order
  local spec pids=()
  for spec in "$@"; do
    timed "${spec%%:*}" "${spec#*:}" >"$REPORTS/${spec%%:*}.log" 2>&1 &
    pids+=($!)
  done
  wait "${pids[@]}"
  for spec in "$@"; do cat "$REPORTS/${spec%%:*}.log"; done
}

T0=$(date +%s%N)
group=${1:-all}
case $group in
  lint|unit|sanity|integration|e2e|plain) timed "$group" "$group" ;;
  e2e-light) timed e2e-light e2e_light ;;
  e2e-real) timed e2e-real e2e_real ;;
  molecule) timed molecule molecule_group ;;
  fast) side_by_side lint:lint unit:unit sanity:sanity ;;
  contract) side_by_side lint:lint unit:unit sanity:sanity contract:contract_e2e ;;
  all)
    # two stages, each a few groups side by side: the lab groups wait on handshakes, pods and controllers much of
    # the time, which the CPU-bound ones (lint, unit, sanity) and molecule's sequential runs fill
    side_by_side lint:lint unit:unit sanity:sanity integration:integration
    side_by_side e2e:e2e molecule:molecule_group
    ;;
  *) echo "unknown group $group (fast|lint|unit|sanity|integration|e2e|e2e-light|e2e-real|plain|molecule|contract|all)"; exit 2 ;;
esac

echo "=== summary"
python "$ROOT/hack/test_summary.py" "$REPORTS" "$(( ($(date +%s%N) - T0) / 1000000 ))"
