# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The IPv4 `lookup local` policy rule of a network namespace the fabric owns, moved after the gateway's rules.

The kernel consults the local table first (rule 0): a packet whose destination is one of the namespace's own
addresses is delivered there, whatever later rules say. A gateway pod's own address lies inside its cluster's
pod CIDR, which is also the remote cluster's original pod CIDR when the two overlap (the case the 1:1 NAT
exists for): a packet for the remote pod that has the gateway pod's address, once the NAT rewrote its
destination, was delivered to the gateway pod itself instead of entering the tunnel by its fwmark rule
(ICMP answered by the wrong host, TCP refused). With the local lookup placed after the gateway's rules, marked
packets take the tunnel first. Only for a namespace the gateway owns (a pod): on a shared host other software
relies on rule 0.

The move adds the new rule before it deletes the old one: the namespace is never without a local lookup.

The other half of the same overlap: a request from the remote pod that has the gateway pod's address arrives
from the tunnel with a source that is local here, and the kernel drops such a packet as martian before the NAT
could rewrite its source (postrouting). `accept_local` on the tunnel interface lets it through.
"""

from __future__ import annotations

import os
import socket
from typing import Dict, Optional

from ansible_collections.liqo.fabric.plugins.module_utils.route.netlink import (
    NLM_F_CREATE, NLM_F_EXCL, RTM_DELRULE, RTM_GETRULE, RTM_NEWRULE, RtnlSocket, _parse_attrs, _raise_failures, _RTMSG,
    _U32)
from ansible_collections.liqo.fabric.plugins.module_utils.route.policy import (
    FRA_PRIORITY, FRA_TABLE, Rule, _rule_msg, ValidationError)

LOCAL_TABLE = 255
SELECTORS = (1, 2, 3, 10, 17)   # FRA_DST, FRA_SRC, FRA_IIFNAME, FRA_FWMARK, FRA_OIFNAME: not a plain lookup


def validate_priority(value, field: str = "local_rule_priority") -> int:
    try:
        prio = int(value)
    except (TypeError, ValueError):
        raise ValidationError(f"{field}: {value!r} is not an integer") from None
    if not 0 <= prio <= 32765:
        raise ValidationError(f"{field}: {prio} is out of range (0 = the kernel's place, up to 32765)")
    return prio


def read(sock: RtnlSocket) -> Dict[int, bytes]:
    """The plain IPv4 `lookup local` rules, {priority: raw payload}."""
    out = {}
    for p in sock.dump(RTM_GETRULE, _RTMSG.pack(socket.AF_INET, 0, 0, 0, 0, 0, 0, 0, 0)):
        fam, _dl, _sl, _tos, tab8 = _RTMSG.unpack_from(p, 0)[:5]
        a = _parse_attrs(p, 12, len(p))
        tab = _U32.unpack(a[FRA_TABLE])[0] if FRA_TABLE in a else tab8
        if fam == socket.AF_INET and tab == LOCAL_TABLE and not any(s in a for s in SELECTORS):
            out[_U32.unpack(a[FRA_PRIORITY])[0] if FRA_PRIORITY in a else 0] = p
    return out


def sync(priority, check: bool = False, netns: Optional[str] = None) -> dict:
    """Makes the namespace's IPv4 `lookup local` rule sit at `priority` alone (0 puts it back). Returns changed,
    before, after (priorities) and writes."""
    prio = validate_priority(priority)
    with RtnlSocket(netns) as sock:
        current = read(sock)
        before = sorted(current)
        res = {"changed": before != [prio], "before": before, "after": [prio], "writes": 0}
        if check or not res["changed"]:
            return res
        if prio not in current:   # first, alone: a refused add deletes nothing
            rule = Rule(socket.AF_INET, prio, None, None, None, None, None, None, LOCAL_TABLE)
            failures = sock.apply([(RTM_NEWRULE, NLM_F_CREATE | NLM_F_EXCL, _rule_msg(rule))])
            res["writes"] += 1
            if failures:
                _raise_failures(failures, lambda i: "add the local rule at priority %d" % prio)
        old = [p for p in before if p != prio]
        if old:
            failures = sock.apply([(RTM_DELRULE, 0, current[p]) for p in old])
            res["writes"] += len(old)
            if failures:
                _raise_failures(failures, lambda i: "delete the local rule at priority %d" % old[i])
    return res


def accept_local(ifname: str, check: bool = False, root: str = "/proc/sys/net/ipv4/conf") -> bool:
    """Sets `accept_local` = 1 on `ifname` (this namespace); True when it changed."""
    path = os.path.join(root, ifname, "accept_local")
    with open(path, encoding="ascii") as f:
        if f.read().strip() == "1":
            return False
    if not check:
        with open(path, "w", encoding="ascii") as f:
            f.write("1\n")
    return True
