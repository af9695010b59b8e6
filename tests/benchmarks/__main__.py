"""`make bench`: runs every tests/benchmarks/bench_*.py module's run() in order and prints its figures.

Each run() prints measured figures, and ratios against a baseline measured in the same run. Targets are
printed next to the figure (met / MISSED); they never fail the run: benchmarks are not tests. At the end the
run's report, with every figure and everything else each bench printed, and the machine, is written (report_file.py) and its path printed.
"""
import datetime
import importlib
import pkgutil
import sys
import time
import traceback

from tests.benchmarks import report, report_file


def main(argv, package="tests.benchmarks"):
    """Runs the bench_* modules of `package` (another package's: the unit tests' made-up benches) named in
    argv[1:], all of them without names."""
    wanted = argv[1:]
    mods = sorted(m.name for m in pkgutil.iter_modules(importlib.import_module(package).__path__)
                  if m.name.startswith("bench_"))
    started, t_run = datetime.datetime.now(datetime.timezone.utc), time.monotonic()
    report.ROWS.clear()
    report.OUTPUT.clear()
    runs = []
    for name in mods:
        if wanted and name.removeprefix("bench_") not in wanted and name not in wanted:
            continue
        print(f"\n=== {name}", flush=True)
        report.begin(name)
        error = None
        t0 = time.monotonic()
        sys.stdout = capture = report.Capture(sys.stdout)
        try:
            importlib.import_module(f"{package}.{name}").run()
        except Exception as exc:  # a broken benchmark is reported, the others still run
            traceback.print_exc()
            # the last line of a long message (an inner run's stderr) is the one that says what broke
            message = str(exc).strip().splitlines()
            error = type(exc).__name__ + (f": {message[-1]}" if message else "")
        finally:
            sys.stdout = capture.inner
        report.keep_output(name, capture.text())
        runs.append(report_file.BenchRun(name, time.monotonic() - t0, error))
        print(f"--- {name}: {runs[-1].seconds:.1f} s", flush=True)
    path = report_file.write(started, time.monotonic() - t_run, wanted, runs, report.ROWS, report.OUTPUT)
    print(f"\nreport: {path}", flush=True)
    return 1 if any(r.error is not None for r in runs) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
