"""Key rotation under a 50 ms ping: the probes' hold (peer_health_hold) and each gateway's key switch as AnsiballZ
modules, whose slower runs widen the window in which a WireGuard session restart could drop packets."""
from tests.e2e.test_key_rotation import *  # noqa: F401,F403 pylint: disable=wildcard-import,unused-wildcard-import
