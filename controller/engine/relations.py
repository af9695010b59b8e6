# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Who owns a watched object that is not a work key's member: the objects of an entry whose `related` names its
kind (same labels, a reference, the same namespace, or all of them), and the objects whose `secrets` name a
Secret."""
from __future__ import annotations

from typing import List, Optional

from controller.watchmap import WatchEntry, get_field


def secret_names(entry: WatchEntry, obj: dict) -> List[str]:
    """The Secrets `obj` references through the entry's `secrets` fields (`{name: x}` or `"x"`)."""
    names = []
    for path in entry.secrets:
        v = get_field(obj, path)
        if isinstance(v, dict):
            v = v.get("name")
        if isinstance(v, str) and v:
            names.append(v)
    return names


def related_owners(cs, owner: WatchEntry, rels, obj: dict, old: Optional[dict]) -> List[dict]:
    """The cached objects of `owner`'s kind that `obj` (or its previous version `old`) is related to by `rels`."""
    inf = cs.informers.get(owner.kind)
    if inf is None:
        return []
    meta = obj.get("metadata") or {}
    out = []
    for cand in list(inf.cache.values()):
        cmeta = cand.get("metadata") or {}
        for r in rels:
            if r.all:
                out.append(cand)
                break
            if r.namespace:
                if cmeta.get("namespace") == meta.get("namespace"):
                    out.append(cand)
                    break
            elif r.labels:
                if cmeta.get("namespace") != meta.get("namespace"):
                    continue
                versions = [obj] + ([old] if old else [])
                if any(all((cmeta.get("labels") or {}).get(lb) is not None and
                           (cmeta.get("labels") or {}).get(lb) == ((v.get("metadata") or {}).get("labels") or {}).get(lb)
                           for lb in r.labels) for v in versions):
                    out.append(cand)
                    break
            else:
                ref = get_field(cand, r.ref)
                if isinstance(ref, dict) and ref.get("name") == meta.get("name") and \
                        (ref.get("namespace") or cmeta.get("namespace")) == meta.get("namespace"):
                    out.append(cand)
                    break
    return out


def secret_owners(cs, owner: WatchEntry, secret: dict) -> List[dict]:
    """The cached objects of `owner`'s kind in the Secret's namespace that reference it."""
    inf = cs.informers.get(owner.kind)
    if inf is None:
        return []
    meta = secret.get("metadata") or {}
    return [c for c in list(inf.cache.values())
            if (c.get("metadata") or {}).get("namespace") == meta.get("namespace")
            and meta.get("name") in secret_names(owner, c)]
