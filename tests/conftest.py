"""Suite-wide pytest settings: markers per group and a closing summary of skips by reason."""
import collections
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COLLECTIONS = os.path.join(ROOT, "build", "collections")  # `make collection` links this tree there
for _path in (ROOT, COLLECTIONS):
    if _path not in sys.path:
        sys.path.insert(0, _path)

_skips: collections.Counter = collections.Counter()


def pytest_runtest_logreport(report):
    if report.skipped:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        _skips[reason.removeprefix("Skipped: ")] += 1


def pytest_terminal_summary(terminalreporter):
    total = sum(_skips.values())
    terminalreporter.write_sep("-", f"skipped: {total}")
    for reason, n in _skips.most_common():
        terminalreporter.write_line(f"  {n} x {reason}")


def require_root():
    if os.geteuid() != 0:
        pytest.skip("needs root for network namespaces")
