"""Run a module of the collection (or any module) through real Ansible, in a netns or locally.

Used by integration tests so modules are exercised the way users run them: argument parsing, check
mode, diff, no_log and the liqo.fabric.netns connection, not by calling Python functions.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

import pytest

# importing tests.conftest puts the collection on sys.path (a process that imports this module alone: a bench's
# inner run)
from tests.conftest import ROOT

from ansible_collections.liqo.fabric.plugins.plugin_utils.speed import switch as speed_switch  # noqa: E402
VENV_BIN = os.path.dirname(sys.executable)
# The tests of a speed path itself (its use of private internals) run on the ansible-core the paths are tested on;
# on the other versions of `make matrix` the paths are off, and the plain path is what those versions run.
SPEED_PATHS_OFF = speed_switch.unsupported_core()
needs_speed_paths = pytest.mark.skipif(SPEED_PATHS_OFF is not None, reason="speed paths off here: %s" % SPEED_PATHS_OFF)


def ansible_env(extra: dict | None = None) -> dict:
    env = dict(os.environ)
    env.update({
        "ANSIBLE_COLLECTIONS_PATH": os.path.join(ROOT, "build", "collections"),
        "ANSIBLE_HOME": os.path.join(ROOT, "build", "ansible-home"),
        "ANSIBLE_CONFIG": os.path.join(ROOT, "ansible.cfg"),
        "PATH": VENV_BIN + os.pathsep + env.get("PATH", ""),
        "ANSIBLE_PYTHON_INTERPRETER": sys.executable,
        "ANSIBLE_HOST_KEY_CHECKING": "False",
    })
    env.update(extra or {})
    return env


def run_module(module: str, args: dict, netns: str | None = None, check: bool = False,
               diff: bool = False, timeout: float = 120) -> dict:
    """Runs `module` with `args` once and returns its result dict, plus `rc`, `stdout`, `stderr`
    of the ansible-playbook process (tests grep them for leaked secrets)."""
    host = netns or "localhost"
    conn = "liqo.fabric.netns" if netns else "local"
    play = [{"hosts": "all", "gather_facts": False,
             "tasks": [{"name": "under test", module: args}]}]
    with tempfile.TemporaryDirectory(prefix="lfab-adhoc-") as tmp:
        playbook = os.path.join(tmp, "play.yml")
        with open(playbook, "w", encoding="utf-8") as f:
            json.dump(play, f)  # JSON is YAML
        argv = [os.path.join(VENV_BIN, "ansible-playbook"), "-i", f"{host},", "-c", conn, playbook]
        if check:
            argv.append("--check")
        if diff:
            argv.append("--diff")
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False,
                              env=ansible_env({"ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.json"}))
    try:
        data = json.loads(proc.stdout)
        result = data["plays"][0]["tasks"][0]["hosts"][host]
    except (ValueError, KeyError, IndexError):
        result = {"failed": True, "msg": "could not parse ansible output"}
    result["rc"] = proc.returncode
    result["stdout"] = proc.stdout
    result["stderr"] = proc.stderr
    return result
