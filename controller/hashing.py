# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Input hashes: what a playbook run depends on, so an unchanged object is skipped without Ansible.

input hash = H(role version, the entry's input fields of the object, digests of the Secrets it
references, the inputs of its related objects). The role version is a digest of the collection's
roles/ and playbooks/ trees (and the watch map), so upgrading a role re-applies everything once.
Secret data never leaves this module: only its digest is kept.
"""
from __future__ import annotations

import hashlib
import json
import os
from typing import Iterable, Optional

from controller.watchmap import get_field

_dumps = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str).encode


def digest(value) -> str:
    return hashlib.blake2b(_dumps(value).encode(), digest_size=16).hexdigest()


def secret_digest(secret: Optional[dict]) -> Optional[str]:
    """Digest of a Secret's data/stringData/type; None for a missing Secret."""
    if secret is None:
        return None
    return digest([secret.get("type"), secret.get("data") or {}, secret.get("stringData") or {}])


def project(obj: dict, fields: Iterable[str]) -> list:
    return [get_field(obj, f) for f in fields]


def tree_version(*paths: str) -> str:
    """Digest of the files (names, sizes, contents) under the given directories/files."""
    h = hashlib.blake2b(digest_size=16)
    for top in paths:
        if os.path.isfile(top):
            files = [top]
        elif os.path.isdir(top):
            files = []
            for root, dirs, names in os.walk(top):
                dirs[:] = sorted(d for d in dirs if d not in ("__pycache__", ".git"))
                files.extend(os.path.join(root, n) for n in sorted(names) if not n.endswith(".pyc"))
        else:
            continue
        for path in files:
            h.update(os.path.relpath(path, os.path.dirname(top)).encode() + b"\0")
            try:
                with open(path, "rb") as f:
                    h.update(f.read())
            except OSError:
                h.update(b"<unreadable>")
            h.update(b"\0")
    return h.hexdigest()


def role_version(collection_root: str, watch_map_path: Optional[str] = None) -> str:
    parts = [os.path.join(collection_root, d) for d in ("roles", "playbooks", "plugins")]
    if watch_map_path:
        parts.append(watch_map_path)
    return tree_version(*parts)
