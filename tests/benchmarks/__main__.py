"""`make bench`: runs every tests/benchmarks/bench_*.py module's run() in order and prints its figures.

Each run() prints measured figures, and ratios against a baseline measured in the same run. Targets are
printed next to the figure (met / MISSED); they never fail the run: benchmarks are not tests.
"""
import importlib
import os
import pkgutil
import sys
import time
import traceback


def main(argv):
    wanted = set(argv[1:])
    here = os.path.dirname(os.path.abspath(__file__))
    mods = sorted(m.name for m in pkgutil.iter_modules([here]) if m.name.startswith("bench_"))
    failed = 0
    for name in mods:
        if wanted and name.removeprefix("bench_") not in wanted and name not in wanted:
            continue
        print(f"\n=== {name}", flush=True)
        t0 = time.monotonic()
        try:
            importlib.import_module(f"tests.benchmarks.{name}").run()
        except Exception:  # a broken benchmark is reported, the others still run
            failed += 1
            traceback.print_exc()
        print(f"--- {name}: {time.monotonic() - t0:.1f} s", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
