# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A hold on a probe process's WireGuard session restarts, for the length of a key rotation.

A probe that misses `threshold` pings restarts its WireGuard session: it removes the peer and adds it back
(wireguard/session.py). During a key rotation the pings of both gateways go unanswered from one side's switch to
the other side's adopt (docs/key-rotation.md), and when that window is longer than the threshold (a loaded
host) the restart destroys what the rotation relies on: the re-added peer starts with an empty staging queue,
so the packets waiting for the new key's handshake are dropped, and on the side that has not switched yet the
still valid session is gone. So the rotation holds both gateways' restarts before the first switch and
releases them after the last adopt; a hold ends by itself at its deadline if the run stops half-way.

The hold is a file next to the probe's pid file, `<interface>.hold` (0600, JSON `{"until": epoch seconds}`), so it
outlives the probe process restart that a peer key change causes. The probe reads it only when it is about to
restart a session, and restarts once the hold is gone if the peer is still unreachable then.
"""

from __future__ import absolute_import, division, print_function

import json
import os
import time

from ansible_collections.liqo.fabric.plugins.module_utils.host.atomic_file import write_atomic

MAX_SECONDS = 3600


class HoldError(ValueError):
    """Bad input; the message names the field and the value."""


def hold_path(state_dir, interface):
    return os.path.join(state_dir, interface + ".hold")


def remaining(state_dir, interface, now=None):
    """Seconds left on the hold of `interface`'s session restarts; 0 when there is none, it expired or the file
    cannot be read (a damaged hold never blocks a restart)."""
    try:
        with open(hold_path(state_dir, interface), encoding="utf-8") as f:
            until = float(json.load(f)["until"])
    except (OSError, ValueError, TypeError, KeyError):
        return 0.0
    return max(0.0, until - (time.time() if now is None else now))


def check_seconds(seconds):
    if isinstance(seconds, bool) or not isinstance(seconds, int) or not 0 <= seconds <= MAX_SECONDS:
        raise HoldError("seconds: %r is not a whole number of seconds from 0 (release) to %d" % (seconds, MAX_SECONDS))
    return seconds


def write(state_dir, interface, seconds, now=None):
    """Holds the restarts of `interface` for `seconds` from now (replacing an earlier hold)."""
    until = (time.time() if now is None else now) + seconds
    path = hold_path(state_dir, interface)
    write_atomic(path, json.dumps({"until": until}))
    return until


def release(state_dir, interface):
    """Ends the hold of `interface`; True when there was one (even an expired one: its file goes too)."""
    try:
        os.unlink(hold_path(state_dir, interface))
        return True
    except FileNotFoundError:
        return False
