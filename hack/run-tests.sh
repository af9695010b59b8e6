#!/usr/bin/env bash
# Runs one group of the suite, or all of them: lint, unit, integration, e2e, sanity, molecule
# (e2e-plain: the e2e group with LIQO_FABRIC_SPEED_PATHS=off, not part of `all`).
# Prints a summary line per group, the skips by reason (pytest), and exits non-zero if any group failed.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
VENV=$ROOT/.venv
export PATH=$VENV/bin:$PATH
export ANSIBLE_HOME=$ROOT/build/ansible-home
export ANSIBLE_COLLECTIONS_PATH=$ROOT/build/collections
export PYTHONPATH=$ROOT${PYTHONPATH:+:$PYTHONPATH}
export PYTHONDONTWRITEBYTECODE=1
mkdir -p build/reports && rm -f build/reports/*.xml build/reports/*.count
declare -A RESULT
# The integration and e2e groups in parallel workers (pytest-xdist): their tests wait on handshakes, pods,
# controllers and timeouts about half of the time (the CPUs are 40-60 % idle in a serial run), so two workers fit
# two CPUs. A file stays on one worker (its module-scoped fixtures are made once), handed out in collection order
# (tests/e2e/conftest.py puts the longest first). LIQO_FABRIC_TEST_WORKERS=0 runs them in this process, one by one.
WORKERS=${LIQO_FABRIC_TEST_WORKERS:-2}
PARALLEL=()
[ "$WORKERS" -gt 0 ] && PARALLEL=(-n "$WORKERS" --dist loadfile --no-loadscope-reorder)

pytest_group() {  # name, paths...
  local name=$1; shift
  echo "=== $name tests"
  pytest -q -p no:cacheprovider --durations=8 --junitxml="build/reports/$name.xml" "$@"
  local rc=$?
  [ $rc -eq 5 ] && rc=0  # "no tests collected" is not a failure of a group
  RESULT[$name]=$rc
}

sanity() {
  echo "=== changelog fragments (antsibull-changelog lint)"
  antsibull-changelog lint && RESULT[changelog]=0 || RESULT[changelog]=1
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
  local dst=$ROOT/build/sanity/ansible_collections/liqo/fabric
  rm -rf "$ROOT/build/sanity" && mkdir -p "$dst"
  git ls-files -z --cached --others --exclude-standard | xargs -0 -I{} cp --parents {} "$dst"/ 2>/dev/null
  (cd "$dst" && git init -q && git add -A >/dev/null && \
     ansible-test sanity --python 3.11 --requirements --color no >"$ROOT/build/reports/sanity.txt" 2>&1)
  local rc=$?
  grep -E "^(ERROR|FATAL)|^Running sanity test" "$ROOT/build/reports/sanity.txt" | sed 's/^/  /'
  echo "  (full output: build/reports/sanity.txt)"
  local total failed
  total=$(grep -c "^Running sanity test" "$ROOT/build/reports/sanity.txt")
  failed=$(sed -n 's/^FATAL: The \([0-9]*\) sanity test(s) listed below.*/\1/p' "$ROOT/build/reports/sanity.txt")
  echo "$((total - ${failed:-0})) ${failed:-0} 0" > build/reports/sanity.count
  RESULT[sanity]=$rc
}

# molecule (ansible-compat) installs a copy of this collection under $ANSIBLE_HOME/collections, which then comes
# before build/collections for ansible-lint: a copy left by an earlier run would be linted instead of this tree.
drop_collection_copy() {
  rm -rf "$ANSIBLE_HOME/collections/ansible_collections/liqo/fabric"
}

lint() {
  echo "=== ansible-lint (production profile, .ansible-lint) over roles/ and playbooks/"
  drop_collection_copy
  ansible-lint --nocolor roles playbooks >"$ROOT/build/reports/lint.txt" 2>&1
  local rc=$?
  grep -vE "^\s*$|^WARNING  Directory expansion" "$ROOT/build/reports/lint.txt" | tail -40 | sed 's/^/  /'
  [ $rc -eq 0 ] && echo "1 0 0" > build/reports/lint.count || echo "0 1 0" > build/reports/lint.count
  RESULT[lint]=$rc
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
  echo "$ok $bad 0" > build/reports/molecule.count
  RESULT[molecule]=$rc
}

group=${1:-all}
case $group in
  lint) lint ;;
  unit) pytest_group unit tests/unit ;;
  integration) pytest_group integration "${PARALLEL[@]}" tests/integration ;;
  e2e) pytest_group e2e "${PARALLEL[@]}" tests/e2e ;;
  # the e2e group with the speed paths on private ansible-core internals off (plugins/plugin_utils/speed_paths.py)
  e2e-plain) LIQO_FABRIC_SPEED_PATHS=off pytest_group e2e-plain "${PARALLEL[@]}" tests/e2e ;;
  sanity) sanity ;;
  molecule) molecule_group ;;
  all)
    lint
    pytest_group unit tests/unit
    pytest_group integration "${PARALLEL[@]}" tests/integration
    pytest_group e2e "${PARALLEL[@]}" tests/e2e
    molecule_group
    sanity
    ;;
  *) echo "unknown group $group (lint|unit|integration|e2e|e2e-plain|sanity|molecule|all)"; exit 2 ;;
esac

echo "=== summary"
fail=0
for k in "${!RESULT[@]}"; do
  if [ "${RESULT[$k]}" -eq 0 ]; then echo "  $k: passed"; else echo "  $k: FAILED"; fail=1; fi
done
python - <<'PY'
import glob, xml.etree.ElementTree as ET
t = f = s = e = 0
for path in glob.glob("build/reports/*.xml"):
    for suite in ET.parse(path).getroot().iter("testsuite"):
        t += int(suite.get("tests", 0)); f += int(suite.get("failures", 0))
        s += int(suite.get("skipped", 0)); e += int(suite.get("errors", 0))
p = t - f - s - e
f += e
for path in glob.glob("build/reports/*.count"):  # molecule scenarios and sanity tests
    a, b, c = (int(x) for x in open(path).read().split())
    p, f, s = p + a, f + b, s + c
print(f"{p} passed, {f} failed, {s} skipped")
PY
exit $fail
