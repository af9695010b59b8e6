"""What a gateway failover relies on in WireGuard itself, on real wireguard-go (or the kernel module) in two netns:

- a warm standby client (peer without endpoint and keepalive) sends nothing; setting both, as the run that makes
  it active does, starts a handshake at once, with no traffic to carry;
- a client's session restart with `rebind` moves it to a new random source port (a new flow for every NAT on the
  way, such as a NodePort's stale conntrack entry) and the server follows it to the new port.
"""
import os
import subprocess
import sys
import time

import pytest

from tests.ansible_run import ROOT, run_module
from tests.integration.test_wireguard import iface_args, ping, wg_names  # noqa: F401 pylint: disable=unused-import
from tests.lab import netns

pytestmark = pytest.mark.root

sys.path.insert(0, os.path.join(ROOT, "build", "collections"))
from ansible_collections.liqo.fabric.plugins.module_utils.wireguard.keys import generate_keypair  # noqa: E402

SERVER_EP = "192.168.77.2:51820"


def read(ns, ifname):
    """The interface's device state read in its netns (listen port, peers with endpoint and last handshake)."""
    r = run_module("liqo.fabric.wireguard_info", {"name": ifname}, netns=ns)
    assert r["exists"], r.get("msg")
    return r["interface"]


def handshake_after(ns, ifname, t0, limit=5.0):
    """Seconds from t0 until the interface's peer has a handshake, or until `limit` when none came. Polled with
    `wg show`: reading it through the module takes seconds on a busy machine, which would count as waiting."""
    while time.monotonic() - t0 < limit:
        out = netns.exec_in(ns, ["wg", "show", ifname, "latest-handshakes"], check=False).stdout.split()
        if len(out) == 2 and out[1] != "0":
            break
        time.sleep(0.02)
    return time.monotonic() - t0


def session_code(call):
    """Code for a child interpreter in a netns (module_utils act on the netns of their process) printing the result
    of `call`, an expression on wireguard/session.py imported as `s`."""
    return ("import sys; sys.path.insert(0, %r); from ansible_collections.liqo.fabric.plugins.module_utils.wireguard "
            "import session as s; print(%s)" % (os.path.join(ROOT, "build", "collections"), call))


def pair(a, b, ifa, ifb, client_peer):
    """Server on b (port 51820, peer without endpoint); client on a (unmanaged port) with `client_peer`."""
    priv_a, pub_a = generate_keypair()
    priv_b, pub_b = generate_keypair()
    server = iface_args(ifb, priv_b, 51820, "10.80.0.2/30", pub_a, None, "10.80.0.1/32")
    client = iface_args(ifa, priv_a, None, "10.80.0.1/30", pub_b, SERVER_EP, "10.80.0.2/32")
    del client["listen_port"]
    client["peers"] = [dict(client["peers"][0], **client_peer)]
    for args, ns in ((server, b), (client, a)):
        r = run_module("liqo.fabric.wireguard_interface", args, netns=ns)
        assert r["changed"] and not r.get("failed"), r.get("msg")
    return client, pub_b


def test_a_standby_client_sends_nothing_and_its_activation_handshakes_at_once(wg_names):
    a, b, ifa, ifb = wg_names
    client, pub_b = pair(a, b, ifa, ifb, {"endpoint": None, "persistent_keepalive": 0})
    time.sleep(1.5)
    (peer,) = read(b, ifb)["peers"]
    assert peer["latest_handshake"] is None and peer["rx_bytes"] == 0, peer   # the standby reached nobody
    # the active run: the same interface, the peer with its endpoint and keepalive; no packet is sent by the test
    active = dict(client, peers=[dict(client["peers"][0], endpoint=SERVER_EP, persistent_keepalive=25)])
    t0 = time.monotonic()
    r = run_module("liqo.fabric.wireguard_interface", active, netns=a)
    assert r["changed"] and not r.get("failed"), r.get("msg")
    while time.monotonic() - t0 < 5 and read(a, ifa)["peers"][0]["latest_handshake"] is None:
        time.sleep(0.1)
    (peer,) = read(a, ifa)["peers"]
    assert peer["latest_handshake"] is not None, "turning the keepalive on sent no handshake within 5 s"
    assert ping(a, "10.80.0.2")


def test_a_rebind_session_restart_moves_the_client_to_a_new_port_the_server_follows(wg_names):
    a, b, ifa, ifb = wg_names
    pair(a, b, ifa, ifb, {"persistent_keepalive": 25})
    assert ping(a, "10.80.0.2")
    before = read(a, ifa)["listen_port"]
    assert read(b, ifb)["peers"][0]["endpoint"] == f"192.168.77.1:{before}"
    code = session_code("s.restart_session(%r, rebind=True)" % ifa)
    out = netns.exec_in(a, [sys.executable, "-c", code]).stdout
    assert out.strip() not in ("", "[]"), out   # the public keys restarted
    after = read(a, ifa)["listen_port"]
    assert after and after != before, (before, after)
    assert ping(a, "10.80.0.2")
    assert read(b, ifb)["peers"][0]["endpoint"] == f"192.168.77.1:{after}"
    # without rebind the port stays (a server's, which the Service targets, is never moved)
    code = code.replace("rebind=True", "rebind=False")
    netns.exec_in(a, [sys.executable, "-c", code])
    assert read(a, ifa)["listen_port"] == after
    assert ping(a, "10.80.0.2")


def test_the_engine_activates_a_standby_client_in_process(wg_names):
    """gateway_ha.activate_client's step (wireguard_session.activate): the standby's one peer without an endpoint
    gets it with the keepalive, the handshake follows at once; a second call has nothing to do."""
    a, b, ifa, ifb = wg_names
    pair(a, b, ifa, ifb, {"endpoint": None, "persistent_keepalive": 0})
    # traffic routed into the standby's tunnel, as a gateway pod's netns has: handshake attempts without an
    # endpoint, each stamping the peer (a handshake is not sent again within 5 s of the last attempt)
    first_attempt = time.monotonic()
    assert not ping(a, "10.80.0.2", attempts=1)
    code = session_code("len(s.activate(%r, %r, 25))" % (ifa, SERVER_EP))
    t0 = time.monotonic()
    assert netns.exec_in(a, [sys.executable, "-c", code]).stdout.strip() == "1"
    seen = handshake_after(a, ifa, t0)
    (peer,) = read(a, ifa)["peers"]
    assert peer["latest_handshake"] is not None and peer["endpoint"] == SERVER_EP and peer["persistent_keepalive"] == 25
    # not a speed target: WireGuard's own retry comes 5 s after the ping's attempt; the activation must start the
    # handshake itself, before that
    assert t0 + seen - first_attempt < 5, "the handshake waited for WireGuard's retry: the activation did not start it"
    assert netns.exec_in(a, [sys.executable, "-c", code]).stdout.strip() == "0"
    assert ping(a, "10.80.0.2")


def _module_utils_code(body):
    """A child interpreter's code with the collection importable (module_utils act on their process's netns)."""
    return "import sys; sys.path.insert(0, %r)\n%s" % (os.path.join(ROOT, "build", "collections"), body)


def _socket_owner_netns(ifname):
    """The network namespace (inode) of the wireguard-go serving `ifname`'s socket, or None when none serves it."""
    code = _module_utils_code(
        "from ansible_collections.liqo.fabric.plugins.module_utils.wireguard.userspace import UserspaceBackend\n"
        "import os\n"
        "pid = UserspaceBackend(%r).recorded_pid(same_netns=False)\n"
        "print(os.stat('/proc/%%d/ns/net' %% pid).st_ino if pid else '')" % ifname)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    return int(out) if out else None


def test_a_name_moved_to_another_namespace_is_not_removed_by_the_old_ones_teardown(wg_names):
    """A failover between two network namespaces of one machine (the lab's gateway hosts): the old host's
    teardown and the new host's build run at once on the same interface name, whose socket directory both
    share. The new wireguard-go must survive the old teardown's clean-up (deleting its socket file would make
    it exit), whichever finishes first."""
    a, b, name = wg_names[:3]
    b_ino = os.stat(f"/run/netns/{b}").st_ino
    start = _module_utils_code(
        "from ansible_collections.liqo.fabric.plugins.module_utils.wireguard.userspace import UserspaceBackend\n"
        "from ansible_collections.liqo.fabric.plugins.module_utils.gateway.dataplane import wait_name_free\n"
        "wait_name_free(%r, 10)\nUserspaceBackend(%r).start()" % (name, name))
    remove = _module_utils_code(
        "from ansible_collections.liqo.fabric.plugins.module_utils.wireguard import interface\n"
        "interface.ensure_absent(%r)" % name)
    netns.exec_in(a, [sys.executable, "-c", start])
    for attempt in range(5):
        old, new = (a, b) if attempt % 2 == 0 else (b, a)
        procs = [subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, "-c", code], stderr=subprocess.PIPE,
                                  text=True) for ns, code in ((old, remove), (new, start))]
        for p in procs:
            assert p.wait(timeout=30) == 0, p.stderr.read()
        time.sleep(0.2)   # wireguard-go exits within milliseconds of losing its socket file
        links = netns.exec_in(new, ["ip", "-br", "link"]).stdout
        assert name in links, f"attempt {attempt}: the new namespace lost {name}:\n{links}"
        assert name not in netns.exec_in(old, ["ip", "-br", "link"]).stdout, f"attempt {attempt}"
        owner = _socket_owner_netns(name)
        assert owner == (b_ino if new == b else os.stat(f"/run/netns/{a}").st_ino), (attempt, owner)
