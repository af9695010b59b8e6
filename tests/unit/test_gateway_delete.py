"""liqo.fabric.gateway_delete's logic on an in-memory apiserver: who holds the controller's Lease (missing,
released, expired by its renewTime or as watched, unreadable), and the gateways let go by a live controller, or
torn down here (their finalizer removed) when none runs or with force; check mode writes nothing."""
import copy

import pytest

from ansible_collections.liqo.fabric.plugins.module_utils.gateway.finalizer import (
    GATEWAY_FINALIZER, GatewayDeleteError, delete_gateways, remove_finalizer)
from ansible_collections.liqo.fabric.plugins.module_utils.kube.client import ApiError
from ansible_collections.liqo.fabric.plugins.module_utils.kube.lease import LeaseWatch, parse_time
from tests.conftest import ROOT

NOW = parse_time("2026-11-26T00:01:00.000000Z")


def lease(holder="ctl-1", renewed="2026-11-26T00:00:58.500000Z", duration=15, rv="5"):
    return {"metadata": {"name": "liqo-fabric-controller", "namespace": "liqo", "resourceVersion": rv},
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": duration, "renewTime": renewed}}


def gateway(kind="GatewayClient", name="paris", finalizers=(GATEWAY_FINALIZER,)):
    return {"kind": kind, "metadata": {"name": name, "namespace": "liqo-tenant-paris", "uid": "uid-" + name,
                                       "resourceVersion": "1", "finalizers": list(finalizers)}}


class FakeKube:
    """GET/LIST/DELETE/merge PATCH of a few objects, as the apiserver does: a deleted object with finalizers stays
    (deletionTimestamp set) until they are removed; a PATCH with a stale resourceVersion is a conflict. `controller`
    plays a live controller's finalizer: at its `controller_after`-th look it removes its finalizer."""

    def __init__(self, objects, controller_after=None):
        self.objects = {(o["kind"], o["metadata"]["namespace"], o["metadata"]["name"]): copy.deepcopy(o)
                        for o in objects}
        self.calls, self.controller_after, self.looks = [], controller_after, 0

    def get(self, kind, namespace, name):
        if isinstance(self.objects.get((kind, namespace, name)), Exception):
            raise self.objects[(kind, namespace, name)]
        if kind != "Lease" and self.controller_after is not None:
            self.looks += 1
            if self.looks >= self.controller_after:
                for obj in self.objects.values():
                    if not isinstance(obj, Exception) and obj["metadata"].get("deletionTimestamp"):
                        obj["metadata"]["finalizers"] = []
                self._collect()
        return copy.deepcopy(self.objects.get((kind, namespace, name)))

    def list(self, kind, namespace=None, label_selector=None):
        return [copy.deepcopy(o) for (k, ns, _name), o in sorted(self.objects.items())
                if k == kind and ns == namespace]

    def delete(self, kind, namespace, name):
        self.calls.append(("DELETE", kind, name))
        obj = self.objects.get((kind, namespace, name))
        if obj is not None:
            obj["metadata"]["deletionTimestamp"] = "2026-11-26T00:01:00Z"
            self._collect()

    def patch(self, kind, namespace, name, patch):
        self.calls.append(("PATCH", kind, name, patch))
        obj = self.objects[(kind, namespace, name)]
        if patch["metadata"]["resourceVersion"] != obj["metadata"]["resourceVersion"]:
            raise ApiError(409, "conflict")
        obj["metadata"]["finalizers"] = patch["metadata"]["finalizers"]
        obj["metadata"]["resourceVersion"] = str(int(obj["metadata"]["resourceVersion"]) + 1)
        self._collect()

    def _collect(self):
        for key, obj in list(self.objects.items()):
            if not isinstance(obj, Exception) and obj["metadata"].get("deletionTimestamp") \
                    and not obj["metadata"].get("finalizers"):
                del self.objects[key]


def watch(kube, clock=None):
    clock = clock or [0.0]
    return LeaseWatch(kube, "liqo", "liqo-fabric-controller", wall=lambda: NOW, monotonic=lambda: clock[0])


@pytest.mark.parametrize("obj,held,reason", [
    (None, False, "no Lease liqo/liqo-fabric-controller"),
    (lease(holder=""), False, "Lease liqo/liqo-fabric-controller is released (no holder)"),
    (lease(renewed="2026-11-26T00:00:40.000000Z"), False,
     "ctl-1 last renewed Lease liqo/liqo-fabric-controller 20.0 s ago, for 15 s"),
    (lease(), True, "ctl-1 holds Lease liqo/liqo-fabric-controller (renewed 1.5 s ago, for 15 s)"),
    (ApiError(403, "forbidden"), None, "Lease liqo/liqo-fabric-controller cannot be read"),
])
def test_who_holds_the_controllers_lease(obj, held, reason):
    objects = {} if obj is None else {("Lease", "liqo", "liqo-fabric-controller"): obj}
    kube = FakeKube([])
    kube.objects.update(objects)
    got = watch(kube).read()
    assert got["held"] is held and got["reason"].startswith(reason), got


def test_a_lease_not_renewed_for_its_duration_as_watched_here_is_held_by_nobody():
    """A holder whose clock runs ahead (renewTime looks fresh) but whose record does not change: not held once the
    record has stayed the same for leaseDurationSeconds on this host's clock."""
    kube = FakeKube([])
    kube.objects[("Lease", "liqo", "liqo-fabric-controller")] = lease(renewed="2026-11-26T00:05:00.000000Z")
    clock = [100.0]
    w = watch(kube, clock)
    assert w.read()["held"] is True
    clock[0] += 10
    assert w.read()["held"] is True
    clock[0] += 6
    got = w.read()
    assert got["held"] is False and "has not renewed Lease liqo/liqo-fabric-controller for 16 s here" in got["reason"]
    kube.objects[("Lease", "liqo", "liqo-fabric-controller")] = lease(renewed="2026-11-26T00:05:02.000000Z", rv="6")
    assert w.read()["held"] is True     # renewed: alive again


def test_without_a_controller_the_gateways_are_torn_down_here_and_let_go():
    kube = FakeKube([gateway(), gateway("GatewayServer", "rome"),
                     {"kind": "Deployment", "metadata": {"name": "gw-paris", "namespace": "liqo-tenant-paris",
                                                         "ownerReferences": [{"uid": "uid-paris"}]}}])
    out = delete_gateways(kube, "liqo-tenant-paris", watch(kube), sleep=lambda s: None)
    assert out["deleted"] == ["GatewayServer liqo-tenant-paris/rome", "GatewayClient liqo-tenant-paris/paris"]
    assert sorted(out["finalized"]) == sorted(out["deleted"])
    assert out["torn_down"] == ["Deployment/gw-paris"]          # the in-cluster teardown: what the gateway owns
    assert out["controller"]["held"] is False
    assert [k for k in kube.objects if k[0].startswith("Gateway")] == []
    assert ("Deployment", "liqo-tenant-paris", "gw-paris") not in kube.objects
    patches = [c for c in kube.calls if c[0] == "PATCH"]
    assert all(c[3]["metadata"]["finalizers"] == [] and c[3]["metadata"]["resourceVersion"] for c in patches), patches


def test_a_live_controller_lets_them_go_and_nothing_is_done_here():
    kube = FakeKube([gateway()], controller_after=4)
    kube.objects[("Lease", "liqo", "liqo-fabric-controller")] = lease()
    out = delete_gateways(kube, "liqo-tenant-paris", watch(kube), sleep=lambda s: None)
    assert out["finalized"] == [] and out["controller"]["held"] is True
    assert not [c for c in kube.calls if c[0] == "PATCH"]
    assert ("GatewayClient", "liqo-tenant-paris", "paris") not in kube.objects


def test_a_controller_that_stops_while_waiting_is_noticed_when_its_lease_expires():
    kube = FakeKube([gateway()])
    kube.objects[("Lease", "liqo", "liqo-fabric-controller")] = lease()
    clock = [0.0]

    def sleep(seconds):
        clock[0] += seconds
    out = delete_gateways(kube, "liqo-tenant-paris", watch(kube, clock), sleep=sleep, monotonic=lambda: clock[0])
    assert out["finalized"] == ["GatewayClient liqo-tenant-paris/paris"]
    assert 15 < clock[0] < 17, clock       # the Lease's 15 s, as watched here
    assert "has not renewed" in out["controller"]["reason"]


def test_force_does_it_here_whatever_the_lease_says():
    kube = FakeKube([gateway()])
    kube.objects[("Lease", "liqo", "liqo-fabric-controller")] = lease()
    out = delete_gateways(kube, "liqo-tenant-paris", watch(kube), force=True, sleep=lambda s: None)
    assert out["finalized"] == ["GatewayClient liqo-tenant-paris/paris"] and out["controller"]["held"] is True
    assert ("GatewayClient", "liqo-tenant-paris", "paris") not in kube.objects


def test_a_stuck_controller_times_out_naming_it_and_force():
    kube = FakeKube([gateway()])
    clock = [0.0]
    kube.objects[("Lease", "liqo", "liqo-fabric-controller")] = lease()

    def sleep(seconds):   # the controller renews its Lease all along
        clock[0] += seconds
        kube.objects[("Lease", "liqo", "liqo-fabric-controller")] = lease(rv=str(int(clock[0] * 100)))
    with pytest.raises(GatewayDeleteError) as err:
        delete_gateways(kube, "liqo-tenant-paris", watch(kube, clock), timeout=10, sleep=sleep,
                        monotonic=lambda: clock[0])
    msg = str(err.value)
    assert msg.startswith("GatewayClient liqo-tenant-paris/paris (finalizers: networking.liqo.io/fabric-gateway) "
                          "still there after 10 s: ctl-1 holds Lease liqo/liqo-fabric-controller"), msg
    assert "TeardownFailed" in msg and "force=true" in msg


def test_another_finalizer_is_waited_for_not_removed():
    kube = FakeKube([gateway(finalizers=(GATEWAY_FINALIZER, "example.com/other"))])
    clock = [0.0]

    def sleep(seconds):
        clock[0] += seconds
    with pytest.raises(GatewayDeleteError, match="finalizers: example.com/other.*not the fabric's"):
        delete_gateways(kube, "liqo-tenant-paris", watch(kube), timeout=3, sleep=sleep, monotonic=lambda: clock[0])
    assert kube.objects[("GatewayClient", "liqo-tenant-paris", "paris")]["metadata"]["finalizers"] == ["example.com/other"]


def test_check_mode_writes_nothing_and_says_what_it_would_do():
    kube = FakeKube([gateway()])
    out = delete_gateways(kube, "liqo-tenant-paris", watch(kube), check_mode=True)
    assert out["deleted"] == out["finalized"] == ["GatewayClient liqo-tenant-paris/paris"] and kube.calls == []
    assert out["diffs"][0]["before_header"] == "GatewayClient liqo-tenant-paris/paris" and out["diffs"][0]["after"] == {}


def test_nothing_to_delete_reads_nothing_more():
    kube = FakeKube([])
    out = delete_gateways(kube, "liqo-tenant-paris", watch(kube))
    assert out == {"deleted": [], "finalized": [], "torn_down": [], "controller": None, "resources": [], "diffs": []}


def test_a_conflict_reads_the_object_again():
    kube = FakeKube([gateway()])
    stale = copy.deepcopy(kube.objects[("GatewayClient", "liqo-tenant-paris", "paris")])
    kube.objects[("GatewayClient", "liqo-tenant-paris", "paris")]["metadata"]["resourceVersion"] = "2"
    assert remove_finalizer(kube, stale) is True
    assert kube.objects[("GatewayClient", "liqo-tenant-paris", "paris")]["metadata"]["finalizers"] == []


def test_the_finalizer_is_the_controllers():
    import yaml  # pylint: disable=import-outside-toplevel
    for path in ("controller/watches.yaml", "controller/watches-in-cluster.yaml"):
        with open(f"{ROOT}/{path}", encoding="utf-8") as f:
            entries = yaml.safe_load(f)["watches"]
        assert {e["finalizer"] for e in entries if e.get("finalizer")} == {GATEWAY_FINALIZER}, path
