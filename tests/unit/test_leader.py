"""LeaderElector.try_acquire_or_renew on an in-memory Lease: a live holder's Lease is left alone, unless the
candidate knows the holder is going (holder_gone, a gateway's standby), and then it is taken at once."""
import copy
import threading

from controller.kubeapi import ApiError
from controller.leader import LeaderElector


class FakeApi:
    """GET and PUT of one Lease with resourceVersion checks (409 on a stale write), as the apiserver does."""
    name = "a"

    def __init__(self, holder="gw-old-7", duration=6):
        self.lease = {"metadata": {"name": "l", "namespace": "default", "resourceVersion": "1"},
                      "spec": {"holderIdentity": holder, "leaseDurationSeconds": duration,
                               "renewTime": "2026-11-26T00:00:00.000000Z", "leaseTransitions": 2}}

    def get(self, _res, _ns, _name):
        return copy.deepcopy(self.lease)

    def request(self, method, _path, body=None, **_kw):
        assert method == "PUT"
        if body["metadata"]["resourceVersion"] != self.lease["metadata"]["resourceVersion"]:
            raise ApiError(409, "conflict")
        self.lease = copy.deepcopy(body)
        self.lease["metadata"]["resourceVersion"] = str(int(body["metadata"]["resourceVersion"]) + 1)
        return self.lease

    def maybe_reload(self):
        pass


def elector(api, gone=None, now=None):
    now = now or [100.0]
    return LeaderElector(api, "gw-new-9", threading.Event(), name="l", namespace="default", duration=6,
                         clock=lambda: now[0], holder_gone=gone)


def test_a_live_holder_keeps_its_lease():
    api = FakeApi()
    seen = []
    e = elector(api, gone=lambda h: seen.append(h) or False)
    assert not e.try_acquire_or_renew() and api.lease["spec"]["holderIdentity"] == "gw-old-7"
    assert seen == ["gw-old-7"]
    assert not elector(api).try_acquire_or_renew()   # without holder_gone: the same


def test_a_holder_known_to_be_going_loses_its_lease_at_once():
    api = FakeApi()
    e = elector(api, gone=lambda h: h == "gw-old-7")
    assert e.try_acquire_or_renew()
    spec = api.lease["spec"]
    assert spec["holderIdentity"] == "gw-new-9" and spec["leaseTransitions"] == 3 and e.transitions == 1


def test_an_expired_lease_is_taken_without_asking():
    api = FakeApi()
    now = [100.0]
    e = elector(api, gone=lambda h: False, now=now)
    assert not e.try_acquire_or_renew()
    now[0] += 7   # the record unchanged for longer than its 6 s, on the candidate's clock
    assert e.try_acquire_or_renew() and api.lease["spec"]["holderIdentity"] == "gw-new-9"


OWNER = {"apiVersion": "networking.liqo.io/v1beta1", "kind": "GatewayServer", "name": "server", "uid": "u-1"}


def test_a_gateway_lease_is_made_owned_by_its_gateway():
    """A Lease made by a candidate with `owner` carries the ownerReference (the garbage collector deletes it with
    the gateway); one made before the owner was known gets it at the next write, once."""
    posted = []

    class Empty(FakeApi):
        def get(self, _res, _ns, _name):
            return copy.deepcopy(self.lease) if posted else None

        def request(self, method, _path, body=None, **_kw):
            if method == "POST":
                posted.append(copy.deepcopy(body))
                self.lease = dict(copy.deepcopy(body), metadata=dict(body["metadata"], resourceVersion="1"))
                return self.lease
            return super().request(method, _path, body=body, **_kw)

    api = Empty()
    owner = [None]
    e = LeaderElector(api, "gw-new-9", threading.Event(), name="l", namespace="default", duration=6,
                      owner=lambda: owner[0])
    assert e.try_acquire_or_renew()
    assert "ownerReferences" not in posted[0]["metadata"]     # the gateway not in the cache yet
    owner[0] = OWNER
    assert e.try_acquire_or_renew() and api.lease["metadata"]["ownerReferences"] == [OWNER]
    assert e.try_acquire_or_renew() and api.lease["metadata"]["ownerReferences"] == [OWNER]   # not twice

    posted.clear()
    api = Empty()
    assert LeaderElector(api, "gw-new-9", threading.Event(), name="l", namespace="default",
                         owner=lambda: OWNER).try_acquire_or_renew()
    assert posted[0]["metadata"]["ownerReferences"] == [OWNER]


def test_the_gateway_mode_owns_its_lease_by_its_gateway():
    from controller.modes import GatewayMode  # pylint: disable=import-outside-toplevel

    class Cluster:
        def __init__(self, obj):
            self.cache = {"default/server": obj} if obj else {}

        def obj(self, kind, key):
            assert kind == "GatewayServer"
            return self.cache.get(key)

    mode = GatewayMode({"kind": "GatewayServer", "namespace": "default", "name": "server"})
    lease = mode.lease("liqo")
    assert (lease.name, lease.namespace) == ("liqo-fabric-gateway-server", "default")
    assert lease.owner(Cluster(None)) is None
    assert lease.owner(Cluster({"metadata": {"name": "server", "uid": "u-1"}})) == OWNER
    # the gateway deleted, gone from the cache: a Lease made now (a standby taking over) is still owned by it
    assert lease.owner(Cluster(None)) == OWNER
