# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""nftables: command buffers run in-process through libnftables, else the `nft` command (`client.Nft`), and the
fabric's dedicated NAT tables (1:1 CIDR remaps, tunnels, masquerade bypass) built from structured input and replaced
atomically (`nat_table.ensure`).
"""
