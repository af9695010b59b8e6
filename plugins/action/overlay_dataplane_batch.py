# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin of liqo.fabric.overlay_dataplane_batch: overlay_dataplane's main() for many hosts from one task,
each in a child forked from this worker (inside the host's network namespace for liqo.fabric.netns), at most
`parallel` at a time. What a host gets and returns is what the in-process path of overlay_dataplane gives it; a host
this worker cannot act for is left to a per-host task (docs/scale.md)."""

from __future__ import annotations

from ansible.errors import AnsibleActionFail
from ansible.module_utils.parsing.convert_bool import boolean
from ansible.utils.display import Display

from ansible_collections.liqo.fabric.plugins.plugin_utils.module_action import InProcessAction
from ansible_collections.liqo.fabric.plugins.plugin_utils.netns_name import valid_netns_name
from ansible_collections.liqo.fabric.plugins.plugin_utils.speed import IN_PROCESS_VAR
from ansible_collections.liqo.fabric.plugins.plugin_utils.speed.in_process import (
    LOCAL_CONNECTIONS, NETNS_CONNECTIONS, in_process_refusal)
from ansible_collections.liqo.fabric.plugins.plugin_utils.speed.netns_fork import ForkError, run_forked_many
from ansible_collections.liqo.fabric.plugins.plugin_utils.speed.preload import preload

display = Display()

MODULE = "liqo.fabric.overlay_dataplane"
PYTHON_MODULE = "ansible_collections.liqo.fabric.plugins.modules.overlay_dataplane"
ARGUMENT_SPEC = dict(
    hosts=dict(type="dict", required=True),
    table=dict(type="int", default=18952),
    state=dict(type="str", default="present", choices=["present", "absent"]),
    parallel=dict(type="int", default=4),
    enabled=dict(type="bool", default=True),
)

# overlay_dataplane imported once here, in ansible-playbook, for every child (its own action plugin may not be loaded)
preload("ansible_collections.liqo.fabric.plugins.action.overlay_dataplane")


def host_target(hostvars, host: str) -> tuple[str | None, str | None]:
    """(netns name or None for the controller host's own, None) when this worker may apply `host`, else (None, why)."""
    hv = hostvars[host]
    connection = str(hv.get("ansible_connection") or "ssh")
    if connection in NETNS_CONNECTIONS:
        transport = connection
    elif connection in LOCAL_CONNECTIONS:
        transport = "local"
    else:
        transport = connection
    reason = in_process_refusal(transport=transport, load_name=connection,
                                become=boolean(hv.get("ansible_become", False), strict=False), async_val=0,
                                environment={}, enabled=hv.get(IN_PROCESS_VAR, True), host_module=True)
    if reason:
        return None, reason
    if transport == "local":
        return None, None
    netns = str(hv.get("ansible_netns_name") or hv.get("ansible_host") or host)
    if not valid_netns_name(netns):
        return None, "invalid network namespace name %r" % netns
    return netns, None


class ActionModule(InProcessAction):
    """liqo.fabric.overlay_dataplane_batch."""

    host_module = True

    def run(self, tmp=None, task_vars=None):
        result = super(InProcessAction, self).run(tmp, task_vars)  # ActionBase.run: this is no module of its own
        task_vars = task_vars if task_vars is not None else {}
        args = self._checked_args()
        hosts = args["hosts"]
        unbatched: dict[str, str] = {}
        if not args["enabled"]:
            unbatched = {h: "enabled is false" for h in hosts}
            return dict(result, changed=False, applied={}, unbatched=unbatched)
        task_reason = self._in_process_refusal(task_vars)  # the task's own become, environment, speed paths
        targets: dict[str, str | None] = {}
        for host in hosts:
            netns, why = (None, task_reason) if task_reason else host_target(task_vars["hostvars"], host)
            if why:
                unbatched[host] = why
            else:
                targets[host] = netns

        profile = self._serialization_profile(PYTHON_MODULE)
        jobs = {}
        for host, netns in targets.items():
            params = self._module_params(MODULE, dict(node=hosts[host] or {}, table=args["table"], state=args["state"]),
                                         task_vars, profile)
            jobs[host] = (lambda p=params: self._call_main(PYTHON_MODULE, p, profile), netns)
        display.vvv("liqo.fabric in-process: %d host(s) in children of the worker, %d left per host"
                    % (len(jobs), len(unbatched)))
        outcomes = run_forked_many(jobs, parallel=args["parallel"])

        applied, diffs, warnings = {}, [], []
        for host in hosts:
            if host not in outcomes:
                continue
            outcome = outcomes[host]
            if isinstance(outcome, ForkError):
                unbatched[host] = "%s: %s" % (MODULE, outcome)
                continue
            res, written = outcome
            res["stderr"] += written
            data = self._module_result(res, profile)
            if data.get("failed"):
                unbatched[host] = "%s failed: %s" % (MODULE, data.get("msg", "no message"))
                continue
            for w in data.pop("warnings", None) or []:
                warnings.append("%s: %s" % (host, w))
            diffs.extend(_labelled(host, data.pop("diff", None)))
            applied[host] = data
        result.update(changed=any(r.get("changed") for r in applied.values()), applied=applied, unbatched=unbatched)
        if warnings:
            result["warnings"] = warnings
        if diffs and self._task.diff:
            result["diff"] = diffs
        return result

    def _checked_args(self):
        dummy, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        if args["parallel"] < 1:
            raise AnsibleActionFail("parallel: %d is not a positive number of children" % args["parallel"])
        return args


def _labelled(host, diff):
    for d in diff if isinstance(diff, list) else [diff] if diff else []:
        d = dict(d)
        for key, default in (("before_header", "before"), ("after_header", "after")):
            d[key] = "%s: %s" % (host, d.get(key, default))
        yield d
