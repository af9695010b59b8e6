# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run the collection's modules inside the Ansible worker instead of an AnsiballZ subprocess.

A module run through AnsiballZ costs ~0.5 s here: a fresh Python, `ansible.module_utils.basic` and the
collection's module_utils compiled from the zip (zipimport keeps no bytecode), the imports, the system CA
store. The work of the API modules (cluster_info, gateway_plan, gateway_publish, ipam, k8s_apply,
overlay_plan) is a few HTTPS calls, and they always run on the controller (``delegate_to: localhost`` or the
``connection: local`` hosts of playbooks/tasks/sides.yml). `InProcessAction`, the action plugin of each of
them, calls the module's own ``main()`` in the worker process (forked for this task, so nothing outlives it)
when that is safe, and otherwise runs the real module with ``_execute_module()``.

Safe means: the task's connection is ``local``, no ``become``, no ``async``, no task ``environment``, and the
variable ``liqo_fabric_in_process`` (host or task variable, default true) is not false.

Host modules (`HostInProcessAction`: gateway_dataplane, overlay_dataplane, tunnel_probe, peer_health, peer_health_hold) change the host
they run on and start daemons, so their ``main()`` runs in a child forked from the worker
(plugin_utils/netns_fork.py); with the lab's ``liqo.fabric.netns`` connection the child first joins the
host's network namespace as ``ip netns exec`` would. That saves the interpreter start, the payload and
~0.15 s of pyroute2 import (the warm runner's zygote has it imported) per task: ~0.35 s here.

The module sees what AnsiballZ would give it: the arguments come from ``_update_module_args()`` (check mode,
diff, no_log, verbosity, ...) and are serialized with the module's serialization profile into
``ansible.module_utils.basic._ANSIBLE_ARGS``; its stdout is captured and parsed by ``_parse_returned_data()``
like the real module's; an exception escaping ``main()`` is reported as the AnsiballZ wrapper reports it (a
failed result, traceback only when the controller's traceback settings ask for one). While ``main()`` runs,
``ansible.module_utils._internal.is_controller`` is false, so ``module.warn()`` lands in the result's
``warnings`` as it does in a real module instead of being printed by the worker.

What legitimately differs: the module runs with the controller's Python (``ansible_playbook_python``), not the
host's ``ansible_python_interpreter`` (no interpreter discovery, so no ``discovered_interpreter_python``
fact), and the worker's environment and working directory (the same ones the local connection hands a
module process).
"""

from __future__ import annotations

import gc
import importlib
import io
import json
import multiprocessing
import os
import sys
import typing as t
from collections.abc import Sequence

from ansible import constants as C
from ansible import context
from ansible.module_utils import basic
from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display
from ansible.utils.vars import merge_hash
from ansible.vars.clean import remove_internal_keys

from ansible_collections.liqo.fabric.plugins.plugin_utils import check_plan, speed_paths
from ansible_collections.liqo.fabric.plugins.plugin_utils.netns_fork import ForkError, run_forked

try:  # private ansible-core internals (2.19): another ansible-core may not have them; then the modules run normally
    from ansible.module_utils import _internal as _mu_internal
    from ansible.module_utils._internal import _errors, _messages, _traceback
    from ansible.module_utils.common import warnings as _mu_warnings
    from ansible.module_utils.common.json import Direction, get_module_encoder
    PRIVATE_IMPORT_ERROR = None
except ImportError as _exc:  # pragma: no cover - only on an ansible-core the suite does not run
    PRIVATE_IMPORT_ERROR = "ansible-core internals are missing (%s)" % _exc

display = Display()

IN_PROCESS_VAR = "liqo_fabric_in_process"
LOCAL_CONNECTIONS = frozenset(("local", "ansible.builtin.local", "ansible.legacy.local"))
NETNS_CONNECTIONS = frozenset(("liqo.fabric.netns",))  # the `transport` of plugins/connection/netns.py
MARKER = "liqo.fabric in-process:"


def in_process_refusal(transport: str, load_name: str, become: bool, async_val: int, environment: dict,
                       enabled: t.Any, host_module: bool = False) -> str | None:
    """Why the module must run as a real module (a short reason), or None when it may run in the worker.
    A host module may also run for a host of the liqo.fabric.netns connection (in a forked child)."""
    if not boolean(True if enabled is None else enabled, strict=False):
        return "%s is false" % IN_PROCESS_VAR
    off = speed_paths.off_reason() or PRIVATE_IMPORT_ERROR
    if off:
        return off
    if not all(hasattr(basic, name) for name in ("_ANSIBLE_ARGS", "_ANSIBLE_PROFILE", "_PARSED_MODULE_ARGS")):
        return "this ansible-core does not take module arguments through ansible.module_utils.basic._ANSIBLE_ARGS"
    local = transport == "local" and load_name in LOCAL_CONNECTIONS
    if not (local or (host_module and transport in NETNS_CONNECTIONS)):
        return "connection %s is not %s" % (load_name or transport, "local or liqo.fabric.netns" if host_module else "local")
    if become:
        return "become is set"
    if async_val:
        return "async is set"
    if environment:
        return "the task sets an environment"
    return None


def _getcwd():
    try:
        return os.getcwd()
    except OSError:  # removed under us: AnsibleModule copes with it, so must we
        return None


def worker_gc_freeze() -> None:
    """In an Ansible worker (a process forked for one task), moves every object inherited from ansible-playbook out
    of the garbage collector's reach. A collection triggered by the module's allocations (decoding 1,000 Pods) would
    otherwise walk the whole inherited heap (the inventory, every host's variables) and write to each object's header,
    copying every page (profile_tasks at 100 nodes x 10 pods: the second cluster's overlay_plan 0.25-0.35 s with
    this, 0.44-0.45 s without; the first cluster's showed no clear change). Objects made after this
    are still collected; the worker exits after its task, so nothing frozen is kept for long. Not in ansible-playbook's
    own process (a strategy that runs tasks there keeps its collector as it is)."""
    if multiprocessing.parent_process() is not None:
        gc.freeze()


def module_fqcn(python_module: str) -> tuple[str, str]:
    """('liqo.fabric.ipam', 'ansible_collections.liqo.fabric.plugins.modules.ipam') for the action plugin
    module 'ansible_collections.liqo.fabric.plugins.action.ipam'."""
    parts = python_module.split(".")
    if len(parts) != 6 or parts[0] != "ansible_collections" or parts[3:5] != ["plugins", "action"]:
        raise ValueError("%s is not an action plugin of a collection" % python_module)
    return "%s.%s.%s" % (parts[1], parts[2], parts[5]), ".".join(parts[:4] + ["modules", parts[5]])


def preload(action_module: str, also: Sequence[str] = ()) -> None:
    """Imports the module of this action plugin (with its module_utils) in the process that loads the plugin.

    The linear strategy loads each task's action class in the ansible-playbook process itself, and every worker
    (and the child a host module forks) is a fork of it: a module imported there once is imported for every task
    and host of the run (overlay_dataplane: ~0.2 s of pyroute2 and module_utils less per node here, the API modules
    0.04-0.17 s per task). Every action plugin of InProcessAction calls it when its class is defined. Nothing when
    the speed paths are off; an import error is left to the run, which reports it as the module's failure."""
    if speed_paths.off_reason() or PRIVATE_IMPORT_ERROR:
        return
    for name in (module_fqcn(action_module)[1], *also):
        try:
            importlib.import_module(name)
        except Exception:  # pylint: disable=broad-exception-caught  # _call_main reports it where it belongs
            pass


class InProcessAction(ActionBase):
    """Action plugin of a module of the same name that only talks to APIs: runs its ``main()`` in the
    worker when the task allows it (see the module docstring), else the real module."""

    _supports_check_mode = True
    _supports_async = True
    host_module = False  # True: main() runs in a child forked from the worker (see HostInProcessAction)
    preload_also: tuple[str, ...] = ()  # imported with the module where the plugin loads (see preload)

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
        reason = self._in_process_refusal(task_vars)
        if reason is None:
            return self._execute_in_process(task_vars)

        display.vvv("%s no, running the module (%s)" % (MARKER, reason), host=self._host_label(task_vars))
        unsupported = speed_paths.unsupported_core() or PRIVATE_IMPORT_ERROR
        if unsupported and reason == unsupported:
            display.warning(speed_paths.warning(unsupported))  # Display prints a repeated warning once
        wrap_async = self._task.async_val and not self._connection.has_native_async
        result = self._execute_module(task_vars=task_vars, wrap_async=wrap_async)
        if not wrap_async:
            self._remove_tmp_path(self._connection._shell.tmpdir)
        return result

    # ------------------------------------------------------------------------------------------ decision
    def _in_process_refusal(self, task_vars):
        enabled = task_vars.get(IN_PROCESS_VAR, True)
        if isinstance(enabled, str):
            enabled = self._templar.template(enabled)
        environment = {}
        if self._task.environment:
            self._compute_environment_string(environment)
        return in_process_refusal(
            transport=getattr(self._connection, "transport", ""),
            load_name=getattr(self._connection, "_load_name", ""),
            become=bool(self._task.become or self._play_context.become),
            async_val=self._task.async_val,
            environment=environment,
            enabled=enabled,
            host_module=self.host_module,
        )

    def _host_label(self, task_vars):
        return task_vars.get("inventory_hostname") or self._play_context.remote_addr

    # ----------------------------------------------------------------------------------------- execution
    @staticmethod
    def _serialization_profile(python_name):
        """The profile AnsiballZ would use for this module ('legacy' unless module METADATA says otherwise)."""
        if not C.config.get_config_value("_MODULE_METADATA"):
            return "legacy"
        import ast  # pylint: disable=import-outside-toplevel
        import importlib.util  # pylint: disable=import-outside-toplevel
        from ansible.executor import module_common  # pylint: disable=import-outside-toplevel
        with open(importlib.util.find_spec(python_name).origin, "rb") as f:
            return module_common._get_module_metadata(ast.parse(f.read())).serialization_profile

    def _module_params(self, module_name, module_args, task_vars, profile):
        """The module's arguments as AnsiballZ would hand them over (with check mode, diff, no_log, ...), encoded."""
        module_args = dict(module_args)
        self._update_module_args(module_name, module_args, task_vars)
        encoder = get_module_encoder(profile, Direction.CONTROLLER_TO_MODULE)
        return json.dumps(dict(ANSIBLE_MODULE_ARGS=module_args), cls=encoder).encode()

    def _module_result(self, res, profile):
        """A _call_main() outcome parsed and cleaned as _execute_module() does a real module's output."""
        return self._clean_module_data(self._parse_returned_data(res, profile))

    def _execute_in_process(self, task_vars):
        module_name = self._task.action
        dummy, python_name = module_fqcn(type(self).__module__)
        profile = self._serialization_profile(python_name)
        json_params = self._module_params(module_name, self._task.args, task_vars, profile)

        if self.host_module:
            netns = self._connection.netns_name() if self._connection.transport in NETNS_CONNECTIONS else None
            if netns:
                self._connection._connect()  # a missing namespace makes the host unreachable, as it would
            display.vvv("%s yes, %s ran in a child of the worker process%s (no AnsiballZ)"
                        % (MARKER, module_name, " in netns %s" % netns if netns else ""),
                        host=self._host_label(task_vars))
            try:
                res, written = run_forked(lambda: self._call_main(python_name, json_params, profile), netns)
            except ForkError as exc:
                return dict(failed=True, msg="%s: %s" % (module_name, exc))
            res["stderr"] += written
        else:
            display.vvv("%s yes, %s ran in the worker process (no AnsiballZ)" % (MARKER, module_name),
                        host=self._host_label(task_vars))
            res = self._call_main(python_name, json_params, profile)
        return self._module_result(res, profile)

    @staticmethod
    def _call_main(python_name, json_params, profile):
        """Imports the module and runs its main() as the AnsiballZ loader would (an import error is the
        module's failure too); returns {'stdout', 'stderr', 'rc'}."""
        saved = dict(args=basic._ANSIBLE_ARGS, profile=basic._ANSIBLE_PROFILE, parsed=basic._PARSED_MODULE_ARGS,
                     controller=_mu_internal.is_controller, warnings=dict(_mu_warnings._global_warnings),
                     deprecations=dict(_mu_warnings._global_deprecations), stdout=sys.stdout, stderr=sys.stderr,
                     environ=dict(os.environ), cwd=_getcwd())
        out, err = io.StringIO(), io.StringIO()
        rc = 0
        try:
            basic._ANSIBLE_ARGS, basic._ANSIBLE_PROFILE, basic._PARSED_MODULE_ARGS = json_params, profile, None
            _mu_internal.is_controller = False
            _mu_warnings._global_warnings.clear()
            _mu_warnings._global_deprecations.clear()
            sys.stdout, sys.stderr = out, err
            try:
                importlib.import_module(python_name).main()
                # a module must print its result and exit (the AnsiballZ loader says the same)
                raise RuntimeError("New-style module did not handle its own exit.")
            except SystemExit as exc:
                rc = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            except Exception as ex:  # pylint: disable=broad-exception-caught  # what AnsiballZ's loader catches
                summary = _messages.ErrorSummary(event=_errors.EventFactory.from_exception(
                    ex, _traceback.is_traceback_enabled(_traceback.TracebackEvent.ERROR)))
                out.write(json.dumps(dict(failed=True, exception=summary),
                                     cls=get_module_encoder(profile, Direction.MODULE_TO_CONTROLLER)))
                rc = 1
        finally:
            sys.stdout, sys.stderr = saved["stdout"], saved["stderr"]
            basic._ANSIBLE_ARGS, basic._ANSIBLE_PROFILE = saved["args"], saved["profile"]
            basic._PARSED_MODULE_ARGS = saved["parsed"]
            _mu_internal.is_controller = saved["controller"]
            _mu_warnings._global_warnings.clear()
            _mu_warnings._global_warnings.update(saved["warnings"])
            _mu_warnings._global_deprecations.clear()
            _mu_warnings._global_deprecations.update(saved["deprecations"])
            if dict(os.environ) != saved["environ"]:  # AnsibleModule may set LANG/LC_ALL
                os.environ.clear()
                os.environ.update(saved["environ"])
            if saved["cwd"] is not None and _getcwd() != saved["cwd"]:  # AnsibleModule may chdir
                os.chdir(saved["cwd"])
        return dict(stdout=out.getvalue(), stderr=err.getvalue(), rc=rc)

    @staticmethod
    def _clean_module_data(data):
        """What ActionBase._execute_module does to a parsed module result."""
        data.pop("_ansible_suppress_tmpdir_delete", None)
        if "results" in data and (not isinstance(data["results"], Sequence) or isinstance(data["results"], str)):
            data["ansible_module_results"] = data.pop("results")
            display.warning("Found internal 'results' key in module return, renamed to 'ansible_module_results'.")
        remove_internal_keys(data)
        for key in ("stdout", "stderr"):
            if key in data and key + "_lines" not in data:
                data[key + "_lines"] = (data.get(key) or "").splitlines()
        return data


class HostInProcessAction(InProcessAction):
    """Action plugin of a module that changes the host it runs on: its ``main()`` runs in a child forked
    from the worker, inside the host's network namespace for the liqo.fabric.netns connection."""

    host_module = True
    # the host modules import pyroute2 only when they touch a link (~0.17 s): imported once in ansible-playbook,
    # not in every forked child (two gateway dataplanes and a tunnel probe per connect)
    preload_also = ("pyroute2",)
