#!/usr/bin/env bash
# Line coverage of plugins/ and controller/ over the suite, one row per package (directory).
#   bash hack/coverage.sh [group...]          runs hack/run-tests.sh for each group (default: all), then reports
#   bash hack/coverage.sh --report            reports again from the data of the last run (build/coverage)
#   bash hack/coverage.sh --compare OLD NEW   compares two coverage.json: exits 1 if a package lost covered lines
#                                             (line by line: meant for a change to the suite, the code unchanged)
# Writes build/reports/coverage.txt (the table, also printed) and build/reports/coverage.json (per package and per
# file, with the missed lines: what --compare reads). Exits with the tests' status; the report is written anyway.
#
# How each kind of process is measured (settings: hack/coverage.ini):
# - Every Python started from this venv with COVERAGE_PROCESS_START set measures itself from its first line: the
#   a1_coverage.pth that coverage's wheel puts in site-packages calls coverage.process_startup(), which reads that
#   variable (unset, as in `make test`, the .pth does one os.getenv and nothing else). That is pytest and its xdist
#   workers, ansible-playbook / ansible / molecule, AnsiballZ module runs (the zips' paths are mapped back by
#   [paths]), `python -m controller`, the warm runner's zygote, spawned peer-health daemons.
# - Forked children (Ansible's workers, in-process module runs forked by plugin_utils/speed/netns_fork.py, the zygote's
#   playbook runs, double-forked daemons) inherit the running tracer; os._exit is patched to save first.
# - ansible-core's own AnsiballZ coverage extension (_ANSIBLE_ANSIBALLZ_COVERAGE_CONFIG, what ansible-test sets)
#   is left off: the .pth already measures the module process, the extension would start a second collector in
#   it, and it fails every module run on an interpreter without coverage instead of leaving it unmeasured.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PY=$ROOT/.venv/bin/python
DATA=$ROOT/build/coverage
REPORTS=$ROOT/build/reports

if [ "${1:-}" = "--compare" ]; then
  [ $# -eq 3 ] || { echo "usage: $0 --compare OLD.json NEW.json"; exit 2; }
  exec "${PY}" - "$2" "$3" <<'PY'
import json, sys
old, new = (json.load(open(p)) for p in sys.argv[1:3])
lost = 0
print("%-26s %8s %8s %7s %7s %8s" % ("package", "old miss", "new miss", "old %", "new %", "lost"))
for pkg in sorted(set(old["packages"]) | set(new["packages"])):
    o, n = old["packages"].get(pkg), new["packages"].get(pkg)
    # lines covered before and missed now, file by file (statements that no longer exist do not count)
    gone = 0
    for path, f in old["files"].items():
        if f["package"] != pkg or path not in new["files"]:
            continue
        was = set(f["executed_lines"])
        gone += len(was & set(new["files"][path]["missing_lines"]))
    if n is None:
        gone = o["statements"] - o["missed"]
    lost += gone
    fmt = lambda p, k: "-" if p is None else str(p[k])
    print("%-26s %8s %8s %7s %7s %8d%s" % (pkg, fmt(o, "missed"), fmt(n, "missed"), fmt(o, "percent"),
                                           fmt(n, "percent"), gone, "  LOST" if gone else ""))
print("covered lines lost: %d" % lost)
sys.exit(1 if lost else 0)
PY
fi

[ -x "$PY" ] || { echo "no venv at .venv: run make setup (or make coverage)"; exit 2; }

# coverage at the version pinned in requirements-test.txt (make's venv step installs it; this serves a venv made
# before the pin, and a direct run of this script)
want=$(sed -n 's/^coverage==\([^ ;#]*\).*/\1/p' requirements-test.txt)
have=$("$PY" -c 'import coverage; print(coverage.__version__)' 2>/dev/null)
if [ -n "$want" ] && [ "$have" != "$want" ]; then
  "$PY" -m pip install -q --disable-pip-version-check "coverage==$want" || exit 2
fi
# The start-up hook. coverage's wheel ships one (a1_coverage.pth); a copy of ours only where it is missing.
site=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
if ! grep -qs "process_startup" "$site"/*.pth; then
  echo 'import os; os.environ.get("COVERAGE_PROCESS_START") and __import__("coverage").process_startup()' \
    > "$site/a1_liqo_fabric_coverage.pth"
fi

report() {  # combine, then the table and the JSON (the run's facts from build/coverage/run.json)
  # the reporting Python must not measure itself
  env -u COVERAGE_PROCESS_START "$PY" - "$ROOT" "$DATA" "$REPORTS" <<'PY'
import collections, glob, json, os, subprocess, sys, time
import coverage
from coverage.data import CoverageData

root, data_dir, reports = sys.argv[1:]
run = json.load(open(os.path.join(data_dir, "run.json"), encoding="utf-8"))
wall, status, groups = run["wall_seconds"], run["test_status"], run["groups"]
config = os.path.join(data_dir, "coverage.ini")
t0 = time.monotonic()
COPY = "/ansible_collections/liqo/fabric/"
SPEED_COPY = "/site-packages/liqo_fabric_speed/"   # the venv's copy of plugin_utils/speed's start-up part
PAYLOAD, TREE, OTHER = "AnsiballZ payload", "work tree", "other copy"  # other: molecule's install, ...


def where(path):
    """(origin, path relative to the work tree) of a measured path, before combining maps it."""
    if path.startswith(root + os.sep):
        return TREE, path[len(root) + 1:]
    if COPY in path:
        return (PAYLOAD if ".zip" + os.sep in path else OTHER), path.split(COPY, 1)[1]
    if SPEED_COPY in path:
        return OTHER, "plugins/plugin_utils/speed/" + path.split(SPEED_COPY, 1)[1]
    return OTHER, None


# Which kind of process ran each line: read every data file once before combining maps the paths away.
parts = sorted(glob.glob(os.path.join(data_dir, ".coverage.*")))
seen = collections.defaultdict(lambda: collections.defaultdict(set))  # rel -> origin -> lines
unfinished = measuring = 0
unmapped = set()
for part in parts:
    d = CoverageData(part)
    try:
        d.read()
        measured = d.measured_files()
    except Exception:  # pylint: disable=broad-except  # a process killed while it wrote its data
        unfinished += 1
        os.unlink(part)
        continue
    measuring += bool(measured)
    for path in measured:
        origin, rel = where(path)
        if rel is None or not os.path.exists(os.path.join(root, rel)):
            # AnsiballZ adds empty package __init__.py files the tree does not have: nothing to map them to
            if not (origin == PAYLOAD and os.path.basename(path) == "__init__.py"):
                unmapped.add(path)
            continue
        seen[rel][origin].update(d.lines(path) or ())

cov = coverage.Coverage(config_file=config)
if glob.glob(os.path.join(data_dir, ".coverage.*")):
    cov.combine([data_dir], keep=False)
    cov.save()
else:
    cov.load()

files = {}
for top in ("plugins", "controller"):
    for dirpath, dirnames, filenames in os.walk(os.path.join(root, top)):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for name in sorted(n for n in filenames if n.endswith(".py")):
            path = os.path.join(dirpath, name)
            dummy, statements, dummy, missing, dummy = cov.analysis2(path)
            rel = os.path.relpath(path, root)
            executed = sorted(set(statements) - set(missing))
            files[rel] = {"package": os.path.dirname(rel), "statements": len(statements), "missed": len(missing),
                          "executed_lines": executed, "missing_lines": sorted(missing),
                          "executed_by_origin": {o: len(lines & set(executed))
                                                 for o, lines in sorted(seen.get(rel, {}).items())}}


def pct(covered, total):
    return round(100.0 * covered / total, 1) if total else 100.0


packages = collections.OrderedDict()
for rel, f in sorted(files.items()):
    f["percent"] = pct(f["statements"] - f["missed"], f["statements"])
    p = packages.setdefault(f["package"], {"files": 0, "files_run": 0, "statements": 0, "missed": 0,
                                           "executed_by_origin": collections.Counter()})
    p["files"] += 1
    p["files_run"] += bool(f["executed_lines"])
    p["statements"] += f["statements"]
    p["missed"] += f["missed"]
    p["executed_by_origin"].update(f["executed_by_origin"])
total = {k: sum(p[k] for p in packages.values()) for k in ("files", "files_run", "statements", "missed")}
for p in list(packages.values()) + [total]:
    p["percent"] = pct(p["statements"] - p["missed"], p["statements"])

not_measured = [
    "processes inside containers: the real-node labs' pods run the project's image (its controller and node "
    "agents); coverage cannot reach into them",
    "the venv of tests/e2e/test_built_collection.py: the README's requirements only (the test checks it), "
    "no coverage there",
    "ansible-test sanity: its tests run in environments of its own, which drop these settings",
    "the warm runner's client in its real runs: a copy of plugins/plugin_utils/speed/warm_client.py run as `python -IS` (no "
    "site, so no start-up hook); only the unit tests that import it count",
    "a process killed with SIGKILL (tests do that on purpose), or still running when the suite ended: its data "
    "is written at exit",
]
commit = subprocess.run(["git", "-C", root, "rev-parse", "HEAD"], capture_output=True, text=True,
                        check=False).stdout.strip()

rows = list(packages.items()) + [("TOTAL", total)]
lines = ["line coverage of plugins/ and controller/ (coverage.py %s), groups: %s"
         % (coverage.__version__, " ".join(groups)), "",
         "%-24s %5s %5s %7s %7s %7s   %s" % ("package", "files", "run", "stmts", "miss", "cover",
                                           "run in module payloads")]
for name, p in rows:
    if name == "TOTAL":
        lines.append("-" * 86)
    payload = p.get("executed_by_origin", {}).get(PAYLOAD) if name != "TOTAL" else \
        sum(q["executed_by_origin"].get(PAYLOAD, 0) for q in packages.values())
    lines.append("%-24s %5d %5d %7d %7d %6.1f%%   %s" % (name, p["files"], p["files_run"], p["statements"],
                                                       p["missed"], p["percent"], payload or "-"))
lines += ["",
          "run: files with a line executed. run in module payloads: of the executed statements, those executed by",
          "a module run from an AnsiballZ zip (/tmp/ansible_*_payload.zip/...). Lines marked pragma: no cover are",
          "not counted.",
          "tests: %s, wall time %d s (%.1f min), commit %s" % (
              "passed" if status == 0 else "FAILED (exit %s, see build/coverage/failed-tests.txt)" % status,
              wall, wall / 60.0, commit[:12] or "?"),
          "data: %d files from %d processes that ran this code%s" % (
              len(parts) - unfinished, measuring,
              ", %d more left unfinished by a process killed while writing" % unfinished if unfinished else "")]
if unmapped:
    lines.append("measured but not mapped onto the work tree (left out): %d, e.g. %s"
                 % (len(unmapped), ", ".join(sorted(unmapped)[:3])))
lines.append("not measured:")
lines += ["  - " + n for n in not_measured]
text = "\n".join(lines) + "\n"
print(text, end="")
os.makedirs(reports, exist_ok=True)
with open(os.path.join(reports, "coverage.txt"), "w", encoding="utf-8") as f:
    f.write(text)
with open(os.path.join(reports, "coverage.json"), "w", encoding="utf-8") as f:
    json.dump({"meta": {"coverage": coverage.__version__, "groups": groups, "commit": commit,
                        "test_status": status, "wall_seconds": wall, "data_files": len(parts) - unfinished,
                        "unfinished_data_files": unfinished, "measuring_processes": measuring,
                        "unmapped": sorted(unmapped), "not_measured": not_measured},
               "packages": packages, "total": total, "files": files}, f, indent=1)
print("(build/reports/coverage.txt, build/reports/coverage.json; combined in %.0f s)" % (time.monotonic() - t0))
PY
}

if [ "${1:-}" = "--report" ]; then
  [ -f "$DATA/run.json" ] || { echo "no coverage data: run $0 first"; exit 2; }
  report
  exit $?
fi

groups=("$@")
[ ${#groups[@]} -gt 0 ] || groups=(all)

# a fresh data directory and the settings with the work tree filled in
mkdir -p "$DATA" "$REPORTS"
find "$DATA" -maxdepth 1 \( -name '.coverage*' -o -name run.json \) -delete
sed "s|\${LIQO_FABRIC_COVERAGE_ROOT}|$ROOT|g" hack/coverage.ini > "$DATA/coverage.ini"
: > "$DATA/failed-tests.txt"

export COVERAGE_PROCESS_START=$DATA/coverage.ini
export LIQO_FABRIC_COVERAGE_ROOT=$ROOT
unset COVERAGE_FILE COVERAGE_RCFILE COVERAGE_PROCESS_CONFIG

t0=$(date +%s)
status=0
for g in "${groups[@]}"; do
  bash hack/run-tests.sh "$g"
  rc=$?
  [ $rc -eq 0 ] || status=$rc
  # run-tests.sh empties build/reports at its start: note this group's failed tests (junit) now
  env -u COVERAGE_PROCESS_START "$PY" - "$REPORTS" "$g" "$rc" >> "$DATA/failed-tests.txt" <<'PY'
import glob, sys, xml.etree.ElementTree as ET
reports, group, rc = sys.argv[1:]
print("group %s: exit status %s" % (group, rc))
for path in sorted(glob.glob(reports + "/*.xml")):
    for case in ET.parse(path).getroot().iter("testcase"):
        for kind in ("failure", "error"):
            if case.find(kind) is not None:
                print("  %s %s::%s" % (kind, case.get("classname"), case.get("name")))
PY
done
wall=$(( $(date +%s) - t0 ))
unset COVERAGE_PROCESS_START

# Measured processes still alive keep their data until they exit: name them rather than report them covered.
for env_file in /proc/[0-9]*/environ; do
  pid=${env_file#/proc/}; pid=${pid%/environ}
  [ "$pid" = $$ ] && continue
  if { tr '\0' '\n' < "$env_file"; } 2>/dev/null | grep -qxF "COVERAGE_PROCESS_START=$DATA/coverage.ini"; then
    echo "still running, not in the data: $pid $({ tr '\0' ' ' < "/proc/$pid/cmdline"; } 2>/dev/null | cut -c1-150)"
  fi
done | tee "$DATA/still-running.txt"

echo "=== failed tests"
grep -v "^group .*: exit status 0$" "$DATA/failed-tests.txt" || true
printf '{"wall_seconds": %d, "test_status": %d, "groups": [%s]}\n' "$wall" "$status" \
  "$(printf '"%s",' "${groups[@]}" | sed 's/,$//')" > "$DATA/run.json"
echo "=== coverage"
report
exit $status
