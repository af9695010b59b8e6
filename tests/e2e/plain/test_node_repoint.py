"""One in-pod mode flow: the engine in node mode (as the node agent runs in its pod) re-points its overlay link
and then runs its playbook cold, with no warm runner to fork from."""
from tests.e2e.test_node_repoint import *  # noqa: F401,F403 pylint: disable=wildcard-import,unused-wildcard-import
