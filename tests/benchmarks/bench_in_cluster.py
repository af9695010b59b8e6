"""The fabric inside two real-node clusters (issue 16), measured by the e2e module that builds it.

tests/e2e/test_in_cluster.py brings up two clusters of 3 real kubelets, installs the fabric with
`kubectl apply -k deploy/`, runs the seeds' manual flow with kubectl alone and deletes each gateway's active pod
under a 50 ms ping; it prints its figures. This benchmark runs the tests that measure (the flow, the pods' memory,
both failovers) and prints those figures against the issue's targets:
- last `kubectl apply` -> both Connections Connected <= 10 s;
- working set (the kubelet's measure) of the controller, a node agent and a gateway pod <= 150 / 100 / 100 MiB;
- the longest time without a reply across a gateway pod's failover <= 3 s;
- TCP pod -> pod across the clusters against the tunnel alone between the gateway pods (no target of its own:
  bench_overlay, later in the same run, prints it against the agentless path's pod -> pod).
One lab for all (~5 min); figures of a loaded machine carry its load (printed).
"""
import json
import os
import subprocess
import sys

from tests.benchmarks.report import MEASURED, figure

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SELECTED = "both_connections or throughput or memory or failover"
TARGETS = [  # (figure printed by the e2e module, name here, unit, target)
    ("last kubectl apply -> both Connections Connected (s)", "last kubectl apply -> both Connected", "s", 10),
    ("working set of the controller (acting) pod (MiB)", "controller pod working set", "MiB", 150),
    ("working set of the node agent pod (MiB)", "node agent pod working set (zygote exited idle)", "MiB", 100),
    ("working set of the node agent (zygote up) pod (MiB)", "node agent pod working set, zygote up", "MiB", None),
    ("working set of the gateway pod (MiB)", "gateway pod working set (zygote exited idle)", "MiB", 100),
    ("working set of the gateway (zygote up) pod (MiB)", "gateway pod working set, zygote up", "MiB", None),
    ("RSS of the controller (acting) pod (MiB)", "controller pod RSS, every process", "MiB", None),
    ("RSS of the node agent pod (MiB)", "node agent pod RSS, every process", "MiB", None),
    ("RSS of the gateway pod (MiB)", "gateway pod RSS, every process", "MiB", None),
    ("client pod deleted -> standby labelled active (s)", "client pod deleted -> standby active", "s", None),
    ("client failover: longest time without a reply (s)", "client failover outage (50 ms ping)", "s", 3),
    ("server pod deleted -> standby labelled active (s)", "server pod deleted -> standby active", "s", None),
    ("server failover: longest time without a reply (s)", "server failover outage (50 ms ping)", "s", 3),
    ("in-cluster TCP pod -> pod remapped, median 3 x 5 s (Mbit/s)", "in-cluster TCP pod -> pod, median 3 x 5 s", "Mbit/s", None),
    ("in-cluster TCP gateway pod -> gateway pod tunnel, median 3 x 5 s (Mbit/s)",
     "in-cluster TCP gateway pod -> gateway pod tunnel", "Mbit/s", None),
    ("in-cluster pod path / tunnel", "in-cluster pod path / tunnel", "x", None),
]
IN_CLUSTER_POD_PATH = "in-cluster TCP pod -> pod remapped, median 3 x 5 s (Mbit/s)"


def figures_of(output: str) -> dict:
    """The last 'in-cluster figures: {...}' JSON the e2e module printed."""
    at = output.rfind("in-cluster figures:")
    if at < 0:
        return {}
    start = output.index("{", at)
    return json.JSONDecoder().raw_decode(output[start:])[0]


def run():
    load = os.getloadavg()[0]
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider",
                           os.path.join(ROOT, "tests", "e2e", "test_in_cluster.py"), "-k", SELECTED],
                          cwd=ROOT, capture_output=True, text=True, check=False)
    got = figures_of(proc.stdout)
    print(f"  (the e2e module's tests: exit {proc.returncode}; load average {load:.1f} before, "
          f"{os.getloadavg()[0]:.1f} after)", flush=True)
    if proc.returncode != 0 or not got:
        print(proc.stdout[-3000:], proc.stderr[-2000:], flush=True)
        if not got:
            raise RuntimeError("the in-cluster e2e module printed no figures")
    for key, name, unit, target in TARGETS:
        if key in got:
            figure(name, float(got[key]), unit, target, lower_is_better=unit != "Mbit/s")
    for key in sorted(k for k in got if "gateway pod start" in k):   # per pod: where its engine's start went
        print(f"  {key}: {got[key]}", flush=True)
    if IN_CLUSTER_POD_PATH in got:
        MEASURED["in-cluster pod path (Mbit/s)"] = float(got[IN_CLUSTER_POD_PATH])
