"""1,000 WireGuard peers configured in one call (target < 0.5 s), against `wg setconf` of the same peers.

The measurement runs inside a throwaway netns (module_utils acts on the netns of its process), in a child
`ip netns exec ... python -m tests.benchmarks.bench_wireguard --inner` that prints its timings as JSON.
"""
import json
import os
import secrets
import subprocess
import sys
import tempfile
import time

from tests.ansible_run import ROOT, run_module
from tests.benchmarks.report import figure, ratio
from tests.lab import netns

sys.path.insert(0, os.path.join(ROOT, "build", "collections"))
from ansible_collections.liqo.fabric.plugins.module_utils import wireguard as wg  # noqa: E402

N_PEERS = 1000


def peer_params(n):
    peers = []
    for i in range(n):
        peers.append({"public_key": wg.generate_keypair()[1], "endpoint": "192.168.77.%d:%d" % (2 + i % 200, 40000 + i),
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
    priv = wg.generate_private_key()
    peers = peer_params(N_PEERS)
    out = {}
    try:
        for name in (ours, base):
            wg.ensure_present(wg.validate_interface({"name": name, "private_key": priv, "listen_port": None}))
        params = {"name": ours, "private_key": priv, "listen_port": 51820, "peers": peers}
        t0 = time.perf_counter()
        res = wg.ensure_present(wg.validate_interface(params))
        out["apply"] = time.perf_counter() - t0
        assert res["changed"] and len(wg.UserspaceBackend(ours).read().peers) == N_PEERS or res["backend"] == "kernel"
        t0 = time.perf_counter()
        res = wg.ensure_present(wg.validate_interface(params))
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
        wg.read_interface(ours)
        out["read"] = time.perf_counter() - t0
    finally:
        for name in (ours, base):
            wg.ensure_absent(name)
    print(json.dumps(out))


def run():
    if os.geteuid() != 0:
        print("  skipped: needs root for network namespaces")
        return
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
        args = {"name": name, "private_key": wg.generate_private_key(), "peers": peer_params(N_PEERS)}
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
