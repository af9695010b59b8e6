# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A WireGuard interface made to match its spec, removed, or read back with its peers' statistics: the backend
chosen (an existing interface keeps its own), its state read, the minimal change computed and written (nothing
when nothing differs), the link's MTU and addresses set."""
from __future__ import absolute_import, division, print_function

import contextlib
import os
import time

from ansible_collections.liqo.fabric.plugins.module_utils.wireguard.diff import (
    apply_change_to_state, compute_change, config_view, peer_view)
from ansible_collections.liqo.fabric.plugins.module_utils.wireguard.errors import ValidationError, WireGuardError
from ansible_collections.liqo.fabric.plugins.module_utils.wireguard.kernel import (
    BACKEND_KERNEL, KernelBackend, kernel_has_wireguard)
from ansible_collections.liqo.fabric.plugins.module_utils.wireguard.link import (
    IPRoute, LinkState, _require_pyroute2, apply_link, link_changes, read_link)
from ansible_collections.liqo.fabric.plugins.module_utils.wireguard.userspace import (
    BACKEND_USERSPACE, RUN_DIR, WIREGUARD_GO, UserspaceBackend)
from ansible_collections.liqo.fabric.plugins.module_utils.wireguard.validation import validate_ifname


def choose_backend(ifname, link, preference="auto", kernel_available=None, run_dir=RUN_DIR, binary=WIREGUARD_GO):
    """An existing interface keeps its backend; otherwise `preference`, where auto = kernel if the module
    is there, else wireguard-go. Raises if the name is taken by something that is not WireGuard."""
    if link is not None:
        if link.kind == "wireguard":
            return KernelBackend(ifname)
        us = UserspaceBackend(ifname, run_dir, binary)
        if link.kind == "tun" and us.socket_live():
            return us
        raise WireGuardError("%s: a %s link with this name exists and is not a WireGuard interface"
                             % (ifname, link.kind or "non-WireGuard"))
    if preference == "auto":
        if kernel_available is None:
            kernel_available = kernel_has_wireguard()
        preference = BACKEND_KERNEL if kernel_available else BACKEND_USERSPACE
    if preference == BACKEND_KERNEL:
        return KernelBackend(ifname)
    if preference in (BACKEND_USERSPACE, "userspace"):
        return UserspaceBackend(ifname, run_dir, binary)
    raise ValidationError("backend: %r is not one of auto, kernel, wireguard-go" % (preference,))


def ensure_present(spec, check_mode=False, backend="auto", run_dir=RUN_DIR, binary=WIREGUARD_GO):
    """Makes the interface match `spec`. Returns a result dict: changed, backend, pid, interface (public view),
    diff {before, after}, and `writes` (number of UAPI/netlink write exchanges, 0 when unchanged)."""
    _require_pyroute2()
    with IPRoute() as ipr, contextlib.ExitStack() as held:
        link = read_link(ipr, spec.name)
        be = choose_backend(spec.name, link, backend, run_dir=run_dir, binary=binary)
        if isinstance(be, UserspaceBackend) and link is None and not _has_binary(binary):
            raise WireGuardError("kernel has no wireguard module and %r is not installed" % binary)
        exists = be.running(link)
        if exists:  # read, compare and write as one step against our other writers (wireguard_session)
            held.enter_context(be.config_lock())
        current = be.read() if exists else None
        change = compute_change(spec, current)
        before = config_view(spec.name, current, link)
        after_link = LinkState(link.index if link else 0, link.kind if link else None, spec.mtu, True,
                               sorted(spec.addresses) if spec.addresses is not None else (link.addresses if link else []))
        after = config_view(spec.name, apply_change_to_state(spec, current), after_link)
        link_dirty = exists and any(link_changes(spec, link))
        changed = (not exists) or (not change.empty()) or bool(link_dirty)
        result = {"changed": changed, "backend": be.name, "created": not exists, "writes": 0,
                  "diff": {"before": before, "after": after}, "interface": after}
        if check_mode or not changed:
            result["pid"] = be.recorded_pid() if exists and isinstance(be, UserspaceBackend) else None
            if not changed:
                result["interface"] = before
            return result
        pid = None
        try:
            if not exists:
                pid = be.start() if isinstance(be, UserspaceBackend) else be.start(ipr)
                link = read_link(ipr, spec.name)
                if link is None:
                    raise WireGuardError("%s: link did not appear after starting the %s backend" % (spec.name, be.name))
            if be.apply(change):
                result["writes"] += 1
            if apply_link(ipr, link, spec):
                result["writes"] += 1
        except Exception:
            if not exists:  # leave nothing half-made behind
                try:
                    be.stop(ipr)
                except Exception:
                    pass
            raise
        result["pid"] = pid if pid is not None else (be.recorded_pid() if isinstance(be, UserspaceBackend) else None)
        return result


def ensure_absent(name, check_mode=False, run_dir=RUN_DIR, binary=WIREGUARD_GO):
    """Removes the interface: wireguard-go process (by recorded PID), socket, pid/log files, link."""
    _require_pyroute2()
    validate_ifname(name)
    with IPRoute() as ipr:
        link = read_link(ipr, name)
        us = UserspaceBackend(name, run_dir, binary)
        if link is None:
            gone = {"name": name, "state": "absent"}
            if us.socket_live():
                # a live interface of this name in another network namespace: absent here, and not ours to
                # touch (a gateway that moved to another host of the same machine keeps its name)
                return {"changed": False, "backend": None, "elsewhere": True,
                        "diff": {"before": dict(gone), "after": dict(gone)}}
            changed = us.remove_leftovers(check=check_mode)
            return {"changed": changed, "backend": None, "diff": {"before": dict(gone), "after": dict(gone)}}
        be = choose_backend(name, link, run_dir=run_dir, binary=binary)
        current = be.read() if be.running(link) else None
        result = {"changed": True, "backend": be.name, "pid": be.recorded_pid() if isinstance(be, UserspaceBackend) else None,
                  "diff": {"before": config_view(name, current, link), "after": {"name": name, "state": "absent"}}}
        if not check_mode:
            be.stop(ipr)
        return result


def read_interface(name, run_dir=RUN_DIR, binary=WIREGUARD_GO, now=None):
    """Public view of an interface with per-peer stats (handshake age, rx/tx) or {'state': 'absent'}."""
    _require_pyroute2()
    validate_ifname(name)
    with IPRoute() as ipr:
        link = read_link(ipr, name)
        if link is None:
            us = UserspaceBackend(name, run_dir, binary)
            us.running(None)  # raises when the name lives in another netns
            return {"name": name, "state": "absent", "backend": None}
        be = choose_backend(name, link, run_dir=run_dir, binary=binary)
        dev = be.read()
    view = config_view(name, dev, link, with_stats=True)
    now = time.time() if now is None else now
    view["peers"] = sorted((peer_view(p, now) for p in dev.peers.values()), key=lambda v: v["public_key"])
    view["backend"] = be.name
    view["pid"] = be.recorded_pid() if isinstance(be, UserspaceBackend) else None
    return view


def _has_binary(binary):
    if os.path.sep in binary:
        return os.access(binary, os.X_OK)
    from shutil import which
    return which(binary) is not None
