# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which wireguard-go a gateway runs, and whether it has the offloads the fabric's speed relies on.

wireguard-go before its 2023 vectorized release writes one packet per system call, has no TCP GSO/GRO on its
TUN device nor UDP GSO/GRO on its socket, and leaves its sockets at the host's default buffers: a tunnel of
that binary carries a fraction of the traffic (docs/wireguard-go.md). Debian bookworm ships such a binary
(0.0.20220316); bookworm-backports ships 0.0.20231211, whose binary prints v0.0.20230223 (the release that
brought the offloads). A gateway still works on the old binary: it is reported, not refused.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess

OFFLOADS_SINCE = (0, 0, 20230223)
PACKAGE = "wireguard-go 0.0.20231211 or later from Debian bookworm-backports (apt-get install -t bookworm-backports wireguard-go)"
_VERSION = re.compile(r"wireguard-go v?(\d+)\.(\d+)\.(\d+)")
_cache = {}


def parse_version(text):
    """(major, minor, patch) from `wireguard-go --version`'s output, or None."""
    m = _VERSION.search(text or "")
    return tuple(int(x) for x in m.groups()) if m else None


def describe(path, version):
    """The report of a binary at `path` printing `version` (a tuple or None): path, version, offloads and a
    warning (None when the binary has the offloads)."""
    offloads = version is not None and version >= OFFLOADS_SINCE
    warning = None
    if not offloads:
        shown = "v" + ".".join(map(str, version)) if version else "of unknown version"
        warning = ("%s is wireguard-go %s, without vectorized I/O and TCP/UDP offloads (from v%s): tunnels run several "
                   "times slower; install %s" % (path, shown, ".".join(map(str, OFFLOADS_SINCE)), PACKAGE))
    return {"path": path, "version": ".".join(map(str, version)) if version else None, "offloads": offloads,
            "warning": warning}


def probe(binary="wireguard-go", timeout=5.0):
    """describe() of the wireguard-go that `binary` names (on PATH unless it has a slash); cached per
    binary file and modification time (one `--version` run per process). None when there is none."""
    path = binary if os.path.sep in binary else shutil.which(binary)
    if not path or not os.access(path, os.X_OK):
        return None
    key = (path, os.stat(path).st_mtime_ns)
    if key not in _cache:
        try:
            out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=timeout, check=False)
            version = parse_version(out.stdout + out.stderr)
        except (OSError, subprocess.TimeoutExpired):
            version = None
        _cache[key] = describe(path, version)
    return dict(_cache[key])
