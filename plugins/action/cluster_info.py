# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin of liqo.fabric.cluster_info: runs the module in the Ansible worker when the task is local (see
plugins/plugin_utils/in_process.py; `liqo_fabric_in_process: false` runs it as a normal module)."""

from __future__ import annotations

from ansible_collections.liqo.fabric.plugins.plugin_utils.module_action import InProcessAction


class ActionModule(InProcessAction):
    """liqo.fabric.cluster_info, in-process when safe."""
