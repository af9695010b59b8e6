"""One reconcile with drift: every kind of fault the controller detects on the real fabric, repaired by cold
playbook runs whose host modules run as AnsiballZ modules."""
from tests.e2e.test_controller_drift import (  # noqa: F401 pylint: disable=unused-import
    fabric_lab, test_each_fault_is_detected_and_repaired_by_the_controller)
