"""The fabric inside two real-node clusters, measured on a lab of its own.

tests/e2e/in_cluster_lab.py builds it as tests/e2e/test_in_cluster.py does: two clusters of 3 real kubelets, the
fabric installed with `kubectl apply -k deploy/`, the seeds' manual flow run with kubectl alone. This benchmark
then runs the lab's scenarios in the e2e module's order (each asserting what it needs to go on) and prints what
they took, against the targets where there is one:
- last `kubectl apply` -> both Connections Connected <= 10 s, quiet and again (the gateways deleted, the flow rerun)
  with the machine at a load average of ~5 (CPU spinners beside the lab, LOAD_SPINNERS);
- working set (the kubelet's measure) of the controller, a node agent and a gateway pod <= 150 / 100 / 100 MiB;
- the longest time without a reply across a gateway pod's failover (50 ms ping) <= 3 s;
- TCP pod -> pod across the clusters >= 0.85 of the tunnel alone between the gateway pods, and the round trip of
  the pod path <= 0.2 ms above the tunnel's (docs/in-cluster-path.md); bench_overlay, later in the same run, prints
  the in-cluster tunnel and pod path against the agentless ones.
Also: where each gateway pod's start went, the faults' reaction and repair times, the failover timelines.
One lab for all (~10 min); figures of a loaded machine carry its load (printed). A scenario that fails is
reported and the next one runs.
"""
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
import traceback

from tests.benchmarks import bench_overlay
from tests.benchmarks.report import MEASURED, figure, ratio
from tests.e2e import in_cluster_lab as icl
from tests.e2e.fabric import wait_for

IPERF_SECONDS, IPERF_ROUNDS = 5, 5
PINGS = 50
# busy processes beside the lab; the 1-minute load average to reach first. The average moves towards the
# spinners' count with a 60 s time constant: 5 of them pass 4.5 after about 140 s even on a quiet lab, which 4
# reach only with the lab's own load on top
LOAD_SPINNERS, LOAD_TARGET = 5, 4.5
POD_PATH = f"in-cluster TCP pod -> pod remapped, median {IPERF_ROUNDS} x {IPERF_SECONDS} s (Mbit/s)"
TUNNEL = f"in-cluster TCP gateway pod -> gateway pod tunnel, median {IPERF_ROUNDS} x {IPERF_SECONDS} s (Mbit/s)"
RTT_POD = f"in-cluster RTT pod -> remote pod, median of {PINGS} (ms)"
RTT_TUNNEL = f"in-cluster RTT gateway pod -> gateway pod over the tunnel, median of {PINGS} (ms)"
LOADED = "last kubectl apply -> both Connected, machine at load ~5 (s)"
UNITS = ("s", "MiB", "Mbit/s", "ms")
TARGETS = {  # figure -> (name printed, target)
    "last kubectl apply -> both Connections Connected (s)": ("last kubectl apply -> both Connected", 10),
    LOADED: (None, 10),
    "working set of the controller (acting) pod (MiB)": ("controller pod working set", 150),
    "working set of the node agent pod (MiB)": ("node agent pod working set (zygote exited idle)", 100),
    "working set of the node agent (zygote up) pod (MiB)": ("node agent pod working set, zygote up", None),
    "working set of the gateway pod (MiB)": ("gateway pod working set (zygote exited idle)", 100),
    "working set of the gateway (zygote up) pod (MiB)": ("gateway pod working set, zygote up", None),
    "RSS of the controller (acting) pod (MiB)": ("controller pod RSS, every process", None),
    "RSS of the node agent pod (MiB)": ("node agent pod RSS, every process", None),
    "RSS of the gateway pod (MiB)": ("gateway pod RSS, every process", None),
    "RSS of the node agent (zygote up) pod (MiB)": ("node agent pod RSS, every process, zygote up", None),
    "RSS of the gateway (zygote up) pod (MiB)": ("gateway pod RSS, every process, zygote up", None),
    "client failover: longest time without a reply (s)": ("client failover outage (50 ms ping)", 3),
    "server failover: longest time without a reply (s)": ("server failover outage (50 ms ping)", 3),
}


def gateway_pod_starts(cluster, name: str) -> list:
    """Per pod of gateway `name`: where its engine's start went (interpreter, imports, setup, engine start, s)."""
    out = []
    for p in icl.gateway_pods(cluster, name):
        started = [r for r in icl.controller_logs_of(cluster, p.metadata.name, "default")
                   if r.get("msg") == "controller started"]
        out.append([started[0]["startup"].get(k) for k in ("interpreter", "imports", "setup", "start")]
                   if started else None)
    return out


def throughput(lab, figures: dict) -> None:
    """Alternating runs of both paths (icl.iperf_paths), the order flipped every round, so both see the same machine
    load; medians. Then the round trip of both, in alternating rounds of 5 pings 20 ms apart."""
    paths = icl.iperf_paths(lab)
    runs = {"pod": [], "tunnel": []}
    for rnd in range(IPERF_ROUNDS):
        for path in (("pod", "tunnel") if rnd % 2 == 0 else ("tunnel", "pod")):
            runs[path].append(icl.iperf_run(*paths[path], seconds=IPERF_SECONDS)["bits_per_second"] / 1e6)
    print(f"  in-cluster throughput runs: pod -> pod {[round(x) for x in runs['pod']]} Mbit/s, gateway pod -> gateway "
          f"pod {[round(x) for x in runs['tunnel']]} Mbit/s", flush=True)
    figures[POD_PATH] = round(statistics.median(runs["pod"]))
    figures[TUNNEL] = round(statistics.median(runs["tunnel"]))
    rtts = {"pod": [], "tunnel": []}
    for dummy in range(PINGS // 5):
        for path, (client, dummy_server, address, bind) in paths.items():
            argv = ["nsenter", f"--net=/proc/{client}/ns/net", "ping", "-n", "-c", "5", "-i", "0.02", "-W", "1"]
            proc = subprocess.run(argv + (["-I", bind] if bind else []) + [address], capture_output=True, text=True,
                                  check=False, timeout=60)
            rtts[path] += [float(m) for m in re.findall(r"time=([\d.]+) ms", proc.stdout)]
    for path, got in rtts.items():
        if len(got) < PINGS * 0.9:
            raise RuntimeError(f"ping over the {path} path: {len(got)}/{PINGS} replies")
    figures[RTT_POD] = round(statistics.median(rtts["pod"]), 3)
    figures[RTT_TUNNEL] = round(statistics.median(rtts["tunnel"]), 3)


def link_counters(enter: list) -> dict:
    """{link: (rx bytes, rx packets, tx bytes, tx packets)} of a netns (`enter`: nsenter's argument)."""
    proc = subprocess.run(["nsenter", *enter, "ip", "-j", "-s", "link"], capture_output=True, text=True, check=True)
    return {x["ifname"]: (x["stats64"]["rx"]["bytes"], x["stats64"]["rx"]["packets"],
                          x["stats64"]["tx"]["bytes"], x["stats64"]["tx"]["packets"]) for x in json.loads(proc.stdout)}


def profile(lab) -> None:
    """Where the pod path differs from the tunnel: the bytes per packet on every link that carried a pod-path run
    (a link whose packets are MTU-sized cut super-packets), then perf's shares of both paths by part of the path."""
    a, b = lab["a"], lab["b"]
    paths = icl.iperf_paths(lab)
    places = {}
    for c, name in ((a, "client"), (b, "server")):
        gw = icl.active_gateway(c, name)
        places[f"{c.name}'s gateway pod"] = [f"--net=/proc/{icl.host_pid(c, gw.metadata.name)}/ns/net"]
        places[f"its node {gw.spec.node_name}"] = [f"--net=/run/netns/{c.node(gw.spec.node_name).netns}"]
    before = {k: link_counters(v) for k, v in places.items()}
    mbit = icl.iperf_run(*paths["pod"], seconds=IPERF_SECONDS)["bits_per_second"] / 1e6
    after = {k: link_counters(v) for k, v in places.items()}
    print(f"  bytes per packet on the links of a pod-path run ({mbit:.0f} Mbit/s); MTU-sized: cut super-packets")
    for where, links in after.items():
        for link, now in sorted(links.items()):
            d = [x - y for x, y in zip(now, before[where].get(link, (0, 0, 0, 0)))]
            if d[0] + d[2] > 10e6:
                print(f"    {where:32} {link:16} rx {d[0] / max(d[1], 1):>7.0f}   tx {d[2] / max(d[3], 1):>7.0f}")
    if not shutil.which("perf"):
        print("  (no perf: profile skipped)")
        return
    pod = bench_overlay.perf_shares(lambda: icl.iperf_run(*paths["pod"], seconds=IPERF_SECONDS)["bits_per_second"] / 1e6)
    tunnel = bench_overlay.perf_shares(
        lambda: icl.iperf_run(*paths["tunnel"], seconds=IPERF_SECONDS)["bits_per_second"] / 1e6)
    print("  perf (cpu-clock, all CPUs): share of samples by part of the path, in-cluster pod path vs its tunnel")
    bench_overlay.print_shares(pod, tunnel)


def load_average() -> float:
    with open("/proc/loadavg", encoding="ascii") as f:
        return float(f.read().split()[0])


def connected_under_load(lab, figures: dict) -> None:
    """The peering made again with the CPUs busy: both gateways (and their PublicKeys) deleted, LOAD_SPINNERS
    processes spinning at nice 0 beside the lab until the 1-minute load average reaches LOAD_TARGET, then the seeds'
    flow again (icl.connect): the time from its last `kubectl apply` to both Connected. The spinners are stopped
    by their PID."""
    a, b = lab["a"], lab["b"]
    icl.kubectl(a, "delete", "gatewayclient", "client", "--wait=true", timeout=120)
    icl.kubectl(b, "delete", "gatewayserver", "server", "--wait=true", timeout=120)
    for c, name in ((a, "client"), (b, "server")):
        icl.kubectl(c, "delete", "publickeies.networking.liqo.io", "--all", "-n", "default", "--wait=true", timeout=60)
        wait_for(lambda c=c, name=name: not icl.gateway_pods(c, name), timeout=120, what=f"{c.name}: gateway {name} gone")
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for dummy in range(LOAD_SPINNERS)]
    try:
        wait_for(lambda: load_average() >= LOAD_TARGET, timeout=180, interval=2, what=f"load average {LOAD_TARGET}")
        at_start = load_average()
        loaded: dict = {}
        icl.connect(lab, loaded)
        figures[LOADED] = loaded["last kubectl apply -> both Connections Connected (s)"]
        figures["first kubectl apply -> both Connected, machine at load ~5 (s)"] = \
            loaded["first kubectl apply -> both Connected (s)"]
        # the load the Connected figures were measured under, as report rows
        figure(f"1-minute load average at the first apply ({LOAD_SPINNERS} spinners beside the lab)", at_start, "load")
        figure("1-minute load average at both Connected", load_average(), "load")
    finally:
        for proc in spinners:
            proc.kill()
            proc.wait()


def verify_services(lab, figures: dict) -> None:
    t0 = time.monotonic()
    proc = icl.verify_services(lab)
    figures["verify with the Service probes, both ways (s)"] = round(time.monotonic() - t0, 1)
    rows, summary = icl.verify_rows(proc)
    print("\n".join("  " + x for x in rows + summary), flush=True)
    figures["verify: probes that failed (pings and Services)"] = len([x for x in rows if x.startswith("FAIL")])


def memory(lab, figures: dict) -> None:
    """The acting controller pod; a's active client pod and a node agent with their warm runner's zygote up (a run
    less than 60 s ago), then idle (the zygote exited: --warm-idle-exit). RSS of every process and the working
    set (icl.POD_MEMORY)."""
    c = lab["a"]

    def measure(label, pod, ns):
        """Records the pod's figures under `label`, "<label> (zygote up)" while its zygote runs; the zygotes."""
        kib, working_kib, zygotes = icl.pod_memory(c, pod, ns)
        label = f"{label} (zygote up)" if zygotes and not label.startswith("controller") else label
        figures[f"RSS of the {label} pod (MiB)"] = round(kib / 1024, 1)
        if working_kib >= 0:
            figures[f"working set of the {label} pod (MiB)"] = round(working_kib / 1024, 1)
        return zygotes

    measure("controller (acting)", icl.acting_controller(c), "liqo")
    gateway = icl.active_gateway(c, "client").metadata.name
    # between runs (a run forks the zygote, Ansible's worker and the module: ~2.5x the pod's memory for a moment)
    wait_for(lambda: icl.idle(c, gateway), timeout=90, interval=1, what="a's client pod idle")
    agents = [p.metadata.name for p in icl.ready_pods(c, "liqo-fabric-node-agent")]
    measure("gateway", gateway, "default")
    measure("node agent", agents[0], "liqo")
    # the steady state: their zygote exits 60 s after their last run; the earlier scenarios gave every pod runs
    wait_for(lambda: measure("gateway", gateway, "default") == 0, timeout=150, interval=5,
             what="the gateway pod's warm runner's zygote exited idle")
    wait_for(lambda: any(measure("node agent", pod, "liqo") == 0 for pod in agents), timeout=150, interval=5,
             what="a node agent whose warm runner's zygote exited idle")


def show(figures: dict, printed: set) -> None:
    """The figures not printed yet: with their target where there is one; counts and texts as they are."""
    for key, value in figures.items():
        if key in printed:
            continue
        printed.add(key)
        if isinstance(value, str) and "\n" in value:
            print(f"  {key}:\n" + "\n".join("    " + line for line in value.splitlines()), flush=True)
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            name, target = TARGETS.get(key, (None, None))
            unit = next((u for u in UNITS if key.endswith(f" ({u})")), "")
            if name is None:
                name = key.removesuffix(f" ({unit})") if unit else key
            figure(name, float(value), unit or "count", target, lower_is_better=unit != "Mbit/s")
        else:
            print(f"  {key}: {value}", flush=True)


def run():
    if os.geteuid() != 0:
        print("  skipped: needs root (network namespaces, kubelets)")
        return
    for tool in ("iperf3", "nsenter"):
        if not shutil.which(tool):
            print(f"  skipped: {tool} is not installed")
            return
    figures: dict = {}
    printed: set = set()
    failed = []
    t0 = time.monotonic()
    with icl.real_node_lab() as lab:
        print(f"  (lab up in {time.monotonic() - t0:.0f} s)", flush=True)
        icl.install(lab)
        icl.connect(lab, figures)
        for c, name in ((lab["a"], "client"), (lab["b"], "server")):
            figures[f"{name} gateway pod start: interpreter, imports, setup, engine start (s)"] = \
                gateway_pod_starts(c, name)
        show(figures, printed)
        # the e2e module's order: each scenario finds the lab as the earlier ones left it
        scenarios = [
            ("wrong public key", lambda: icl.wrong_public_key_held(lab, figures)),
            ("MTU mismatch", lambda: icl.mtu_mismatch_and_back(lab, figures)),
            ("path MTU auto", lambda: icl.path_mtu_auto(lab, figures)),
            ("tunnel dropped", lambda: icl.tunnel_dropped_and_back(lab, figures)),
            ("every pod pair", lambda: icl.probe_every_pod_pair(lab, figures)),
            ("throughput", lambda: throughput(lab, figures)),
            ("profile", lambda: profile(lab)),
            ("verify with Services", lambda: verify_services(lab, figures)),
            ("drift", lambda: icl.drift_faults_one_by_one(lab, figures)),
            ("node agent replaced", lambda: icl.node_agent_replaced_under_ping(lab, figures)),
            ("node added and removed", lambda: icl.node_added_and_removed(lab, figures)),
            ("client failover", lambda: icl.failover_to_the_standby(lab, "a", "client", figures)),
            ("server failover", lambda: icl.failover_to_the_standby(lab, "b", "server", figures)),
            ("memory", lambda: memory(lab, figures)),
            ("load balancer", lambda: icl.load_balancer_switch(lab, figures)),
            ("connected under load", lambda: connected_under_load(lab, figures)),
        ]
        for what, scenario in scenarios:
            try:
                scenario()
            except Exception:  # pylint: disable=broad-except  # the others still measure
                failed.append(what)
                # the report keeps the reason; the traceback goes to the console only
                reason = (str(sys.exc_info()[1]).strip().splitlines() or [type(sys.exc_info()[1]).__name__])[-1]
                print(f"  {what}: NOT MEASURED ({reason})", flush=True)
                traceback.print_exc(file=sys.__stderr__)
            show(figures, printed)
    if POD_PATH in figures and TUNNEL in figures:
        ratio("in-cluster pod path / tunnel", figures[POD_PATH], figures[TUNNEL], higher_is_better=True, target=0.85)
        MEASURED["in-cluster pod path (Mbit/s)"] = float(figures[POD_PATH])
        MEASURED["in-cluster tunnel (Mbit/s)"] = float(figures[TUNNEL])
    if RTT_POD in figures and RTT_TUNNEL in figures:
        figure("in-cluster RTT pod-to-pod minus gateway pod-to-gateway pod", figures[RTT_POD] - figures[RTT_TUNNEL], "ms",
               target=0.2)
    if failed:
        raise RuntimeError(f"in-cluster scenarios not measured: {', '.join(failed)}")
