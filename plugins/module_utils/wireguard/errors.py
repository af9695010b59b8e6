# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The errors every module of the WireGuard family raises."""
from __future__ import absolute_import, division, print_function


class WireGuardError(Exception):
    """Any failure; the message is safe to show (never contains a private or preshared key)."""


class ValidationError(WireGuardError, ValueError):
    """Bad input, detected before anything is changed. The message names the field(s)."""
