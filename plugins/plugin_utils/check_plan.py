# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A check-mode run's view of what it would have written to each cluster, carried from step to step.

In check mode nothing reaches the apiserver, so a later step (IPAM after the Configuration, the gateway plan
after the GatewayServer, the overlay after the PublicKeys) would see none of what the earlier ones planned and
stop or plan nothing. The action plugin of every API module (plugin_utils/module_action.py) therefore, in check
mode only:
- before the module runs, passes it the objects earlier steps of the same `ansible-playbook` run would have
  written to its cluster (option ``assume``; module_utils/kube/client.Kube.assume overlays them on reads);
- after it, records the objects the module says it would write (its ``assumed`` result).

The record is a JSON file per `ansible-playbook` process in Ansible's per-run local temporary directory (removed
when the run ends); workers are forked from that process, so their parent's pid names the run. Writers take an
exclusive lock: forks of one task record concurrently. Objects are keyed by cluster (kubeconfig path and
context) and by kind/namespace/name; a later record of the same object replaces the earlier one.
"""

from __future__ import annotations

import fcntl
import json
import os

from ansible import constants as C


def _path() -> str:
    return os.path.join(C.DEFAULT_LOCAL_TMP, "liqo-fabric-check-plan-%d.json" % os.getppid())


def cluster_key(args: dict) -> str:
    """The cluster a module's arguments address (an unset kubeconfig: the environment's default)."""
    kubeconfig = args.get("kubeconfig") or ""
    if kubeconfig:
        kubeconfig = os.path.realpath(os.path.expanduser(str(kubeconfig)))
    return "%s#%s" % (kubeconfig, args.get("context") or "")


def object_key(obj: dict) -> str:
    meta = obj.get("metadata") or {}
    return "%s/%s/%s" % (obj.get("kind"), meta.get("namespace") or "", meta.get("name") or "")


def _read(f) -> dict:
    f.seek(0)
    text = f.read()
    return json.loads(text) if text.strip() else {}


def assumed(cluster: str) -> list:
    """What earlier steps of this run would have written to `cluster` (objects; ``absent: true`` for deletions)."""
    try:
        with open(_path(), "r", encoding="utf-8") as f:
            fcntl.flock(f, fcntl.LOCK_SH)
            return list((_read(f).get(cluster) or {}).values())
    except FileNotFoundError:
        return []


def record(cluster: str, objects: list) -> None:
    if not objects:
        return
    fd = os.open(_path(), os.O_RDWR | os.O_CREAT, 0o600)  # objects may be Secrets' metadata: owner only
    with os.fdopen(fd, "r+", encoding="utf-8") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        state = _read(f)
        mine = state.setdefault(cluster, {})
        for obj in objects:
            if isinstance(obj, dict) and obj.get("kind") and (obj.get("metadata") or {}).get("name"):
                mine[object_key(obj)] = obj
        f.seek(0)
        f.truncate()
        json.dump(state, f)
