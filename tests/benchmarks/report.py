"""Uniform printing of benchmark figures, and the rows `make bench` writes into its report (report_file.py)."""
from typing import NamedTuple


class Row(NamedTuple):
    figure: str
    value: float
    unit: str
    target: str   # as printed after "target" ("< 0.5 s: met"), "" without one


# bench module name -> its figures and ratios in the order printed; __main__ calls begin() before each run(), so a
# figure belongs to the bench begun last. Empty when a bench module runs on its own: then figures are only printed.
ROWS: dict = {}


def begin(bench):
    """The figures printed from now on belong to `bench`."""
    ROWS[bench] = []


def _record(row):
    if ROWS:
        ROWS[next(reversed(ROWS))].append(row)


def figure(name, value, unit, target=None, lower_is_better=True):
    line = f"  {name:<58} {value:>12.3f} {unit}"
    verdict = ""
    if target is not None:
        ok = value <= target if lower_is_better else value >= target
        verdict = f"{'<' if lower_is_better else '>='} {target} {unit}: {'met' if ok else 'MISSED'}"
        line += f"   target {verdict}"
    print(line, flush=True)
    _record(Row(name, value, unit, verdict))


def ratio(name, ours, baseline, target=None, higher_is_better=False):
    r = ours / baseline if baseline else float("inf")
    line = f"  {name:<58} {r:>12.3f} x"
    verdict = ""
    if target is not None:
        ok = r >= target if higher_is_better else r <= target
        verdict = f"{'>=' if higher_is_better else '<='} {target}: {'met' if ok else 'MISSED'}"
        line += f"   target {verdict}"
    print(line, flush=True)
    _record(Row(name, r, "x", verdict))
    return r


# figures one benchmark leaves for a later one of the same `make bench` run (e.g. the in-cluster pod path, which
# bench_overlay compares with the agentless one)
MEASURED: dict = {}
