# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""IPv4 address management for remote clusters' pod and external CIDRs: the allocator (`allocator.Ipam`, pure)
and its ledger in the Kubernetes API with the reconcile of Configurations (`store.reconcile`).
"""
