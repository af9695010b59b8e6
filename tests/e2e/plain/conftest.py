"""The speed-paths-off contract: e2e flows rerun with LIQO_FABRIC_SPEED_PATHS=off (docs/speed-paths.md).

Each module here imports the tests (and the fixtures they need) of one e2e module and reruns them with the speed
paths switched off for the module's whole life: its lab, its ansible-playbook runs and its controllers all inherit
the switch. They are ordinary test files, so they share the e2e group's workers instead of a second pass of
their own.
"""
import contextlib
import os

import pytest

from ansible_collections.liqo.fabric.plugins.plugin_utils import speed


@contextlib.contextmanager
def switched_off():
    """LIQO_FABRIC_SPEED_PATHS=off in this process's environment (inherited by every process it starts), then
    back to what it was."""
    before = os.environ.get(speed.ENV)
    os.environ[speed.ENV] = "off"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(speed.ENV, None)
        else:
            os.environ[speed.ENV] = before


@pytest.fixture(scope="module", autouse=True)
def speed_paths_off():
    """Autouse and module-scoped: set up before the module's lab fixture, torn down after it."""
    with switched_off():
        yield
