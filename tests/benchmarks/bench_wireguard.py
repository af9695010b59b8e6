"""1,000 WireGuard peers configured in one call (target < 0.5 s), against `wg setconf` of the same peers.

The measurement runs inside a throwaway netns (module_utils acts on the netns of its process), in a child
`ip netns exec ... python -m tests.benchmarks.bench_wireguard --inner` that prints its timings as JSON.

Also a warm standby client made active, as tests/integration/test_wireguard_failover.py does it, in two netns
joined by a veth: by a run of liqo.fabric.wireguard_interface giving its peer the endpoint and keepalive (the
ansible-playbook run included), and in process by wireguard_session.activate (the gateway pod's way; a python
start included) after traffic stamped a handshake attempt -> the first handshake (`wg show`, polled every 20 ms).
"""
import contextlib
import json
import os
import secrets
import subprocess
import sys
import tempfile
import time

from tests.ansible_run import ROOT, run_module
from tests.benchmarks.report import figure, ratio
from tests.lab import names, netns

sys.path.insert(0, os.path.join(ROOT, "build", "collections"))
from ansible_collections.liqo.fabric.plugins.module_utils.wireguard.interface import (  # noqa: E402
    ensure_absent, ensure_present, read_interface)
from ansible_collections.liqo.fabric.plugins.module_utils.wireguard.keys import (  # noqa: E402
    generate_keypair, generate_private_key)
from ansible_collections.liqo.fabric.plugins.module_utils.wireguard.userspace import UserspaceBackend  # noqa: E402
from ansible_collections.liqo.fabric.plugins.module_utils.wireguard.validation import validate_interface  # noqa: E402

N_PEERS = 1000


def peer_params(n):
    peers = []
    for i in range(n):
        peers.append({"public_key": generate_keypair()[1], "endpoint": "192.168.77.%d:%d" % (2 + i % 200, 40000 + i),
                      "allowed_ips": ["10.%d.%d.0/24" % (100 + i // 256, i % 256)], "persistent_keepalive": 25})
    return peers


def wg_conf(private_key, peers):
    lines = ["[Interface]", "PrivateKey = " + private_key, "ListenPort = 51830", ""]
    for p in peers:
        lines += ["[Peer]", "PublicKey = " + p["public_key"], "Endpoint = " + p["endpoint"],
                  "AllowedIPs = " + ", ".join(p["allowed_ips"]), "PersistentKeepalive = 25", ""]
    return "\n".join(lines)


def inner(tag):
    ours, base = f"lfab{tag}wgo", f"lfab{tag}wgb"
    priv = generate_private_key()
    peers = peer_params(N_PEERS)
    out = {}
    try:
        for name in (ours, base):
            ensure_present(validate_interface({"name": name, "private_key": priv, "listen_port": None}))
        params = {"name": ours, "private_key": priv, "listen_port": 51820, "peers": peers}
        t0 = time.perf_counter()
        res = ensure_present(validate_interface(params))
        out["apply"] = time.perf_counter() - t0
        assert res["changed"] and len(UserspaceBackend(ours).read().peers) == N_PEERS or res["backend"] == "kernel"
        t0 = time.perf_counter()
        res = ensure_present(validate_interface(params))
        out["rerun"] = time.perf_counter() - t0
        out["rerun_writes"] = res["writes"]
        out["backend"] = res["backend"]
        fd, path = tempfile.mkstemp(prefix="lfab-wgconf-")   # 0600; holds a private key, removed below
        try:
            with os.fdopen(fd, "w") as f:
                f.write(wg_conf(priv, peers))
            t0 = time.perf_counter()
            subprocess.run(["wg", "setconf", base, path], check=True)
            out["wg_setconf"] = time.perf_counter() - t0
        finally:
            os.unlink(path)
        t0 = time.perf_counter()
        read_interface(ours)
        out["read"] = time.perf_counter() - t0
    finally:
        for name in (ours, base):
            ensure_absent(name)
    print(json.dumps(out))


@contextlib.contextmanager
def veth_pair():
    """(ns_a, ns_b): two throwaway netns joined by a veth, 192.168.77.1/24 and .2/24 on eth0 (the integration
    tests' veth_pair). Leaving, what still runs in them (a wireguard-go) is stopped by PID."""
    prefix = names.lab_prefix(names.new_lab_id())
    made = [f"{prefix}b-a", f"{prefix}b-b"]
    netns.create_netns(made)
    try:
        for n in made:
            netns.ip_batch(["link set lo up"], netns=n)
        netns.ip_batch([f"link add eth0 netns {made[0]} type veth peer name eth0 netns {made[1]}"])
        for n, addr in zip(made, ("192.168.77.1/24", "192.168.77.2/24")):
            netns.ip_batch([f"addr add {addr} dev eth0", "link set eth0 up"], netns=n)
        yield made[0], made[1]
    finally:
        netns.delete_netns_and_processes(made)


def standby_activation():
    """A standby client (peer without endpoint and keepalive) made active, by a module run and in process."""
    from tests.integration.test_wireguard import ping  # pylint: disable=import-outside-toplevel
    from tests.integration.test_wireguard_failover import (  # pylint: disable=import-outside-toplevel
        SERVER_EP, handshake_after, pair, session_code)
    tag = secrets.token_hex(2)
    took = {}
    with veth_pair() as (a, b):
        for how in ("module", "in process"):
            ifa, ifb = f"lfab{tag}{how[0]}a", f"lfab{tag}{how[0]}b"
            try:
                client = pair(a, b, ifa, ifb, {"endpoint": None, "persistent_keepalive": 0})[0]
                if how == "module":
                    active = dict(client, peers=[dict(client["peers"][0], endpoint=SERVER_EP, persistent_keepalive=25)])
                    t0 = time.monotonic()
                    res = run_module("liqo.fabric.wireguard_interface", active, netns=a)
                    if res.get("failed"):
                        raise RuntimeError(res.get("msg"))
                else:
                    ping(a, "10.80.0.2", attempts=1)   # traffic into the standby's tunnel: a handshake attempt
                    code = session_code("len(s.activate(%r, %r, 25))" % (ifa, SERVER_EP))
                    t0 = time.monotonic()
                    netns.exec_in(a, [sys.executable, "-c", code])
                took[how] = handshake_after(a, ifa, t0, limit=10)
                if took[how] >= 10:
                    raise RuntimeError(f"standby activated ({how}): no handshake within 10 s")
            finally:
                for ns, name in ((a, ifa), (b, ifb)):
                    run_module("liqo.fabric.wireguard_interface", {"name": name, "state": "absent"}, netns=ns)
    figure("standby activated by a module run -> handshake", took["module"], "s")
    figure("standby activated in process -> handshake", took["in process"], "s")


def run():
    if os.geteuid() != 0:
        print("  skipped: needs root for network namespaces")
        return
    standby_activation()
    tag = secrets.token_hex(2)
    ns = f"lfab{tag}bench"
    netns.create_netns([ns])
    try:
        netns.ip_batch(["link set lo up"], netns=ns)
        env = dict(os.environ, PYTHONPATH=ROOT)
        proc = subprocess.run(["ip", "netns", "exec", ns, sys.executable, "-m", "tests.benchmarks.bench_wireguard",
                               "--inner", tag], capture_output=True, text=True, env=env, cwd=ROOT, timeout=300, check=False)
        if proc.returncode != 0:
            raise RuntimeError("inner benchmark failed: " + proc.stderr[-2000:])
        r = json.loads(proc.stdout.strip().splitlines()[-1])
        print(f"  backend: {r['backend']}")
        figure(f"{N_PEERS} peers, one call (validate + read + diff + apply)", r["apply"], "s", target=0.5)
        figure(f"baseline: wg setconf, same {N_PEERS} peers", r["wg_setconf"], "s")
        ratio("ours / wg setconf", r["apply"], r["wg_setconf"])
        figure(f"idempotent rerun, {N_PEERS} peers ({r['rerun_writes']} writes)", r["rerun"], "s")
        figure(f"read-back of {N_PEERS} peers (wireguard_info path)", r["read"], "s")

        # end to end through ansible-playbook and the netns connection
        name = f"lfab{tag}wge"
        args = {"name": name, "private_key": generate_private_key(), "peers": peer_params(N_PEERS)}
        t0 = time.perf_counter()
        res = run_module("liqo.fabric.wireguard_interface", args, netns=ns)
        t1 = time.perf_counter()
        res2 = run_module("liqo.fabric.wireguard_interface", args, netns=ns)
        t2 = time.perf_counter()
        run_module("liqo.fabric.wireguard_interface", {"name": name, "state": "absent"}, netns=ns)
        if res.get("failed"):
            raise RuntimeError(res.get("msg"))
        figure(f"ansible-playbook task, {N_PEERS} peers (incl. ~1 s Ansible start)", t1 - t0, "s")
        figure(f"ansible-playbook task, idempotent rerun (changed={res2.get('changed')})", t2 - t1, "s")
    finally:
        netns.delete_netns([ns])


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--inner":
        inner(sys.argv[2])
    else:
        run()
