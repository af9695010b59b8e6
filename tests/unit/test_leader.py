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
