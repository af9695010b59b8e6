"""Connect with the overlay: one overlay_dataplane task per node instead of the batch, and the per-node digest
records that let a rerun skip unchanged nodes, which the ordinary path writes from other tasks."""
from tests.e2e.test_connect_rerun import *  # noqa: F401,F403 pylint: disable=wildcard-import,unused-wildcard-import

# Left to the e2e group: the batch itself, which the ordinary path never runs; the liqoctl lines, which the
# callback prints whatever path ran the tasks; and the reruns after a new pod, a drifted node or a disconnect, which
# read and write the same per-node records the first two tests check.
del test_nodes_the_batch_cannot_apply_get_a_task_of_their_own_and_the_record_holds_both  # noqa: F821
del test_a_rerun_still_says_the_overlay_is_set_up  # noqa: F821
del test_a_new_pod_applies_on_the_gateway_host_only  # noqa: F821
del test_a_drifted_node_is_repaired_by_reconcile_overlay_or_a_full_connect  # noqa: F821
del test_disconnect_records_the_empty_overlay_and_connect_applies_every_node_again  # noqa: F821
