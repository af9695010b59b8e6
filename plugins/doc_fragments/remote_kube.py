# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations


class ModuleDocFragment:  # pylint: disable=too-few-public-methods
    """The peer cluster of the modules that read both ends of a connection at once, beside liqo.fabric.kube
    (kube_client.REMOTE_KUBE_ARG_SPEC)."""

    DOCUMENTATION = r"""
options:
  remote_kubeconfig:
    description:
      - Kubeconfig of the peer cluster.
      - The C(K8S_AUTH_*) variables that apply beside a kubeconfig (O(kubeconfig)) apply to it too; the
        two-cluster playbooks refuse C(K8S_AUTH_API_KEY) and C(K8S_AUTH_CONTEXT) for that reason.
    type: path
    required: true
"""
