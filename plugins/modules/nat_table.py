#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: nat_table
short_description: Own one dedicated nftables NAT table (1:1 CIDR remaps, DNAT/SNAT, masquerade bypass, MSS clamp)
version_added: 0.1.0
description:
  - Builds one nftables table from structured input and replaces it atomically, in one transaction that
    names only this table; other tables (the CNI's, kube-proxy's, the firewall's) are never touched.
  - "1:1 CIDR remaps translate whole prefixes with the host bits preserved (C(dnat ip prefix to) /
    C(snat ip prefix to)): with O(remaps[].original=10.243.0.0/16) and O(remaps[].remapped=10.71.0.0/16),
    10.243.3.7 leaves as 10.71.3.7 and 10.71.3.7 arrives at 10.243.3.7. Remaps that share the interface
    become one rule with an interval map, so 10,000 of them cost one lookup per packet."
  - Chains are C(prerouting) (nat, priority dstnat - 10), C(postrouting) (nat, priority srcnat - 10) and
    C(forward) (filter, priority mangle, for the MSS clamp); for O(tunnels) also C(mangle_prerouting) (filter,
    priority mangle), C(mangle_output) (route, priority mangle) and C(output) (nat, priority -110); a chain
    exists only when it has rules.
  - "O(tunnels) handle a remote cluster whose pod CIDR overlaps a local one: packets to its remapped CIDR get
    the tunnel's fwmark before they are translated back to the remote's real CIDR, so a policy routing rule
    (C(ip rule fwmark M lookup T), see M(liqo.fabric.route_rule)) sends them into the tunnel instead of to the
    local pods. Connections from the tunnel get the same mark as conntrack mark so their replies follow them."
  - Idempotent by structure; the kernel's table is read back as JSON, normalised into the same canonical
    form as the input and compared; a second identical run reports C(changed=false) and writes nothing.
  - Input is validated before anything changes; every error names the field and the value.
  - Runs in-process through libnftables when it is installed (C(libnftables.so.1)), else through the
    C(nft) command.
author: liqo.fabric developers (@liqo-fabric)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - liqo.fabric.attributes
attributes:
  diff_mode:
    details: The diff shows the table before and after as nft rule text, one map element per line.
options:
  name:
    description:
      - Name of the table owned by this task (a letter, then up to 62 letters, digits or C(_)).
    type: str
    default: liqo_fabric_nat
  family:
    description:
      - Address family of the table. IPv6 entries need V(inet).
    type: str
    default: ip
    choices: [ip, inet]
  state:
    description:
      - V(present) makes the table hold exactly the listed entries; V(absent) deletes the table (only it).
    type: str
    default: present
    choices: [present, absent]
  remaps:
    description:
      - 1:1 prefix translations between a real CIDR and the CIDR it is known as elsewhere.
    type: list
    elements: dict
    suboptions:
      original:
        description: The real network (for example the local pod CIDR), in CIDR notation without host bits.
        type: str
        required: true
      remapped:
        description: The network O(remaps[].original) appears as. Must have the same prefix length.
        type: str
        required: true
      translate:
        description:
          - V(destination) rewrites the destination of packets to O(remaps[].remapped) into O(remaps[].original)
            (prerouting); V(source) rewrites the source of packets from O(remaps[].original) into
            O(remaps[].remapped) (postrouting); V(both) does both.
        type: str
        default: both
        choices: [both, source, destination]
      iifname:
        description: Only translate destinations of packets arriving on this interface (for example the tunnel).
        type: str
      oifname:
        description: Only translate sources of packets leaving through this interface.
        type: str
  dnat:
    description:
      - Single-address destination NAT, evaluated before the remaps.
    type: list
    elements: dict
    suboptions:
      daddr:
        description: Destination address to translate.
        type: str
        required: true
      to:
        description: New destination address.
        type: str
        required: true
      saddr:
        description: Only for packets from this network (CIDR or address).
        type: str
      iifname:
        description: Only for packets arriving on this interface.
        type: str
  snat:
    description:
      - Source NAT to a single address, evaluated before the remaps.
    type: list
    elements: dict
    suboptions:
      saddr:
        description: Source network (CIDR or address) to translate.
        type: str
        required: true
      to:
        description: New source address.
        type: str
        required: true
      daddr:
        description: Only for packets to this network (CIDR or address).
        type: str
      iifname:
        description: Only for packets that arrived on this interface.
        type: str
      oifname:
        description: Only for packets leaving through this interface.
        type: str
  bypass:
    description:
      - Traffic that must keep its source address although another table masquerades it (typically the
        CNI's masquerade of pod traffic leaving the node). Evaluated after O(snat) and O(remaps).
      - Implemented as an identity 1:1 SNAT of O(bypass[].saddr) onto itself, not as C(accept), because an
        C(accept) only ends this table's chain while the kernel skips later NAT chains only once a NAT
        binding exists.
    type: list
    elements: dict
    suboptions:
      saddr:
        description: Source network whose addresses are kept.
        type: str
        required: true
      daddr:
        description: Only for packets to this network (for example a remote pod CIDR).
        type: str
      oifname:
        description: Only for packets leaving through this interface.
        type: str
  mss:
    description:
      - TCP MSS clamping of SYN packets forwarded through the tunnel interface.
    type: list
    elements: dict
    suboptions:
      oifname:
        description: Clamp SYNs leaving through this interface (the tunnel). This or O(mss[].iifname) is needed.
        type: str
      iifname:
        description: Clamp SYNs arriving on this interface.
        type: str
      size:
        description: Fixed MSS (536-65495). Default is the route MTU minus headers (C(rt mtu)).
        type: int
  tunnels:
    description:
      - Policy routing by mark plus 1:1 NAT towards a remote cluster reached through a tunnel interface, for
        remote pod CIDRs that may overlap the local ones. With T = O(tunnels[].interface), M = O(tunnels[].mark),
        O = O(tunnels[].remote_original) and R = O(tunnels[].remote_remapped), each tunnel generates
        C(iifname != T ip daddr R meta mark set M), C(iifname != T ct mark M meta mark set M) and
        C(iifname T ct state new ct mark set M) (C(mangle_prerouting)); C(iifname != T ip daddr R dnat ip prefix to O)
        (C(prerouting)) and C(iifname T ip saddr O snat ip prefix to R) (C(postrouting)), the last two only when R
        differs from O; with O(tunnels[].output) the same marking and DNAT for the host's own packets.
      - The policy routing rule C(fwmark M lookup T) and the route into the tunnel in table T are not created
        here (use M(liqo.fabric.route_rule) and M(liqo.fabric.route_table)). The host's own packets also need a
        route for R in the main table (any route through the tunnel), or the socket gets no route before the mark is set.
      - Interfaces and marks must be unique across tunnels, and remapped CIDRs must not overlap.
    type: list
    elements: dict
    suboptions:
      interface:
        description: The tunnel interface (for example the WireGuard interface of this peering).
        type: str
        required: true
      mark:
        description:
          - Firewall mark (1 to 0xffffffff), set as packet mark (C(meta mark)) and as conntrack mark (C(ct mark)).
          - Replaces the whole packet mark of matching packets.
        type: int
        required: true
      remote_original:
        description: The remote cluster's real pod CIDR (may equal a local CIDR), without host bits.
        type: str
        required: true
      remote_remapped:
        description:
          - The CIDR local pods use to reach the remote pods. Same prefix length as O(tunnels[].remote_original);
            may equal it (no translation, only the marks).
        type: str
        required: true
      output:
        description: Also mark and translate packets generated by this host (C(mangle_output) and C(output) chains).
        type: bool
        default: true
  backend:
    description:
      - How nftables is driven. V(auto) uses libnftables when it is installed, else the C(nft) command.
    type: str
    default: auto
    choices: [auto, libnftables, nft]
notes:
  - Runs on the target host (use the C(liqo.fabric.netns) connection for a network namespace). Needs CAP_NET_ADMIN.
  - Replacing the table does not disturb established connections; their NAT bindings live in conntrack, the
    new rules apply to new connections.
"""

EXAMPLES = r"""
- name: Local pods (10.243.0.0/16) appear as 10.71.0.0/16 on the other side of wg0
  liqo.fabric.nat_table:
    name: liqo_fabric_nat
    remaps:
      - original: 10.243.0.0/16
        remapped: 10.71.0.0/16
        iifname: wg0
        oifname: wg0
    mss:
      - oifname: wg0

- name: Keep pod sources towards a non-overlapping remote cluster, one service address, one SNAT
  liqo.fabric.nat_table:
    name: liqo_fabric_nat
    family: inet
    bypass:
      - saddr: 10.243.0.0/16
        daddr: 10.72.0.0/16
    dnat:
      - daddr: 10.70.0.5
        to: 10.243.0.9
        iifname: wg0
    snat:
      - saddr: 10.243.0.9
        to: 10.70.0.5
        oifname: wg0

- name: Remote pods share our pod CIDR; we reach them as 10.71.0.0/16 through wg-b, routed by mark 0x4b00
  liqo.fabric.nat_table:
    name: liqo_fabric_nat
    tunnels:
      - interface: wg-b
        mark: 0x4b00
        remote_original: 10.243.0.0/16
        remote_remapped: 10.71.0.0/16

- name: Remove the table (and nothing else)
  liqo.fabric.nat_table:
    name: liqo_fabric_nat
    state: absent
"""

RETURN = r"""
table:
  description: Name of the table managed.
  returned: always
  type: str
  sample: liqo_fabric_nat
family:
  description: Family of the table.
  returned: always
  type: str
  sample: ip
rules:
  description: Number of rules of the desired table (a map rule counts once); 0 for O(state=absent).
  returned: always
  type: int
  sample: 3
backend:
  description: How nftables was driven, C(libnftables) (in-process) or C(nft) (the command).
  returned: always
  type: str
  sample: libnftables
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.liqo.fabric.plugins.module_utils.nft.client import NftError
from ansible_collections.liqo.fabric.plugins.module_utils.nft.nat_table import NatTableError, ensure

ENTRY_KEYS = ("remaps", "dnat", "snat", "bypass", "mss", "tunnels")


def main():
    module = AnsibleModule(
        argument_spec=dict(
            name=dict(type="str", default="liqo_fabric_nat"),
            family=dict(type="str", default="ip", choices=["ip", "inet"]),
            state=dict(type="str", default="present", choices=["present", "absent"]),
            remaps=dict(type="list", elements="dict", options=dict(
                original=dict(type="str", required=True),
                remapped=dict(type="str", required=True),
                translate=dict(type="str", default="both", choices=["both", "source", "destination"]),
                iifname=dict(type="str"),
                oifname=dict(type="str"),
            )),
            dnat=dict(type="list", elements="dict", options=dict(
                daddr=dict(type="str", required=True),
                to=dict(type="str", required=True),
                saddr=dict(type="str"),
                iifname=dict(type="str"),
            )),
            snat=dict(type="list", elements="dict", options=dict(
                saddr=dict(type="str", required=True),
                to=dict(type="str", required=True),
                daddr=dict(type="str"),
                iifname=dict(type="str"),
                oifname=dict(type="str"),
            )),
            bypass=dict(type="list", elements="dict", no_log=False, options=dict(
                saddr=dict(type="str", required=True),
                daddr=dict(type="str"),
                oifname=dict(type="str"),
            )),
            mss=dict(type="list", elements="dict", options=dict(
                oifname=dict(type="str"),
                iifname=dict(type="str"),
                size=dict(type="int"),
            )),
            tunnels=dict(type="list", elements="dict", options=dict(
                interface=dict(type="str", required=True),
                mark=dict(type="int", required=True),
                remote_original=dict(type="str", required=True),
                remote_remapped=dict(type="str", required=True),
                output=dict(type="bool", default=True),
            )),
            backend=dict(type="str", default="auto", choices=["auto", "libnftables", "nft"]),
        ),
        supports_check_mode=True,
    )
    p = module.params
    spec = {"name": p["name"], "family": p["family"]}
    spec.update({k: p[k] for k in ENTRY_KEYS if p[k] is not None})
    try:
        result = ensure(spec, state=p["state"], check_mode=module.check_mode, backend=p["backend"])
    except NatTableError as e:
        module.fail_json(msg=f"invalid nat_table input: {e}", errors=e.errors, table=p["name"], changed=False)
    except NftError as e:
        module.fail_json(msg=str(e), stderr=e.error, table=p["name"], changed=False)
    out = {k: result[k] for k in ("changed", "table", "family", "rules", "backend")}
    if module._diff:  # pylint: disable=protected-access
        out["diff"] = result["diff"]
    module.exit_json(**out)


if __name__ == "__main__":
    main()
