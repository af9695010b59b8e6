"""Lab up/down time for 2 clusters x 3 nodes x 10 pods, apiserver start reported apart, and its memory."""
import time

from tests.benchmarks.report import figure
from tests.lab import Lab


def _rss_mib(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status", encoding="utf-8") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def _mem_available_mib() -> float:
    with open("/proc/meminfo", encoding="utf-8") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / 1024
    return 0.0


def run():
    before = _mem_available_mib()
    t0 = time.monotonic()
    lab = Lab([{"name": "a"}, {"name": "b"}], pod_cidr="10.243.0.0/16", nodes=3, pods_per_node=10)
    lab.up()
    total_up = time.monotonic() - t0
    try:
        figure("2 apiservers + etcd start (parallel)", lab.timings["apiservers_start"], "s")
        figure("lab up, apiserver start excluded (2x3 nodes, 60 pods)", lab.timings["up_without_apiservers"], "s",
               target=20)
        figure("lab up, total", total_up, "s")
        for name, c in lab.clusters.items():
            figure(f"  cluster {name}: dataplane (netns, veth, routes)", c.timings["dataplane"], "s")
            figure(f"  cluster {name}: API registration (3 nodes, 30 pods)", c.timings["register"], "s")
        rss = {role: _rss_mib(pid) for c in lab.clusters.values() for role, pid in c.apiserver.pids.items()
               for role in [f"{c.name}/{role}"]}
        for role, mib in sorted(rss.items()):
            figure(f"  RSS {role}", mib, "MiB")
        figure("lab processes RSS total", sum(rss.values()), "MiB")
        figure("MemAvailable drop while the lab is up (incl. kernel)", before - _mem_available_mib(), "MiB")
    finally:
        lab.down()
    figure("lab down (2 clusters, 69 netns, 4 processes)", lab.timings["down"], "s", target=5)
