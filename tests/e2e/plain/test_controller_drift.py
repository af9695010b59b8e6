"""One reconcile with drift per kind of controller key, repaired by cold playbook runs whose host modules run as
AnsiballZ modules: a gateway key (wireguard-go killed: the gateway's interface, peers, health probe and nft table
built again) and the cluster's overlay key (a node's overlay link deleted)."""
from tests.e2e.test_controller_drift import (  # noqa: F401 pylint: disable=unused-import
    check_faults, fabric_lab)

# Left to the e2e group: the other seven kinds of fault. Each is repaired by a forced run of one of the same two
# playbooks (reconcile_gateway, reconcile_overlay), which run the same modules the two faults below make them run.
FAULTS = ["kill -9 the gateway's wireguard-go", "delete a node's overlay link"]


def test_a_gateway_fault_and_an_overlay_fault_are_repaired_by_cold_runs(fabric_lab):  # noqa: F811
    check_faults(fabric_lab, FAULTS)
