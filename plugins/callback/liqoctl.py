# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
name: liqoctl
type: stdout
short_description: liqoctl-style progress lines for the fabric's playbooks
version_added: 0.1.0
description:
  - Prints only the progress lines of tasks named C(INFO ...) (for example
    C(INFO   (local) Cluster identity correctly retrieved)), each once, when the task succeeded (a name made of
    several C(INFO ...) parts joined by C( | ) prints one line per part), and every
    failure as an C(ERROR) line with its message; a playbook without such tasks ends with a one-line recap
    per host.
  - "A task that runs on both clusters at once (hosts with the variable C(fabric_side), V(local) or V(remote))
    names the side C((each)): C(INFO (each) Public key correctly created) prints C(INFO (local) ...) and
    C(INFO (remote) ...), local first, whatever the order the hosts finished in."
  - The text of C(debug) messages is printed as it is (the C(generate_*) playbooks print YAML that way).
  - With C(-v) or more it prints exactly what the C(default) callback prints.
  - The repository's C(ansible.cfg) selects it (C(stdout_callback = liqo.fabric.liqoctl)).
author: liqo.fabric developers (@liqo-fabric)
extends_documentation_fragment:
  - default_callback
requirements:
  - set as stdout in configuration
"""

from ansible.plugins.callback.default import CallbackModule as DefaultCallback

PREFIXES = ("INFO ", "WARN ")
EACH = "(each)"
SIDE_ORDER = {"local": 0, "remote": 1}


class CallbackModule(DefaultCallback):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "stdout"
    CALLBACK_NAME = "liqo.fabric.liqoctl"

    def __init__(self):
        super().__init__()
        self._printed = set()
        self._info_lines = 0
        self._pending = []  # (side order, line) of the running task's per-side results

    def _terse(self):
        return self._display.verbosity < 1

    @staticmethod
    def _parts(task):
        """(prefix or None, text) of each ' | '-separated part of the task's name (one module call can stand for
        several liqoctl steps)."""
        out = []
        for part in task.get_name().split(" | "):
            part = part.strip()
            prefix = next((p for p in PREFIXES if part.startswith(p)), None)
            out.append((prefix, part[len(prefix):].strip() if prefix else part))
        return out

    @classmethod
    def _progress(cls, task):
        """The progress lines of a task: its name, or each part of it, that starts with INFO/WARN."""
        lines = ["%-6s %s" % (prefix.strip(), text) for prefix, text in cls._parts(task) if prefix]
        return "\n".join(lines) or None

    def _ok(self, result):
        if result._task.action in ("debug", "ansible.builtin.debug", "ansible.legacy.debug") \
                and isinstance(result._result.get("msg"), str):
            self._display.display(result._result["msg"])  # generate_* print YAML this way
            self._info_lines += 1
            return
        line = self._progress(result._task)
        if not line:
            return
        if EACH in line:
            side = result._host.get_vars().get("fabric_side") or result._host.get_name()
            key = (result._task._uuid, side)
            if key not in self._printed:
                self._printed.add(key)
                self._pending.append((SIDE_ORDER.get(side, 2), side, line.replace(EACH, "(%s)" % side)))
            return
        if result._task._uuid not in self._printed:
            self._printed.add(result._task._uuid)
            self._info_lines += 1
            self._display.display(line)

    def _flush(self):
        for dummy, dummy2, line in sorted(self._pending):
            self._info_lines += 1
            self._display.display(line)
        self._pending = []

    def _failed(self, result, ignore_errors=False):
        if ignore_errors:
            return
        res = result._result
        msg = res.get("msg") or res.get("stderr") or res.get("module_stderr") or "failed"
        name = " / ".join(text for dummy, text in self._parts(result._task))
        self._display.display("%-6s %s [%s]: %s" % ("ERROR", name, result._host.get_name(), msg), stderr=True)

    # -- terse mode overrides; each falls back to the default callback with -v ---------------------
    def v2_playbook_on_start(self, playbook):
        if not self._terse():
            super().v2_playbook_on_start(playbook)

    def v2_playbook_on_play_start(self, play):
        self._flush()
        if not self._terse():
            super().v2_playbook_on_play_start(play)

    def v2_playbook_on_task_start(self, task, is_conditional):
        self._flush()
        if not self._terse():
            super().v2_playbook_on_task_start(task, is_conditional)

    def v2_playbook_on_handler_task_start(self, task):
        self._flush()
        if not self._terse():
            super().v2_playbook_on_handler_task_start(task)

    def v2_playbook_on_include(self, included_file):
        if not self._terse():
            super().v2_playbook_on_include(included_file)

    def v2_runner_on_ok(self, result):
        if self._terse():
            self._ok(result)
        else:
            super().v2_runner_on_ok(result)

    def v2_runner_item_on_ok(self, result):
        if self._terse():
            self._ok(result)
        else:
            super().v2_runner_item_on_ok(result)

    def v2_runner_on_failed(self, result, ignore_errors=False):
        if self._terse():
            self._failed(result, ignore_errors)
        else:
            super().v2_runner_on_failed(result, ignore_errors)

    def v2_runner_item_on_failed(self, result):
        if self._terse():
            self._failed(result)
        else:
            super().v2_runner_item_on_failed(result)

    def v2_runner_on_unreachable(self, result):
        if self._terse():
            self._failed(result)
        else:
            super().v2_runner_on_unreachable(result)

    def v2_runner_on_skipped(self, result):
        if not self._terse():
            super().v2_runner_on_skipped(result)

    def v2_runner_item_on_skipped(self, result):
        if not self._terse():
            super().v2_runner_item_on_skipped(result)

    def v2_runner_retry(self, result):
        if not self._terse():
            super().v2_runner_retry(result)

    def v2_playbook_on_stats(self, stats):
        self._flush()
        if not self._terse():
            super().v2_playbook_on_stats(stats)
            return
        if self._info_lines:
            return
        for host in sorted(stats.processed):
            s = stats.summarize(host)
            self._display.display("%s: ok=%d changed=%d failed=%d unreachable=%d skipped=%d"
                                  % (host, s["ok"], s["changed"], s["failures"], s["unreachable"], s["skipped"]))
