# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""verify_table and benchmark_table: the reports of liqo.fabric.verify and liqo.fabric.benchmark (documented in
verify_table.yml and benchmark_table.yml; module_utils/verify/probes.py)."""
from __future__ import annotations

from ansible_collections.liqo.fabric.plugins.module_utils.verify import probes as verify


class FilterModule:  # pylint: disable=too-few-public-methods
    def filters(self):
        return {"verify_table": verify.table, "benchmark_table": verify.benchmark_table}
