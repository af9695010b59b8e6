# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The speed paths: the collection's optional fast lane beside the ordinary way Ansible runs things.

Everything works without this package's paths: modules run as AnsiballZ modules, the controller starts a cold
ansible-playbook per run. The paths make the same runs faster by leaning on internals that are no public API
(ansible-core's, zipimport's), so each asks the one switch (switch.py, `enabled(kind, setting)`): those on
ansible-core internals run only on the ansible-core versions the suite runs, and LIQO_FABRIC_SPEED_PATHS=off or a
path's own switch turns it off:

- in_process.py: an API module's main() in the Ansible worker, a host module's in a child forked from it;
  netns_fork.py: that child, inside the host's network namespace (setns(2) through libc);
  preload.py: each such module imported once in ansible-playbook, inherited by every worker.
  Private names: ``ansible.module_utils._internal`` (``is_controller``, ``_errors``, ``_messages``,
  ``_traceback``), ``ansible.module_utils.basic._ANSIBLE_ARGS`` / ``_ANSIBLE_PROFILE`` / ``_PARSED_MODULE_ARGS``,
  ``ansible.module_utils.common.warnings._global_warnings`` / ``_global_deprecations``,
  ``ansible.executor.module_common._get_module_metadata`` and the ``_MODULE_METADATA`` setting; all but the last
  two imported in internals.py.
- warm.py (with its client warm_client.py): the controller's playbook runs forked from a zygote that imported
  Ansible once. Private names: ``ansible.utils.collection_loader._collection_finder._meta_yml_to_dict`` (replaced by
  a memoized parser), ``ansible.config.manager``'s ``_base_defs`` and ``_config_file``,
  ``ansible.utils.display._synchronize_textiowrapper``, ``DataLoader.load_from_file`` (wrapped).
- ansiballz_cache.py: AnsiballZ payload zips imported with one compile per file and the code objects cached on
  disk, installed into a venv as a .pth (`make setup`). Private names: ``zipimport.zipimporter._files`` and
  AnsiballZ's payload file naming.

The edge: nothing outside this package imports ansible-core's private internals, and the rest of the code reads as
the ordinary way with one `if` where a path may take over (plugin_utils/module_action.py, controller/runner.py).
warm.py, warm_client.py and ansiballz_cache.py (with switch.py) also run outside the collection, from a path or a
copy (their docstrings say how): they import nothing of it.
"""

from ansible_collections.liqo.fabric.plugins.plugin_utils.speed.switch import (
    ENV, IN_PROCESS_VAR, Verdict, enabled, off_reason, switched_off, unsupported_core, warning)

__all__ = ("ENV", "IN_PROCESS_VAR", "Verdict", "enabled", "off_reason", "switched_off", "unsupported_core", "warning")
