#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: gateway_plan
short_description: Plan the gateways of a cluster from their GatewayServer/GatewayClient resources
version_added: 0.1.0
description:
  - Reads the C(GatewayServer) and C(GatewayClient) resources of a cluster with the C(Configuration) and
    C(PublicKey) of their remote cluster and returns, for each gateway, what its dataplane must be (WireGuard
    interface and peer, NAT tunnel, fwmark and routing table) and what it must publish (status, Connection).
  - Creates each gateway's key Secret once (C(wg-server-NAME) / C(wg-client-NAME)), with a private key
    generated inside the module and written only to the Secret; only the public key is returned.
  - A gateway with C(spec.secretRef) uses the user's own key from that Secret instead (C(data.privateKey) as
    Liqo stores it, 32 raw bytes, or the base64 text of the key); the public key is derived from it and the
    Secret is never written. A missing Secret or a key of the wrong length is an C(error) naming the field
    and the Secret, never the key.
  - The peer's PublicKey is the one of the gateway's namespace labelled C(liqo.io/remote-cluster-id) with the
    peer's cluster id (Liqo) or, when the namespace has no other gateway, with this cluster's id (the seeds'
    example); several candidates are an C(error) (C(AmbiguousPublicKey)), never a guess.
  - A gateway that lacks its Configuration, its remapped CIDRs or the remote PublicKey is returned with
    C(waiting); one with bad input (no remote cluster id label, no server address, an MTU different from the
    remote's, more than one port in C(spec.endpoint.ports) or C(nodePorts), C(serviceType) ExternalName, a
    C(loadBalancerIP) without a LoadBalancer Service, a client C(protocol) TCP) with C(error). Both carry a
    reason and a message naming the field.
author: liqo.fabric developers (@liqo-fabric)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - liqo.fabric.attributes.no_diff
  - liqo.fabric.kube
attributes:
  check_mode:
    details: In check mode no Secret is created and the public key of a new gateway is null.
options:
  namespace:
    description: Only the gateways of this namespace.
    type: str
  name:
    description: Only the gateway(s) with this name.
    type: str
  kinds:
    description: Which kinds of gateway to plan.
    type: list
    elements: str
    choices: [GatewayServer, GatewayClient]
    default: [GatewayServer, GatewayClient]
  endpoint_address:
    description: Address the remote gateway reaches this gateway host at (published in a GatewayServer's status).
    type: str
  internal_cidr:
    description: The local internal CIDR; the gateway's internal endpoint is its first address.
    type: str
    default: 10.80.0.0/16
  include_private_keys:
    description:
      - Also return RV(private_keys) for configuring the WireGuard interfaces. The task must then have
        C(no_log=true); the module refuses otherwise.
    type: bool
    default: false
  validate_manifests:
    description:
      - Render each gateway's template and validate the manifests with a server-side dry run before anything
        is built; a gateway that fails gets RV(gateways[].error) and is not ready. False for a teardown.
    type: bool
    default: true
  peer_kubeconfigs:
    description:
      - Kubeconfigs of the peer clusters this host reaches, by cluster id (the controller serving several clusters
        passes them). For each gateway whose C(liqo.io/remote-cluster-id) names one of them, the PublicKeys of that
        cluster carrying the gateway's public key and a C(networking.liqo.io/mtu) annotation get the gateway's MTU
        in it (a PublicKey without the annotation is left alone), and the MTU is compared with the peer gateway's
        own C(spec.mtu) (the gateway of the other kind in that PublicKey's namespace) rather than with the
        annotation of the peer's PublicKey here, which the peer's run may not have rewritten yet. So a change of
        C(spec.mtu) on both gateways of a connection is seen as equal on both sides, and the annotation's change
        reruns the peer's gateway under the controller.
      - Only a ready gateway announces its MTU. A refused change (held, the tunnel runs on as last built) or a
        gateway still waiting announces none, and a peer gateway whose own C(spec.mtu) is refused (C(InvalidMTU)) is
        not compared with (the annotation's view stays).
      - A peer cluster out of reach is no failure (see RV(peer_errors)); the plan keeps the annotation's view.
    type: dict
    default: {}
notes:
  - With O(include_private_keys), failures still carry a message without secrets in C(msg); show it with a
    following M(ansible.builtin.assert) since C(no_log) hides the task's output.
"""

EXAMPLES = r"""
- name: Plan the gateways of the cluster
  liqo.fabric.gateway_plan:
    kubeconfig: /etc/liqo/kubeconfig
    endpoint_address: 192.168.254.1
  delegate_to: localhost
  register: gateways
"""

RETURN = r"""
gateways:
  description: One plan per gateway.
  returned: always
  type: list
  elements: dict
  contains:
    kind:
      description: GatewayServer or GatewayClient.
      type: str
    interface:
      description: WireGuard interface name (unique per host).
      type: str
    ready:
      description: Whether the dataplane can be built (Configuration remapped, remote PublicKey present).
      type: bool
    waiting:
      description: Reason and message while something is missing, else null.
      type: dict
    error:
      description:
        - Reason and message of a misconfiguration, else null.
        - C(InvalidGatewayTemplate) / C(GatewayManifestRejected) when the template is missing, does not render or
          renders manifests the apiserver rejects (server-side dry run); such a gateway is not ready, nothing is
          built for it and no key Secret is created.
        - C(ConfigurationRefused) when the IPAM refused the current spec of the gateway's Configuration (its
          C(NetworkCIDRsConfigured) condition is C(False); it keeps the allocation in use).
        - C(InvalidMTU) when C(spec.mtu) is not an integer from 576 to 9000 nor C(auto) (the fabric's CRDs refuse it
          already; Liqo's own bound nothing).
      type: dict
    mtu_auto:
      description:
        - C(spec.mtu) is C(auto) - the gateway host probes the path to the peer and runs the tunnel at what crosses it
          (docs/path-mtu.md). C(mtu) is then what the last probe set (C(status.mtu), source C(probed)), the default
          before the first probe, and never more than C(mtu_peer).
      type: bool
    mtu_source:
      description: Where C(mtu) comes from - C(probed), C(configured) (C(spec.mtu) a number) or C(default).
      type: str
    mtu_peer:
      description: With C(mtu_auto), the MTU the peer's PublicKey announces (its own probe), else null.
      type: int
    mtu_probe:
      description: The size the tunnel's connectivity probe sends - C(mtu), or with C(mtu_auto) a 1280-byte path's.
      type: int
    held:
      description:
        - A refused change (an error, not ready) of a gateway built before (its Connection carries the
          C(fabric.liqo.io/built-generation) annotation). Its tunnel, health probe and the overlay's routes are
          kept as they run; nothing is rebuilt from the refused spec and nothing is torn down.
      type: bool
    manifests_checked:
      description: Whether the template's manifests were rendered and validated by this plan.
      type: bool
    public_key:
      description: Public key of this gateway.
      type: str
    peer:
      description: The WireGuard peer (remote public key, endpoint, allowed IPs, keepalive).
      type: dict
    nat_tunnel:
      description: The nat_table tunnel entry (interface, mark, remote original and remapped pod CIDR).
      type: dict
    status:
      description: Status fields the gateway resource publishes.
      type: dict
peer_updates:
  description: What was (or would be, in check mode) written in the peer clusters (O(peer_kubeconfigs)).
  returned: always
  type: list
  elements: str
peer_errors:
  description: Why a peer cluster of O(peer_kubeconfigs) could not be read or written, by cluster id.
  returned: always
  type: dict
private_keys:
  description: Private key of each gateway by interface name.
  returned: when O(include_private_keys=true)
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.liqo.fabric.plugins.module_utils.gateway.api import gateway_plans
from ansible_collections.liqo.fabric.plugins.module_utils.gateway.peer_mtu import follow_peers
from ansible_collections.liqo.fabric.plugins.module_utils.kube.client import KUBE_ARG_SPEC, with_kube


def main():
    module = AnsibleModule(
        argument_spec=dict(
            **KUBE_ARG_SPEC,
            namespace=dict(type="str"),
            name=dict(type="str"),
            kinds=dict(type="list", elements="str", choices=["GatewayServer", "GatewayClient"],
                       default=["GatewayServer", "GatewayClient"]),
            endpoint_address=dict(type="str"),
            internal_cidr=dict(type="str", default="10.80.0.0/16"),
            include_private_keys=dict(type="bool", default=False),
            validate_manifests=dict(type="bool", default=True),
            peer_kubeconfigs=dict(type="dict", default={}),
        ),
        supports_check_mode=True,
    )
    p = module.params
    if p["include_private_keys"] and not module.no_log:
        module.fail_json(msg="include_private_keys: true requires no_log: true on the task (private keys)")
    plans, keys, changed = with_kube(module, lambda kube: gateway_plans(
        kube, p["endpoint_address"], p["internal_cidr"], p["namespace"], p["name"], p["kinds"], module.check_mode,
        p["validate_manifests"]))
    peer_updates, peer_errors = follow_peers(plans, p["peer_kubeconfigs"], module.check_mode)
    for cluster_id in sorted(peer_errors):
        module.warn(peer_errors[cluster_id])
    result = dict(changed=changed or bool(peer_updates), gateways=plans, peer_updates=peer_updates,
                  peer_errors=peer_errors)
    if p["include_private_keys"]:
        result["private_keys"] = keys
    module.exit_json(**result)


if __name__ == "__main__":
    main()
