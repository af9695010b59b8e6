# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The action plugin bases of the collection's modules: run the task's module, and in a check-mode run carry what
earlier steps would have written (check_plan.py).

`InProcessAction` is the base of the API modules' action plugins, `HostInProcessAction` the one of the host modules'.
A module runs as an ordinary AnsiballZ module, unless the speed path takes it (speed/in_process.py): an API module's
``main()`` then runs in the Ansible worker, a host module's in a child forked from it. ``-vvv`` prints
``liqo.fabric in-process: yes|no (reason)`` for every task.
"""

from __future__ import annotations

import gc
import multiprocessing

from ansible import context
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display
from ansible.utils.vars import merge_hash

from ansible_collections.liqo.fabric.plugins.plugin_utils import check_plan, speed
from ansible_collections.liqo.fabric.plugins.plugin_utils.speed.in_process import MARKER, InProcessLane, task_verdict
from ansible_collections.liqo.fabric.plugins.plugin_utils.speed.preload import preload

display = Display()


def worker_gc_freeze() -> None:
    """In an Ansible worker (a process forked for one task), moves every object inherited from ansible-playbook out
    of the garbage collector's reach. A collection triggered by the module's allocations (decoding many Pods) would
    otherwise walk the whole inherited heap (the inventory, every host's variables) and write to each object's
    header, copying every page. Objects made after this are still collected; the worker exits after its task, so
    nothing frozen is kept for long. Not in ansible-playbook's own process (a strategy that runs tasks there keeps
    its collector as it is)."""
    if multiprocessing.parent_process() is not None:
        gc.freeze()


class InProcessAction(InProcessLane, ActionBase):
    """Action plugin of a module of the same name that only talks to APIs: runs its ``main()`` in the
    worker when the task allows it (speed/in_process.py), else the real module."""

    _supports_check_mode = True
    _supports_async = True
    host_module = False  # True: main() runs in a child forked from the worker (see HostInProcessAction)
    preload_also: tuple[str, ...] = ()  # imported with the module where the plugin loads (speed/preload.py)

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if cls.__module__.startswith("ansible_collections.") and ".plugins.action." in cls.__module__:
            preload(cls.__module__, cls.preload_also)  # each action plugin's module, once, where the plugin is loaded

    def run(self, tmp=None, task_vars=None):
        worker_gc_freeze()
        result = super().run(tmp, task_vars)
        del tmp  # tmp no longer has any effect
        task_vars = task_vars if task_vars is not None else {}

        # only a whole --check run: a task-level check_mode task among real ones is a check of its own
        carry = not self.host_module and self._play_context.check_mode and bool(context.CLIARGS.get("check"))
        if carry:  # check mode: what earlier steps would have written is seen by this one (plugin_utils/check_plan.py)
            cluster = check_plan.cluster_key(self._task.args)
            earlier = check_plan.assumed(cluster)
            if earlier:
                self._task.args = dict(self._task.args, assume=earlier)
            result = merge_hash(result, self._execute(task_vars))
            if not result.get("failed"):
                check_plan.record(cluster, result.pop("assumed", None) or [])
            return result
        return merge_hash(result, self._execute(task_vars))

    def _execute(self, task_vars):
        verdict = self._in_process_verdict(task_vars)
        if verdict.on:
            return self._execute_in_process(task_vars)

        display.vvv("%s no, running the module (%s)" % (MARKER, verdict.reason), host=self._host_label(task_vars))
        if verdict.warn:
            display.warning(speed.warning(verdict.reason))  # Display prints a repeated warning once
        wrap_async = self._task.async_val and not self._connection.has_native_async
        result = self._execute_module(task_vars=task_vars, wrap_async=wrap_async)
        if not wrap_async:
            self._remove_tmp_path(self._connection._shell.tmpdir)
        return result

    # ------------------------------------------------------------------------------------------ decision
    def _in_process_verdict(self, task_vars):
        enabled = task_vars.get(speed.IN_PROCESS_VAR, True)
        if isinstance(enabled, str):
            enabled = self._templar.template(enabled)
        environment = {}
        if self._task.environment:
            self._compute_environment_string(environment)
        return task_verdict(
            transport=getattr(self._connection, "transport", ""),
            load_name=getattr(self._connection, "_load_name", ""),
            become=bool(self._task.become or self._play_context.become),
            async_val=self._task.async_val,
            environment=environment,
            enabled=enabled,
            host_module=self.host_module,
        )

    def _in_process_refusal(self, task_vars):
        """Why this task's module must run as a real module, or None."""
        return self._in_process_verdict(task_vars).reason

    def _host_label(self, task_vars):
        return task_vars.get("inventory_hostname") or self._play_context.remote_addr


class HostInProcessAction(InProcessAction):
    """Action plugin of a module that changes the host it runs on: its ``main()`` runs in a child forked
    from the worker, inside the host's network namespace for the liqo.fabric.netns connection."""

    host_module = True
    # the host modules import pyroute2 only when they touch a link: imported once in ansible-playbook,
    # not in every forked child (two gateway dataplanes and a tunnel probe per connect)
    preload_also = ("pyroute2",)
