"""10,000 routes in table 18952 inside a throwaway netns: liqo.fabric's route.policy.sync_route_table against
`ip -batch` for the same routes, measured in the same run (median of 3)."""
import os
import statistics
import sys
import time

from tests.ansible_run import ROOT, run_module
from tests.benchmarks.report import figure, ratio
from tests.lab import names, netns

sys.path.insert(0, os.path.join(ROOT, "build", "collections"))
from ansible_collections.liqo.fabric.plugins.module_utils.route.policy import sync_route_table  # noqa: E402  pylint: disable=wrong-import-position

N = 10000
TABLE = 18952
REPEAT = 3


def _routes(gw="192.168.5.2"):
    return [{"dst": f"10.{64 + i // 256}.{i % 256}.0/24", "via": gw, "dev": "d0"} for i in range(N)]


def _count(ns):
    proc = netns.run(["ip", "-n", ns, "route", "show", "table", str(TABLE)], check=False)
    return len(proc.stdout.splitlines()) if proc.returncode == 0 else 0


def _timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def run():
    if os.geteuid() != 0:
        print("  skipped: needs root for network namespaces")
        return
    ns = f"{names.lab_prefix(names.new_lab_id())}b-rt"
    netns.create_netns([ns])
    try:
        netns.ip_batch(["link set lo up", "link add d0 type veth peer name d1", "link set d0 up", "link set d1 up",
                        "addr add 192.168.5.1/24 dev d0"], netns=ns)
        routes = _routes()
        script = "".join(f"route add {r['dst']} via {r['via']} dev d0 table {TABLE}\n" for r in routes)
        ip_times, apply_times, rerun_times, replace_times, delete_times = [], [], [], [], []
        rerun_writes = set()
        for dummy in range(REPEAT):
            t, dummy = _timed(lambda: netns.run(["ip", "-n", ns, "-batch", "-"], input=script))
            assert _count(ns) == N
            ip_times.append(t)
            netns.run(["ip", "-n", ns, "route", "flush", "table", str(TABLE)])
            assert _count(ns) == 0

            t, res = _timed(lambda: sync_route_table(routes, table=TABLE, netns=ns, want_lines=False))
            assert res["writes"] == N and _count(ns) == N
            apply_times.append(t)
            t, res = _timed(lambda: sync_route_table(routes, table=TABLE, netns=ns, want_lines=False))
            assert not res["changed"]
            rerun_writes.add(res["writes"])
            rerun_times.append(t)
            moved = _routes("192.168.5.3")
            t, res = _timed(lambda: sync_route_table(moved, table=TABLE, netns=ns, want_lines=False))
            assert len(res["replaced"]) == N
            replace_times.append(t)
            t, res = _timed(lambda: sync_route_table([], table=TABLE, netns=ns, want_lines=False))
            assert len(res["removed"]) == N and _count(ns) == 0
            delete_times.append(t)

        ip_med = statistics.median(ip_times)
        apply_med = statistics.median(apply_times)
        figure(f"ip -batch: add {N} routes (baseline)", ip_med, "s")
        figure(f"sync_route_table: apply {N} routes to an empty table", apply_med, "s", target=1.0)
        figure(f"sync_route_table: idempotent rerun, {N} routes", statistics.median(rerun_times), "s", target=1.0)
        assert rerun_writes == {0}, rerun_writes
        figure("  netlink writes in the idempotent reruns (must be 0)", float(max(rerun_writes)), "msgs")
        figure(f"sync_route_table: replace the next hop of {N} routes", statistics.median(replace_times), "s")
        figure(f"sync_route_table: remove {N} routes", statistics.median(delete_times), "s")
        ratio("apply time / ip -batch time (same routes, same run)", apply_med, ip_med)

        # The whole module through ansible-playbook (includes ~1 s of Ansible start-up and 10k-item arg parsing).
        sync_route_table(routes, table=TABLE, netns=ns, want_lines=False)
        t, res = _timed(lambda: run_module("liqo.fabric.route_table", {"table": TABLE, "routes": routes}, netns=ns, timeout=300))
        assert res["rc"] == 0 and not res.get("changed"), res.get("msg")
        figure(f"liqo.fabric.route_table via ansible-playbook, idempotent, {N} routes", t, "s")
    finally:
        netns.delete_netns([ns])


if __name__ == "__main__":
    run()
