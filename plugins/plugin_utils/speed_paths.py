# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Whether the collection's speed paths may run: in-process modules (in_process.py), the netns fork
(netns_fork.py), the controller's warm runner (controller/warm.py) and the payload bytecode cache
(tools/ansiballz_cache.py). They lean on private ansible-core internals (module_utils._internal,
basic._ANSIBLE_ARGS, _collection_finder._meta_yml_to_dict), so they run only on the ansible-core versions the
suite runs (meta/runtime.yml's requires_ansible); elsewhere, or with LIQO_FABRIC_SPEED_PATHS=off, everything
runs the ordinary way (AnsiballZ modules, a cold ansible-playbook per controller run).

Standard library only, no private import: importable on any ansible-core.
"""

from __future__ import annotations

import os
import re

ENV = "LIQO_FABRIC_SPEED_PATHS"
OFF_VALUES = ("off", "0", "false", "no")
TESTED_MIN = (2, 19)  # inclusive
TESTED_BELOW = (2, 20)  # exclusive; keep in step with meta/runtime.yml
TESTED_RANGE = ">=%d.%d,<%d.%d" % (TESTED_MIN + TESTED_BELOW)
WHAT = "in-process modules, netns fork, warm runner, payload cache"


def core_version():
    from ansible import release  # pylint: disable=import-outside-toplevel
    return release.__version__


def parse(version):
    match = re.match(r"(\d+)\.(\d+)", str(version))
    return (int(match.group(1)), int(match.group(2))) if match else None


def switched_off(environ=None):
    """'LIQO_FABRIC_SPEED_PATHS=<value>' when the user turned the speed paths off, else None."""
    environ = os.environ if environ is None else environ
    if environ.get(ENV, "").strip().lower() in OFF_VALUES:
        return "%s=%s" % (ENV, environ[ENV])
    return None


def off_reason(version=None, environ=None):
    """Why the speed paths are off (a short reason), or None when they may run."""
    reason = switched_off(environ)
    if reason:
        return reason
    version = core_version() if version is None else version
    parsed = parse(version)
    if parsed is None or not TESTED_MIN <= parsed < TESTED_BELOW:
        return "ansible-core %s is outside the tested range %s" % (version, TESTED_RANGE)
    return None


def unsupported_core(version=None):
    """The reason when the ansible-core version (not the user's switch) turns the speed paths off."""
    return off_reason(version, environ={})


def warning(reason):
    return ("liqo.fabric: speed paths off (%s): %s; modules run as ordinary Ansible modules and the controller "
            "runs a cold ansible-playbook per run (correct, slower)" % (WHAT, reason))
