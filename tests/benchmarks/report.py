"""Uniform printing of benchmark figures, and what `make bench` writes into its report (report_file.py): the rows of
the figures, and whatever else a bench prints (tables, text values)."""
import io
from typing import NamedTuple


class Row(NamedTuple):
    figure: str
    value: float
    unit: str
    target: str   # as printed after "target" ("< 0.5 s: met"), "" without one


# bench module name -> its figures and ratios in the order printed; __main__ calls begin() before each run(), so a
# figure belongs to the bench begun last. Empty when a bench module runs on its own: then figures are only printed.
ROWS: dict = {}
# bench module name -> the lines it printed besides its figure lines, in order (keep_output)
OUTPUT: dict = {}
_shown: set = set()    # the figure lines the bench begun last printed


def begin(bench):
    """The figures printed from now on belong to `bench`."""
    ROWS[bench] = []
    _shown.clear()


class Capture(io.TextIOBase):
    """A stdout that passes everything on to `inner` and keeps a copy."""

    def __init__(self, inner):
        super().__init__()
        self.inner, self.parts = inner, []

    def write(self, s):
        self.parts.append(s)
        return self.inner.write(s)

    def flush(self):
        self.inner.flush()

    def text(self):
        return "".join(self.parts)


def keep_output(bench, text):
    """Records the non-empty lines of `text` (what `bench` printed) that are not figure lines."""
    OUTPUT[bench] = [line for line in text.splitlines() if line.strip() and line not in _shown]


def _record(row):
    if ROWS:
        ROWS[next(reversed(ROWS))].append(row)


def _show(name, value, unit, target, ok, comparison, target_unit=""):
    """Prints one figure line (with its target and verdict when it has one) and records its row."""
    line = f"  {name:<58} {value:>12.3f} {unit}"
    verdict = ""
    if target is not None:
        verdict = f"{comparison} {target}{target_unit}: {'met' if ok(value) else 'MISSED'}"
        line += f"   target {verdict}"
    print(line, flush=True)
    _shown.add(line)
    _record(Row(name, value, unit, verdict))


def figure(name, value, unit, target=None, lower_is_better=True):
    _show(name, value, unit, target, lambda v: v <= target if lower_is_better else v >= target,
          "<" if lower_is_better else ">=", f" {unit}")


def ratio(name, ours, baseline, target=None, higher_is_better=False):
    r = ours / baseline if baseline else float("inf")
    _show(name, r, "x", target, lambda v: v >= target if higher_is_better else v <= target,
          ">=" if higher_is_better else "<=")
    return r


# figures one benchmark leaves for a later one of the same `make bench` run (e.g. the in-cluster pod path, which
# bench_overlay compares with the agentless one)
MEASURED: dict = {}
