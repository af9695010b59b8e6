# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Policy routing over the fabric's own rtnetlink stack: the exact routes of a table and the rules that use it
(`policy.sync_route_table`, `policy.sync_rules`), the `lookup local` rule of a namespace the fabric owns
(`local_rule`), on one batched NETLINK_ROUTE socket (`netlink.RtnlSocket`).

Why a netlink stack of its own beside pyroute2 (which wireguard/, overlay/link.py and host/pod_netns.py use): a
route table is applied whole, up to thousands of routes at once (tests/benchmarks/bench_routing.py: 10,000), and
pyroute2's message classes cost more per route to encode and decode than a whole table of routes may take with struct
packing and one batched socket; links, WireGuard devices and namespaces are a few messages each, with nested
attributes that pyroute2 already models.
"""
