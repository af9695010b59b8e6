"""A rolling upgrade of the fabric in the cluster, and its rollback, on the real-node lab (tests/e2e/real_nodes.py).

Version N is the tree of a commit of main (PREVIOUS, built with tests/e2e/previous_release.py) in its own image,
docker.io/liqo-fabric/fabric:<version>-<short sha> (deploy/image/build.sh with IMAGE_TREE/IMAGE_VERSION), imported
into every node's containerd of the running lab; N+1 is this tree's image (`make image`). install_previous() installs
N with `kubectl apply -k` of an overlay of N's deploy/ that sets N's tag, and roll() applies an overlay of this
tree's deploy/ with the tag to roll to (N+1's, or N's again: a downgrade is an image rollback with the same
manifests), under 5 pings/s between pods across the peering and one long-lived TCP flow, until the controller, the
node agents and every gateway run the new image. tests/e2e/test_rolling_upgrade.py asserts on it;
tests/benchmarks/bench_rolling_upgrade.py prints its figures.
"""
from __future__ import annotations

import concurrent.futures
import json
import os
import subprocess
import tempfile
import threading
import time

import yaml
from kubernetes import client

from ansible_collections.liqo.fabric.plugins.module_utils.gateway import rollout
from tests.e2e import in_cluster_lab as icl
from tests.e2e import previous_release
from tests.e2e.fabric import wait_for
from tests.e2e.real_nodes import kubectl
from tests.lab import images
from tests.lab.tcp import Flow

# N: main at its last release, the first whose controller rolls the gateways after the node agents (override:
# LIQO_FABRIC_ROLL_FROM=<commit>; 5710972, the release before, recreates its gateways: docs/upgrade.md)
PREVIOUS = os.environ.get("LIQO_FABRIC_ROLL_FROM") or "1ddf3e4"
FLOW_PORT = 5412
GATEWAYS = {"a": "client", "b": "server"}   # the gateway of each cluster (in_cluster_lab.connect)


def previous_image() -> dict:
    """N's tree (built once, cached; skips in a clone without the commit) and its image: {"tree", "name", "archive",
    "ordered"}."""
    tree = previous_release.collection(PREVIOUS)
    sha = subprocess.run(["git", "-C", previous_release.ROOT, "rev-parse", "--short=7", PREVIOUS], capture_output=True,
                         text=True, check=True).stdout.strip()
    with open(os.path.join(tree, "galaxy.yml"), encoding="utf-8") as f:
        version = yaml.safe_load(f)["version"]
    # a release whose controller holds the gateways' roll until the node agents' (both versions act during a roll)
    ordered = os.path.isfile(os.path.join(tree, "plugins", "module_utils", "gateway", "rollout.py"))
    return dict(images.fabric_image_of(tree, f"{version}-{sha}"), tree=tree, ordered=ordered)


def tag_of(image: str) -> str:
    return image.rsplit(":", 1)[1]


def overlay(lab, deploy: str, tag: str) -> str:
    """A kustomization of `deploy` with the fabric image's tag set (under the lab's directory: it goes with the lab)."""
    where = tempfile.mkdtemp(prefix="roll-", dir=lab.workdir)
    with open(os.path.join(where, "kustomization.yaml"), "w", encoding="utf-8") as f:
        f.write(f"resources:\n  - {os.path.relpath(deploy, where)}\n"
                f"images:\n  - name: docker.io/liqo-fabric/fabric\n    newTag: \"{tag}\"\n")
    return where


def install_previous(lab, previous: dict) -> None:
    """N in both clusters (its image in every node, its manifests with its tag) and the workload; then connected."""
    images.import_into(lab, previous["archive"])
    icl.install(lab, overlay(lab, os.path.join(previous["tree"], "deploy"), tag_of(previous["name"])))
    icl.connect(lab)


def fabric_pods(cluster) -> list:
    """Every pod of the fabric in the cluster: the controller's and the node agents' (liqo), the gateways' (default)."""
    core = cluster.kube.core
    return (core.list_namespaced_pod("liqo", label_selector="app.kubernetes.io/part-of=liqo-fabric").items
            + core.list_namespaced_pod("default", label_selector="networking.liqo.io/component=gateway").items)


def images_of(pod) -> set:
    return {c.image for c in (pod.spec.init_containers or []) + pod.spec.containers}


def on_old_image(cluster, image: str) -> list:
    """`name: images` of the fabric's pods (terminating ones too) running anything but `image`."""
    return [f"{p.metadata.name}: {sorted(images_of(p))}" for p in fabric_pods(cluster) if images_of(p) != {image}]


def rolled(cluster, image: str) -> bool:
    """The roll to `image` done: the controller and gateway Deployments and the node-agent DaemonSet all updated and
    available, every pod of the fabric on `image` and none left terminating."""
    apps = client.AppsV1Api(cluster.kube.api)
    for ns, sel in (("liqo", "app.kubernetes.io/part-of=liqo-fabric"), ("default", "networking.liqo.io/component=gateway")):
        deps = apps.list_namespaced_deployment(ns, label_selector=sel).items
        if ns == "default" and not deps:
            return False
        for d in deps:
            s, want = d.status, d.spec.replicas
            if (s.observed_generation or 0) < d.metadata.generation or not (
                    s.updated_replicas == s.replicas == s.available_replicas == s.ready_replicas == want):
                return False
    for ds in apps.list_namespaced_daemon_set("liqo").items:
        s = ds.status
        if (s.observed_generation or 0) < ds.metadata.generation or not (
                s.updated_number_scheduled == s.desired_number_scheduled == s.number_available):
            return False
    return not on_old_image(cluster, image)


def roll_order(cluster, image: str) -> dict:
    """When the last node agent on `image` became ready and when the first gateway pod on `image` was created (the
    API's timestamps, whole seconds): the gateways roll after the node agents (module_utils/gateway/rollout.py)."""
    agents = [p for p in cluster.kube.core.list_namespaced_pod("liqo", label_selector=rollout.AGENT_SELECTOR).items
              if images_of(p) == {image}]
    gateways = [p for p in cluster.kube.core.list_namespaced_pod(
        "default", label_selector="networking.liqo.io/component=gateway").items if images_of(p) == {image}]
    ready = [c.last_transition_time for p in agents for c in (p.status.conditions or []) if c.type == "Ready"]
    return {"last agent ready": max(ready) if ready else None,
            "first gateway pod created": min((p.metadata.creation_timestamp for p in gateways), default=None)}


class ConnectionWatch:
    """The Connections of every cluster read every second in a thread: how long any was Error (s) and the states
    seen."""

    def __init__(self, lab):
        self.lab, self.error_since, self.longest_error, self.seen = lab, {}, 0.0, set()
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.done.wait(1.0):
            for c in self.lab.clusters.values():
                try:
                    items = icl.get_json(c, "connections")["items"]
                except AssertionError:   # a kubectl that failed under load: the next round reads again
                    continue
                for x in items:
                    key, value = f"{c.name}/{x['metadata']['name']}", (x.get("status") or {}).get("value")
                    self.seen.add(value)
                    if value == "Error":
                        self.error_since.setdefault(key, time.monotonic())
                        self.longest_error = max(self.longest_error, time.monotonic() - self.error_since[key])
                    else:
                        self.error_since.pop(key, None)

    def stop(self) -> float:
        self.done.set()
        self.thread.join(30)
        return round(self.longest_error, 1)


def traffic_ends(lab) -> tuple:
    """The pods the traffic runs between: a's workload pod on a node without a's active gateway pod and b's on a
    node without b's (pod veth, the overlay, both gateways' NAT and WireGuard); b's pod at its address remapped
    for a. (host PID in a's pod, host PID in b's pod, address)."""
    a, b = lab["a"], lab["b"]
    gw_a, gw_b = icl.active_gateway(a, "client"), icl.active_gateway(b, "server")
    src = next(p for p in icl.workload_pods(a) if p.spec.node_name != gw_a.spec.node_name)
    dst = next(p for p in icl.workload_pods(b) if p.spec.node_name != gw_b.spec.node_name)
    view = icl.get_json(a, "configurations", "dry-paper")["status"]["remote"]["cidr"]["pod"][0]
    return icl.host_pid(a, src.metadata.name), icl.host_pid(b, dst.metadata.name), icl.remapped(dst.status.pod_ip, view)


def to_recreate(cluster, image: str) -> list:
    """The step a downgrade to a release whose gateway templates say `strategy: Recreate` needs (docs/upgrade.md):
    once that release's bootstrap applied its templates (`image` in them), each gateway Deployment still rolling
    (RollingUpdate) is patched to Recreate, rollingUpdate removed. The older controller's server-side apply of its
    template cannot do it: it leaves the rollingUpdate it does not name, which the apiserver refuses beside Recreate
    (its status: GatewayManifestRejected, until this step). The Deployments patched."""
    wait_for(lambda: all(image in json.dumps(t["spec"]) for kind in ("wggatewayclienttemplates", "wggatewayservertemplates")
                         for t in icl.get_json(cluster, kind, "-n", "liqo")["items"]),
             timeout=240, interval=2, what=f"{cluster.name}: the gateway templates of {image}")
    templates = [t for kind in ("wggatewayclienttemplates", "wggatewayservertemplates")
                 for t in icl.get_json(cluster, kind, "-n", "liqo")["items"]]
    if not any(t["spec"]["template"]["spec"]["deployment"]["spec"].get("strategy", {}).get("type") == "Recreate"
               for t in templates):
        return []
    patched = []
    for d in icl.get_json(cluster, "deployments", "-n", "default", "-l", "networking.liqo.io/component=gateway")["items"]:
        if d["spec"]["strategy"]["type"] != "Recreate":
            kubectl(cluster, "patch", "deployment", "-n", "default", d["metadata"]["name"], "--type", "merge", "-p",
                    '{"spec": {"strategy": {"type": "Recreate", "rollingUpdate": null}}}')
            patched.append(d["metadata"]["name"])
    return patched


def roll(lab, deploy: str, image: str, figures: dict | None = None, recreate_step: bool = False) -> dict:
    """`kubectl apply -k` of `deploy` with `image`'s tag on both clusters, under pings and a TCP flow, until
    rolled(); then both Connections Connected again. `recreate_step`: a downgrade's to_recreate() too (a release
    whose gateway templates say Recreate). What the tests assert: {"flow": Flow.stop(), "pings resumed": bool,
    "error seen (s)": longest Error of a Connection, "old image": pods left on another image, "order": roll_order()
    per cluster}. Figures: the roll's time, the longest time without a reply, the longest Error."""
    figures = {} if figures is None else figures
    src_pid, dst_pid, address = traffic_ends(lab)
    wait_for(lambda: subprocess.run(["nsenter", f"--net=/proc/{src_pid}/ns/net", "ping", "-c", "1", "-W", "1", address],
                                    capture_output=True, check=False).returncode == 0, timeout=60,
             what=f"a reply from {address} before the roll")
    pinger = icl.Pinger(["nsenter", f"--net=/proc/{src_pid}/ns/net"], address, interval=0.2, count=100000)
    # 1 kB every 100 ms; given up after 300 s unacknowledged: a downgrade's recreated gateways are a short outage
    flow = Flow(["nsenter", f"--net=/proc/{src_pid}/ns/net"], ["nsenter", f"--net=/proc/{dst_pid}/ns/net"],
                address, FLOW_PORT, interval=0.1, give_up=300)
    watch = ConnectionWatch(lab)
    try:
        started = time.time()
        wait_for(lambda: pinger.replied_since(started), timeout=10, what="pings answered before the roll")
        where = overlay(lab, deploy, tag_of(image))
        t0 = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(len(lab.clusters)) as pool:
            for done in [pool.submit(kubectl, c, "apply", "-k", where, timeout=120) for c in lab.clusters.values()]:
                done.result()
            if recreate_step:
                for done in [pool.submit(to_recreate, c, image) for c in lab.clusters.values()]:
                    done.result()
        for c in lab.clusters.values():
            wait_for(lambda c=c: rolled(c, image), timeout=420, interval=2, what=f"{c.name}: the fabric rolled to {image}")
        figures["kubectl apply -k -> every fabric pod on the new image (s)"] = round(time.monotonic() - t0, 1)
        for c in lab.clusters.values():
            wait_for(lambda c=c: icl.connected_connections(c), timeout=120, what=f"{c.name}: Connection Connected")
        rolled_at = time.time()
        resumed = bool(wait_for(lambda: pinger.replied_since(rolled_at), timeout=30, what="pings answered after the roll"))
        time.sleep(2)   # the flow carries data after the roll too
    finally:
        gap = pinger.stop()
        error = watch.stop()
        flow_end = flow.stop(timeout=180)
    figures["longest time without a reply, 5 pings/s (s)"] = gap
    figures["longest time a Connection was Error (s)"] = error
    return {"flow": flow_end, "pings resumed": resumed, "error seen (s)": error, "states seen": sorted(map(str, watch.seen)),
            "old image": {c.name: on_old_image(c, image) for c in lab.clusters.values()},
            "order": {c.name: roll_order(c, image) for c in lab.clusters.values()}}
