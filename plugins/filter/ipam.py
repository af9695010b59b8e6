# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""IPAM filters: map an address between a remote cluster's original CIDR and its remapped one.

The documentation of each filter is in the YAML file of the same name next to this file
(plugins/filter/remap_address.yml), as ansible-doc expects for a file holding several filters.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.liqo.fabric.plugins.module_utils.ipam.allocator import IpamError, translate


def remap_address(address, from_cidr, to_cidr):
    """``'10.243.3.7' | liqo.fabric.remap_address('10.243.0.0/16', '10.71.0.0/16')`` -> ``'10.71.3.7'``."""
    try:
        return translate(address, from_cidr, to_cidr)
    except IpamError as exc:
        raise AnsibleFilterError("remap_address: %s" % exc)


class FilterModule:
    """liqo.fabric IPAM filters."""

    def filters(self):
        return {"remap_address": remap_address}
