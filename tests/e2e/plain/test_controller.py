"""The controller's reconcile with a cold ansible-playbook per run (no warm runner, no zygote): converges, counts
its runs as cold, and skips unchanged resyncs."""
from tests.e2e.test_controller import (  # noqa: F401 pylint: disable=unused-import
    controllers, kube, lab1, test_gitops_apply_converges_and_resync_skips)
