# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Checking a fabric end to end: the probes liqo.fabric.verify runs and their report (`probes`), the same through
Services (`services`), and the checks of liqo.fabric.diagnose, each naming the likely cause and the fix
(`diagnose`). Pure functions over API objects and results.
"""
