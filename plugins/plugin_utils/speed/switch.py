# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one switch of the speed paths: `enabled(kind, setting)` says whether a path may run, and why not.

Every path is off with LIQO_FABRIC_SPEED_PATHS=off (or 0, false, no). Beside that, each kind is off:
- in_process (an API module's main() in the Ansible worker), netns_fork (a host module's in a child forked from
  it): with liqo_fabric_in_process false, on an ansible-core outside the tested range or without the internals
  they use (internals.py);
- preload (those modules imported once where their action plugins load): on such an ansible-core;
- warm_runner (the controller's runs forked from a zygote): with --no-warm-runner, outside the tested range;
- ansiballz_hook (AnsiballZ payloads imported with one compile per file): never otherwise;
- ansiballz_cache (those compiled files kept on disk): with LIQO_FABRIC_ANSIBALLZ_CACHE=off.

The caller passes the path's own setting when only it can see it (a host or task variable, a command-line flag);
the switch reads the environment itself. The tested range is the ansible-core releases the speed paths are tested on
(the suite's pin, requirements-dev.txt), narrower than meta/runtime.yml's requires_ansible: the paths lean on private
ansible-core internals (speed/__init__.py names them), so elsewhere everything runs the ordinary way, which
`make matrix` tests on every version requires_ansible admits.

The payload cache imports this file, from its copy in a venv's site-packages, at every start of a Python: only `os`
at the top, the rest (and ansible) when a version or internals check needs it.
"""

import os

ENV = "LIQO_FABRIC_SPEED_PATHS"
CACHE_ENV = "LIQO_FABRIC_ANSIBALLZ_CACHE"
IN_PROCESS_VAR = "liqo_fabric_in_process"
OFF_VALUES = ("off", "0", "false", "no")
TESTED_MIN = (2, 19)  # inclusive
TESTED_BELOW = (2, 20)  # exclusive; keep in step with requirements-dev.txt's ansible-core
TESTED_RANGE = ">=%d.%d,<%d.%d" % (TESTED_MIN + TESTED_BELOW)
WHAT = "in-process modules, netns fork, warm runner, payload cache"

KINDS = ("in_process", "netns_fork", "preload", "warm_runner", "ansiballz_hook", "ansiballz_cache")
_OWN_SWITCH = {"in_process": "%s is false" % IN_PROCESS_VAR, "netns_fork": "%s is false" % IN_PROCESS_VAR,
               "warm_runner": "--no-warm-runner"}
_VERSION_GATED = ("in_process", "netns_fork", "preload", "warm_runner")
_USES_MODULE_INTERNALS = ("in_process", "netns_fork", "preload")


class Verdict(tuple):
    """(on, reason, warn): whether a speed path runs; why not, in a few words (-vvv, the controller's log); whether
    that reason is ansible-core itself (its version, its internals), which deserves a warning, where a switch the
    user set does not. A named tuple without the cost of importing `typing` or `collections`."""
    __slots__ = ()

    def __new__(cls, on, reason=None, warn=False):
        return tuple.__new__(cls, (bool(on), reason, bool(warn)))

    on = property(lambda self: self[0])
    reason = property(lambda self: self[1])
    warn = property(lambda self: self[2])


ON = Verdict(True)


def enabled(kind, setting=True, environ=None, version=None):
    """The Verdict on the speed path `kind` (see KINDS). `setting`: the path's own switch as the caller found it
    (liqo_fabric_in_process, not --no-warm-runner; None is its default, on). `environ`, `version`: os.environ and
    the installed ansible-core's unless given."""
    if kind not in KINDS:
        raise ValueError("no speed path %r" % (kind,))
    environ = os.environ if environ is None else environ
    if kind in _OWN_SWITCH and not _true(setting):
        return Verdict(False, _OWN_SWITCH[kind])
    reason = switched_off(environ)
    if reason:
        return Verdict(False, reason)
    if kind == "ansiballz_cache" and environ.get(CACHE_ENV, "").lower() in OFF_VALUES:
        return Verdict(False, "%s=%s" % (CACHE_ENV, environ[CACHE_ENV]))
    if kind in _VERSION_GATED:
        reason = unsupported_core(version)
        if reason:
            return Verdict(False, reason, warn=True)
    if kind in _USES_MODULE_INTERNALS:
        # pylint: disable-next=import-outside-toplevel  # ansible's internals: only for the paths that use them
        from ansible_collections.liqo.fabric.plugins.plugin_utils.speed import internals
        if internals.MISSING:
            return Verdict(False, internals.MISSING, warn=True)
    return ON


def _true(setting):
    if setting is None or isinstance(setting, bool):
        return setting is not False
    from ansible.module_utils.parsing.convert_bool import boolean  # pylint: disable=import-outside-toplevel
    return boolean(setting, strict=False)


def core_version():
    from ansible import release  # pylint: disable=import-outside-toplevel
    return release.__version__


def parse(version):
    import re  # pylint: disable=import-outside-toplevel
    match = re.match(r"(\d+)\.(\d+)", str(version))
    return (int(match.group(1)), int(match.group(2))) if match else None


def switched_off(environ=None):
    """'LIQO_FABRIC_SPEED_PATHS=<value>' when the user turned every speed path off, else None."""
    environ = os.environ if environ is None else environ
    if environ.get(ENV, "").strip().lower() in OFF_VALUES:
        return "%s=%s" % (ENV, environ[ENV])
    return None


def unsupported_core(version=None):
    """The reason when the ansible-core version keeps the version-gated paths off, else None."""
    version = core_version() if version is None else version
    parsed = parse(version)
    if parsed is None or not TESTED_MIN <= parsed < TESTED_BELOW:
        return "ansible-core %s is outside the tested range %s" % (version, TESTED_RANGE)
    return None


def off_reason(version=None, environ=None):
    """Why the version-gated speed paths are off as a whole (the user's switch, the ansible-core version), or None."""
    return switched_off(environ) or unsupported_core(version)


def warning(reason):
    return ("liqo.fabric: speed paths off (%s): %s; modules run as ordinary Ansible modules and the controller "
            "runs a cold ansible-playbook per run (correct, slower)" % (WHAT, reason))
