"""IPAM allocation cost: 1,000 remote clusters against one IPAM (pure computation, no API round trips).

Scenarios, each timed per allocation (pod + external CIDR of one remote cluster = one allocation):
  * worst common case: every remote cluster's pod CIDR (10.243.0.0/19) and external CIDR (10.70.0.0/23)
    overlap local ones, so both are remapped every time, packing 10.0.0.0/8. (1,000 clusters with
    /16s cannot fit: the three RFC 1918 pools hold ~253 free /16s; that case is timed too, up to
    exhaustion and the refusals after it);
  * fragmented: 1,000 kept /24 remote CIDRs spread over 10.0.0.0/8 first, then 1,000 /24 remaps;
  * restart: rebuild the IPAM from its serialised state and from 1,000 Configuration dicts.
Baseline in the same run: a naive first fit that scans every aligned /16 of every pool per call.
"""
import ipaddress
import os
import sys
import time

from tests.benchmarks.report import figure, ratio

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "build", "collections"))

from ansible_collections.liqo.fabric.plugins.module_utils.ipam.allocator import Ipam, PoolsExhaustedError  # noqa: E402  pylint: disable=wrong-import-position

N = 1000
LOCAL = {"pod_cidrs": ["10.243.0.0/16"], "service_cidr": "10.96.0.0/12"}


def _naive(taken, net, pools):
    if not any(net.overlaps(t) for t in taken):
        return net
    for pool in pools:
        for cand in pool.subnets(new_prefix=net.prefixlen):
            if not any(cand.overlaps(t) for t in taken):
                return cand
    return None


def run():
    # 1) 1,000 remote clusters, all conflicting (pod /18 + external /22 each)
    for label, pod, ext in (("pod 10.243.0.0/19 + external 10.70.0.0/23 each (all remapped)", "10.243.0.0/19", "10.70.0.0/23"),
                            ("pod 10.243.0.0/16 + external 10.70.0.0/16 each (pools run out)", "10.243.0.0/16", "10.70.0.0/16")):
        ipam = Ipam(**LOCAL)
        per = []
        exhausted = 0
        t0 = time.perf_counter()
        for i in range(N):
            s = time.perf_counter()
            try:
                ipam.allocate_remote("liqo-tenant-%d/c%d" % (i, i), pod, ext)
            except PoolsExhaustedError:
                exhausted += 1
            per.append(time.perf_counter() - s)
        total = time.perf_counter() - t0
        per.sort()
        print("  1,000 remote clusters, %s:" % label)
        figure("total", total * 1000, "ms")
        figure("per allocation, mean", total / N * 1000, "ms", target=10)
        figure("per allocation, p99", per[int(N * 0.99) - 1] * 1000, "ms", target=10)
        figure("per allocation, max", per[-1] * 1000, "ms", target=10)
        figure("clusters served", N - exhausted, "count")
        if exhausted == 0:
            served = ipam

    # 2) fragmented pools: 1,000 kept /24s scattered, then 1,000 /24 remaps
    frag = Ipam(**LOCAL)
    for i in range(N):
        net = "10.%d.%d.0/24" % ((i * 7) % 240, (i * 37) % 256)
        try:
            frag.allocate("kept/%d" % i, "pod", net)
        except PoolsExhaustedError:
            pass
    t0 = time.perf_counter()
    for i in range(N):
        frag.allocate("remap/%d" % i, "pod", "10.243.0.0/24")
    total = time.perf_counter() - t0
    print("  fragmented: 1,000 /24 remaps after 1,000 scattered kept /24s:")
    figure("per allocation, mean", total / N * 1000, "ms", target=10)

    # 3) restart: rebuild from the serialised state / from Configuration dicts
    ipam = served
    text = ipam.dumps()
    t0 = time.perf_counter()
    Ipam.loads(text)
    figure("rebuild from state JSON (%d allocations)" % len(ipam.allocations()), (time.perf_counter() - t0) * 1000, "ms")
    confs = [{"metadata": {"namespace": a.owner.split("/")[0], "name": a.owner.split("/")[1], "creationTimestamp": "2026-01-01T00:00:00Z"},
              "spec": {"remote": {"cidr": {"pod": "10.243.0.0/19", "external": "10.70.0.0/23"}}},
              "status": {"remote": {"cidr": {
                  "pod": str(ipam.allocation(a.owner, "pod").remapped),
                  "external": str(ipam.allocation(a.owner, "external").remapped)}}}}
             for a in ipam.allocations() if a.field == "pod" and ipam.allocation(a.owner, "external")]
    t0 = time.perf_counter()
    Ipam(**LOCAL).adopt_configurations(confs)
    figure("rebuild from %d Configurations" % len(confs), (time.perf_counter() - t0) * 1000, "ms")

    # baseline: naive scan of all /16s per call, first 100 clusters only (it is quadratic)
    pools = [ipaddress.ip_network(p) for p in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16")]
    taken = [ipaddress.ip_network(c) for c in ("10.243.0.0/16", "10.96.0.0/12", "10.70.0.0/16", "10.80.0.0/16")]
    m = 100
    t0 = time.perf_counter()
    for dummy in range(m):
        for c in ("10.243.0.0/16", "10.70.0.0/16"):
            taken.append(_naive(taken, ipaddress.ip_network(c), pools))
    naive = (time.perf_counter() - t0) / m
    small = Ipam(**LOCAL)
    t0 = time.perf_counter()
    for i in range(m):
        small.allocate_remote("t/%d" % i, "10.243.0.0/16", "10.70.0.0/16")
    ours = (time.perf_counter() - t0) / m
    figure("naive scan of all /16s, per allocation (first %d)" % m, naive * 1000, "ms")
    figure("ipam, per allocation (first %d)" % m, ours * 1000, "ms")
    ratio("ipam / naive (lower is better)", ours, naive)


if __name__ == "__main__":
    run()
