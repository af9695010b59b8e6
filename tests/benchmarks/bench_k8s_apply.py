"""Per-task cost of liqo.fabric.k8s_apply against kubernetes.core.k8s (apply: true) on one lab cluster.

One playbook alternates the two modules on the same definitions (a ConfigMap; a GatewayServer), REPS times
each, after a warm-up task of each; every run after the first is an unchanged re-apply, the common case in
`connect`. Figures are the medians of the json callback's per-task durations (what ansible-playbook spends
on the task: templating, module transfer, the module run), and their ratio.
"""
from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from datetime import datetime

from tests.ansible_run import ansible_env
from tests.benchmarks.report import figure, ratio
from tests.e2e import fabric
from tests.lab import Lab

REPS = 8
NS = "k8s-apply-bench"


def _definitions():
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "bench", "namespace": NS},
          "data": {"mode": "fast", "items": "1,2,3"}}
    gs = {"apiVersion": "networking.liqo.io/v1beta1", "kind": "GatewayServer",
          "metadata": {"name": "bench", "namespace": NS, "labels": {"liqo.io/remote-cluster-id": "peer"}},
          "spec": {"endpoint": {"port": 51820, "serviceType": "NodePort"}, "mtu": 1340,
                   "serverTemplateRef": {"apiVersion": "networking.liqo.io/v1beta1", "kind": "WgGatewayServerTemplate",
                                         "name": "wireguard-server", "namespace": "liqo"}}}
    return {"ConfigMap": cm, "GatewayServer": gs}


def _playbook(kubeconfig):
    tasks = [{"name": "namespace", "liqo.fabric.k8s_apply": {
        "kubeconfig": kubeconfig, "definitions": [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}]}}]
    for rep in range(REPS + 1):  # rep 0 warms up both
        for kind, obj in _definitions().items():
            tasks.append({"name": f"core {kind} {rep}",
                          "kubernetes.core.k8s": {"kubeconfig": kubeconfig, "apply": True, "definition": obj}})
            tasks.append({"name": f"fabric {kind} {rep}",
                          "liqo.fabric.k8s_apply": {"kubeconfig": kubeconfig, "definitions": [obj]}})
    return [{"hosts": "localhost", "gather_facts": False, "tasks": tasks}]


def _durations(stdout):
    out = {}
    for task in json.loads(stdout)["plays"][0]["tasks"]:
        res = task["hosts"]["localhost"]
        if res.get("failed"):
            raise RuntimeError(f"{task['task']['name']}: {res.get('msg')}")
        d = task["task"]["duration"]
        secs = (datetime.fromisoformat(d["end"].replace("Z", "+00:00"))
                - datetime.fromisoformat(d["start"].replace("Z", "+00:00"))).total_seconds()
        out[task["task"]["name"]] = (secs, res.get("changed"))
    return out


def run():
    if os.geteuid() != 0:
        print("  skipped: needs root for the lab's network namespaces")
        return
    if not shutil.which("kubectl"):
        print("  skipped: kubectl is not installed")
        return
    with Lab([{"name": "a"}], nodes=1, pods_per_node=1) as lab:
        fabric.install(lab["a"])
        with tempfile.TemporaryDirectory(prefix="lfab-bench-") as tmp:
            path = os.path.join(tmp, "bench.yml")
            with open(path, "w", encoding="utf-8") as f:
                json.dump(_playbook(lab["a"].kubeconfig), f)
            proc = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i",
                                   "localhost,", "-c", "local", path], capture_output=True, text=True, check=False,
                                  env=ansible_env({"ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.json"}), timeout=600)
        if proc.returncode != 0:
            raise RuntimeError(f"benchmark playbook failed: {proc.stdout[-2000:]} {proc.stderr[-2000:]}")
        times = _durations(proc.stdout)
    for kind in _definitions():
        core = [times[f"core {kind} {rep}"][0] for rep in range(1, REPS + 1)]
        ours = [times[f"fabric {kind} {rep}"][0] for rep in range(1, REPS + 1)]
        unchanged = all(not times[f"fabric {kind} {rep}"][1] for rep in range(1, REPS + 1))
        figure(f"kubernetes.core.k8s apply {kind}, median of {REPS}", statistics.median(core), "s")
        figure(f"liqo.fabric.k8s_apply {kind}, median of {REPS}", statistics.median(ours), "s")
        ratio(f"k8s_apply / kubernetes.core.k8s ({kind})", statistics.median(ours), statistics.median(core), target=0.6)
        if not unchanged:
            print(f"  WARNING: a re-apply of the {kind} reported a change")
