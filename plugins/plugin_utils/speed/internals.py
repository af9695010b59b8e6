# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The private ansible-core internals a module run inside the Ansible worker needs, imported in this one place.

`MISSING` says why they cannot be used on this ansible-core (an import error, no module argument hand-over through
``ansible.module_utils.basic._ANSIBLE_ARGS``), or is None; the switch (switch.py) then keeps the in-process, netns
fork and preload paths off.
"""

from __future__ import annotations

from ansible.module_utils import basic

MODULE_ARGS = ("_ANSIBLE_ARGS", "_ANSIBLE_PROFILE", "_PARSED_MODULE_ARGS")  # what AnsiballZ hands a module over in

try:  # private ansible-core internals (2.19): another ansible-core may not have them; then the modules run normally
    from ansible.module_utils import _internal as mu_internal
    from ansible.module_utils._internal import _errors, _messages, _traceback
    from ansible.module_utils.common import warnings as mu_warnings
    from ansible.module_utils.common.json import Direction, get_module_encoder
    from ansible.vars.clean import remove_internal_keys  # gone in ansible-core 2.21
    MISSING = None
except ImportError as _exc:  # pragma: no cover - only on an ansible-core the suite does not run
    MISSING = "ansible-core internals are missing (%s)" % _exc

if MISSING is None and not all(hasattr(basic, name) for name in MODULE_ARGS):  # pragma: no cover - the same
    MISSING = "this ansible-core does not take module arguments through ansible.module_utils.basic._ANSIBLE_ARGS"

__all__ = ("MISSING", "MODULE_ARGS", "basic", "mu_internal", "_errors", "_messages", "_traceback", "mu_warnings",
           "Direction", "get_module_encoder", "remove_internal_keys")
