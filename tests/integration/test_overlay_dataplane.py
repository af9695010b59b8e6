"""liqo.fabric.overlay_dataplane on a real kernel: the whole overlay of a node (links, table 18952 routes,
rules, masquerade bypass table) in one module run, between the two netns of `veth_pair`:

    a = node (192.168.77.1, internal 10.80.0.3, pod gateway 10.243.0.1)
    b = active gateway host (192.168.77.2, internal 10.80.0.2)

Module runs go through real ansible-playbook (tests.ansible_run); the other calls run
overlay_dataplane.sync_overlay_dataplane() in a Python process inside the netns.
"""
import json
import os
import subprocess
import sys

import pytest

from tests.ansible_run import run_module
from tests.lab import netns

pytestmark = pytest.mark.root

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODULE = "liqo.fabric.overlay_dataplane"
TABLE = 18952
NODE_LINK, GW_LINK = "lovg0a1b2c3d", "lovn4e5f6a7b"
NAT = "liqo_fabric_overlay"

CALL = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from ansible_collections.liqo.fabric.plugins.module_utils.overlay import dataplane as od
args = json.load(sys.stdin)
try:
    print(json.dumps(od.sync_overlay_dataplane(**args)))
except od.ValidationError as e:
    print(json.dumps({"error": "ValidationError", "msg": str(e)}))
except od.DataplaneError as e:
    print(json.dumps({"error": "DataplaneError", "msg": str(e)}))
"""


def node_plan(**over):
    plan = {
        "internal_ip": "10.80.0.3", "role": "node",
        "links": [{"name": NODE_LINK, "type": "vxlan", "vni": 65539, "remotes": ["192.168.77.2"],
                   "local": "192.168.77.1", "mtu": 1450, "addresses": ["10.80.0.3/32"]}],
        "routes": [{"dst": "10.80.0.2/32", "dev": NODE_LINK, "scope": "link"},
                   {"dst": "10.72.0.0/16", "via": "10.80.0.2", "dev": NODE_LINK, "onlink": True, "src": "10.243.0.1"}],
        "rules": [{"priority": 1650, "to": "10.80.0.0/16", "table": TABLE},
                  {"priority": 1900, "to": "10.72.0.0/16", "table": TABLE}],
        "bypass": [{"saddr": "10.243.0.0/16", "daddr": "10.72.0.0/16"}],
    }
    plan.update(over)
    return plan


def gateway_plan():
    return {
        "internal_ip": "10.80.0.2", "role": "gateway",
        "links": [{"name": GW_LINK, "type": "vxlan", "vni": 65539, "remotes": ["192.168.77.1"],
                   "local": "192.168.77.2", "mtu": 1450, "addresses": ["10.80.0.2/32"]}],
        "routes": [{"dst": "10.80.0.3/32", "dev": GW_LINK, "scope": "link"}],
        "rules": [{"priority": 1650, "to": "10.80.0.0/16", "table": TABLE}],
        "bypass": [],
    }


def call(ns, **args):
    """sync_overlay_dataplane(**args) inside `ns`; {"error", "msg"} for the two error kinds."""
    proc = netns.exec_in(ns, [sys.executable, "-c", CALL, os.path.join(ROOT, "build", "collections")],
                         input=json.dumps(args), check=False)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def ok(result):
    assert result["rc"] == 0 and not result.get("failed"), result.get("msg") or result["stderr"]
    return result


def kernel(ns):
    """What the overlay owns in `ns`, read with the system tools (independent of the module)."""
    links = netns.run(["ip", "-n", ns, "-d", "-o", "link", "show"]).stdout
    nft = subprocess.run(["ip", "netns", "exec", ns, "nft", "list", "table", "ip", NAT],
                         capture_output=True, text=True, check=False)
    return {
        "links": sorted(line.split(": ")[1].split("@")[0] for line in links.splitlines()
                        if line.split(": ")[1].startswith(("lovg", "lovn"))),
        "link_details": [line for line in links.splitlines() if NODE_LINK in line or GW_LINK in line],
        "routes": netns.run(["ip", "-n", ns, "route", "show", "table", str(TABLE)], check=False).stdout.strip(),  # no table: ""
        "rules": [line for line in netns.run(["ip", "-n", ns, "rule", "show"]).stdout.splitlines()
                  if f"lookup {TABLE}" in line],
        "nft": nft.stdout if nft.returncode == 0 else "",
    }


EMPTY = {"links": [], "link_details": [], "routes": "", "rules": [], "nft": ""}


@pytest.fixture
def lab(veth_pair):
    a, b = veth_pair
    netns.ip_batch(["addr add 10.243.0.1/32 dev lo"], netns=a)  # the node's pod gateway address (route src)
    return a, b


def pings(ns, addr):
    return netns.exec_in(ns, ["ping", "-c", "1", "-w", "3", addr], check=False).returncode == 0


def test_node_plan_apply_rerun_absent(lab):
    a, b = lab
    # check mode on a fresh node: routes through a link that does not exist yet are planned, nothing written
    r = ok(run_module(MODULE, {"node": node_plan()}, netns=a, check=True, diff=True))
    assert r["changed"] and r["writes"] == 0
    assert r["links"]["created"] == [NODE_LINK] and len(r["routes"]["added"]) == 2 and len(r["rules"]["added"]) == 2
    assert r["nat"]["changed"] and f"{NODE_LINK} vxlan vni 65539" in r["diff"]["after"]
    assert "snat ip prefix to 10.243.0.0/16" in r["diff"]["after"] and NODE_LINK not in r["diff"]["before"]
    assert kernel(a) == EMPTY

    r = ok(run_module(MODULE, {"node": node_plan()}, netns=a))
    assert r["changed"] and r["writes"] == 4 + 2 + 2 + 1  # link (create, addr, fdb, up), 2 routes, 2 rules, 1 nft
    k = kernel(a)
    assert k["links"] == [NODE_LINK] and "vxlan id 65539" in k["link_details"][0] and "mtu 1450" in k["link_details"][0]
    assert f"10.72.0.0/16 via 10.80.0.2 dev {NODE_LINK} proto static src 10.243.0.1 onlink" in k["routes"]
    assert f"10.80.0.2 dev {NODE_LINK} proto static scope link" in k["routes"]
    assert k["rules"] == [f"1650:\tfrom all to 10.80.0.0/16 lookup {TABLE} proto static",
                          f"1900:\tfrom all to 10.72.0.0/16 lookup {TABLE} proto static"]
    assert "ip saddr 10.243.0.0/16 ip daddr 10.72.0.0/16 snat" in k["nft"]

    # the gateway side, through the function, then traffic crosses the overlay via table 18952
    g = call(b, node_plan=gateway_plan())
    assert g["changed"] and g["links"]["created"] == [GW_LINK] and not g["nat"]["changed"]
    assert pings(a, "10.80.0.2"), "ping over the overlay link, routed by rule 1650 -> table 18952"

    r = ok(run_module(MODULE, {"node": node_plan()}, netns=a, diff=True))
    assert not r["changed"] and r["writes"] == 0 and r["diff"]["before"] == r["diff"]["after"]
    assert kernel(a) == k

    # absent: check mode removes nothing, then everything goes, then nothing is left to do
    r = ok(run_module(MODULE, {"state": "absent"}, netns=a, check=True))
    assert r["changed"] and r["links"]["deleted"] == [NODE_LINK] and r["writes"] == 0 and kernel(a) == k
    r = ok(run_module(MODULE, {"state": "absent"}, netns=a))
    assert r["changed"] and len(r["rules"]["removed"]) == 2 and r["nat"]["changed"]
    assert kernel(a) == EMPTY
    r = call(a, node_plan=None, state="absent")
    assert not r["changed"] and r["writes"] == 0
    g = call(b, node_plan=None, state="absent")
    assert g["changed"] and kernel(b) == EMPTY


def test_drift_and_stray_links_are_repaired(lab):
    a, _b = lab
    first = call(a, node_plan=node_plan())
    assert first["changed"]
    want = kernel(a)
    # someone deletes a rule and a route, flushes the bypass table, changes the MTU, adds a stray owned link
    netns.ip_batch([f"rule del priority 1900 table {TABLE}", f"route del 10.80.0.2/32 table {TABLE}",
                    f"link set {NODE_LINK} mtu 1400", "link add lovn99999999 type vxlan id 7 dstport 4789"], netns=a)
    netns.run(["ip", "netns", "exec", a, "nft", "flush", "table", "ip", NAT])
    r = call(a, node_plan=node_plan())
    assert r["changed"] and r["links"]["deleted"] == ["lovn99999999"] and r["links"]["updated"] == [NODE_LINK]
    assert r["routes"]["added"] and r["rules"]["added"] == [f"1900: from all to 10.72.0.0/16 lookup {TABLE}"]
    assert r["nat"]["changed"]
    assert r["writes"] == 1 + 1 + 1 + 1 + 1  # mtu, stray link delete, route, rule, nft
    assert kernel(a) == want
    assert call(a, node_plan=node_plan())["writes"] == 0


@pytest.mark.parametrize("plan,field,value", [
    (node_plan(routes=[{"dst": "10.80.0.2/32", "dev": NODE_LINK, "scope": "link"},
                       {"dst": "10.72.0.300/16", "via": "10.80.0.2", "dev": NODE_LINK, "onlink": True}]),
     "routes[1].dst", "'10.72.0.300/16'"),
    (node_plan(links=[dict(node_plan()["links"][0], vni=2 ** 24)]), "links[0].vni", "16777216"),
    (node_plan(rules=[{"priority": 1650, "to": "10.80.0.0/33"}]), "rules[0].to", "'10.80.0.0/33'"),
    (node_plan(bypass=[{"saddr": "10.243.0.0/16", "daddr": "10.72.0.1/16"}]), "bypass[0].daddr", "'10.72.0.1/16'"),
    (node_plan(routes=[{"dst": "10.72.0.0/16", "dev": "lovgnosuch"}]), "routes[0].dev", "'lovgnosuch'"),
    (node_plan(links=[dict(node_plan()["links"][0], name="vx0")]), "links[0].name", "'vx0'"),
])
def test_bad_input_changes_nothing(lab, plan, field, value):
    a, _b = lab
    r = call(a, node_plan=plan)
    assert r.get("error") == "ValidationError" and r["msg"].startswith(field) and value in r["msg"], r
    assert kernel(a) == EMPTY, "the valid parts (the link first) must not be applied either"


def test_bad_input_through_ansible_keeps_the_applied_state(lab):
    a, _b = lab
    ok(run_module(MODULE, {"node": node_plan()}, netns=a))
    before = kernel(a)
    bad = node_plan(links=[dict(node_plan()["links"][0], vni=0, mtu=1300)],
                    routes=[{"dst": "10.72.0.0/16", "via": "10.80.0.2", "dev": NODE_LINK, "onlink": True}])
    r = run_module(MODULE, {"node": bad}, netns=a)
    assert r.get("failed") and r["msg"].startswith("node.links[0].vni: 0"), r.get("msg")
    assert kernel(a) == before, "nothing of the new plan applied (no MTU change, no route removed)"
    r = run_module(MODULE, {"node": node_plan(), "table": 254}, netns=a)
    assert r.get("failed") and r["msg"].startswith("table: 254") and kernel(a) == before
    ok(run_module(MODULE, {"state": "absent"}, netns=a))
    assert kernel(a) == EMPTY


HOLD = r"""
import sys
sys.path.insert(0, sys.argv[1])
from ansible_collections.liqo.fabric.plugins.module_utils.host.netns_lock import LockTimeout, netns_lock
try:
    with netns_lock(sys.argv[2], timeout=float(sys.argv[3])):
        print("held", flush=True)
        sys.stdin.read()   # until the test closes stdin
except LockTimeout as e:
    print("timeout:", e, flush=True)
"""


def hold(ns, name=f"overlay-{TABLE}", timeout=5.0):
    """A process of `ns` holding the lock `name` until its stdin closes (or telling it timed out)."""
    proc = netns.popen_in(ns, [sys.executable, "-c", HOLD, os.path.join(ROOT, "build", "collections"), name,
                               str(timeout)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    return proc, proc.stdout.readline().strip()


def test_one_writer_per_network_namespace(lab):
    """Two writers of a namespace's overlay (a node agent's in-process re-point and its playbook's module) take
    turns: the sync waits while another process of the namespace holds the lock, and runs when it is released.
    The lock is the namespace's own (an abstract socket): another namespace never waits for it, and the kernel
    frees it when the holder ends."""
    a, b = lab
    holder, said = hold(a)
    assert said == "held"
    waiter, said = hold(a, timeout=0.3)
    assert said.startswith("timeout: lock overlay-18952 of this network namespace held"), said
    waiter.communicate("")
    other, said = hold(b)
    assert said == "held", "b's lock is not a's"
    other.communicate("")
    sync = netns.popen_in(a, [sys.executable, "-c", CALL, os.path.join(ROOT, "build", "collections")],
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    sync.stdin.write(json.dumps({"node_plan": node_plan()}))
    sync.stdin.close()
    try:
        sync.wait(1.5)
    except subprocess.TimeoutExpired:
        pass
    assert sync.poll() is None and kernel(a) == EMPTY, "the sync must wait for the holder"
    holder.communicate("")
    r = json.loads(sync.stdout.read())
    sync.wait(10)
    assert r["changed"] and kernel(a)["links"] == [NODE_LINK]
    holder, said = hold(a)
    holder.kill()   # a holder that dies frees the lock
    holder.wait()
    again, said = hold(a, timeout=1)
    assert said == "held"
    again.communicate("")
    assert not call(a, node_plan=node_plan())["changed"]
    call(a, node_plan=None, state="absent")
