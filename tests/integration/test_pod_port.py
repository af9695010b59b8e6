"""overlay_dataplane's `pod_ports` on a real kernel: a gateway pod behind a CNI bridge, reached over its own bridge
port by the node it runs on, so that the overlay's encapsulated super-packets from the other nodes reach it whole.

    other (another node, 192.168.78.2) --veth-- node (192.168.78.1; bridge br0 10.244.0.1/24) --br0 port-- pod (10.244.0.5)
    a VXLAN link between other and the pod's IP (10.81.0.2 <-> 10.81.0.1) carries a TCP transfer

Without the port route, the bridge cuts every super-packet into MTU-sized packets: the pod's eth0 receives packets of
at most 1,500 bytes. With it, they arrive whole (tens of kilobytes each).
"""
import json

import pytest

from tests.ansible_run import run_module
from tests.lab import netns, tcp

pytestmark = pytest.mark.root

MODULE = "liqo.fabric.overlay_dataplane"
TABLE = 18952
POD_IP, BRIDGE_IP = "10.244.0.5", "10.244.0.1"
PROTOCOL = 0xF5
TRANSFER = 16 * 1024 * 1024
PORT = 5201


def plan(pod_ports=True, ip=POD_IP):
    return {"pod_ports": [{"ip": ip}] if pod_ports else [],
            "rules": [{"priority": 1640, "to": f"{ip}/32", "table": TABLE}]}


def ok(result):
    assert result["rc"] == 0 and not result.get("failed"), result.get("msg") or result["stderr"]
    return result


@pytest.fixture
def lab(netns_factory):
    other, node, pod = netns_factory("other", "node", "pod")
    netns.ip_batch([f"link add eth0 netns {other} type veth peer name eth1 netns {node}",
                    f"link add eth0 netns {pod} type veth peer name vpod netns {node}"])
    netns.ip_batch(["addr add 192.168.78.1/24 dev eth1", "link set eth1 up",
                    "link add br0 type bridge", "addr add 10.244.0.1/24 dev br0", "link set br0 up",
                    "link set vpod master br0", "link set vpod up"], netns=node)
    netns.sysctl_in(node, {"net.ipv4.ip_forward": "1"})
    netns.ip_batch(["addr add 192.168.78.2/24 dev eth0", "link set eth0 up",
                    f"route add {POD_IP}/32 via 192.168.78.1",
                    f"link add vx0 type vxlan id 77 remote {POD_IP} local 192.168.78.2 dstport 4789",
                    "link set vx0 mtu 1400", "addr add 10.81.0.2/32 dev vx0", "link set vx0 up",
                    "route add 10.81.0.1/32 dev vx0"], netns=other)
    netns.ip_batch([f"addr add {POD_IP}/24 dev eth0", "link set eth0 up", f"route add default via {BRIDGE_IP}",
                    f"link add vx0 type vxlan id 77 remote 192.168.78.2 local {POD_IP} dstport 4789",
                    "link set vx0 mtu 1400", "addr add 10.81.0.1/32 dev vx0", "link set vx0 up",
                    "route add 10.81.0.2/32 dev vx0"], netns=pod)
    return other, node, pod


def rx(ns, dev="eth0"):
    data = json.loads(netns.run(["ip", "-n", ns, "-j", "-s", "link", "show", dev]).stdout)[0]["stats64"]["rx"]
    return data["bytes"], data["packets"]


def transfer(other, pod) -> float:
    """Bytes per packet the pod's eth0 received during a TCP transfer over the VXLAN link."""
    b0, p0 = rx(pod)
    assert tcp.transfer(other, pod, "10.81.0.1", PORT, TRANSFER) == TRANSFER
    b1, p1 = rx(pod)
    return (b1 - b0) / max(p1 - p0, 1)


def neighbours(ns):
    return json.loads(netns.run(["ip", "-n", ns, "-j", "neigh", "show", "nud", "permanent"]).stdout)


def kernel(ns):
    return {"routes": netns.run(["ip", "-n", ns, "route", "show", "table", str(TABLE)], check=False).stdout.strip(),
            "rules": [ln for ln in netns.run(["ip", "-n", ns, "rule", "show"]).stdout.splitlines() if f"lookup {TABLE}" in ln],
            "neigh": [(n["dst"], n["dev"], n["lladdr"]) for n in neighbours(ns)]}


def pod_mac(pod):
    return json.loads(netns.run(["ip", "-n", pod, "-j", "link", "show", "eth0"]).stdout)[0]["address"]


def test_bridge_cuts_super_packets_and_the_port_route_keeps_them_whole(lab):
    other, node, pod = lab
    size = transfer(other, pod)
    assert size <= 1500, f"through the bridge, every packet reaching the pod is MTU-sized ({size:.0f} bytes a packet)"

    r = ok(run_module(MODULE, {"node": plan()}, netns=node, check=True, diff=True))
    assert r["changed"] and r["writes"] == 0 and r["pod_ports"]["routed"] == {POD_IP: "vpod"}
    assert f"{POD_IP} dev vpod lladdr" in r["diff"]["after"] and kernel(node)["neigh"] == []

    r = ok(run_module(MODULE, {"node": plan()}, netns=node))
    assert r["changed"] and r["pod_ports"]["routed"] == {POD_IP: "vpod"} and r["pod_ports"]["pending"] == {}
    k = kernel(node)
    assert f"{POD_IP} dev vpod proto static scope link src {BRIDGE_IP}" in k["routes"]
    assert k["rules"] == [f"1640:\tfrom all to {POD_IP} lookup {TABLE} proto static"]
    assert k["neigh"] == [(POD_IP, "vpod", pod_mac(pod))]
    assert [n.get("protocol") for n in neighbours(node)] in ([PROTOCOL], [str(PROTOCOL)], ["0xf5"])
    assert {"table": TABLE, "dst": [f"{POD_IP}/32"]} in r["manifest"]["routes"], "the drift check watches the route"

    size = transfer(other, pod)
    assert size > 3000, f"over the pod's port, the super-packets cross the node whole ({size:.0f} bytes a packet)"

    r = ok(run_module(MODULE, {"node": plan()}, netns=node))
    assert not r["changed"] and r["writes"] == 0 and kernel(node) == k

    # switched off: the route, its neighbour and (with the plan's rule gone) nothing of it is left
    r = ok(run_module(MODULE, {"node": {"pod_ports": [], "rules": []}}, netns=node))
    assert r["changed"] and r["pod_ports"]["neighbours_removed"] and kernel(node) == {"routes": "", "rules": [], "neigh": []}
    assert transfer(other, pod) <= 1500


def test_absent_removes_everything(lab):
    dummy, node, dummy2 = lab
    ok(run_module(MODULE, {"node": plan()}, netns=node))
    assert kernel(node)["neigh"]
    r = ok(run_module(MODULE, {"state": "absent"}, netns=node, check=True))
    assert r["changed"] and r["writes"] == 0 and kernel(node)["neigh"]
    r = ok(run_module(MODULE, {"state": "absent"}, netns=node))
    assert r["changed"] and kernel(node) == {"routes": "", "rules": [], "neigh": []}
    assert not ok(run_module(MODULE, {"state": "absent"}, netns=node))["changed"]


def test_pod_gone_unknown_and_not_bridged(lab):
    other, node, pod = lab
    ok(run_module(MODULE, {"node": plan()}, netns=node))
    # the pod goes: the kernel drops its route and neighbour with its port, the next run has nothing to remove
    netns.ip_batch(["link del eth0"], netns=pod)
    assert kernel(node)["neigh"] == [] and POD_IP not in kernel(node)["routes"]
    r = ok(run_module(MODULE, {"node": plan()}, netns=node))
    assert r["pod_ports"]["routed"] == {} and POD_IP in r["pod_ports"]["pending"]
    assert any("keeps the bridge path" in w for w in r.get("warnings", [])), r.get("warnings")
    assert kernel(node)["neigh"] == [] and POD_IP not in kernel(node)["routes"]
    # an address on no bridge of this host (a routed CNI, a point-to-point veth): nothing to do, nothing to say
    r = ok(run_module(MODULE, {"node": plan(ip="192.168.78.2")}, netns=node))
    assert r["pod_ports"] == {"routed": {}, "pending": {}, "neighbours_added": [], "neighbours_removed": []}
    assert not r.get("warnings")


@pytest.mark.parametrize("entry,msg", [
    ({"ip": "10.244.0.300"}, "node.pod_ports[0].ip: '10.244.0.300' is not an IP address"),
    ({"ip": "fd00::5"}, "node.pod_ports[0].ip: fd00::5 is not an IPv4 address"),
    ({"ip": POD_IP, "port": "vpod"}, "node.pod_ports[0]: unknown key(s) port (expected ip)"),
])
def test_bad_input_changes_nothing(lab, entry, msg):
    dummy, node, dummy2 = lab
    r = run_module(MODULE, {"node": {"pod_ports": [entry], "rules": plan()["rules"]}}, netns=node)
    assert r.get("failed") and r["msg"] == msg, r.get("msg")
    assert kernel(node) == {"routes": "", "rules": [], "neigh": []}
