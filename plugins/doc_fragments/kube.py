# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations


class ModuleDocFragment:  # pylint: disable=too-few-public-methods
    """How the fabric's API-side modules reach a cluster (kube_client.KUBE_ARG_SPEC)."""

    DOCUMENTATION = r"""
options:
  kubeconfig:
    description:
      - Path of the cluster's kubeconfig (several joined by C(:) are merged as kubectl does).
      - Every credential kubectl accepts works, C(exec) plugins and C(auth-provider) users need the Python library
        C(kubernetes). An exec credential is kept until its C(expirationTimestamp) and fetched again after a 401.
        C(proxy-url) (http), C(tls-server-name) and C(insecure-skip-tls-verify) are honoured.
      - Without it, the first of C(K8S_AUTH_KUBECONFIG), C(K8S_AUTH_HOST) (with C(K8S_AUTH_API_KEY),
        C(K8S_AUTH_SSL_CA_CERT), C(K8S_AUTH_CERT_FILE), C(K8S_AUTH_KEY_FILE), C(K8S_AUTH_USERNAME),
        C(K8S_AUTH_PASSWORD)), the in-cluster service account, C(KUBECONFIG), C(~/.kube/config).
      - C(K8S_AUTH_VERIFY_SSL=false), C(K8S_AUTH_PROXY) and C(K8S_AUTH_API_KEY) apply beside a kubeconfig too, as in
        kubernetes.core.
      - A 401 from the apiserver fails with a message naming its URL, where the credentials came from (kubeconfig
        and context, or C(K8S_AUTH_HOST)) and their kind, never their value.
    type: path
  context:
    description: Kubeconfig context (default C(K8S_AUTH_CONTEXT), then the kubeconfig's current context).
    type: str
  assume:
    description:
      - Check mode only (refused otherwise). Objects read as if they were in the cluster, C(absent=true) ones as
        deleted; the collection's action plugins pass what earlier steps of the same check-mode run would have
        written, so a plan runs to the end. Not meant to be set by hand.
    type: list
    elements: dict
"""
