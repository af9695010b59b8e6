# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Feature protocol: what a mode adds to the generic engine (gateway HA, live peer health, node re-pointing,
key rotation), so that the engine holds no network logic and no branch per feature.

A mode (controller/modes.py) registers its features. The engine calls each hook of every feature in registration
order; a lost Lease and the engine's stop go in reverse order, as a stack unwinds. Every hook has a default that
does nothing: a feature subclasses Feature and implements only what it needs.
"""
from __future__ import annotations

import threading
from typing import Callable, List, Optional, Protocol, Tuple

# a check a run polls while it lasts: a non-empty answer cancels the run and is its reason
RunGuard = Callable[[], str]


class Feature(Protocol):
    name: str = "feature"
    # the work items it handles: the keys it enqueues itself start with this ("" = none)
    key_prefix: str = ""

    # ---- what it watches
    def on_event(self, cs, kind: str, etype: str, obj: dict, old: Optional[dict]) -> None:
        """Every informer event of cluster `cs`, before the engine makes work of it."""

    # ---- the work items it handles
    def process(self, cs, item) -> None:
        """A work item whose key starts with key_prefix; the engine neither records nor retries it."""

    # ---- its periodic tick
    def tick_period(self) -> float:
        """Seconds between ticks, asked once when the engine starts; 0: no tick."""
        return 0.0

    def tick(self) -> None:
        """The periodic check, in a thread of its own; an exception is logged ("<name> check failed")."""

    # ---- start and stop
    def start(self, cs) -> None:
        """The engine starts serving cluster `cs`: its informers run, its Lease is not sought yet."""

    def leading(self, cs, leading: bool) -> None:
        """This replica took `cs`'s Lease (in a thread of its own, before the state is loaded and the keys
        resynced), or lost it while the engine runs."""

    def stop(self) -> None:
        """The engine stops: called before its threads are told to."""

    def threads(self) -> List[threading.Thread]:
        """Threads that must stay alive (/healthz) and that the engine joins when it stops."""
        return []

    # ---- the runs of a replica that does not hold the Lease (a gateway pod's standby)
    def standby_runs(self, cs) -> bool:
        """Whether `cs`'s work items may run while this replica does not hold `cs`'s Lease."""
        return False

    def run_context(self, cs) -> Tuple[dict, Optional[RunGuard]]:
        """Extra vars of a playbook run in `cs`, and a guard for it (a run it cancels is neither recorded nor
        retried)."""
        return {}, None
