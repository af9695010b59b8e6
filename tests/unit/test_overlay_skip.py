"""A rerun with nothing changed runs no per-node module. The digest of each node's planned overlay
(overlay_plan.host_digest) against the record of the last apply: which hosts a run applies
(overlay_plan.pending_hosts, filter liqo.fabric.node_overlay_pending) and which record it leaves
(overlay_plan.record_after, filter liqo.fabric.node_overlay_record). A changed input must move the digest of
exactly the nodes whose state it changes."""
import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.liqo.fabric.plugins.filter.overlay import FilterModule, node_overlay_pending, node_overlay_record
from ansible_collections.liqo.fabric.plugins.module_utils.overlay import plan as P


def cluster(n_nodes=4, pods_on=None, remote=("10.72.0.0/16",), tunnels=("liqo-tun0",), local=("10.243.0.0/16",),
            mtu=1450, extra_pods=()):
    nodes = [{"metadata": {"name": f"n{i}", "annotations": {}}, "spec": {"podCIDR": f"10.243.{i}.0/24"},
              "status": {"addresses": [{"type": "InternalIP", "address": f"172.30.0.{i + 2}"}]}}
             for i in range(n_nodes)]
    pods = [{"spec": {"nodeName": f"n{i}"},
             "status": {"podIP": f"10.243.{i}.9", "hostIP": f"172.30.0.{i + 2}", "phase": "Running"}}
            for i in (pods_on if pods_on is not None else range(n_nodes))]
    for node, ip in extra_pods:
        pods.append({"spec": {"nodeName": node}, "status": {"podIP": ip, "hostIP": "x", "phase": "Running"}})
    result = P.plan(nodes, pods, ["n0"], "n0", list(remote), list(tunnels), "10.80.0.0/16", "vxlan", mtu, True,
                    list(local)).to_result()
    return {name: P.host_digest(host) for name, host in result["hosts"].items()}


def changed(before, after):
    return sorted(n for n in set(before) | set(after) if before.get(n) != after.get(n))


@pytest.mark.parametrize("change, nodes", [
    # a pod added on n2: only the active gateway host (n0) routes to it
    (dict(extra_pods=[("n2", "10.243.2.10")]), ["n0"]),
    # a pod on the gateway host itself: its host routes need nothing
    (dict(extra_pods=[("n0", "10.243.0.10")]), []),
    # a peer added (one more remote CIDR): every node routes it, the gateway host does not
    (dict(remote=("10.72.0.0/16", "10.73.0.0/16")), ["n1", "n2", "n3"]),
    # a new tunnel on the gateway host: its rules only
    (dict(tunnels=("liqo-tun0", "liqo-tun1")), ["n0"]),
    # the local pod CIDR changed: the masquerade bypass of every node but the gateway host
    (dict(local=("10.244.0.0/16",)), ["n1", "n2", "n3"]),
    # the MTU of the overlay links: every host
    (dict(mtu=1400), ["n0", "n1", "n2", "n3"]),
    # a node added: its own state, and the gateway host's link towards it
    (dict(n_nodes=5), ["n0", "n4"]),
])
def test_a_changed_input_moves_the_digest_of_exactly_the_nodes_it_changes(change, nodes):
    assert changed(cluster(), cluster(**change)) == nodes


def test_the_same_inputs_give_the_same_digests():
    assert cluster() == cluster()


PLANNED = {"digests": {"n0": "d0", "n1": "d1", "n2": "d2"}, "applied": {"n0": "d0", "n1": "old", "n2": ""},
           "hosts": {"n0": {}, "n1": {}, "n2": {}}}


@pytest.mark.parametrize("hosts, skip, expected", [
    # n0 recorded with its planned digest: left alone; n1 stale, n2 never applied
    ([("n0", ""), ("n1", ""), ("n2", "")], True, ["n1", "n2"]),
    ([("n0", ""), ("n1", ""), ("n2", "")], False, ["n0", "n1", "n2"]),
    # a host named apart from its Node
    ([("host-a", "n0"), ("host-b", "n1")], True, ["host-b"]),
    # a host that is no Node of the plan is applied, so the apply names it
    ([("stray", ""), ("n0", "")], True, ["stray"]),
    ([], True, []),
])
def test_pending_hosts(hosts, skip, expected):
    assert P.pending_hosts(PLANNED, hosts, skip) == expected


def test_pending_with_no_record_is_every_host():
    assert P.pending_hosts({"digests": {"n0": "d0"}, "applied": {}}, [("n0", "")]) == ["n0"]
    assert P.pending_hosts({}, [("n0", "")]) == ["n0"]


@pytest.mark.parametrize("applied, attempted, expected", [
    # n1 and n2 applied now; n0 untouched and recorded with its planned digest
    (["n1", "n2"], ["n1", "n2"], {"n0": "d0", "n1": "d1", "n2": "d2"}),
    # n2 failed: it drops out, the next run applies it
    (["n1"], ["n1", "n2"], {"n0": "d0", "n1": "d1"}),
    # n0 tried again and failed: its old record no longer vouches for the kernel
    (["n1"], ["n0", "n1"], {"n1": "d1"}),
    # nothing tried: only the records that still match the plan stay (n1's is stale)
    ([], [], {"n0": "d0"}),
])
def test_record_after(applied, attempted, expected):
    assert P.record_after(PLANNED, applied, attempted) == expected


def test_record_drops_nodes_no_longer_planned():
    assert P.record_after({"digests": {"n0": "d0"}, "applied": {"n0": "d0", "gone": "dx"}}, [], []) == {"n0": "d0"}


def test_filters():
    assert set(FilterModule().filters()) == {"node_overlay_pending", "node_overlay_record"}
    assert node_overlay_pending(PLANNED, ["a", "n1"], ["n0", ""], True) == ["n1"]
    ok, failed, skipped = {"changed": True}, {"failed": True, "msg": "x"}, {"skipped": True}
    # hosts n0..n2 plus one that did not run the apply (n3: not planned, no result)
    record = node_overlay_record(PLANNED, ["h0", "h1", "h2", "n3"], ["n0", "n1", "n2", ""], [skipped, ok, failed, {}])
    assert record == {"n0": "d0", "n1": "d1"}
    with pytest.raises(AnsibleFilterError, match="2 given for 1 hosts"):
        node_overlay_pending(PLANNED, ["n0"], ["", ""])


def test_the_batch_filters():
    """pending.yml's batch: host -> planned node state; the record takes a host's batch result where it has none of
    its own (not run per host), and its own where it has one (a node that failed in the batch, then ran per host)."""
    planned = dict(PLANNED, hosts={"n0": {"role": "gateway"}, "n1": {"role": "node"}, "n2": {}})
    assert node_overlay_pending(planned, ["a", "n1"], ["n0", ""], True, True) == {"n1": {"role": "node"}}
    assert node_overlay_pending(planned, ["a", "n1"], ["n0", ""], False, True) == {
        "a": {"role": "gateway"}, "n1": {"role": "node"}}
    ok, failed = {"changed": True}, {"failed": True, "msg": "x"}
    # h0 applied in the batch only; h1 failed in the batch and then ran per host; h2 failed per host
    record = node_overlay_record(PLANNED, ["h0", "h1", "h2"], ["n0", "n1", "n2"], [{}, ok, failed],
                                 {"h0": ok, "h1": failed})
    assert record == {"n0": "d0", "n1": "d1"}
    # n2 neither per host nor in the batch, n1 not in the run: both recorded with a stale digest, so dropped (the
    # next run applies them)
    assert node_overlay_record(PLANNED, ["h0", "h2"], ["n0", "n2"], [{}, {}], {"h0": ok}) == {"n0": "d0"}
    with pytest.raises(AnsibleFilterError, match="1 results given for 2 hosts"):
        node_overlay_record(PLANNED, ["n0", "n1"], ["", ""], [ok])
    with pytest.raises(AnsibleFilterError, match="node_overlay_node_name: stray, n9 not a Node of the cluster"):
        node_overlay_pending(PLANNED, ["stray", "n0", "h"], ["", "", "n9"])
    with pytest.raises(AnsibleFilterError, match="not an overlay_plan result"):
        node_overlay_pending(None, [], [])
