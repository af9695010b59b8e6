# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations


class ModuleDocFragment:  # pylint: disable=too-few-public-methods
    """How the fabric's API-side modules reach a cluster (kube_client.KUBE_ARG_SPEC)."""

    DOCUMENTATION = r"""
options:
  kubeconfig:
    description: Path of the cluster's kubeconfig. Without it, the in-cluster service account is used.
    type: path
  context:
    description: Kubeconfig context (default the current context).
    type: str
"""
