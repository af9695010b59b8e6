# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The dataplane manifest: what a successful run declares it owns (set_stats `fabric_dataplane`, a list of targets,
one per host; controller/drift.py shows one), as the engine stores it per work key and merges it, and what a drift
check answers: differences, among which a CheckFailure says what the check could not read.
"""
from __future__ import annotations

import json
from typing import List

MANIFEST_KEY = "fabric_dataplane"
PARTIAL_KEY = "fabric_dataplane_partial"


class CheckFailure(str):
    """A difference that is not drift: the check could not read the kernel (a missing or foreign network
    namespace, another machine's host, an unreadable nftables or UAPI socket). The engine reports it
    (Degraded, reason DriftCheckFailed) instead of passing or repairing blindly."""


def failures(diffs: List[str]) -> List[str]:
    """The differences that say a check could not read the kernel."""
    return [d for d in diffs if isinstance(d, CheckFailure)]


def as_targets(manifest) -> List[dict]:
    """The targets (dicts) of a stored manifest."""
    if manifest is None:
        return []
    return [t for t in (manifest if isinstance(manifest, list) else [manifest]) if isinstance(t, dict)]


def partial(stats: dict) -> bool:
    """The run declared (`fabric_dataplane_partial`) that its manifest covers only some of the key's targets."""
    value = (stats or {}).get(PARTIAL_KEY)
    return value is True or (isinstance(value, str) and value.strip().lower() == "true")


def target_place(target: dict) -> tuple:
    """Where a target is: the machine (boot id) and the network namespace."""
    return (target.get("kind"), target.get("boot_id"), target.get("netns"), target.get("netns_inode"))


def merge_targets(old, new) -> list:
    """A partial run's targets replace the stored targets of the same place; the other stored ones are kept."""
    fresh = as_targets(new)
    places = {target_place(t) for t in fresh}
    return [t for t in as_targets(old) if target_place(t) not in places] + fresh


def manifest_from_stats(stats: dict):
    """The `fabric_dataplane` of a run's set_stats data (also accepts a JSON string)."""
    value = (stats or {}).get(MANIFEST_KEY)
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    return value
