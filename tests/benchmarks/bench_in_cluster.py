"""The fabric inside two real-node clusters, measured on a lab of its own.

tests/e2e/in_cluster_lab.py builds it as tests/e2e/test_in_cluster.py does: two clusters of 3 real kubelets, the
fabric installed with `kubectl apply -k deploy/`, the seeds' manual flow run with kubectl alone. This benchmark
then runs the lab's scenarios in the e2e module's order (each asserting what it needs to go on) and prints what
they took, against the targets where there is one:
- last `kubectl apply` -> both Connections Connected <= 10 s;
- working set (the kubelet's measure) of the controller, a node agent and a gateway pod <= 150 / 100 / 100 MiB;
- the longest time without a reply across a gateway pod's failover (50 ms ping) <= 3 s;
- TCP pod -> pod across the clusters against the tunnel alone between the gateway pods (no target of its own:
  bench_overlay, later in the same run, prints it against the agentless path's pod -> pod).
Also: where each gateway pod's start went, the faults' reaction and repair times, the failover timelines.
One lab for all (~10 min); figures of a loaded machine carry its load (printed). A scenario that fails is
reported and the next one runs.
"""
import os
import shutil
import statistics
import time
import traceback

from tests.benchmarks.report import MEASURED, figure, ratio
from tests.e2e import in_cluster_lab as icl
from tests.e2e.fabric import wait_for

IPERF_SECONDS, IPERF_ROUNDS = 5, 3
POD_PATH = f"in-cluster TCP pod -> pod remapped, median {IPERF_ROUNDS} x {IPERF_SECONDS} s (Mbit/s)"
TUNNEL = f"in-cluster TCP gateway pod -> gateway pod tunnel, median {IPERF_ROUNDS} x {IPERF_SECONDS} s (Mbit/s)"
UNITS = ("s", "MiB", "Mbit/s")
TARGETS = {  # figure -> (name printed, target)
    "last kubectl apply -> both Connections Connected (s)": ("last kubectl apply -> both Connected", 10),
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
    """Alternating runs of both paths (icl.iperf_paths), so both see the same machine load; medians."""
    paths = icl.iperf_paths(lab)
    runs = {"pod": [], "tunnel": []}
    for _round in range(IPERF_ROUNDS):
        for path, args in paths.items():
            runs[path].append(icl.iperf_run(*args, seconds=IPERF_SECONDS)["bits_per_second"] / 1e6)
    print(f"  in-cluster throughput runs: pod -> pod {[round(x) for x in runs['pod']]} Mbit/s, gateway pod -> gateway "
          f"pod {[round(x) for x in runs['tunnel']]} Mbit/s", flush=True)
    figures[POD_PATH] = round(statistics.median(runs["pod"]))
    figures[TUNNEL] = round(statistics.median(runs["tunnel"]))


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
            ("tunnel dropped", lambda: icl.tunnel_dropped_and_back(lab, figures)),
            ("every pod pair", lambda: icl.probe_every_pod_pair(lab, figures)),
            ("throughput", lambda: throughput(lab, figures)),
            ("verify with Services", lambda: verify_services(lab, figures)),
            ("drift", lambda: icl.drift_faults_one_by_one(lab, figures)),
            ("node agent replaced", lambda: icl.node_agent_replaced_under_ping(lab, figures)),
            ("node added and removed", lambda: icl.node_added_and_removed(lab, figures)),
            ("client failover", lambda: icl.failover_to_the_standby(lab, "a", "client", figures)),
            ("server failover", lambda: icl.failover_to_the_standby(lab, "b", "server", figures)),
            ("memory", lambda: memory(lab, figures)),
            ("load balancer", lambda: icl.load_balancer_switch(lab, figures)),
        ]
        for what, scenario in scenarios:
            try:
                scenario()
            except Exception:  # pylint: disable=broad-except  # the others still measure
                failed.append(what)
                print(f"  {what}: NOT MEASURED\n" + traceback.format_exc()[-3000:], flush=True)
            show(figures, printed)
    if POD_PATH in figures and TUNNEL in figures:
        ratio("in-cluster pod path / tunnel", figures[POD_PATH], figures[TUNNEL])
        MEASURED["in-cluster pod path (Mbit/s)"] = float(figures[POD_PATH])
    if failed:
        raise RuntimeError(f"in-cluster scenarios not measured: {', '.join(failed)}")
