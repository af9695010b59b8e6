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
              health: [{state_dir: /run/liqo-fabric-health, interface: lwg1a2b3c4d}]  # live probe processes

The controller keeps the manifest of each work key's last successful run (persisted with the applied
hashes) and calls the entry's drift function `fn(manifest, context) -> [difference, ...]`; a non-empty list
enqueues a forced reconcile. Reading happens in a short-lived thread that entered the namespace with
setns(2), through the collection's module_utils (rtnetlink dump, libnftables, the UAPI socket).
"""
from __future__ import annotations

import ctypes
import functools
import ipaddress
import os
import threading
from typing import Callable, List, Optional

from controller.library import health_daemon as phd
from controller.library import nft_client, route_netlink, route_policy
from controller.library import wireguard_errors, wireguard_kernel, wireguard_userspace, wireguard_validation
# a check's answer (controller.drift.CheckFailure, drift.failures: custom checks use them)
from controller.manifest import CheckFailure, failures  # noqa: F401  pylint: disable=unused-import

CLONE_NEWNET = 0x40000000
NETNS_DIR = "/var/run/netns"
_libc = ctypes.CDLL(None, use_errno=True)


def join_netns(netns: str) -> None:
    """Moves the calling thread into the named network namespace."""
    fd = os.open(os.path.join(NETNS_DIR, netns), os.O_RDONLY | os.O_CLOEXEC)
    try:
        if _libc.setns(fd, CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"setns({netns}): {os.strerror(err)}")
    finally:
        os.close(fd)


def in_netns(netns: Optional[str], fn: Callable, timeout: float = 10.0):
    """Runs fn() in a fresh thread that joined `netns` (None: the current one); returns its result."""
    box = {}

    def body():
        try:
            if netns:
                join_netns(netns)
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


def _named(v) -> dict:
    return v if isinstance(v, dict) else {"name": v}


def _endpoint(value):
    try:
        host, port = wireguard_validation.split_endpoint(value, "endpoint")
        return str(ipaddress.ip_address(host)), port
    except (ValueError, TypeError):
        return value


def _check_wireguard(where: str, spec: dict, links: dict, run_dir: str) -> List[str]:
    name = spec["name"]
    if name not in links:
        return [f"{where}: wireguard interface {name} is missing"]
    diffs = []
    if spec.get("mtu") and links[name] != int(spec["mtu"]):
        diffs.append(f"{where}: wireguard interface {name} has MTU {links[name]}, expected {spec['mtu']}")
    us = wireguard_userspace.UserspaceBackend(name, run_dir)
    if os.path.exists(us.sock_path):
        if not us.socket_live():
            return diffs + [f"{where}: wireguard-go of {name} is not running"]
        try:
            dev = us.read()
        except (OSError, wireguard_errors.WireGuardError) as exc:
            return diffs + [CheckFailure(f"{where}: cannot read wireguard {name}: {exc}")]
    elif spec.get("peers") or spec.get("listen_port"):
        try:
            dev = wireguard_kernel.KernelBackend(name).read()
        except Exception as exc:  # pylint: disable=broad-except  # pyroute2 missing, not a kernel device
            return diffs + [CheckFailure(f"{where}: cannot read wireguard {name}: {exc}")]
    else:
        return diffs
    if spec.get("listen_port") and dev.listen_port != int(spec["listen_port"]):
        diffs.append(f"{where}: wireguard {name} listens on port {dev.listen_port}, expected {spec['listen_port']}")
    for peer in _as_list(spec.get("peers")):
        have = dev.peers.get(peer.get("public_key"))
        if have is None:
            diffs.append(f"{where}: wireguard {name} has no peer {peer.get('public_key')}")
        elif peer.get("endpoint") and _endpoint(have.endpoint) != _endpoint(peer["endpoint"]):
            diffs.append(f"{where}: wireguard {name} peer endpoint is {have.endpoint}, expected {peer['endpoint']}")
    return diffs


def _read_sysctl(name: str):
    with open(os.path.join("/proc/sys", *name.split(".")), encoding="ascii") as f:
        return f.read().strip()


def check_target(target: dict, run_dir: str = wireguard_userspace.RUN_DIR) -> List[str]:
    """Differences between one target of a manifest and the kernel (call inside the target's netns)."""
    where = target.get("netns") or "host"
    diffs: List[str] = []
    links = [_named(v) for v in _as_list(target.get("links"))]
    wg = [_named(v) for v in _as_list(target.get("wireguard"))]
    routes, rules = _as_list(target.get("routes")), _as_list(target.get("rules"))
    tables = _as_list(target.get("nft_tables"))
    if links or wg or routes or rules:
        with route_netlink.RtnlSocket() as sock:
            have_links = route_netlink.read_link_mtus(sock)
            for spec in links:
                name = spec.get("name")
                if name not in have_links:
                    diffs.append(f"{where}: link {name} is missing")
                elif spec.get("mtu") and have_links[name] != int(spec["mtu"]):
                    diffs.append(f"{where}: link {name} has MTU {have_links[name]}, expected {spec['mtu']}")
            index = route_netlink.read_links(sock) if routes else {}
            for spec in routes:
                table = int(spec.get("table", route_policy.DEFAULT_TABLE))
                current = route_policy.read_routes(sock, table, index)
                have = {ipaddress.ip_network(r.dst, strict=False) for fam in current.values() for r in fam.values()}
                for dst in _as_list(spec.get("dst")):
                    if ipaddress.ip_network(dst, strict=False) not in have:
                        diffs.append(f"{where}: route {dst} missing from table {table}")
            if rules:
                owned = sorted({int(r.get("table", route_policy.DEFAULT_TABLE)) for r in rules if isinstance(r, dict)})
                current = route_policy.read_rules(sock, owned)
                have = {route_policy.rule_line(r) for fam in current.values() for r in fam}
                for spec in rules:
                    line = spec.get("line") if isinstance(spec, dict) else spec
                    if line not in have:
                        diffs.append(f"{where}: rule '{line}' is missing")
        for spec in wg:
            diffs.extend(_check_wireguard(where, spec, have_links, run_dir))
    for name, value in sorted((target.get("sysctls") or {}).items()):
        try:
            have = _read_sysctl(name)
        except OSError as exc:
            diffs.append(CheckFailure(f"{where}: cannot read sysctl {name}: {exc}"))
            continue
        if have != str(value):
            diffs.append(f"{where}: sysctl {name} is {have}, expected {value}")
    for spec in _as_list(target.get("health")):
        # the gateway's live health probe process (peer_health_daemon): alive with the pid file it wrote
        if isinstance(spec, dict) and phd.read_pidfile(spec.get("state_dir", ""), spec.get("interface", "")) is None:
            diffs.append(f"{where}: the health probe process of {spec.get('interface')} is not running")
    if tables:
        try:
            with nft_client.Nft() as nft:
                for spec in tables:
                    family, name = spec.get("family", "ip"), spec.get("name")
                    data = nft.list_table_json(family, name)
                    if data is None:
                        diffs.append(f"{where}: nft table {family} {name} is missing")
                        continue
                    count = sum(1 for o in data.get("nftables", []) if "rule" in o)
                    if count < int(spec.get("rules", 0)):
                        diffs.append(f"{where}: nft table {family} {name} has {count} rule(s), expected {spec['rules']}")
        except (nft_client.NftError, OSError) as exc:
            diffs.append(CheckFailure(f"{where}: cannot read nftables: {exc}"))
    return diffs


@functools.lru_cache(maxsize=1)
def _boot_id() -> Optional[str]:
    """This machine's boot id (it changes only with a reboot, which ends this process too)."""
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
            return f.read().strip()
    except OSError:
        return None


def _own_netns_inode() -> Optional[int]:
    try:
        return os.stat("/proc/thread-self/ns/net").st_ino
    except OSError:
        return None


def unreadable(target: dict) -> Optional[str]:
    """Why this process cannot read a target's kernel (another machine, an unnamed namespace of another process, a
    named namespace that is gone), or None."""
    netns = target.get("netns")
    where = netns or target.get("host") or "host"
    boot = _boot_id()
    if target.get("boot_id") and boot and target["boot_id"] != boot:
        return (f"{where}: built on another machine (boot id {target['boot_id']}): this controller cannot read its "
                "kernel (run the node agent there)")
    if not netns and target.get("netns_inode") and target["netns_inode"] != _own_netns_inode():
        return f"{where}: built in an unnamed network namespace (inode {target['netns_inode']}) the controller cannot enter"
    if netns and not os.path.exists(os.path.join(NETNS_DIR, netns)):
        return f"{netns}: network namespace is missing"
    return None


def dataplane(manifest, context: Optional[dict] = None, kind: Optional[str] = None) -> List[str]:
    """Generic check of every target of a manifest (of one `kind` when given; see the module docstring).
    Returns differences; the ones that are CheckFailure say what could not be read."""
    diffs: List[str] = []
    for target in _as_list(manifest):
        if not isinstance(target, dict) or (kind and target.get("kind", kind) != kind):
            continue
        why = unreadable(target)
        if why:
            diffs.append(CheckFailure(why))
            continue
        netns = target.get("netns")
        try:
            diffs.extend(in_netns(netns, lambda t=target: check_target(t)))
        except (OSError, route_netlink.NetlinkError, TimeoutError) as exc:
            diffs.append(CheckFailure(f"{netns or target.get('host') or 'host'}: check failed: {exc}"))
    return diffs


def readable_here(target: dict) -> Optional[tuple]:
    """(netns or None) when this process can read the target's kernel (unreadable() says nothing against it, and it
    is not a remote host's), else None."""
    if unreadable(target) or (target.get("host") and not target.get("netns")):
        return None
    return (target.get("netns"),)


def watch_points(manifest, with_pids: bool = True, run_dir: str = wireguard_userspace.RUN_DIR) -> dict:
    """{network namespace (None: this process's): {pid: what}} of a manifest's targets this process can read: the
    namespaces whose kernel notifications can tell a fault as it happens, and the processes whose exit can
    (wireguard-go, the health probes)."""
    out: dict = {}
    for target in _as_list(manifest):
        where = readable_here(target) if isinstance(target, dict) else None
        if where is None:
            continue
        pids = out.setdefault(where[0], {})
        if not with_pids:
            continue
        for spec in (_named(v) for v in _as_list(target.get("wireguard"))):
            pid = wireguard_userspace.UserspaceBackend(spec["name"], run_dir).recorded_pid(same_netns=False)
            if pid:
                pids[pid] = f"wireguard-go of {spec['name']}"
        for spec in _as_list(target.get("health")):
            rec = phd.read_pidfile(spec.get("state_dir", ""), spec.get("interface", "")) if isinstance(spec, dict) else None
            if rec:
                pids[rec["pid"]] = f"the health probe of {spec.get('interface')}"
    return out


def gateway(manifest, context: Optional[dict] = None) -> List[str]:
    """Gateways: WireGuard interface, MTU, peers and a live wireguard-go, NAT table (and its rules), the
    tunnel's routes and rules, sysctls. Overlay targets a gateway run also declared are the Node entry's."""
    return dataplane(manifest, context, kind="gateway")


def overlay(manifest, context: Optional[dict] = None) -> List[str]:
    """Node overlay: the Geneve/VXLAN links (and MTUs), routes and rules of table 18952, the bypass table."""
    return dataplane(manifest, context, kind="overlay")
