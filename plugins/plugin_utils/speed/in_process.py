# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run the collection's modules inside the Ansible worker instead of an AnsiballZ subprocess.

A module run through AnsiballZ costs a fresh Python, `ansible.module_utils.basic` and the collection's module_utils
compiled from the zip (zipimport keeps no bytecode), the imports and the system CA store. The work of the API modules
(cluster_info, gateway_plan, gateway_publish, ipam, k8s_apply, overlay_plan, ...) is a few HTTPS calls, and they always
run on the controller (``delegate_to: localhost`` or the ``connection: local`` hosts of playbooks/tasks/sides.yml).
`InProcessLane`, mixed into the action plugin base of those modules (plugin_utils/module_action.py), calls the
module's own ``main()`` in the worker process (forked for this task, so nothing outlives it) when `task_verdict` says
it may.

It may when the switch lets it (switch.py: ``liqo_fabric_in_process``, LIQO_FABRIC_SPEED_PATHS, the ansible-core
version and internals) and the task's connection is ``local``, with no ``become``, no ``async`` and no task
``environment``.

Host modules (gateway_dataplane, overlay_dataplane, tunnel_probe, peer_health, peer_health_hold, ...) change the host
they run on and start daemons, so their ``main()`` runs in a child forked from the worker (netns_fork.py); with the
lab's ``liqo.fabric.netns`` connection the child first joins the host's network namespace as ``ip netns exec`` would.
That saves the interpreter start, the payload and the pyroute2 import (preloaded, preload.py) per task.

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

import importlib
import io
import json
import os
import sys
from collections.abc import Sequence

from ansible import constants as C
from ansible.utils.display import Display

from ansible_collections.liqo.fabric.plugins.plugin_utils.speed import internals, switch
from ansible_collections.liqo.fabric.plugins.plugin_utils.speed.netns_fork import ForkError, run_forked

display = Display()

LOCAL_CONNECTIONS = frozenset(("local", "ansible.builtin.local", "ansible.legacy.local"))
NETNS_CONNECTIONS = frozenset(("liqo.fabric.netns",))  # the `transport` of plugins/connection/netns.py
MARKER = "liqo.fabric in-process:"


def task_verdict(transport: str, load_name: str, become: bool, async_val: int, environment: dict,
                 enabled: object, host_module: bool = False) -> switch.Verdict:
    """Whether this task's module may run in the worker (a host module: in a child forked from it, also for a host of
    the liqo.fabric.netns connection). `enabled`: the task's liqo_fabric_in_process."""
    verdict = switch.enabled("netns_fork" if host_module else "in_process", enabled)
    if not verdict.on:
        return verdict
    local = transport == "local" and load_name in LOCAL_CONNECTIONS
    if not (local or (host_module and transport in NETNS_CONNECTIONS)):
        return switch.Verdict(False, "connection %s is not %s" % (
            load_name or transport, "local or liqo.fabric.netns" if host_module else "local"))
    if become:
        return switch.Verdict(False, "become is set")
    if async_val:
        return switch.Verdict(False, "async is set")
    if environment:
        return switch.Verdict(False, "the task sets an environment")
    return switch.ON


def in_process_refusal(transport: str, load_name: str, become: bool, async_val: int, environment: dict,
                       enabled: object, host_module: bool = False) -> str | None:
    """Why the module must run as a real module (a short reason), or None when it may run in the worker."""
    return task_verdict(transport, load_name, become, async_val, environment, enabled, host_module).reason


def _getcwd():
    try:
        return os.getcwd()
    except OSError:  # removed under us: AnsibleModule copes with it, so must we
        return None


def module_fqcn(python_module: str) -> tuple[str, str]:
    """('liqo.fabric.ipam', 'ansible_collections.liqo.fabric.plugins.modules.ipam') for the action plugin
    module 'ansible_collections.liqo.fabric.plugins.action.ipam'."""
    parts = python_module.split(".")
    if len(parts) != 6 or parts[0] != "ansible_collections" or parts[3:5] != ["plugins", "action"]:
        raise ValueError("%s is not an action plugin of a collection" % python_module)
    return "%s.%s.%s" % (parts[1], parts[2], parts[5]), ".".join(parts[:4] + ["modules", parts[5]])


class InProcessLane:
    """The in-process run of an action plugin's module, mixed into an ActionBase (plugin_utils/module_action.py):
    its ``main()`` in the worker, or for a ``host_module`` in a child forked from it."""

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
        encoder = internals.get_module_encoder(profile, internals.Direction.CONTROLLER_TO_MODULE)
        return json.dumps(dict(ANSIBLE_MODULE_ARGS=module_args), cls=encoder).encode()

    def _module_result(self, res, profile):
        """A _call_main() outcome parsed and cleaned as _execute_module() does a real module's output."""
        return self._clean_module_data(self._parse_returned_data(res, profile))

    @staticmethod
    def _call_main(python_name, json_params, profile):
        """Imports the module and runs its main() as the AnsiballZ loader would (an import error is the
        module's failure too); returns {'stdout', 'stderr', 'rc'}."""
        basic, mu_internal, mu_warnings = internals.basic, internals.mu_internal, internals.mu_warnings
        saved = dict(args=basic._ANSIBLE_ARGS, profile=basic._ANSIBLE_PROFILE, parsed=basic._PARSED_MODULE_ARGS,
                     controller=mu_internal.is_controller, warnings=dict(mu_warnings._global_warnings),
                     deprecations=dict(mu_warnings._global_deprecations), stdout=sys.stdout, stderr=sys.stderr,
                     environ=dict(os.environ), cwd=_getcwd())
        out, err = io.StringIO(), io.StringIO()
        rc = 0
        try:
            basic._ANSIBLE_ARGS, basic._ANSIBLE_PROFILE, basic._PARSED_MODULE_ARGS = json_params, profile, None
            mu_internal.is_controller = False
            mu_warnings._global_warnings.clear()
            mu_warnings._global_deprecations.clear()
            sys.stdout, sys.stderr = out, err
            try:
                importlib.import_module(python_name).main()
                # a module must print its result and exit (the AnsiballZ loader says the same)
                raise RuntimeError("New-style module did not handle its own exit.")
            except SystemExit as exc:
                rc = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            except Exception as ex:  # pylint: disable=broad-exception-caught  # what AnsiballZ's loader catches
                traceback = internals._traceback
                summary = internals._messages.ErrorSummary(event=internals._errors.EventFactory.from_exception(
                    ex, traceback.is_traceback_enabled(traceback.TracebackEvent.ERROR)))
                out.write(json.dumps(dict(failed=True, exception=summary), cls=internals.get_module_encoder(
                    profile, internals.Direction.MODULE_TO_CONTROLLER)))
                rc = 1
        finally:
            sys.stdout, sys.stderr = saved["stdout"], saved["stderr"]
            basic._ANSIBLE_ARGS, basic._ANSIBLE_PROFILE = saved["args"], saved["profile"]
            basic._PARSED_MODULE_ARGS = saved["parsed"]
            mu_internal.is_controller = saved["controller"]
            mu_warnings._global_warnings.clear()
            mu_warnings._global_warnings.update(saved["warnings"])
            mu_warnings._global_deprecations.clear()
            mu_warnings._global_deprecations.update(saved["deprecations"])
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
        internals.remove_internal_keys(data)
        for key in ("stdout", "stderr"):
            if key in data and key + "_lines" not in data:
                data[key + "_lines"] = (data.get(key) or "").splitlines()
        return data
