# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Cheap dataplane drift checks, no playbook: read back what the last successful run declared it owns.

A playbook declares its dataplane objects with `set_stats` (aggregate, key `fabric_dataplane`), a list of
targets, one per network namespace (or the local host when `netns` is absent):

    - ansible.builtin.set_stats:
        aggregate: true
        per_host: false
        data:
          fabric_dataplane:
            - netns: "{{ ansible_host }}"          # omit on the local host (node mode)
              links: [liqo.vxlan]                  # interfaces that must exist
              wireguard: [lfab12ab-wg0]            # WireGuard interfaces (and a live wireguard-go)
              routes: [{table: 18952, dst: [10.71.0.0/16, 10.80.0.2/32]}]
              nft_tables: [{family: ip, name: liqo_nat, rules: 4}]   # rules: at least this many

The controller keeps the manifest of each work key's last successful run (persisted with the applied
hashes) and calls the entry's drift function `fn(manifest, context) -> [difference, ...]`; a non-empty list
enqueues a forced reconcile. Reading happens in a short-lived thread that entered the namespace with
setns(2), through the collection's module_utils (rtnetlink dump, libnftables, the UAPI socket).
"""
from __future__ import annotations

import ctypes
import ipaddress
import json
import os
import threading
from typing import Callable, List, Optional

from controller import ensure_collection_importable

ensure_collection_importable()
# pylint: disable=wrong-import-position
from ansible_collections.liqo.fabric.plugins.module_utils import routing  # noqa: E402
from ansible_collections.liqo.fabric.plugins.module_utils.nftables import Nft, NftError  # noqa: E402
from ansible_collections.liqo.fabric.plugins.module_utils.wireguard import RUN_DIR, UserspaceBackend  # noqa: E402

CLONE_NEWNET = 0x40000000
NETNS_DIR = "/var/run/netns"
MANIFEST_KEY = "fabric_dataplane"
_libc = ctypes.CDLL(None, use_errno=True)


def in_netns(netns: Optional[str], fn: Callable, timeout: float = 10.0):
    """Runs fn() in a fresh thread that joined `netns` (None: the current one); returns its result."""
    box = {}

    def body():
        try:
            if netns:
                fd = os.open(os.path.join(NETNS_DIR, netns), os.O_RDONLY)
                try:
                    if _libc.setns(fd, CLONE_NEWNET) != 0:
                        err = ctypes.get_errno()
                        raise OSError(err, f"setns({netns}): {os.strerror(err)}")
                finally:
                    os.close(fd)
            box["result"] = fn()
        except BaseException as exc:  # pylint: disable=broad-except
            box["error"] = exc

    t = threading.Thread(target=body, name=f"drift-{netns or 'host'}", daemon=True)
    t.start()
    t.join(timeout)
    if t.is_alive():
        raise TimeoutError(f"drift check in netns {netns!r} did not finish in {timeout} s")
    if "error" in box:
        raise box["error"]
    return box.get("result")


def _as_list(v) -> list:
    if v is None:
        return []
    return v if isinstance(v, list) else [v]


def check_target(target: dict, run_dir: str = RUN_DIR) -> List[str]:
    """Differences between one target of a manifest and the kernel (call inside the target's netns)."""
    where = target.get("netns") or "host"
    diffs: List[str] = []
    links = wg = routes = tables = None
    links, wg = _as_list(target.get("links")), _as_list(target.get("wireguard"))
    routes, tables = _as_list(target.get("routes")), _as_list(target.get("nft_tables"))
    if links or wg or routes:
        with routing.RtnlSocket() as sock:
            have_links = set(routing.read_links(sock).values())
            for name in links:
                if name not in have_links:
                    diffs.append(f"{where}: link {name} is missing")
            for spec in routes:
                table = int(spec.get("table", routing.DEFAULT_TABLE))
                current = routing.read_routes(sock, table, routing.read_links(sock))
                have = {ipaddress.ip_network(r.dst, strict=False) for fam in current.values() for r in fam.values()}
                for dst in _as_list(spec.get("dst")):
                    if ipaddress.ip_network(dst, strict=False) not in have:
                        diffs.append(f"{where}: route {dst} missing from table {table}")
        for name in wg:
            if name not in have_links:
                diffs.append(f"{where}: wireguard interface {name} is missing")
            elif os.path.exists(os.path.join(run_dir, name + ".sock")) and not UserspaceBackend(name, run_dir).socket_live():
                diffs.append(f"{where}: wireguard-go of {name} is not running")
    if tables:
        try:
            with Nft() as nft:
                for spec in tables:
                    family, name = spec.get("family", "ip"), spec.get("name")
                    data = nft.list_table_json(family, name)
                    if data is None:
                        diffs.append(f"{where}: nft table {family} {name} is missing")
                        continue
                    rules = sum(1 for o in data.get("nftables", []) if "rule" in o)
                    if rules < int(spec.get("rules", 0)):
                        diffs.append(f"{where}: nft table {family} {name} has {rules} rule(s), expected {spec['rules']}")
        except NftError as exc:
            diffs.append(f"{where}: cannot read nftables: {exc}")
    return diffs


def dataplane(manifest, context: Optional[dict] = None) -> List[str]:
    """Generic check of every target of a manifest (see the module docstring)."""
    diffs: List[str] = []
    for target in _as_list(manifest):
        if not isinstance(target, dict):
            continue
        netns = target.get("netns")
        if netns and not os.path.exists(os.path.join(NETNS_DIR, netns)):
            diffs.append(f"{netns}: network namespace is missing")
            continue
        try:
            diffs.extend(in_netns(netns, lambda t=target: check_target(t)))
        except (OSError, routing.NetlinkError, TimeoutError) as exc:
            diffs.append(f"{netns or 'host'}: check failed: {exc}")
    return diffs


def gateway(manifest, context: Optional[dict] = None) -> List[str]:
    """Gateways: WireGuard interface and its wireguard-go, NAT table (and its rules), routes to the peer."""
    return dataplane(manifest, context)


def overlay(manifest, context: Optional[dict] = None) -> List[str]:
    """Node overlay: the Geneve/VXLAN links and the routes of table 18952 on each node."""
    return dataplane(manifest, context)


def manifest_from_stats(stats: dict):
    """The `fabric_dataplane` of a run's set_stats data (also accepts a JSON string)."""
    value = (stats or {}).get(MANIFEST_KEY)
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    return value
