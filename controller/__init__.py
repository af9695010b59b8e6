# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""liqo-fabric-controller: a generic engine that turns Kubernetes changes into Ansible playbook runs.

watch (informers) -> per-key work queue (debounce, coalesce, priority, locks, hash skip) ->
ansible_runner -> status conditions, Events, metrics. No network logic lives here: what a change means
is declared in watches.yaml and done by the collection's playbooks and roles.
"""

import time as _time

__version__ = "0.1.0"
IMPORTED_AT = _time.monotonic()   # the entry point's first line: the startup timeline's origin (controller.logs)


def ensure_collection_importable() -> None:
    """Makes `ansible_collections.liqo.fabric` importable (module_utils are shared with the playbooks):
    from a checkout through build/collections (a link `make collection` creates), when installed through
    the ansible_collections directory this package lives in."""
    import os  # pylint: disable=import-outside-toplevel
    import sys  # pylint: disable=import-outside-toplevel
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    candidates = [os.path.join(root, "build", "collections")]
    parts = root.split(os.sep)
    if len(parts) >= 3 and parts[-3] == "ansible_collections":
        candidates.append(os.sep.join(parts[:-3]))
    for path in candidates:
        if os.path.isdir(os.path.join(path, "ansible_collections", "liqo", "fabric")) and path not in sys.path:
            sys.path.append(path)
