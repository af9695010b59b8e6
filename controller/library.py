# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The collection's library (plugins/module_utils, shared with the playbooks) as the controller imports it.

This is the only controller module that imports `ansible_collections.liqo.fabric`: it makes the collection
importable once (from a checkout through build/collections, the link `make collection` creates; installed,
through the ansible_collections directory the controller lives in), then binds the modules the controller uses
as `<family>_<file>`: `kube_client` is plugins/module_utils/kube/client.py. Controller files import those,
`from controller.library import kube_client`, and call their public names only.
"""

import os
import sys


def _collection_importable() -> None:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    candidates = [os.path.join(root, "build", "collections")]
    parts = root.split(os.sep)
    if len(parts) >= 3 and parts[-3] == "ansible_collections":
        candidates.append(os.sep.join(parts[:-3]))
    for path in candidates:
        if os.path.isdir(os.path.join(path, "ansible_collections", "liqo", "fabric")) and path not in sys.path:
            sys.path.append(path)


_collection_importable()

# pylint: disable=wrong-import-position
from ansible_collections.liqo.fabric.plugins.module_utils.api import conversion as api_conversion  # noqa: E402
from ansible_collections.liqo.fabric.plugins.module_utils.api import storage_migration as api_storage_migration  # noqa: E402
from ansible_collections.liqo.fabric.plugins.module_utils.gateway import key_rotation as gateway_key_rotation  # noqa: E402
from ansible_collections.liqo.fabric.plugins.module_utils.gateway import path_mtu as gateway_path_mtu  # noqa: E402
from ansible_collections.liqo.fabric.plugins.module_utils.gateway import plan as gateway_plan  # noqa: E402
from ansible_collections.liqo.fabric.plugins.module_utils.health import daemon as health_daemon  # noqa: E402
from ansible_collections.liqo.fabric.plugins.module_utils.health import metrics as health_metrics  # noqa: E402
from ansible_collections.liqo.fabric.plugins.module_utils.health import prober as health_prober  # noqa: E402
from ansible_collections.liqo.fabric.plugins.module_utils.health import status as health_status  # noqa: E402
from ansible_collections.liqo.fabric.plugins.module_utils.kube import client as kube_client  # noqa: E402
from ansible_collections.liqo.fabric.plugins.module_utils.kube import rest as kube_rest  # noqa: E402
from ansible_collections.liqo.fabric.plugins.module_utils.nft import client as nft_client  # noqa: E402
from ansible_collections.liqo.fabric.plugins.module_utils.overlay import dataplane as overlay_dataplane  # noqa: E402
from ansible_collections.liqo.fabric.plugins.module_utils.overlay import incluster as overlay_incluster  # noqa: E402
from ansible_collections.liqo.fabric.plugins.module_utils.route import netlink as route_netlink  # noqa: E402
from ansible_collections.liqo.fabric.plugins.module_utils.route import policy as route_policy  # noqa: E402
from ansible_collections.liqo.fabric.plugins.module_utils.wireguard import errors as wireguard_errors  # noqa: E402
from ansible_collections.liqo.fabric.plugins.module_utils.wireguard import kernel as wireguard_kernel  # noqa: E402
from ansible_collections.liqo.fabric.plugins.module_utils.wireguard import session as wireguard_session  # noqa: E402
from ansible_collections.liqo.fabric.plugins.module_utils.wireguard import userspace as wireguard_userspace  # noqa: E402
from ansible_collections.liqo.fabric.plugins.module_utils.wireguard import validation as wireguard_validation  # noqa: E402
# not module_utils, but the same collection: the speed paths (plugins/plugin_utils/speed/): the switch, the warm runner
from ansible_collections.liqo.fabric.plugins.plugin_utils import speed  # noqa: E402
from ansible_collections.liqo.fabric.plugins.plugin_utils.speed import warm as speed_warm  # noqa: E402
from ansible_collections.liqo.fabric.plugins.plugin_utils.speed import warm_client as speed_warm_client  # noqa: E402

__all__ = [
    "api_conversion",
    "api_storage_migration",
    "gateway_key_rotation",
    "gateway_path_mtu",
    "gateway_plan",
    "health_daemon",
    "health_metrics",
    "health_prober",
    "health_status",
    "kube_client",
    "kube_rest",
    "nft_client",
    "overlay_dataplane",
    "overlay_incluster",
    "route_netlink",
    "route_policy",
    "wireguard_errors",
    "wireguard_kernel",
    "wireguard_session",
    "wireguard_userspace",
    "wireguard_validation",
    "speed",
    "speed_warm",
    "speed_warm_client",
]
