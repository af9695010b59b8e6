"""Connect, traffic, rerun, secrets, disconnect: every gateway host module (gateway_dataplane, tunnel_probe,
peer_health) as an AnsiballZ module over the liqo.fabric.netns connection instead of the netns fork, and every API
module (cluster_identity, gateway_plan, gateway_publish, k8s_apply) through AnsiballZ instead of in the worker:
arguments, check mode, no_log and results parsed the ordinary way."""
from tests.e2e.test_gateway import *  # noqa: F401,F403 pylint: disable=wildcard-import,unused-wildcard-import

# Left to the e2e group: refusals of bad input are decided by the plan before any module touches a host, and the
# manual flow runs the same modules as connect one playbook at a time.
del test_a_wrong_public_key_on_the_server_is_refused_and_the_live_peer_kept  # noqa: F821
del test_mtu_mismatch_reports_error_with_reason  # noqa: F821
del test_single_cluster_manual_flow_reaches_the_same_end_state  # noqa: F821
