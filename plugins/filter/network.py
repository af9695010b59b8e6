# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""ipv4_network: an IPv4 network in CIDR form, normalized, or '' (so playbooks check CIDRs without ansible.utils)."""
from __future__ import annotations

import ipaddress

DOCUMENTATION = r"""
name: ipv4_network
short_description: An IPv4 CIDR's network, or an empty string
version_added: 0.1.0
description:
  - Returns the network of an IPv4 CIDR (C(10.243.0.0/16)) as a string, or an empty string when the value is not an
    IPv4 network (not an address, IPv6, or host bits set as in C(10.243.0.1/16)).
  - C(value == value | liqo.fabric.ipv4_network) checks an input CIDR.
author: liqo.fabric developers (@liqo-fabric)
options:
  _input:
    description: The CIDR to check.
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Refuse a pod CIDR with host bits
  ansible.builtin.assert:
    that: (pod_cidr | liqo.fabric.ipv4_network) == pod_cidr
  vars:
    pod_cidr: 10.243.0.0/16
"""

RETURN = r"""
_value:
  description: The network (C(a.b.c.d/len)), or an empty string.
  type: str
"""


def ipv4_network(value):
    try:
        return str(ipaddress.IPv4Network(str(value).strip(), strict=True)) if "/" in str(value) else ""
    except (ipaddress.AddressValueError, ipaddress.NetmaskValueError, ValueError):
        return ""


class FilterModule:  # pylint: disable=too-few-public-methods
    def filters(self):
        return {"ipv4_network": ipv4_network}
