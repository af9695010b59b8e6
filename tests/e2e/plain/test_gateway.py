"""Connect, traffic, rerun, bad keys and MTUs, secrets, disconnect: every gateway host module (gateway_dataplane,
tunnel_probe, peer_health) as an AnsiballZ module over the liqo.fabric.netns connection instead of the netns fork,
and every API module (cluster_identity, gateway_plan, gateway_publish, k8s_apply) through AnsiballZ instead of in
the worker: arguments, check mode, no_log and results parsed the ordinary way."""
from tests.e2e.test_gateway import *  # noqa: F401,F403 pylint: disable=wildcard-import,unused-wildcard-import
