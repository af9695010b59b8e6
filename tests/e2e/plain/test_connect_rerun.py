"""Connect with the overlay: one overlay_dataplane task per node instead of the batch, and the per-node digest
records that let a rerun skip unchanged nodes, which the ordinary path writes from other tasks."""
from tests.e2e.test_connect_rerun import *  # noqa: F401,F403 pylint: disable=wildcard-import,unused-wildcard-import

# about the batch itself, which the ordinary path never runs
del test_nodes_the_batch_cannot_apply_get_a_task_of_their_own_and_the_record_holds_both  # noqa: F821
