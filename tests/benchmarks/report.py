"""Uniform printing of benchmark figures."""


def figure(name, value, unit, target=None, lower_is_better=True):
    line = f"  {name:<58} {value:>12.3f} {unit}"
    if target is not None:
        ok = value <= target if lower_is_better else value >= target
        line += f"   target {'<' if lower_is_better else '>='} {target} {unit}: {'met' if ok else 'MISSED'}"
    print(line, flush=True)


def ratio(name, ours, baseline, target=None, higher_is_better=False):
    r = ours / baseline if baseline else float("inf")
    line = f"  {name:<58} {r:>12.3f} x"
    if target is not None:
        ok = r >= target if higher_is_better else r <= target
        line += f"   target {'>=' if higher_is_better else '<='} {target}: {'met' if ok else 'MISSED'}"
    print(line, flush=True)
    return r


# figures one benchmark leaves for a later one of the same `make bench` run (e.g. the in-cluster pod path, which
# bench_overlay compares with the agentless one)
MEASURED: dict = {}
