"""gateway_dataplane's local_rule_priority is checked against the gateways' rules before anything is written."""
import re

import pytest

from ansible_collections.liqo.fabric.plugins.module_utils.gateway import dataplane as gd


@pytest.mark.parametrize("value,message", [
    (1801, "local_rule_priority: 1801 must come after the gateways' rules (the last is 1801)"),
    (0, "local_rule_priority: 0 must come after the gateways' rules"),
    ("high", "local_rule_priority: 'high' is not an integer"),
    (99999, "local_rule_priority: 99999 is out of range"),
])
def test_a_local_rule_priority_before_the_tunnels_rules_is_refused(value, message):
    with pytest.raises(gd.DataplaneError, match=re.escape(message)):
        gd._local_rule_priority([{"rule_priority": 1800}], value)   # pylint: disable=protected-access


def test_the_first_priority_after_the_tunnels_rules_is_taken():
    assert gd._local_rule_priority([{"rule_priority": 1800}, {"rule_priority": 1795}], "1802") == 1802  # pylint: disable=protected-access
