# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The network link of a WireGuard interface (MTU, addresses, up), read and changed over rtnetlink with pyroute2,
whichever backend runs the interface."""
from __future__ import absolute_import, division, print_function

import importlib.util
import ipaddress

from ansible_collections.liqo.fabric.plugins.module_utils.wireguard.errors import WireGuardError

# pyroute2 for the interface's link: a few messages with nested attributes; route tables take route/'s own stack (route/__init__.py)
# pyroute2 is imported when a link is read or changed, not at import: it is slow to import, and the modules that only
# plan or publish gateways (key generation, status) never need it.
HAS_PYROUTE2 = importlib.util.find_spec("pyroute2") is not None
PYROUTE2_IMPORT_ERROR = None if HAS_PYROUTE2 else "ImportError: No module named 'pyroute2'"


def IPRoute(*args, **kwargs):  # pylint: disable=invalid-name
    from pyroute2 import IPRoute as _IPRoute  # pylint: disable=import-outside-toplevel
    return _IPRoute(*args, **kwargs)


class LinkState(object):
    __slots__ = ("index", "kind", "mtu", "up", "addresses")

    def __init__(self, index, kind, mtu, up, addresses):
        self.index = index
        self.kind = kind
        self.mtu = mtu
        self.up = up
        self.addresses = addresses


def _require_pyroute2():
    if not HAS_PYROUTE2:
        raise WireGuardError("pyroute2 is required: " + (PYROUTE2_IMPORT_ERROR or "").strip().splitlines()[-1])


def read_link(ipr, name):
    idx = ipr.link_lookup(ifname=name)
    if not idx:
        return None
    msg = ipr.get_links(idx[0])[0]
    kind = None
    info = msg.get_attr("IFLA_LINKINFO")
    if info is not None:
        kind = info.get_attr("IFLA_INFO_KIND")
    addrs = []
    for a in ipr.get_addr(index=idx[0]):
        ip = a.get_attr("IFA_LOCAL") or a.get_attr("IFA_ADDRESS")
        if ip is None:
            continue
        iface = ipaddress.ip_interface("%s/%d" % (ip, a["prefixlen"]))
        if iface.version == 6 and iface.ip.is_link_local:
            continue  # kernel-generated, not managed
        addrs.append(str(iface))
    return LinkState(idx[0], kind, msg.get_attr("IFLA_MTU"), bool(msg["flags"] & 1), sorted(addrs))


def link_changes(spec, link):
    """(mtu or None, addresses to add, addresses to delete, bring up?) for an existing link."""
    mtu = spec.mtu if link.mtu != spec.mtu else None
    add, delete = [], []
    if spec.addresses is not None:
        have = set(link.addresses)
        add = [a for a in spec.addresses if a not in have]
        delete = [a for a in link.addresses if a not in set(spec.addresses)]
    return mtu, add, delete, not link.up


def apply_link(ipr, link, spec):
    """Writes only what differs; returns True if anything was written. One netlink socket for all of it."""
    mtu, add, delete, up = link_changes(spec, link)
    for a in delete:
        i = ipaddress.ip_interface(a)
        ipr.addr("del", index=link.index, address=str(i.ip), prefixlen=i.network.prefixlen)
    for a in add:
        i = ipaddress.ip_interface(a)
        ipr.addr("add", index=link.index, address=str(i.ip), prefixlen=i.network.prefixlen)
    if mtu is not None:
        ipr.link("set", index=link.index, mtu=mtu)
    if up:
        ipr.link("set", index=link.index, state="up")
    return bool(mtu is not None or add or delete or up)
