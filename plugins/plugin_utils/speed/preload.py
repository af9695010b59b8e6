# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Import each in-process module once, in the process that loads its action plugin.

The linear strategy loads each task's action class in the ansible-playbook process itself, and every worker (and the
child a host module forks) is a fork of it: a module imported there once is imported for every task and host of the
run instead of once per worker. Every action plugin of plugin_utils/module_action.py's bases calls `preload` when its
class is defined.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence

from ansible_collections.liqo.fabric.plugins.plugin_utils.speed import switch
from ansible_collections.liqo.fabric.plugins.plugin_utils.speed.in_process import module_fqcn


def preload(action_module: str, also: Sequence[str] = ()) -> None:
    """Imports the module of this action plugin (with its module_utils), and `also`, here. Nothing when the switch
    keeps the path off; an import error is left to the run, which reports it as the module's failure."""
    if not switch.enabled("preload").on:
        return
    for name in (module_fqcn(action_module)[1], *also):
        try:
            importlib.import_module(name)
        except Exception:  # pylint: disable=broad-exception-caught  # _call_main reports it where it belongs
            pass
