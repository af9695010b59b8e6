# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations


class ModuleDocFragment:  # pylint: disable=too-few-public-methods
    """What the modules support, for ansible.builtin.action_common_attributes (which describes each attribute):
    ``liqo.fabric.attributes`` check mode and diff, ``liqo.fabric.attributes.no_diff`` check mode only,
    ``liqo.fabric.attributes.no_check`` neither; all on POSIX. A module adds its own ``attributes:`` entries
    beside the fragment for what differs (``details``, another platform), and its entries win."""

    DOCUMENTATION = r"""
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
  platform:
    platforms: posix
"""

    NO_DIFF = r"""
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  platform:
    platforms: posix
"""

    NO_CHECK = r"""
attributes:
  check_mode:
    support: none
  diff_mode:
    support: none
  platform:
    platforms: posix
"""
