"""A rolling upgrade of the fabric in the cluster from the previous release N (a commit of main, its own image) to
this tree's N+1, and back (a downgrade: the image rolled back, the manifests this tree's), with `kubectl apply -k`
of an overlay that sets the image's tag, under 5 pings/s between pods across the peering and a long-lived TCP flow
(tests/e2e/rolling_upgrade.py). Runs on the real-node lab it shares (tests/e2e/real_nodes.py) after test_in_cluster
removed its install; installs N, rolls, and removes the install at the end.
"""
from __future__ import annotations

import concurrent.futures

import pytest

from tests.e2e.fabric import wait_for
from tests.e2e.real_nodes import kubectl
from tests.lab.images import fabric_image

pytest.register_assert_rewrite("tests.e2e.rolling_upgrade")
from tests.e2e import rolling_upgrade as ru  # noqa: E402  pylint: disable=wrong-import-position
from tests.e2e.in_cluster_lab import DEPLOY, get_json  # noqa: E402  pylint: disable=wrong-import-position


@pytest.fixture(scope="module")
def previous():
    return ru.previous_image()


@pytest.fixture(scope="module")
def lab(real_node_lab, request):
    yield real_node_lab.get()
    real_node_lab.release(request)


@pytest.fixture(scope="module")
def on_previous(lab, previous):
    """N installed in both clusters and connected; removed at the end: the gateways first (their finalizer is the
    running controller's), then `kubectl delete -k`, both clusters at once."""
    try:
        ru.install_previous(lab, previous)
        yield lab
    finally:
        with concurrent.futures.ThreadPoolExecutor(len(lab.clusters)) as pool:
            for done in [pool.submit(kubectl, c, "delete", "gatewayclients,gatewayservers", "-A", "--all", "--wait=true",
                                     check=False, timeout=120) for c in lab.clusters.values()]:
                done.result()
            for done in [pool.submit(kubectl, c, "delete", "-k", DEPLOY, "--wait=true", "--ignore-not-found", timeout=180)
                         for c in lab.clusters.values()]:
                done.result()
            for done in [pool.submit(removed, c) for c in lab.clusters.values()]:
                done.result()


def removed(c) -> None:
    """The workload deleted, then namespace liqo and every pod of the fabric gone from cluster `c`."""
    kubectl(c, "delete", "deployment", "workload", "--ignore-not-found", "--wait=true", timeout=120)
    wait_for(lambda: kubectl(c, "get", "namespace", "liqo", check=False).returncode != 0, timeout=120,
             what=f"{c.name}: namespace liqo gone")
    wait_for(lambda: not ru.fabric_pods(c), timeout=90, what=f"{c.name}: no pod of the fabric left")


def assert_rolled_without_outage(lab, result: dict, image: str, ordered: bool) -> None:
    for c, order in result["order"].items():   # the gateways rolled once the node agents had (N holds them too)
        assert order["last agent ready"] and order["first gateway pod created"], (c, order)
        if ordered:
            assert order["first gateway pod created"] >= order["last agent ready"], (c, order)
    flow = result["flow"]
    assert not flow["error"] and flow["sent"] > 0 and flow["received"] == flow["sent"], flow   # the TCP flow survived
    assert result["pings resumed"]
    assert result["old image"] == {c: [] for c in lab.clusters}, result["old image"]
    for c in lab.clusters.values():
        states = [(x["metadata"]["name"], (x.get("status") or {}).get("value")) for x in get_json(c, "connections")["items"]]
        assert states and all(v == "Connected" for _n, v in states), (c.name, states)
        for p in ru.fabric_pods(c):
            assert ru.images_of(p) == {image}, (p.metadata.name, ru.images_of(p))


def test_the_previous_release_runs_on_its_own_image(on_previous, previous):
    assert previous["name"] != fabric_image()
    for c in on_previous.clusters.values():
        pods = ru.fabric_pods(c)
        assert len(pods) == 2 + len(c.nodes) + 2, [p.metadata.name for p in pods]   # controllers, agents, gateways
        assert ru.on_old_image(c, previous["name"]) == []


def test_rolling_upgrade_to_this_tree_keeps_the_traffic(on_previous, previous):
    image = fabric_image()
    result = ru.roll(on_previous, DEPLOY, image)
    assert_rolled_without_outage(on_previous, result, image, previous["ordered"])
    for c in on_previous.clusters.values():   # this tree's strategy, and the active pod's deletion cost
        gw = get_json(c, "deployment", "-n", "default", f"gw-{ru.GATEWAYS[c.name]}")["spec"]
        assert gw["strategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}, gw
        active = get_json(c, "pods", "-n", "default", "-l", "networking.liqo.io/active=true")["items"]
        assert [p["metadata"].get("annotations", {}).get("controller.kubernetes.io/pod-deletion-cost") for p in active] == ["100"]


def test_downgrade_is_an_image_rollback_with_the_same_manifests(on_previous, previous):
    # (the previous release's gateway templates say Recreate: the documented step of such a downgrade)
    result = ru.roll(on_previous, DEPLOY, previous["name"], recreate_step=True)
    assert_rolled_without_outage(on_previous, result, previous["name"], previous["ordered"])
