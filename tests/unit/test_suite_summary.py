"""hack/test_summary.py: the closing lines of every `make test` (group times, the slowest tests, the total)."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SUMMARY = os.path.join(ROOT, "hack", "test_summary.py")

JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" errors="{errors}" failures="{failures}" skipped="{skipped}" tests="{tests}">
{cases}
</testsuite></testsuites>"""


def write_group(reports, name, rc, millis, cases=None, count=None, failures=0, skipped=0):
    (reports / f"{name}.rc").write_text(f"{rc}\n")
    (reports / f"{name}.time").write_text(f"{millis}\n")
    if cases is not None:
        body = "\n".join(f'<testcase classname="tests.{name}.test_m" name="{n}" time="{t}"/>' for n, t in cases)
        (reports / f"{name}.xml").write_text(JUNIT.format(errors=0, failures=failures, skipped=skipped,
                                                          tests=len(cases), cases=body))
    if count is not None:
        (reports / f"{name}.count").write_text(" ".join(str(x) for x in count))


def summary(reports, wall_ms="90000"):
    return subprocess.run([sys.executable, SUMMARY, str(reports), wall_ms], capture_output=True, text=True,
                          check=False)


def test_groups_slowest_first_the_slowest_tests_and_the_total_last(tmp_path):
    write_group(tmp_path, "unit", 0, 12500, cases=[(f"t{i}", i / 10) for i in range(20)])
    write_group(tmp_path, "e2e", 0, 61000, cases=[("slow_one", 40.0), ("other", 3.0)], skipped=1)
    write_group(tmp_path, "sanity", 0, 30000, count=(41, 0, 0))
    proc = summary(tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    groups = [line.split()[0] for line in lines[1:4]]
    assert groups == ["e2e", "sanity", "unit"]
    assert "61.0 s" in lines[1] and "passed" in lines[1]
    assert any(line.split()[:2] == ["in", "all"] and "90.0 s" in line for line in lines)
    slow = [line for line in lines if "::" in line]
    assert len(slow) == 15 and "tests.e2e.test_m::slow_one" in slow[0] and "40.0 s" in slow[0]
    # 20 unit + 1 e2e passed, 1 e2e skipped, 41 sanity tests: the last line, in the form CI reads
    assert lines[-1] == "62 passed, 0 failed, 1 skipped"


def test_a_failed_group_fails_the_summary_and_is_named(tmp_path):
    write_group(tmp_path, "unit", 0, 1000, cases=[("a", 0.1)])
    write_group(tmp_path, "molecule", 1, 2000, count=(3, 1, 0))
    proc = summary(tmp_path)
    assert proc.returncode == 1
    assert any(line.split()[:2] == ["molecule", "FAILED"] for line in proc.stdout.splitlines())
    assert proc.stdout.splitlines()[-1] == "4 passed, 1 failed, 0 skipped"
