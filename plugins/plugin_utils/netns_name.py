# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Named network namespaces as `ip netns` makes them: a file /run/netns/<name> for each."""

from __future__ import annotations

NETNS_RUN_DIR = "/run/netns"


def valid_netns_name(name: str | None) -> bool:
    """A name `ip netns` could have made: a single path component under /run/netns."""
    return bool(name) and "/" not in name and name not in (".", "..")
