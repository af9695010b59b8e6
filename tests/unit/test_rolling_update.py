"""What a rolling upgrade of the fabric in the cluster stands on (docs/upgrade.md): the update strategies and
disruption budgets of deploy/, the gateway's deletion cost (controller/gateway_ha.py) and the image of another
version (deploy/image/build.sh's IMAGE_TREE/IMAGE_VERSION)."""
import os
import subprocess

import pytest
import yaml

from ansible_collections.liqo.fabric.plugins.module_utils.gateway import rollout
from controller import gateway_ha

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEPLOY = os.path.join(ROOT, "deploy")


def load(rel):
    with open(os.path.join(DEPLOY, rel), encoding="utf-8") as f:
        return [o for o in yaml.safe_load_all(f) if o]


def gateway_deployment(kind):
    return load(f"templates/wireguard-{kind}.yaml")[0]["spec"]["template"]["spec"]["deployment"]


def test_the_controller_rolls_a_new_replica_in_before_an_old_one_goes():
    dep = load("controller/deployment.yaml")[0]
    assert dep["spec"]["replicas"] == 2
    assert dep["spec"]["strategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}


def test_the_node_agents_roll_one_node_at_a_time_without_surge():
    ds = load("controller/daemonset.yaml")[0]
    pod = ds["spec"]["template"]["spec"]
    # no surge: the host network makes the metrics port a host port, which a second agent on the node could not bind
    assert pod["hostNetwork"] and pod["containers"][0]["ports"][0]["containerPort"] == 9181
    # (maxSurge, Kubernetes >= 1.22, not named: a 1.20 apiserver's schema refuses it)
    assert ds["spec"]["updateStrategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}}


@pytest.mark.parametrize("kind", ["server", "client"])
def test_a_gateway_rolls_a_warm_standby_in_before_an_old_pod_goes(kind):
    spec = gateway_deployment(kind)["spec"]
    assert spec["replicas"] == 2
    assert spec["strategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}
    args = spec["template"]["spec"]["containers"][0]["args"]
    warmup = float(next(a for a in args if a.startswith("--standby-warmup-delay=")).split("=")[1])
    assert spec["minReadySeconds"] > warmup   # a new standby warms up before it counts as available


def test_disruption_budgets_one_controller_and_one_gateway_pod_at_a_time():
    # deploy/budgets: deploy/ and its budgets (policy/v1, Kubernetes >= 1.21); deploy/ alone installs on 1.20
    assert load("budgets/kustomization.yaml")[0]["resources"] == ["..", "controller.yaml", "gateways.yaml"]
    assert not [r for r in load("kustomization.yaml")[0]["resources"] if "pdb" in r]
    pdbs = {o["metadata"]["name"]: o for f in ("controller", "gateways") for o in load(f"budgets/{f}.yaml")}
    assert sorted(pdbs) == ["liqo-fabric-controller", "liqo-fabric-gateways"]
    assert all(p["apiVersion"] == "policy/v1" and p["spec"]["maxUnavailable"] == 1 for p in pdbs.values())
    controller = load("controller/deployment.yaml")[0]
    assert pdbs["liqo-fabric-controller"]["spec"]["selector"]["matchLabels"].items() <= \
        controller["spec"]["template"]["metadata"]["labels"].items()
    for kind in ("server", "client"):   # the rendered gateway pods are in the budget of their namespace
        labels = gateway_deployment(kind)["spec"]["template"]["metadata"]["labels"]
        assert pdbs["liqo-fabric-gateways"]["spec"]["selector"]["matchLabels"].items() <= labels.items()


class FakeApi:
    def __init__(self):
        self.calls = []

    def request(self, method, path, body=None, content_type=None):
        self.calls.append((method, path, body, content_type))


def test_the_active_gateway_pod_costs_more_to_delete_than_its_standby():
    api = FakeApi()
    assert gateway_ha.mark(api, "default", "gw-client-1", True)
    assert gateway_ha.mark(api, "default", "gw-client-1", False)
    (m1, p1, active, ct), (_m2, _p2, standby, _ct) = api.calls
    assert (m1, ct) == ("PATCH", "application/merge-patch+json") and p1.endswith("/namespaces/default/pods/gw-client-1")
    assert active["metadata"] == {"labels": {"networking.liqo.io/active": "true"},
                                  "annotations": {"controller.kubernetes.io/pod-deletion-cost": "100"}}
    # merge patch: None removes the label and the annotation
    assert standby["metadata"] == {"labels": {"networking.liqo.io/active": None},
                                   "annotations": {"controller.kubernetes.io/pod-deletion-cost": None}}


def test_a_gateway_pod_stops_as_soon_as_its_own_deletion_begins(monkeypatch):
    """Its own pod's deletionTimestamp (or its DELETED event) makes a gateway pod stop as on SIGTERM, once; another
    pod's deletion, or an event of its pod still alive, does not."""
    import signal  # pylint: disable=import-outside-toplevel
    import types  # pylint: disable=import-outside-toplevel
    monkeypatch.setenv("POD_NAME", "gw-server-1")
    sent = []
    monkeypatch.setattr(gateway_ha.os, "kill", lambda pid, sig: sent.append(sig))
    gateway = {"kind": "GatewayServer", "namespace": "default", "name": "server"}
    ha = gateway_ha.GatewayHA(types.SimpleNamespace(clusters={}), gateway)

    def pod(name, ns="default", deleting=False):
        meta = {"name": name, "namespace": ns}
        if deleting:
            meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
        return {"metadata": meta}
    cs = None
    ha.on_event(cs, "Pod", "MODIFIED", pod("gw-server-1"), None)
    ha.on_event(cs, "Pod", "MODIFIED", pod("gw-server-2", deleting=True), None)
    ha.on_event(cs, "Pod", "MODIFIED", pod("gw-server-1", ns="other", deleting=True), None)
    ha.on_event(cs, "Node", "MODIFIED", pod("gw-server-1", deleting=True), None)
    assert sent == []
    ha.on_event(cs, "Pod", "MODIFIED", pod("gw-server-1", deleting=True), None)
    ha.on_event(cs, "Pod", "DELETED", pod("gw-server-1", deleting=True), None)
    assert sent == [signal.SIGTERM]


@pytest.mark.parametrize("env, message", [
    ({"IMAGE_VERSION": "1.0/x"}, "IMAGE_VERSION=1.0/x: not an image tag"),
    ({"IMAGE_VERSION": "-x"}, "IMAGE_VERSION=-x: not an image tag"),
    ({"IMAGE_TREE": "/"}, "IMAGE_TREE=/: no galaxy.yml there"),
])
def test_build_of_another_version_refuses_bad_input_before_building(env, message, tmp_path):
    proc = subprocess.run(["bash", os.path.join(DEPLOY, "image", "build.sh")], capture_output=True, text=True,
                          check=False, timeout=30,
                          env=dict(os.environ, LIQO_FABRIC_CACHE=str(tmp_path / "cache"), **env))
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr
    assert not (tmp_path / "cache").exists()   # nothing built, nothing cached


def test_build_of_another_tree_refuses_other_python_requirements(tmp_path):
    for name in ("galaxy.yml", "requirements-dev.txt"):
        with open(os.path.join(ROOT, name), encoding="utf-8") as f:
            (tmp_path / name).write_text(f.read() + ("other-package==1.0\n" if name == "requirements-dev.txt" else ""))
    proc = subprocess.run(["bash", os.path.join(DEPLOY, "image", "build.sh")], capture_output=True, text=True,
                          check=False, timeout=30, env=dict(os.environ, IMAGE_TREE=str(tmp_path),
                                                            LIQO_FABRIC_CACHE=str(tmp_path / "cache")))
    assert proc.returncode == 2 and "its requirements-dev.txt is not this tree's" in proc.stderr, proc.stderr
    assert not (tmp_path / "cache").exists()


def agents(generation=2, observed=2, desired=3, updated=3, available=3):
    return {"metadata": {"namespace": "liqo", "name": "liqo-fabric-node-agent", "generation": generation},
            "status": {"observedGeneration": observed, "desiredNumberScheduled": desired,
                       "updatedNumberScheduled": updated, "numberAvailable": available}}


@pytest.mark.parametrize("ds,why", [
    (agents(), ""),
    (agents(desired=0, updated=0, available=0), ""),      # no node: nothing rolls
    (agents(generation=3), "liqo/liqo-fabric-node-agent: template change not observed yet"),
    (agents(updated=1, available=2), "liqo/liqo-fabric-node-agent: 1 of 3 agents updated, 2 available"),
    (agents(available=2), "liqo/liqo-fabric-node-agent: 3 of 3 agents updated, 2 available"),   # the last one starting
])
def test_the_node_agents_rollout_as_the_gateways_wait_for_it(ds, why):
    assert rollout.agents_rolling([ds]) == why


def deployment(image, held_since=None):
    ann = {rollout.HELD_SINCE: str(held_since)} if held_since is not None else {}
    return {"metadata": {"annotations": ann},
            "spec": {"replicas": 2, "template": {"spec": {"containers": [{"name": "gateway", "image": image}]}}}}


def test_a_gateway_roll_waits_for_the_node_agents_at_most_hold_max():
    old, new = deployment("fabric:1"), deployment("fabric:2")
    assert rollout.decide(None, new, "rolling") == "apply"           # a new gateway: nothing to hold
    assert rollout.decide(old, new, "") == "apply"                   # the agents rolled out
    assert rollout.decide(old, deployment("fabric:1"), "rolling") == "apply"   # this change rolls nothing
    assert rollout.decide(old, new, "rolling") == "hold"
    assert rollout.decide(deployment("fabric:1", held_since=1000), new, "rolling", now=1000 + rollout.HOLD_MAX - 1) == "hold"
    assert rollout.decide(deployment("fabric:1", held_since=1000), new, "rolling", now=1001 + rollout.HOLD_MAX) == "expired"
    assert rollout.held_since(deployment("x", held_since="garbage")) is None
