# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The action plugin of every host module: runs the module's main() in a child forked from the Ansible worker when
the host's connection is local or liqo.fabric.netns (inside the host's network namespace for the latter), else the
real module (plugins/plugin_utils/module_action.py; the fork in plugin_utils/speed/netns_fork.py;
`liqo_fabric_in_process: false` runs it as a normal module). The module and pyroute2 are imported once where the
plugin is loaded (the ansible-playbook process, speed/preload.py), so the worker of each host inherits them. A
daemon the module starts (peer_health's probe) is a fresh interpreter, not a fork of the worker.

Each host module has a symlink to this file here (`gateway_dataplane.py -> netns_fork.py`), imported as a plugin of
its own named after its module (in_process.py beside it says why symlinks); a new host module gets the speed path
with `ln -s netns_fork.py <module>.py`.
"""

from __future__ import annotations

from ansible_collections.liqo.fabric.plugins.plugin_utils.module_action import HostInProcessAction


class ActionModule(HostInProcessAction):
    """The module this plugin is named after, in a forked child of the worker when safe."""
