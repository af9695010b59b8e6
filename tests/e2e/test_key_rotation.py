"""Key rotation with overlap: liqo.fabric.rotate_keys on two connected lab clusters rotates both
gateways' WireGuard keys under a fast ping without losing a packet; afterwards each Secret holds only its
new key, both interfaces use the new keys, the old key no longer completes a handshake, and no private key
shows in any output. The tests run in order on one lab."""
import base64
import concurrent.futures
import glob
import json
import os
import re
import shutil
import time

import pytest

from ansible_collections.liqo.fabric.plugins.plugin_utils import speed
from tests.e2e import fabric
from tests.e2e.fabric import PingFlow, get, kubectl, playbook, translate
from tests.lab import netns

pytestmark = pytest.mark.skipif(not shutil.which("kubectl"), reason="kubectl is not installed")
OUTPUTS = []
OLD = {}       # cluster name -> {"private": ..., "public": ...} before the rotation
BY_CONTROLLER = {}   # cluster name -> the keys the controller's rotation replaced (those of the first rotation)


AFTER_ROTATION = 3.0   # seconds the ping goes on after the rotation's end: traffic on the new keys both ways


def ping_interval() -> float:
    """50 ms; 100 ms with the speed paths off. What X sends between its switch and Y's adopt waits in X's WireGuard
    staging queue, 128 packets (docs/key-rotation.md): 6.4 s of a 50 ms ping. The ordinary path's cold role runs on a
    loaded host can take longer, so its ping is slower, which still shows any session restart the probes' hold
    should have prevented (that drops the whole queue and the old session)."""
    return 0.1 if speed.off_reason() else 0.05


@pytest.fixture(scope="module")
def lab():
    # the records start with this module's lab: tests/e2e/plain reruns these tests in the same worker process
    OUTPUTS.clear()
    OLD.clear()
    BY_CONTROLLER.clear()
    with fabric.connected_pair(outputs=OUTPUTS, gateway_group="cluster_a_gateway",
                               remote_gateway_group="cluster_b_gateway") as lab_:
        yield lab_


def rotate(lab, *cli_flags, check=True):
    proc = playbook("rotate_keys", lab.inventory_path, kubeconfig=lab["a"].kubeconfig,
                    remote_kubeconfig=lab["b"].kubeconfig, gateway_group="cluster_a_gateway",
                    remote_gateway_group="cluster_b_gateway", cli_flags=cli_flags, check=check)
    OUTPUTS.append(proc.stdout + proc.stderr)
    return proc


def key_secret(cluster):
    items = json.loads(kubectl(cluster, "get", "secrets", "-A", "-l", "networking.liqo.io/gateway-keys=true",
                               "-o", "json"))["items"]
    assert len(items) == 1, [s["metadata"]["name"] for s in items]
    return items[0]


def secret_keys(cluster):
    data = key_secret(cluster)["data"]
    return {k: base64.b64decode(v).decode() for k, v in data.items()}


def wg(cluster, *args):
    node = cluster.gateway_nodes[0].netns
    iface = [l.split()[0].split("@")[0] for l in netns.exec_in(node, ["ip", "-br", "link"]).stdout.splitlines()
             if l.startswith("lwg")]
    assert len(iface) == 1, iface
    return netns.exec_in(node, ["wg", "show", iface[0], *args]).stdout.strip()


def public_keys(cluster):
    return [pk["spec"]["publicKey"] for pk in get(cluster, "publickeies")]


def test_check_mode_plans_the_rotation_and_changes_nothing(lab):
    a, b = lab["a"], lab["b"]
    before = {c.name: (secret_keys(c), public_keys(c), wg(c, "public-key")) for c in (a, b)}
    proc = rotate(lab, "--check", "--diff")
    for c in (a, b):
        assert (secret_keys(c), public_keys(c), wg(c, "public-key")) == before[c.name]
    out = proc.stdout
    # the diff shows the PublicKey's next key (the check-mode placeholder) and the Secret's fields, no values
    assert "CHECK+MODE+key+generated+by+the+real+run+xA=" in out and "nextPrivateKey" in out, out[-3000:]
    assert "(set)" in out


def test_rotation_under_a_fast_ping_loses_nothing(lab):
    a, b = lab["a"], lab["b"]
    for c in (a, b):
        keys = secret_keys(c)
        assert set(keys) == {"privateKey", "publicKey"}
        OLD[c.name] = {"private": keys["privateKey"], "public": keys["publicKey"]}
        assert wg(c, "public-key") == keys["publicKey"]
    pod_a, pod_b = a.gateway_nodes[0].pods[0], b.gateway_nodes[0].pods[0]
    remapped = get(a, "configurations")[0]["status"]["remote"]["cidr"]["pod"][0]
    target = translate(pod_b.ip, b.pod_cidr, remapped)
    # the ping runs from before the rotation until AFTER_ROTATION past its end, however long it takes
    ping = PingFlow(pod_a.netns, target, ping_interval())
    try:
        time.sleep(1)
        proc = rotate(lab, check=False)
        time.sleep(AFTER_ROTATION)
    finally:
        sent, lost, losses = ping.stop()
    assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr[-2000:]
    assert sent >= AFTER_ROTATION / ping_interval(), losses
    assert not lost, losses
    steps = [line for line in proc.stdout.splitlines() if line.startswith("INFO")]
    assert "INFO   (local) Gateway key switched, old private key destroyed" in steps
    # both gateways' probes held their session restarts for the rotation (a re-added peer would drop the packets
    # waiting for the new key's handshake; tests/integration/test_peer_health.py) and released them at its end
    for c in (a, b):
        assert glob.glob(os.path.join(c.workdir, "health", "*", "*.hold")) == [], c.name
    assert "INFO   (remote) New public key adopted by the peer" in steps


def test_secrets_hold_only_the_new_keys_and_interfaces_use_them(lab):
    a, b = lab["a"], lab["b"]
    new = {}
    for c in (a, b):
        keys = secret_keys(c)
        assert set(keys) == {"privateKey", "publicKey"}, sorted(keys)
        assert keys["privateKey"] != OLD[c.name]["private"] and keys["publicKey"] != OLD[c.name]["public"]
        assert OLD[c.name]["private"] not in json.dumps(key_secret(c))
        assert "networking.liqo.io/keys-rotated-at" in key_secret(c)["metadata"]["annotations"]
        new[c.name] = keys["publicKey"]
        assert wg(c, "public-key") == keys["publicKey"]
    # each side's peer is the other's new key, learned through the PublicKey (annotation gone)
    assert wg(a, "peers") == new["b"] and wg(b, "peers") == new["a"]
    assert public_keys(a) == [new["b"]] and public_keys(b) == [new["a"]]
    for c in (a, b):
        assert not (get(c, "publickeies")[0]["metadata"].get("annotations") or {}).get("networking.liqo.io/next-public-key")
        assert get(c, "connections")[0]["status"]["value"] == "Connected"


def _test_peer(node_netns, private_key, peer_public, endpoint, subnet):
    """A wireguard-go interface in the gateway host's netns keyed with `private_key` (given on stdin, never in
    a file), peering `peer_public` at `endpoint`, its tunnel the /30 10.255.<subnet>.0; returns whether a handshake
    completed."""
    iface = f"lwgkr{os.urandom(3).hex()}"   # its UAPI socket is in /var/run/wireguard, shared by every netns
    netns.exec_in(node_netns, ["wireguard-go", iface])
    try:
        netns.exec_in(node_netns, ["wg", "set", iface, "private-key", "/dev/stdin", "peer", peer_public,
                                   "endpoint", endpoint, "allowed-ips", f"10.255.{subnet}.2/32"], input=private_key)
        netns.exec_in(node_netns, ["ip", "addr", "add", f"10.255.{subnet}.1/30", "dev", iface])
        netns.exec_in(node_netns, ["ip", "link", "set", iface, "up"])
        netns.exec_in(node_netns, ["ping", "-c", "3", "-i", "0.5", "-W", "1", f"10.255.{subnet}.2"], check=False)
        deadline = time.monotonic() + 6
        while time.monotonic() < deadline:
            hs = netns.exec_in(node_netns, ["wg", "show", iface, "latest-handshakes"]).stdout.split()
            if len(hs) == 2 and hs[1] != "0":
                return True
            time.sleep(0.5)
        return False
    finally:
        netns.exec_in(node_netns, ["ip", "link", "del", iface], check=False)


def test_the_old_key_no_longer_completes_a_handshake(lab):
    a, b = lab["a"], lab["b"]
    server = get(b, "gatewayservers")[0]["status"]["endpoint"]
    endpoint = f"{server['addresses'][0]}:{server['port']}"
    node_a = a.gateway_nodes[0].netns
    new_b = secret_keys(b)["publicKey"]
    cases = {
        # the client's old key against the server: refused
        "old client key": (OLD["a"]["private"], new_b),
        # the server's old public key: nobody answers to it any more (its private key is gone from the Secret)
        "old server key": (secret_keys(a)["privateKey"], OLD["b"]["public"]),
        # control: the same test peer with the client's new key completes a handshake
        "new keys": (secret_keys(a)["privateKey"], new_b),
    }
    # the three test peers at once, each on an interface and a tunnel of its own: a refusal is a wait that expires
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(cases)) as pool:
        done = {name: pool.submit(_test_peer, node_a, key, peer, endpoint, 252 + i)
                for i, (name, (key, peer)) in enumerate(cases.items())}
        shook = {name: future.result() for name, future in done.items()}
    assert shook == {"old client key": False, "old server key": False, "new keys": True}, shook


def test_the_controller_rotates_on_the_annotated_period(lab, tmp_path):
    """A GatewayClient annotated with a 30 s key-rotation-period: the controller (serving both clusters,
    with the inventory) runs rotate_keys when the period since the last rotation has passed."""
    from tests.e2e.test_controller import ControllerProc  # pylint: disable=import-outside-toplevel
    a, b = lab["a"], lab["b"]
    before = {c.name: secret_keys(c) for c in (a, b)}
    BY_CONTROLLER.update(before)
    gc = get(a, "gatewayclients")[0]
    ref = ["gatewayclients.networking.liqo.io", gc["metadata"]["name"], "-n", gc["metadata"]["namespace"]]
    ctl = ControllerProc(str(tmp_path), {"a": a.kubeconfig, "b": b.kubeconfig}, "--key-rotation-check", "2",
                         inventory=lab.inventory_path)
    ctl.start()
    try:
        kubectl(a, "annotate", *ref, "networking.liqo.io/key-rotation-period=30s")
        done = fabric.wait_for(lambda: [line for line in ctl.logs() if line.get("msg") == "key rotation done"], 150,
                               what="the controller's rotation")
        assert done[0]["result"] == "ok" and done[0]["cluster"] == "a", ctl.log_tail(60)
        for c in (a, b):
            assert secret_keys(c)["publicKey"] != before[c.name]["publicKey"]
        fabric.wait_for(lambda: all(get(c, "connections")[0]["status"]["value"] == "Connected" for c in (a, b)), 60,
                        what="both Connections Connected after the rotation")
    finally:
        kubectl(a, "annotate", *ref, "networking.liqo.io/key-rotation-period-", check=False)
        ctl.stop()
    for c in (a, b):
        keys = secret_keys(c)
        assert set(keys) == {"privateKey", "publicKey"}
        assert wg(c, "public-key") == keys["publicKey"]
    with open(ctl.log_path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    for c in (a, b):
        for k in (before[c.name]["privateKey"], secret_keys(c)["privateKey"]):
            assert k not in text


def test_a_second_rotation_works_and_no_private_key_is_ever_shown(lab):
    a, b = lab["a"], lab["b"]
    mid = {c.name: secret_keys(c)["privateKey"] for c in (a, b)}
    # the keys of the first rotation, when the controller's rotation (the test before) replaced them since
    between = [BY_CONTROLLER[n] for n in sorted(BY_CONTROLLER)]
    publics = {OLD[n]["public"] for n in OLD} | {k["publicKey"] for k in between} | {
        secret_keys(c)["publicKey"] for c in (a, b)}
    rotate(lab, check=False)
    publics |= {secret_keys(c)["publicKey"] for c in (a, b)}
    for c in (a, b):
        assert secret_keys(c)["privateKey"] != mid[c.name]
        assert get(c, "connections")[0]["status"]["value"] == "Connected"
    keys = [OLD[n]["private"] for n in OLD] + [k["privateKey"] for k in between] + list(mid.values()) + [
        secret_keys(c)["privateKey"] for c in (a, b)]
    assert len(set(keys)) == 6 + len(between)
    for text in OUTPUTS:
        for key in keys:
            assert key not in text
            assert base64.b64decode(key).hex() not in text
        # anything shaped like a WireGuard key is a public key of this lab (or the check-mode placeholder)
        shown = set(re.findall(r"(?<![A-Za-z0-9+/])[A-Za-z0-9+/]{43}=", text))
        assert shown <= publics | {"CHECK+MODE+key+generated+by+the+real+run+xA="}, shown - publics


def test_bad_input_names_each_field_before_any_write(tmp_path):
    proc = playbook("rotate_keys", check=False, kubeconfig=str(tmp_path / "nope"), wait_timeout="soon")
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    for msg in (f"kubeconfig: {tmp_path / 'nope'} is not a file", "remote_kubeconfig: missing",
                "wait_timeout: soon is not a number of seconds", "gateway_group: inventory group gateway has no host"):
        assert msg in out, out[-2000:]
