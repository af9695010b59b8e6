# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The action plugin of every API module: runs the module's main() in the Ansible worker when the task is local,
else the real module (plugins/plugin_utils/module_action.py, the speed path in plugin_utils/speed/in_process.py;
`liqo_fabric_in_process: false` runs it as a normal module).

Ansible takes a module's action plugin from the file of the module's name in this directory, so each API module has
a symlink to this file here (`cluster_info.py -> in_process.py`); a new API module gets the speed path with
`ln -s in_process.py <module>.py`. Each symlink is imported as a plugin of its own, named after its module: that
name tells InProcessAction which module to run, and the strategy loads the plugin in ansible-playbook itself, where
it preloads that module for every worker. Routing in meta/runtime.yml does less: `modules: <name>: action_plugin:`
loads one plugin for all the modules, in the worker only (no preload), and callbacks see `liqo.fabric.in_process` as
the task's resolved action; `action: <name>: redirect:` also hands one module's module_defaults to all the others.
"""

from __future__ import annotations

from ansible_collections.liqo.fabric.plugins.plugin_utils.module_action import InProcessAction


class ActionModule(InProcessAction):
    """The module this plugin is named after, in-process when safe."""
