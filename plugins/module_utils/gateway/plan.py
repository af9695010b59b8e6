# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a gateway must look like, derived from its CRs: the pure planning step of roles/gateway.

Input: a GatewayServer or GatewayClient, the Configuration and PublicKey of the same remote cluster,
the local cluster id and a few host facts. Output: a GatewayPlan (to_result(): the plan dict the modules
return) with the WireGuard interface, the NAT tunnel entry, the policy-routing mark/table, the status to
publish and whether the gateway can be built yet (waiting) or is misconfigured (error, with a reason and a
message naming the field).

Addressing inside the tunnel: packets cross it with their *original* addresses; the 1:1 remap happens at
each end (nat_table `tunnels`). Because the remote's original pod CIDR may equal the local one, tunnel
traffic is steered by a fwmark into a per-gateway routing table (route_rule/route_table).
"""

from __future__ import annotations

import dataclasses
import hashlib
import ipaddress

from ansible_collections.liqo.fabric.plugins.module_utils.gateway import path_mtu
from ansible_collections.liqo.fabric.plugins.module_utils.kube.client import REMOTE_CLUSTER_ID_LABEL

KINDS = {"GatewayServer": "Server", "GatewayClient": "Client"}
DEFAULT_MTU = 1340
# spec.mtu the tunnel accepts (the fabric's CRDs say so too; Liqo's own CRDs bound nothing): 576 is the smallest
# datagram every IPv4 host must accept (RFC 791), 9000 the usual jumbo-frame MTU of the underlay
MTU_RANGE = (576, 9000)
# spec.mtu: auto: the tunnel MTU found by probing the path to the peer (module_utils/gateway/path_mtu.py)
MTU_AUTO = "auto"
DEFAULT_PORT = 51820
KEEPALIVE = 25
MTU_ANNOTATION = "networking.liqo.io/mtu"
KEY_SECRET_LABEL = "networking.liqo.io/gateway-keys"
# Point-to-point transit addresses of the tunnel itself (probe target); link-local, never routed.
TRANSIT = {"Server": ("169.254.18.1/30", "169.254.18.2"), "Client": ("169.254.18.2/30", "169.254.18.1")}
MARK_BASE, MARK_SPAN = 20000, 10000          # fwmark == routing table id, per gateway
RULE_PRIORITY = 1800
NODE_PORT_BASE, NODE_PORT_SPAN = 30000, 2768  # Kubernetes' default NodePort range


def gateway_id(cluster_id, namespace, name, kind):
    """Stable id of a gateway on a host: interface names must be unique per host (wireguard-go sockets)."""
    return hashlib.sha256(("%s/%s/%s/%s" % (cluster_id, namespace, kind, name)).encode()).hexdigest()


def interface_name(gid):
    return "lwg" + gid[:8]


def mark_for(gid):
    return MARK_BASE + int(gid[8:16], 16) % MARK_SPAN


def default_node_port(gid):
    return NODE_PORT_BASE + int(gid[16:24], 16) % NODE_PORT_SPAN


def secret_name(kind, name):
    return "wg-%s-%s" % (KINDS[kind].lower(), name)


def _labels(obj):
    return (obj.get("metadata") or {}).get("labels") or {}


def _pick(objs, remote_id, namespace):
    """The object labelled with the remote cluster id, preferring the gateway's namespace."""
    matches = [o for o in objs if _labels(o).get(REMOTE_CLUSTER_ID_LABEL) == remote_id]
    same_ns = [o for o in matches if (o.get("metadata") or {}).get("namespace") == namespace]
    pool = same_ns or matches
    return sorted(pool, key=lambda o: (o["metadata"].get("creationTimestamp") or "", o["metadata"]["name"]))[0] if pool else None


def _names(objs):
    return ", ".join(sorted(o["metadata"]["name"] for o in objs))


def peer_public_key(public_keys, gateway, local_cluster_id, namespace_gateways=None):
    """The peer's PublicKey of a gateway: (object or None, error message or None).

    Only the PublicKeys of the gateway's own (tenant) namespace are considered, by their
    liqo.io/remote-cluster-id label, which carries either
    - the id of the key's owner, i.e. the gateway's remote cluster (Liqo's v1beta1 labelling), or
    - the id of the cluster the key is applied to, i.e. this cluster (the seeds' v1alpha1 example).
    An owner-labelled key belongs to this gateway alone. A key labelled with this cluster's id belongs to the
    only gateway of the namespace: with several gateways there (``namespace_gateways``) it is refused as
    ambiguous rather than guessed. More than one matching key is refused too (which one is the peer's?)."""
    meta = gateway.get("metadata") or {}
    namespace = meta.get("namespace")
    remote_id = _labels(gateway).get(REMOTE_CLUSTER_ID_LABEL)
    in_ns = [o for o in public_keys if (o.get("metadata") or {}).get("namespace") in (namespace, None)]
    owner = [o for o in in_ns if _labels(o).get(REMOTE_CLUSTER_ID_LABEL) == remote_id]
    if len(owner) > 1:
        return None, ("PublicKeys %s in namespace %s are all labelled %s=%s: only one may carry the peer's key"
                      % (_names(owner), namespace, REMOTE_CLUSTER_ID_LABEL, remote_id))
    if owner:
        return owner[0], None
    if not local_cluster_id or local_cluster_id == remote_id:
        return None, None
    here = [o for o in in_ns if _labels(o).get(REMOTE_CLUSTER_ID_LABEL) == local_cluster_id]
    if not here:
        return None, None
    others = sorted("%s %s" % (g.get("kind"), (g.get("metadata") or {}).get("name")) for g in namespace_gateways or []
                    if (g.get("kind"), (g.get("metadata") or {}).get("name")) != (gateway.get("kind"), meta.get("name")))
    if len(here) > 1 or others:
        return None, ("PublicKey%s %s in namespace %s labelled %s=%s (this cluster's id, the seeds' labelling) cannot be"
                      " told apart: %s; label the peer's PublicKey with the peer's cluster id %s (Liqo's labelling)"
                      " or keep one gateway per namespace"
                      % ("s" if len(here) > 1 else "", _names(here), namespace, REMOTE_CLUSTER_ID_LABEL, local_cluster_id,
                         "several keys match" if len(here) > 1 else "the namespace has other gateways (%s)" % ", ".join(others),
                         remote_id))
    return here[0], None


def _one_port(endpoint, scalar, plural, where):
    """The single value of ``scalar`` or of the list ``plural`` (Liqo's v1beta1 shape): (value or None, error).
    One gateway is one WireGuard tunnel on one port: a list of more than one is refused, not truncated."""
    values = endpoint.get(plural)
    if values in (None, []):
        return endpoint.get(scalar), None
    if not isinstance(values, list):
        return None, "%s.%s: must be a list of port numbers, got %r" % (where, plural, values)
    if endpoint.get(scalar) not in (None, 0) and endpoint.get(scalar) != values[0]:
        return None, "%s.%s and %s.%s: give only one of them" % (where, scalar, where, plural)
    if len(values) > 1:
        return None, ("%s.%s: %s has %d ports, but a gateway here is one WireGuard tunnel on one port; give exactly one"
                      " (one gateway per tunnel)" % (where, plural, values, len(values)))
    return values[0], None


SERVICE_TYPES = ("ClusterIP", "NodePort", "LoadBalancer")
# Errors in the gateway's own fields (or its key Secret): the run fails for it, so the controller sets it Degraded
REFUSAL_REASONS = ("InvalidEndpoint", "UnsupportedServiceType", "UnsupportedProtocol", "AmbiguousPublicKey",
                   "SecretNotFound", "InvalidSecretKey", "ConfigurationRefused", "InvalidMTU")


def endpoint_spec(gateway):
    """The endpoint fields of a GatewayServer/GatewayClient, every one honoured or refused:
    ({port, node_port, service_type, load_balancer_ip, protocol, addresses}, None) or (None, (reason, message)).
    ``ports`` / ``nodePorts`` (Liqo's lists) of one element stand for ``port`` / ``nodePort``."""
    spec = gateway.get("spec") or {}
    ep = spec.get("endpoint") or {}
    where = "spec.endpoint"
    port, err = _one_port(ep, "port", "ports", where)
    if err:
        return None, ("InvalidEndpoint", err)
    out = {"port": port, "node_port": None, "service_type": None, "load_balancer_ip": None, "protocol": None,
           "addresses": ep.get("addresses") or []}
    if gateway["kind"] == "GatewayServer":
        node_port, err = _one_port(ep, "nodePort", "nodePorts", where)
        if err:
            return None, ("InvalidEndpoint", err)
        stype = ep.get("serviceType") or "ClusterIP"
        if stype == "ExternalName":
            return None, ("UnsupportedServiceType", "%s.serviceType: ExternalName cannot expose a gateway: an ExternalName"
                          " Service is a DNS alias with no ports and no selector, so nothing carries the tunnel's UDP"
                          " port to the gateway; use %s" % (where, ", ".join(SERVICE_TYPES)))
        if stype not in SERVICE_TYPES:
            return None, ("UnsupportedServiceType", "%s.serviceType: %r is not one of %s" % (where, stype, ", ".join(SERVICE_TYPES)))
        if node_port and stype == "ClusterIP":
            return None, ("InvalidEndpoint", "%s.nodePort%s: %s, but a ClusterIP Service has no node port; set serviceType"
                          " NodePort (or LoadBalancer) or remove it" % (where, "s" if ep.get("nodePorts") else "", node_port))
        lb_ip = ep.get("loadBalancerIP") or None
        if lb_ip and stype != "LoadBalancer":
            return None, ("InvalidEndpoint", "%s.loadBalancerIP: %s is only used by a LoadBalancer Service, but serviceType"
                          " is %s; set serviceType LoadBalancer or remove it" % (where, lb_ip, stype))
        out.update(node_port=node_port or None, service_type=stype, load_balancer_ip=lb_ip)
    else:
        protocol = ep.get("protocol") or "UDP"
        if protocol != "UDP":
            return None, ("UnsupportedProtocol", "%s.protocol: %s is not supported: the tunnel is WireGuard, which carries"
                          " its packets over UDP only; set UDP (the default)" % (where, protocol))
        out["protocol"] = protocol
    return out, None


def mtu_problem(value):
    """Why a gateway's spec.mtu (absent: the default) cannot be the tunnel's MTU: a message naming the field and the
    value, or None. ``auto`` asks for the MTU found by probing the path to the peer."""
    if value is None or value == MTU_AUTO:
        return None
    low, high = MTU_RANGE
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        return ("spec.mtu: %r is not an MTU the tunnel can use: give an integer from %d (the smallest datagram every"
                " IPv4 host must accept) to %d (a jumbo-frame underlay), the same on both sides, or %s (the path MTU"
                " to the peer, probed)" % (value, low, high, MTU_AUTO))
    return None


def mtu_auto(gateway):
    """Whether the gateway's tunnel MTU is probed (spec.mtu: auto)."""
    return (gateway.get("spec") or {}).get("mtu") == MTU_AUTO


def _valid_mtu(value):
    return isinstance(value, int) and not isinstance(value, bool) and MTU_RANGE[0] <= value <= MTU_RANGE[1]


def probed_mtu(gateway):
    """The tunnel MTU a probing gateway runs (status.mtu.value with source probed: what its probes found, through
    their hysteresis and the peer's cap), or None before its first probe."""
    status = ((gateway.get("status") or {}).get("mtu") or {})
    if status.get("source") != "probed" or not _valid_mtu(status.get("value")):
        return None
    return status["value"]


def gateway_mtu(gateway):
    """The MTU a gateway's spec asks for (absent: the default; auto: the MTU its last probe found, else the default),
    or None when spec.mtu is refused (mtu_problem)."""
    value = (gateway.get("spec") or {}).get("mtu")
    if mtu_problem(value):
        return None
    if value == MTU_AUTO:
        return probed_mtu(gateway) or DEFAULT_MTU
    return DEFAULT_MTU if value is None else value


def mtu_source(gateway):
    """Where the gateway's MTU comes from: probed (auto, once a probe found it), configured (spec.mtu a number) or
    default (spec.mtu absent, or auto before the first probe)."""
    value = (gateway.get("spec") or {}).get("mtu")
    if value == MTU_AUTO:
        return "probed" if probed_mtu(gateway) else "default"
    return "default" if value is None else "configured"


def user_secret_name(gateway):
    """spec.secretRef.name: the Secret holding the user's own keys (Liqo's declarative keys), else None."""
    ref = (gateway.get("spec") or {}).get("secretRef") or {}
    return ref.get("name") if isinstance(ref, dict) and ref.get("name") else None


def cidr_fields(cidr):
    """{pod, external} of a Configuration's ``cidr`` with one CIDR string each (or None): the seeds' v1alpha1
    writes strings, Liqo's v1beta1 lists; a list of one stands for its element. ``external`` is optional.
    A list of several is kept as a list (the IPAM refuses it, naming the field)."""
    out = {}
    for field in ("pod", "external"):
        value = (cidr or {}).get(field)
        if isinstance(value, list) and len(value) <= 1:
            value = value[0] if value else None
        out[field] = value
    return out


def listen_port(gateway, gid):
    endpoint, problem = endpoint_spec(gateway)
    if gateway["kind"] != "GatewayServer" or problem:
        return None
    if endpoint["service_type"] == "NodePort":
        return endpoint["node_port"] or default_node_port(gid)
    return endpoint["port"] or DEFAULT_PORT


@dataclasses.dataclass(frozen=True)
class Problem:
    """Why a gateway cannot be built (an error) or cannot be built yet (waiting): the Connection's reason and a
    message naming the field."""
    reason: str
    message: str


@dataclasses.dataclass(frozen=True)
class RemoteCidrs:
    """The remote cluster's CIDRs in its Configuration: as the remote uses them (spec) and remapped here by the IPAM
    (status)."""
    configuration: str
    pod_original: str | None
    pod_remapped: str
    external_original: str | None
    external_remapped: str | None


@dataclasses.dataclass(frozen=True)
class NatTunnel:
    """The gateway's entry of nat_table `tunnels`."""
    interface: str
    mark: int
    remote_original: str | None
    remote_remapped: str
    output: bool = True


@dataclasses.dataclass(frozen=True)
class Peer:
    """The WireGuard peer: the other end of the tunnel."""
    public_key: str | None
    endpoint: str | None            # a client's: the server's address:port; a server learns it from the handshake
    allowed_ips: list = dataclasses.field(default_factory=lambda: ["0.0.0.0/0"])
    persistent_keepalive: int = 0


@dataclasses.dataclass(frozen=True)
class GatewayPlan:
    """The plan of one gateway. Its JSON form, to_result(), is what modules return and later steps amend."""
    kind: str                       # GatewayServer | GatewayClient
    role: str                       # Server | Client
    name: str
    namespace: str
    uid: str | None
    generation: int | None
    remote_cluster_id: str | None
    id: str                         # gateway_id, shortened
    interface: str                  # the WireGuard interface (unique per host)
    nat_table: str
    mark: int                       # fwmark of the tunnel's traffic ...
    table: int                      # ... and the routing table it selects
    rule_priority: int
    mtu: int                        # the tunnel MTU to build (auto: the last probed, the peer's if smaller)
    listen_port: int | None         # a server's (the node port with a NodePort Service)
    transit_address: str            # this end's address inside the tunnel (/30) ...
    probe_address: str              # ... and the other end's
    secret_name: str                # the key Secret: the user's (spec.secretRef) or the one created for the gateway
    user_secret: bool
    public_key: str | None
    peer: Peer | None = None        # set once the peer's PublicKey is known
    nat_tunnel: NatTunnel | None = None   # set once the IPAM remapped the remote pod CIDR
    remote: RemoteCidrs | None = None
    ready: bool = False             # everything known: the gateway can be built
    waiting: Problem | None = None  # not yet
    error: Problem | None = None    # misconfigured (an MTU mismatch leaves the plan ready: the Connection reports it)
    connection_name: str = ""
    mtu_auto: bool = False          # spec.mtu auto: the gateway host probes the path (module_utils/gateway/path_mtu.py)
    mtu_source: str = "default"     # probed | configured | default
    mtu_peer: int | None = None     # auto: the tunnel MTU the peer announced (its own probe), the cap of this one's
    mtu_probe: int | None = None    # the size the tunnel's connectivity probe sends: the MTU, auto the smallest path's
    status: dict = dataclasses.field(default_factory=dict)   # what the GatewayServer/Client status shows

    def to_result(self) -> dict:
        return dataclasses.asdict(self)


def mtu_status(gateway, mtu):
    """status.mtu of a gateway whose tunnel runs at `mtu`: the value, its source and (auto) what the last probe found."""
    out = {"value": mtu, "source": mtu_source(gateway)}
    last = ((gateway.get("status") or {}).get("mtu") or {})
    if mtu_auto(gateway) and probed_mtu(gateway):
        for key in ("probed", "pathMTU"):
            if _valid_mtu(last.get(key)):
                out[key] = last[key]
    return out


def _gateway_status(role, secret, namespace, internal_cidr, endpoint_address, port):
    """The gateway's status: its key Secret, its internal endpoint and (a server) the endpoint peers connect to."""
    internal = ipaddress.ip_network(internal_cidr, strict=False)
    status = {"secretRef": {"apiVersion": "v1", "kind": "Secret", "name": secret, "namespace": namespace},
              "internalEndpoint": {"ip": str(internal.network_address + 1)}}
    if role == "Server":
        status["endpoint"] = {"addresses": [endpoint_address] if endpoint_address else [], "port": port, "protocol": "UDP"}
    return status


def _base_plan(gateway, local_cluster_id, endpoint_address, internal_cidr, local_public_key) -> GatewayPlan:
    """What the gateway's own object decides: its names, addresses and status; nothing known of the peer yet."""
    kind = gateway["kind"]
    meta = gateway.get("metadata") or {}
    name, namespace = meta.get("name"), meta.get("namespace")
    role = KINDS[kind]
    gid = gateway_id(local_cluster_id, namespace, name, kind)
    mark = mark_for(gid)
    user_secret = user_secret_name(gateway)
    secret = user_secret or secret_name(kind, name)
    port = listen_port(gateway, gid)
    mtu = gateway_mtu(gateway) or DEFAULT_MTU
    status = _gateway_status(role, secret, namespace, internal_cidr, endpoint_address, port)
    if not mtu_problem((gateway.get("spec") or {}).get("mtu")):
        status["mtu"] = mtu_status(gateway, mtu)
    return GatewayPlan(
        kind=kind, role=role, name=name, namespace=namespace, uid=meta.get("uid"), generation=meta.get("generation"),
        remote_cluster_id=_labels(gateway).get(REMOTE_CLUSTER_ID_LABEL), id=gid[:16], interface=interface_name(gid),
        nat_table="lfgw_" + gid[:12], mark=mark, table=mark, rule_priority=RULE_PRIORITY,
        mtu=mtu, listen_port=port, transit_address=TRANSIT[role][0],
        probe_address=TRANSIT[role][1], secret_name=secret, user_secret=bool(user_secret), public_key=local_public_key,
        connection_name=name, mtu_auto=mtu_auto(gateway), mtu_source=mtu_source(gateway),
        mtu_probe=path_mtu.floor_mtu() if mtu_auto(gateway) else mtu, status=status)


def _peer_endpoint(role, endpoint_fields, endpoint_address, need_endpoint):
    """(the peer's endpoint: a client's server address:port, None for a server; or the Problem without one)."""
    if role == "Server":
        if not endpoint_address and need_endpoint:
            return None, Problem("NoEndpointAddress", "the gateway host has no endpoint address (set gateway_endpoint_address)")
        return None, None
    addresses, port = endpoint_fields["addresses"], endpoint_fields["port"]
    if not addresses:
        return None, Problem("InvalidEndpoint", "spec.endpoint.addresses: at least one address of the server is required")
    if not port:
        return None, Problem("InvalidEndpoint", "spec.endpoint.port (or ports): the server's port is required")
    return "%s:%s" % (addresses[0], port), None


def _remote_cidrs(configurations, remote_id, namespace):
    """(the remote cluster's CIDRs from its Configuration, or the Problem to wait for)."""
    conf = _pick(configurations, remote_id, namespace)
    if conf is None:
        return None, Problem("ConfigurationNotFound", "no Configuration labelled %s=%s" % (REMOTE_CLUSTER_ID_LABEL, remote_id))
    spec = cidr_fields(((conf.get("spec") or {}).get("remote") or {}).get("cidr"))
    status = cidr_fields(((conf.get("status") or {}).get("remote") or {}).get("cidr"))
    if not status.get("pod"):
        return None, Problem("WaitingForIPAM", "Configuration %s/%s has no status.remote.cidr.pod yet"
                             % (conf["metadata"].get("namespace"), conf["metadata"]["name"]))
    return RemoteCidrs(conf["metadata"]["name"], spec.get("pod"), status.get("pod"), spec.get("external"),
                       status.get("external")), None


IPAM_CONDITION = "NetworkCIDRsConfigured"


def _ipam_refusal(conf):
    """The Problem when the IPAM refused the Configuration's current spec (it keeps the allocation in use)."""
    cond = next((c for c in ((conf.get("status") or {}).get("conditions") or []) if c.get("type") == IPAM_CONDITION), None)
    if cond is None or cond.get("status") != "False":
        return None
    return Problem("ConfigurationRefused", "Configuration %s/%s: %s" % (
        conf["metadata"].get("namespace"), conf["metadata"]["name"], cond.get("message") or cond.get("reason")))


def announced_mtu(public_key):
    """The tunnel MTU the peer's PublicKey announces (networking.liqo.io/mtu) as a number, else None (absent, or
    auto before the peer's first probe)."""
    value = ((public_key.get("metadata") or {}).get("annotations") or {}).get(MTU_ANNOTATION)
    try:
        value = int(str(value))
    except ValueError:
        return None
    return value if _valid_mtu(value) else None


def with_peer_cap(plan_, public_key):
    """An auto plan once the peer's PublicKey is known: the smaller of its own MTU and the peer's announced one (both
    sides agree on the smaller value: each probes the direction it sends in)."""
    peer = announced_mtu(public_key)
    if not plan_.mtu_auto or peer is None:
        return plan_
    mtu = min(plan_.mtu, peer)
    status = dict(plan_.status, mtu=dict(plan_.status.get("mtu") or {}, value=mtu))
    return dataclasses.replace(plan_, mtu=mtu, mtu_peer=peer, status=status)


def _mtu_mismatch(mtu, public_key):
    remote_mtu = ((public_key.get("metadata") or {}).get("annotations") or {}).get(MTU_ANNOTATION)
    if str(remote_mtu) == MTU_AUTO:
        return None  # the peer probes its path: nothing to compare until it announces what it found
    if remote_mtu and str(remote_mtu) != str(mtu):
        return Problem("MTUMismatch", "spec.mtu: %s here but %s on the remote gateway (PublicKey %s, annotation %s); the"
                       " MTU must be equal on both sides" % (mtu, remote_mtu, public_key["metadata"]["name"], MTU_ANNOTATION))
    return None


def plan(gateway, configurations, public_keys, local_cluster_id, endpoint_address, internal_cidr="10.80.0.0/16",
         local_public_key=None, need_endpoint=True, namespace_gateways=None) -> GatewayPlan:
    """The plan of one gateway (see the module docstring); never raises for bad CR content.
    need_endpoint=False: a server without an endpoint address is not an error (the overlay's view, which
    does not know the gateway host's address). namespace_gateways: the gateways of its namespace (to tell
    whose a PublicKey labelled with this cluster's id is, see peer_public_key)."""
    out = _base_plan(gateway, local_cluster_id, endpoint_address, internal_cidr, local_public_key)
    endpoint_fields, problem = endpoint_spec(gateway)
    if problem:  # no endpoint to publish either
        return dataclasses.replace(out, error=Problem(*problem),
                                   status={k: v for k, v in out.status.items() if k != "endpoint"})
    refused_mtu = mtu_problem((gateway.get("spec") or {}).get("mtu"))
    if refused_mtu:
        return dataclasses.replace(out, error=Problem("InvalidMTU", refused_mtu))
    remote_id = out.remote_cluster_id
    if not remote_id:
        return dataclasses.replace(out, error=Problem("MissingRemoteClusterID", "metadata.labels[%s]: required, the id of"
                                                      " the remote cluster" % REMOTE_CLUSTER_ID_LABEL))
    peer_endpoint, problem = _peer_endpoint(out.role, endpoint_fields, endpoint_address, need_endpoint)
    if problem:
        return dataclasses.replace(out, error=problem)
    remote, waiting = _remote_cidrs(configurations, remote_id, out.namespace)
    if waiting:
        return dataclasses.replace(out, waiting=waiting)
    out = dataclasses.replace(out, remote=remote,
                              nat_tunnel=NatTunnel(out.interface, out.mark, remote.pod_original, remote.pod_remapped))
    refused = _ipam_refusal(_pick(configurations, remote_id, out.namespace))
    if refused:  # its status holds the remap of the spec the IPAM last accepted, not of this one
        return dataclasses.replace(out, error=refused)
    pk, ambiguous = peer_public_key(public_keys, gateway, local_cluster_id, namespace_gateways)
    if ambiguous:
        return dataclasses.replace(out, error=Problem("AmbiguousPublicKey", ambiguous))
    if pk is None:
        return dataclasses.replace(out, waiting=Problem(
            "WaitingForPublicKey", "no PublicKey in namespace %s labelled %s=%s (the peer's id) or %s=%s (this cluster's"
            " id)" % (out.namespace, REMOTE_CLUSTER_ID_LABEL, remote_id, REMOTE_CLUSTER_ID_LABEL, local_cluster_id)))
    peer = Peer((pk.get("spec") or {}).get("publicKey"), peer_endpoint,
                persistent_keepalive=KEEPALIVE if out.role == "Client" else 0)
    if out.mtu_auto:
        return dataclasses.replace(with_peer_cap(out, pk), peer=peer, ready=True)
    return dataclasses.replace(out, peer=peer, ready=True, error=_mtu_mismatch(out.mtu, pk))


def connection_value(plan_, probe=None):
    """(status.value, condition reason, message) of the Connection for a plan and a probe result."""
    if plan_.get("error"):
        return "Error", plan_["error"]["reason"], plan_["error"]["message"]
    if plan_.get("waiting"):
        return "Connecting", plan_["waiting"]["reason"], plan_["waiting"]["message"]
    if not probe:
        return "Connecting", "NotProbed", "the tunnel was configured but not probed yet"
    if probe.get("connected"):
        return "Connected", "Established", "handshake and probe through the tunnel succeeded"
    return "Error" if probe.get("final") else "Connecting", probe.get("reason") or "ProbeFailed", probe.get("message") or ""


def published_mtu(plan_, probe=None):
    """status.mtu to publish: what a probe of the path in this run set (the probe's `mtu_status`), else the plan's."""
    return (probe or {}).get("mtu_status") or (plan_.get("status") or {}).get("mtu")


def connection_object(plan_, probe=None, now=None):
    """The Connection (spec and status) this gateway publishes."""
    value, reason, message = connection_value(plan_, probe)
    status = {"value": value}
    mtu = published_mtu(plan_, probe)
    if mtu:
        status["mtu"] = {"value": mtu["value"], "source": mtu["source"]}
    if probe and probe.get("latency_ms") is not None and value == "Connected":
        status["latency"] = {"value": "%.3fms" % probe["latency_ms"], "timestamp": now}
    return {
        "apiVersion": "networking.liqo.io/v1beta1",
        "kind": "Connection",
        "metadata": {"name": plan_["connection_name"], "namespace": plan_["namespace"],
                     "labels": {REMOTE_CLUSTER_ID_LABEL: plan_.get("remote_cluster_id") or ""}},
        "spec": {"type": plan_["role"],
                 "gatewayRef": {"apiVersion": "networking.liqo.io/v1beta1", "kind": plan_["kind"],
                                "name": plan_["name"], "namespace": plan_["namespace"], "uid": plan_.get("uid")}},
        "status": status,
    }, reason, message
