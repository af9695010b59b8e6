# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin of liqo.fabric.peer_health: runs the module in a child of the Ansible worker when the host's
connection is local or liqo.fabric.netns (see plugins/plugin_utils/in_process.py); a probe process it starts is
then a fresh interpreter, not a fork of the worker (module_utils/health/daemon.py)."""

from __future__ import annotations

from ansible_collections.liqo.fabric.plugins.plugin_utils.module_action import HostInProcessAction


class ActionModule(HostInProcessAction):
    """liqo.fabric.peer_health, in a forked child of the worker when safe."""
