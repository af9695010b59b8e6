# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""liqo.fabric.verify: which probes to run (pure planning over API objects) and the report of their results.

For each connected peer: pod to remote pod (sampled: every node pair, one pod each; all pod pairs with full),
node to remote pod, each at the remote pod's address remapped by this cluster's IPAM (host bits kept), with a
small and a full-size packet (the gateway's MTU, don't fragment)."""

from __future__ import annotations

import ipaddress

from ansible_collections.liqo.fabric.plugins.module_utils.kube.client import REMOTE_CLUSTER_ID_LABEL

SMALL = 56          # ping's default payload
GATEWAY_HOST_LABEL = "liqo.io/gateway-host"  # Nodes that host a gateway (their own traffic is not probed)
IP_ICMP_HEADERS = 28


class VerifyError(Exception):
    pass


def remap(address, original, remapped):
    """The address inside `remapped` with the host bits it has inside `original`."""
    orig, new = ipaddress.ip_network(original), ipaddress.ip_network(remapped)
    addr = ipaddress.ip_address(address)
    if addr not in orig or orig.prefixlen != new.prefixlen:
        raise VerifyError("pod address %s is not in the peer's pod CIDR %s (remapped to %s)" % (address, original, remapped))
    return str(new.network_address + (int(addr) - int(orig.network_address)))


GATEWAY_POD_LABEL = ("networking.liqo.io/component", "gateway")
GATEWAY_POD_SKIP = ("a gateway pod of the in-cluster fabric, not a workload: its netns routes the remote CIDRs into "
                    "its own tunnel (a warm standby's reaches no peer), so it is neither a source nor a target")


def is_gateway_pod(pod):
    return ((pod.get("metadata") or {}).get("labels") or {}).get(GATEWAY_POD_LABEL[0]) == GATEWAY_POD_LABEL[1]


def running_pods(pods):
    """{node: [pod, ...]} of the pods with their own address (not hostNetwork), Running, sorted by namespace/name;
    gateway pods left out (GATEWAY_POD_SKIP)."""
    out = {}
    for pod in sorted(pods, key=lambda p: (p["metadata"].get("namespace"), p["metadata"]["name"])):
        spec, status = pod.get("spec") or {}, pod.get("status") or {}
        if spec.get("hostNetwork") or status.get("phase") != "Running" or not status.get("podIP") or not spec.get("nodeName"):
            continue
        if pod["metadata"].get("deletionTimestamp") or is_gateway_pod(pod):
            continue
        out.setdefault(spec["nodeName"], []).append(pod)
    return out


def _ref(pod):
    return "%s/%s" % (pod["metadata"].get("namespace"), pod["metadata"]["name"])


GATEWAY_HOST_SKIP = ("host network of a gateway host: its own traffic leaves with the tunnel's transit address,"
                     " which the peer's nodes do not route back (its pods are probed)")


def plan(cluster, peer, local_pods, remote_pods, configurations, peer_id, mtu, full=False, gateway_nodes=()):
    """({node: [probe, ...]}, [skipped]): what each node of `cluster` probes toward `peer`. A probe: from (a pod
    ref, or "node NAME" for the node itself), from_address, to (the remote pod), to_address (remapped), original,
    node (remote), size. A gateway host's own (host network) probes are listed as skipped with the reason.
    Raises VerifyError when this cluster has no remap of the peer's pod CIDR."""
    conf = next((c for c in configurations if ((c["metadata"].get("labels") or {}).get(REMOTE_CLUSTER_ID_LABEL)) == peer_id),
                None)
    if conf is None:
        raise VerifyError("%s: no Configuration labelled %s=%s (connect the clusters first)"
                          % (cluster, REMOTE_CLUSTER_ID_LABEL, peer_id))
    original = ((conf.get("spec") or {}).get("remote") or {}).get("cidr", {}).get("pod")
    remapped = (((conf.get("status") or {}).get("remote") or {}).get("cidr") or {}).get("pod")
    if not (original and remapped):
        raise VerifyError("%s: Configuration %s/%s has no remapped pod CIDR (status.remote.cidr.pod)"
                          % (cluster, conf["metadata"].get("namespace"), conf["metadata"]["name"]))
    original = original[0] if isinstance(original, list) else original
    remapped = remapped[0] if isinstance(remapped, list) else remapped
    mine, theirs = running_pods(local_pods), running_pods(remote_pods)
    skipped = [{"cluster": cluster, "peer": peer, "from": _ref(p), "reason": GATEWAY_POD_SKIP}
               for p in sorted(local_pods, key=_ref) if is_gateway_pod(p) and not p["metadata"].get("deletionTimestamp")]
    targets = [p for node in sorted(theirs) for p in (theirs[node] if full else theirs[node][:1])]
    sizes = (SMALL, int(mtu) - IP_ICMP_HEADERS)
    out = {}
    for node in sorted(mine):
        sources = mine[node] if full else mine[node][:1]
        probes = out.setdefault(node, [])
        if node in gateway_nodes:
            skipped.append({"cluster": cluster, "peer": peer, "from": "node %s" % node, "reason": GATEWAY_HOST_SKIP})
        for src in ([] if node in gateway_nodes else [None]) + sources:  # None: the node itself
            for dst in targets if src is not None else [theirs[n][0] for n in sorted(theirs)]:
                for size in sizes:
                    probes.append({
                        "cluster": cluster, "peer": peer,
                        "from": _ref(src) if src else "node %s" % node, "from_address": src["status"]["podIP"] if src else None,
                        "from_node": node, "to": _ref(dst), "node": dst["spec"]["nodeName"], "original": dst["status"]["podIP"],
                        "to_address": remap(dst["status"]["podIP"], original, remapped), "size": size})
    return out, skipped


def table(results, skipped=()):
    lines = ["SKIP  %s -> %s  %s: %s" % (s["cluster"], s["peer"], s["from"], s["reason"]) for s in skipped]
    for r in results:
        source = "%s (%s on %s)" % (r["from"], r["from_address"], r["from_node"]) if r.get("from_address") else r["from"]
        tail = ("  rtt %.2f ms" % r["rtt_ms"]) if r.get("ok") and r.get("rtt_ms") is not None else (
            "  %.0f Mbit/s" % r["mbit_per_s"]) if r.get("ok") and r.get("mbit_per_s") is not None else (
            "  " + r["error"]) if r.get("error") else ""
        size = "%s B" % r["size"] if isinstance(r["size"], int) else r["size"]  # Service probes: "TCP"
        address = "%s:%s" % (r["to_address"], r["port"]) if r.get("port") else r["to_address"]
        lines.append("%s  %s -> %s  %s -> %s %s (%s on %s)  %s%s" % (
            "PASS" if r.get("ok") else "FAIL", r["cluster"], r["peer"], source, r["to"], address, r["original"],
            r["node"], size, tail))
    failed = len([r for r in results if not r.get("ok")])
    skips = ", %d skipped" % len(skipped) if skipped else ""
    lines.append("%d probes, %d passed, %d failed%s" % (len(results), len(results) - failed, failed, skips))
    return "\n".join(lines)


def benchmark_pair(cluster, local_pods, remote_pods, configurations, peer_id, local_gateway_nodes=(), remote_gateway_nodes=()):
    """The pods liqo.fabric.benchmark measures between: one of `cluster` and one of the peer, each on a node that
    is not a gateway host when there is one (the path every other node's pods take: overlay, gateway, tunnel)."""
    mine, theirs = running_pods(local_pods), running_pods(remote_pods)

    def pick(pods, gateways, which):
        nodes = [n for n in sorted(pods) if n not in gateways] or sorted(pods)
        if not nodes:
            raise VerifyError("%s: no Running pod with its own address on the %s cluster" % (cluster, which))
        return pods[nodes[0]][0]

    client, server = pick(mine, local_gateway_nodes, "local"), pick(theirs, remote_gateway_nodes, "remote")
    probe = plan(cluster, "remote", [client], [server], configurations, peer_id, 1340)[0]
    target = next(iter(probe.values()))[0]["to_address"]
    return {"client": {"pod": _ref(client), "node": client["spec"]["nodeName"], "address": client["status"]["podIP"]},
            "server": {"pod": _ref(server), "node": server["spec"]["nodeName"], "address": server["status"]["podIP"],
                       "target": target}}


def benchmark_table(figures):
    """liqo.fabric.benchmark's report: the pod path and the tunnel side by side, and what the pod path costs."""
    rows = [("pod to pod", figures["pod_to_pod"]), ("gateway to gateway", figures["gateway_to_gateway"])]
    lines = ["%-20s %16s %12s %14s  %s" % ("", "throughput", "retransmits", "RTT (median)", "from -> to")]
    for label, f in rows:
        rtt = "%.3f ms" % float(f["rtt_ms"]) if f.get("rtt_ms") not in (None, "", "None") else "-"
        mbit = float(f["mbit_per_s"])
        lines.append("%-20s %9.1f Mbit/s %12s %14s  %s -> %s" % (label, mbit, f["retransmits"], rtt, f["from"], f["to"]))
    diff = figures.get("rtt_difference_ms")
    lines.append("pod path / tunnel: throughput x %.3f, RTT %s" % (
        float(figures["throughput_ratio"]), "%+.3f ms" % float(diff) if diff not in (None, "", "None") else "-"))
    return "\n".join(lines)
