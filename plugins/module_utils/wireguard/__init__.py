# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""WireGuard interfaces. One model (`model`: the desired `InterfaceSpec`, the read-back `DeviceState`, the
`DeviceChange` between them) goes through validation (`validation.validate_interface`), the minimal diff (`diff`)
and one of two backends: the kernel module over generic netlink (`kernel`) or one wireguard-go process per interface
driven over its UAPI socket (`userspace`, `uapi`). `interface.ensure_present` / `ensure_absent` / `read_interface`
are the entry points; `keys` makes and reads keys, `link` the interface's MTU and addresses, `session` restarts a
peer's session now, `go_version` tells whether wireguard-go has its offloads. Private keys stay in memory.
"""
