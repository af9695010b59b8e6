#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: gateway_dataplane
short_description: Build or remove a gateway host's whole dataplane in one call
version_added: 0.1.0
description:
  - Applies the plan of M(liqo.fabric.gateway_plan) on the gateway host it runs on, for every listed gateway,
    in one process and in dependency order.
  - First the forwarding and loose reverse-path sysctls; then the WireGuard interface and its one peer (as
    M(liqo.fabric.wireguard_interface) with C(exclusive=true)); the NAT table with the tunnel's marks, the 1:1
    remap of the remote pod CIDR and the TCP MSS clamp (as M(liqo.fabric.nat_table) C(tunnels) and C(mss));
    the tunnel's routing table, a default route into the interface, and the two policy rules selecting it,
    by fwmark and by remapped remote CIDR (as M(liqo.fabric.route_table) and M(liqo.fabric.route_rule));
    last a probe of the tunnel, handshake then full-MTU pings (as M(liqo.fabric.tunnel_probe)).
  - Every input is validated first; when any gateway's input is bad nothing is written and the message names
    the gateway and the field.
  - V(state=absent) removes the listed gateways' rules, routes, NAT tables and interfaces (wireguard-go process
    and socket included); when they were the host's last gateways, the sysctls get back the values found before
    the first one (see O(sysctl_file)).
  - A gateway whose plan gives its live peer (a handshake within the last 180 s) a new public key first adds the
    new key beside it, carrying nothing, and waits up to 5.5 s for its handshake (a client's at its configured
    endpoint, a server's where the live peer's packets come from). When the handshake comes, the
    new key takes over with its session; when it does not (a PublicKey that is not the peer's), nothing of that
    gateway is touched, the task fails naming the key (RV(refused)) and the tunnel runs on with the live peer.
  - A second identical run writes nothing and reports no change.
  - One call replaces six module runs, each of which costs more than the work it does.
author: liqo.fabric developers (@liqo-fabric)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - liqo.fabric.attributes
attributes:
  diff_mode:
    details: One diff per part (sysctls, WireGuard without secrets, NAT table as nft text, routes, rules).
requirements:
  - pyroute2
  - nftables (libnftables or the nft command)
  - wireguard-go (when the kernel has no wireguard module); v0.0.20230223 or later (Debian bookworm-backports'
    0.0.20231211) for its offloads, an older one works several times slower and gets a warning
options:
  gateways:
    description:
      - Entries of RV(liqo.fabric.gateway_plan#module:gateways). With V(state=present) pass the ready ones;
        each needs C(interface), C(nat_table), C(table), C(mtu), C(transit_address), C(peer), C(nat_tunnel),
        C(mark), C(rule_priority) and C(probe_address); with V(state=absent) C(interface), C(nat_table) and
        C(table) are enough.
    type: list
    elements: dict
    default: []
  private_keys:
    description:
      - Private key of each gateway by interface name (RV(liqo.fabric.gateway_plan#module:private_keys)).
        Required for V(state=present). Never returned or logged.
    type: dict
  state:
    description: V(present) builds the gateways, V(absent) removes them.
    type: str
    default: present
    choices: [present, absent]
  probe_wait:
    description:
      - Seconds the probe keeps trying until the tunnel is up. With V(0) one probe is made and a failure is not
        final; after a full wait a failure is final. Gateways whose plan has an C(error) are not probed.
    type: float
    default: 0
  probe:
    description:
      - Probe the tunnels at all. V(false) while a key rotation has switched this side's key and the peer has not
        yet, when the probe could only fail (liqo.fabric.rotate_keys, docs/key-rotation.md).
    type: bool
    default: true
  handover_wait:
    description:
      - Seconds to wait for an interface name that a wireguard-go of another network namespace of the same
        machine still holds (wireguard-go's control sockets are per machine), for example while the old active
        gateway host of a failover tears down in the same task. V(0) fails at once.
    type: float
    default: 0
  peer_key_trial:
    description:
      - Try a new peer key (a handshake within 5.5 s) before it replaces a live peer, and refuse it when
        none comes. V(false) in a key rotation's adopt step (liqo.fabric.rotate_keys); the key is the peer's and
        already in use there, and the packets the peer queued for it must reach it at once.
    type: bool
    default: true
  local_rule_priority:
    description:
      - Only where the gateways own the network namespace (a gateway pod). Moves the IPv4 C(lookup local)
        policy rule from priority 0 to this one, after the gateways' rules, so that a packet for a remote pod
        whose original address is also an address of this namespace (a gateway pod's IP lies in its cluster's
        pod CIDR, which the remote cluster shares when the CIDRs overlap) enters the tunnel instead of being
        delivered here. Must be above every gateway's C(rule_priority) + 1.
      - Also sets C(accept_local) on the gateways' tunnel interfaces, since a request from the remote pod with that
        address arrives with a source that is local here, which the kernel drops as martian before the NAT
        rewrites it.
      - V(state=absent) puts the rule back at priority 0. Omitted, the rule is left alone (a shared host).
    type: int
  sysctl_file:
    description:
      - The host's record of its host-wide sysctls (C(net.ipv4.ip_forward=1), C(net.ipv4.conf.all.rp_filter=2)),
        one per host whatever the number of gateways on it. The first gateway records the values found before
        it and the interfaces of the gateways running on the host; V(state=absent) takes the listed gateways off,
        and when none is left puts the values found before back and removes the file. A valid sysctl.d file
        (the wanted values, the rest in comments).
      - When omitted the values are set and never restored.
    type: path
notes:
  - Runs on the gateway host (use the C(liqo.fabric.netns) connection for a network namespace). Needs CAP_NET_ADMIN.
seealso:
  - module: liqo.fabric.gateway_plan
  - module: liqo.fabric.gateway_publish
"""

EXAMPLES = r"""
- name: Plan the gateways of the cluster
  liqo.fabric.gateway_plan:
    kubeconfig: /etc/kubernetes/admin.conf
    include_private_keys: true
  delegate_to: localhost
  run_once: true
  register: plan
  no_log: true

- name: Build them on the gateway host and wait up to 10 s for the tunnels
  liqo.fabric.gateway_dataplane:
    gateways: "{{ plan.gateways | selectattr('ready') | list }}"
    private_keys: "{{ plan.private_keys }}"
    probe_wait: 10
  register: dataplane

- name: Remove them
  liqo.fabric.gateway_dataplane:
    gateways: "{{ plan.gateways }}"
    state: absent
"""

RETURN = r"""
gateways:
  description: What was done (or would be) per gateway, by part (wireguard, nat, routes, rules).
  returned: always
  type: list
  elements: dict
  sample:
    - interface: lwg1a2b3c4d
      kind: GatewayClient
      changed: true
      writes: 6
      wireguard: {changed: true, created: true, backend: wireguard-go, pid: 4242, writes: 2}
      nat: {changed: true, table: lfgw_1a2b3c4d5e6f, rules: 7}
      routes: {changed: true, added: ["0.0.0.0/0 dev lwg1a2b3c4d scope link"], replaced: [], removed: [], writes: 1}
      rules: {changed: true, added: ["1800: from all fwmark 0x5e2a lookup 24106"], removed: [], writes: 2}
refused:
  description: Gateways left as they run because their new peer key completed no handshake, by interface.
  returned: always
  type: dict
  sample: {"lwg1a2b3c4d": {"reason": "PeerKeyRejected", "message": "the peer's new public key ... completed no handshake ..."}}
errors:
  description:
    - On a failure, the gateway objects (C(namespace/name)) a refusal belongs to, with its reason and message, so that
      the controller's C(Degraded) condition of each says why; C({}) when the failure is no field of a gateway.
    - C(PeerKeyRejected) (see RV(refused)); C(InvalidEndpoint) when a client's C(spec.endpoint.addresses) cannot be
      used on this host (a name it cannot resolve). Nothing is written then, and a gateway built before runs on as
      it is.
  returned: failed
  type: dict
  sample: {"liqo-tenant-b/b": {"reason": "InvalidEndpoint", "message": "gateways[0] (lwg1a2b3c4d): spec.endpoint.addresses: cannot resolve host ..."}}
probes:
  description:
    - Probe result by interface (connected, reason, message, latency_ms, final), as M(liqo.fabric.tunnel_probe).
    - A gateway with C(mtu_auto) is probed at a 1280-byte path's size, then its path is probed and the interface set
      to what crosses it - C(mtu_status) (C(value), C(source), C(probed), C(pathMTU)) and C(path_mtu) (the probe -
      C(tried) sizes, C(seconds)), or C(path_mtu_error).
  returned: when state is present and not in check mode
  type: dict
  sample: {lwg1a2b3c4d: {connected: true, reason: Established, latency_ms: 0.21, final: true}}
sysctls:
  description: Sysctl names (and the record file) changed.
  returned: always
  type: list
  elements: str
  sample: [net.ipv4.ip_forward]
wireguard_go:
  description:
    - The wireguard-go the gateways run on (path, version as the binary prints it, offloads) and, when it lacks
      the vectorized I/O and TCP/UDP offloads of v0.0.20230223 (Debian bookworm's 0.0.20220316), a warning naming
      the package to install (wireguard-go 0.0.20231211 from bookworm-backports); the task warns too.
  returned: state=present, when a gateway uses the wireguard-go backend
  type: dict
  sample: {path: /usr/bin/wireguard-go, version: 0.0.20230223, offloads: true, warning: null}
local_rule:
  description: With O(local_rule_priority), whether the C(lookup local) rule moved, its priority now and the
    tunnel interfaces whose C(accept_local) was set.
  returned: when O(local_rule_priority) is set
  type: dict
  sample: {changed: true, priority: 1810, accept_local: [lwg1a2b3c4d]}
sysctls_restored:
  description: The values put back by the host's last gateway going (empty while other gateways run there).
  returned: state=absent
  type: dict
  sample: {net.ipv4.ip_forward: "0", net.ipv4.conf.all.rp_filter: "0"}
manifest:
  description:
    - What this host now owns, for the controller's drift checks (see module_utils/host/manifest.py);
      C(kind) gateway, C(wireguard) (name, mtu, listen_port, peers' public keys and endpoints), C(routes),
      C(rules) (as C(ip rule) prints them), C(nft_tables) (with their rule counts) and C(sysctls).
  returned: state=present, not in check mode
  type: dict
  sample: {"kind": "gateway", "wireguard": [{"name": "lfab1a2b3c4d", "mtu": 1340, "listen_port": 51820, "peers": []}],
           "routes": [{"table": 1001, "dst": ["0.0.0.0/0"]}], "rules": [], "links": [],
           "nft_tables": [{"family": "ip", "name": "liqo_nat_1a2b", "rules": 4}], "sysctls": {"net.ipv4.ip_forward": "1"}}
"""

import traceback

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.liqo.fabric.plugins.module_utils.gateway import dataplane as gd
from ansible_collections.liqo.fabric.plugins.module_utils.host import manifest as dataplane_manifest
from ansible_collections.liqo.fabric.plugins.module_utils.route.netlink import NetlinkError
from ansible_collections.liqo.fabric.plugins.module_utils.wireguard.errors import WireGuardError
from ansible_collections.liqo.fabric.plugins.module_utils.wireguard.link import HAS_PYROUTE2, PYROUTE2_IMPORT_ERROR


def main():
    module = AnsibleModule(
        argument_spec=dict(
            gateways=dict(type="list", elements="dict", default=[]),
            private_keys=dict(type="dict", no_log=True),
            state=dict(type="str", default="present", choices=["present", "absent"]),
            probe_wait=dict(type="float", default=0),
            probe=dict(type="bool", default=True),
            sysctl_file=dict(type="path"),
            handover_wait=dict(type="float", default=0),
            peer_key_trial=dict(type="bool", default=True),
            local_rule_priority=dict(type="int"),
        ),
        required_if=[("state", "present", ("private_keys",))],
        supports_check_mode=True,
    )
    if not HAS_PYROUTE2:
        module.fail_json(msg=missing_required_lib("pyroute2"), exception=PYROUTE2_IMPORT_ERROR)
    p = module.params
    try:
        result = gd.sync_gateway_dataplane(p["gateways"], p["private_keys"], p["state"], module.check_mode,
                                           p["probe_wait"], p["sysctl_file"], p["handover_wait"],
                                           p["local_rule_priority"], p["probe"], p["peer_key_trial"])
    except gd.DataplaneError as e:
        module.fail_json(msg=str(e), errors=e.errors)
    except (WireGuardError, NetlinkError, gd.NftError, OSError) as e:
        module.fail_json(msg="gateway dataplane: %s" % e, exception=traceback.format_exc())
    if (result.get("wireguard_go") or {}).get("warning"):
        module.warn(result["wireguard_go"]["warning"])
    if p["state"] == "present" and not module.check_mode:
        result["manifest"] = dataplane_manifest.gateway(p["gateways"], result, gd._rules, gd._routes,  # pylint: disable=protected-access
                                                        gd.SYSCTLS)
    diffs = result.pop("diffs")
    if module._diff:  # pylint: disable=protected-access
        result["diff"] = diffs
    if result["refused"]:
        module.fail_json(msg="; ".join("%s: %s" % (i, r["message"]) for i, r in sorted(result["refused"].items())),
                         errors=gd.refusal_errors(result), **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
