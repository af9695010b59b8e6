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
