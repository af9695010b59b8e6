# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The small files the fabric keeps on a host (pid files, a probe's hold, the sysctl record): written whole or not
at all, readable only by their owner unless asked otherwise."""

from __future__ import annotations

import os


def write_atomic(path: str, text: str, mode: int = 0o600) -> None:
    """Writes `text` to `path` through `<path>.tmp` and a rename: a reader sees the old file or the new one, never a
    part of it. The file has `mode` from the start (0600 by default): a `.tmp` left by an earlier run with another mode
    is set to `mode` before anything is written into it."""
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            fd = -1  # closed by the file object from here on
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        if fd >= 0:
            os.close(fd)
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
