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
    C(forward) (filter, priority mangle, for the MSS clamp); a chain exists only when it has rules.
  - Idempotent by structure; the kernel's table is read back as JSON, normalised into the same canonical
    form as the input and compared; a second identical run reports C(changed=false) and writes nothing.
  - Input is validated before anything changes; every error names the field and the value.
  - Runs in-process through libnftables when it is installed (C(libnftables.so.1)), else through the
    C(nft) command.
author: liqo.fabric developers (@liqo-fabric)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
    details: The diff shows the table before and after as nft rule text, one map element per line.
  platform:
    platforms: posix
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

from ansible_collections.liqo.fabric.plugins.module_utils.nat_table import NatTableError, ensure
from ansible_collections.liqo.fabric.plugins.module_utils.nftables import NftError

ENTRY_KEYS = ("remaps", "dnat", "snat", "bypass", "mss")


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
