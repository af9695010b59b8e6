# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The engine: informers -> input hashes -> work queue -> playbook runs -> status, Events, metrics.

One Engine (engine.py) serves one or more clusters (cluster.py: API client, informers, Lease, applied hashes,
dataplane manifests) and is put together from its parts, one file each:

- what a change becomes: informers.py (what is watched and cached), reactor.py (an event -> work keys),
  relations.py (owners of related objects and Secrets), inputs.py (input hashes, the hash skip);
- what a work item becomes: executor.py (workers, dispatch, reconcile), run.py (a playbook run and its vars),
  record.py (applied hashes, manifests, outcome), conditions.py (status and Events), finalizers.py;
- what runs periodically: loops.py (resync, drift, state flush, feature ticks), resync.py, drift_check.py,
  state.py (the persisted state); and as the kernel changes: fault_events.py (the drift checks of a namespace
  its notifications name, through controller/kernel_events.py);
- what a mode adds: mode.py (where a mode looks, its Lease, its run vars) and feature.py (the Feature protocol).
  controller/modes.py makes the three modes and registers their features (gateway HA, live peer health, node
  re-pointing, key rotation): no network logic lives in this package.
"""
from controller.engine.engine import Engine  # noqa: F401
