"""The closing summary of hack/run-tests.sh: each group's result and wall time, the slowest tests, the total.

Reads build/reports: <group>.rc and <group>.time (milliseconds) written by every group, <group>.xml (pytest's
junit report) and <group>.count ("passed failed skipped", for molecule scenarios, sanity tests and lint). Exits
non-zero when any group failed. The last line is the total, "N passed, N failed, N skipped".
"""
import glob
import os
import sys
import xml.etree.ElementTree as ET

SLOWEST = 15


def groups(reports: str) -> list:
    """(name, exit code, seconds) of every group that ran, slowest first."""
    out = []
    for path in glob.glob(os.path.join(reports, "*.rc")):
        name = os.path.basename(path)[:-3]
        with open(path, encoding="utf-8") as f:
            rc = int(f.read().strip() or 1)
        try:
            with open(os.path.join(reports, name + ".time"), encoding="utf-8") as f:
                seconds = int(f.read().strip()) / 1000
        except (OSError, ValueError):
            seconds = float("nan")
        out.append((name, rc, seconds))
    return sorted(out, key=lambda g: -g[2])


def cases(reports: str) -> list:
    """(seconds, group, test id) of every test case of every junit report."""
    out = []
    for path in glob.glob(os.path.join(reports, "*.xml")):
        group = os.path.basename(path)[:-4]
        for case in ET.parse(path).getroot().iter("testcase"):
            test_id = f"{case.get('classname', '')}::{case.get('name')}"
            out.append((float(case.get("time", 0)), group, test_id))
    return out


def totals(reports: str) -> tuple:
    passed = failed = skipped = 0
    for path in glob.glob(os.path.join(reports, "*.xml")):
        for suite in ET.parse(path).getroot().iter("testsuite"):
            tests, errors = int(suite.get("tests", 0)), int(suite.get("errors", 0))
            fails, skips = int(suite.get("failures", 0)), int(suite.get("skipped", 0))
            passed += tests - fails - skips - errors
            failed += fails + errors
            skipped += skips
    for path in glob.glob(os.path.join(reports, "*.count")):  # molecule scenarios, sanity tests, lint
        with open(path, encoding="utf-8") as f:
            a, b, c = (int(x) for x in f.read().split())
        passed, failed, skipped = passed + a, failed + b, skipped + c
    return passed, failed, skipped


def main(argv) -> int:
    reports = argv[1]
    wall = int(argv[2]) / 1000 if len(argv) > 2 else None
    ran = groups(reports)
    print("  group            result   wall time")
    for name, rc, seconds in ran:
        print(f"  {name:<16} {'passed' if rc == 0 else 'FAILED':<8} {seconds:7.1f} s  ({seconds / 60:.1f} min)")
    if wall is not None:
        print(f"  {'in all':<16} {'':<8} {wall:7.1f} s  ({wall / 60:.1f} min)")
    slow = sorted(cases(reports), reverse=True)[:SLOWEST]
    if slow:
        print(f"=== the {len(slow)} slowest tests (a module's first test carries its lab's set-up)")
        for seconds, group, test_id in slow:
            print(f"  {seconds:7.1f} s  {group:<12} {test_id}")
    passed, failed, skipped = totals(reports)
    print(f"{passed} passed, {failed} failed, {skipped} skipped")
    return 1 if any(group[1] != 0 for group in ran) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
