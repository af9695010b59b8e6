"""Suite-wide pytest settings: markers per group and a closing summary of skips by reason."""
import collections
import os
import sys
import time

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


def process_reaped(pid: int, timeout: float = 10.0) -> bool:
    """True once `pid` no longer exists. A stopped daemon (double-forked, so PID 1 or a subreaper is its parent)
    is a zombie until that reaper collects it, which takes a second or more on some machines: the zombie holds
    nothing, but the test waits for it to be gone all the same."""
    deadline = time.monotonic() + timeout
    while os.path.exists(f"/proc/{pid}"):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True
