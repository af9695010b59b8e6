# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The playbooks' clusters as the modules reach them (module_utils/kube/config.locate): `-e kubeconfig`, else the
environment (K8S_AUTH_*, KUBECONFIG, ~/.kube/config, the in-cluster service account); the remote cluster of a
two-cluster playbook only from `-e remote_kubeconfig`. Documented in kubeconfig.yml and kubeconfig_errors.yml."""
from __future__ import annotations

import os

from ansible.errors import AnsibleFilterError

from ansible_collections.liqo.fabric.plugins.module_utils.kube import config as kube_config

OPTION = "-e kubeconfig=PATH"
# Beside any kubeconfig the modules apply these to the cluster (as kubernetes.core does): a token and a context
# name are one cluster's, so with a remote cluster they would be sent to it too
ONE_CLUSTER_VARIABLES = ("K8S_AUTH_API_KEY", "K8S_AUTH_CONTEXT")


def kubeconfig(value):
    try:
        return kube_config.locate(value or None, OPTION)[0]
    except kube_config.KubeConfigError as exc:
        raise AnsibleFilterError(str(exc))


def _not_files(path):
    return [p for p in path.split(os.pathsep) if not os.path.isfile(os.path.expanduser(p))]


def kubeconfig_errors(value, remote_kubeconfig=None, remote="none", command="this playbook"):
    """What is wrong with a playbook's clusters, one message per input, in the order of the inputs."""
    if remote not in ("none", "optional", "required"):
        raise AnsibleFilterError("kubeconfig_errors: remote is none, optional or required, not %r" % (remote,))
    two = remote != "none"
    errors = []
    try:
        local, source = kube_config.locate(value or None, OPTION)
    except kube_config.KubeConfigError:
        local = source = None
        errors.append("kubeconfig: missing (%s%s), and the environment gives no cluster (no K8S_AUTH_KUBECONFIG, "
                      "K8S_AUTH_HOST or KUBECONFIG, no %s, not a pod with a service account)"
                      % (OPTION, ", the local cluster" if two else "", kube_config.DEFAULT_KUBECONFIG))
    if local and _not_files(local):
        errors.append("kubeconfig: %s%s is not a file" % (local, "" if source == OPTION else " (%s)" % source))
    if not two:
        return errors
    if not remote_kubeconfig:
        if remote == "required":
            errors.append("remote_kubeconfig: missing (-e remote_kubeconfig=PATH, the remote cluster: the K8S_AUTH_* "
                          "variables, KUBECONFIG and %s give one cluster, the local one)" % kube_config.DEFAULT_KUBECONFIG)
        return errors
    if _not_files(remote_kubeconfig):
        errors.append("remote_kubeconfig: %s is not a file" % remote_kubeconfig)
    if local and local == remote_kubeconfig:
        errors.append("kubeconfig and remote_kubeconfig: both are %s, %s needs two different clusters" % (local, command))
    leaking = [name for name in ONE_CLUSTER_VARIABLES if os.environ.get(name)]
    if leaking:
        errors.append("%s: set, and the modules would apply %s to remote_kubeconfig's cluster too (the K8S_AUTH_* "
                      "variables stand for one cluster): give the local cluster's credentials and context in a "
                      "kubeconfig (%s or K8S_AUTH_KUBECONFIG) and unset %s"
                      % (", ".join(leaking), "it" if len(leaking) == 1 else "them", OPTION,
                         "it" if len(leaking) == 1 else "them"))
    return errors


class FilterModule:  # pylint: disable=too-few-public-methods
    def filters(self):
        return {"kubeconfig": kubeconfig, "kubeconfig_errors": kubeconfig_errors}
