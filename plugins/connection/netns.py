# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
name: netns
short_description: Run tasks inside a Linux network namespace of the controller host
description:
  - Runs every command of a task inside a named network namespace (C(ip netns exec NAME ...)) on the
    machine that runs Ansible. Files are shared with that machine, so file transfer is a local copy.
  - The liqo.fabric lab uses it to apply the same roles to lab nodes (network namespaces) that run
    over SSH on real nodes.
  - Needs root (or CAP_SYS_ADMIN) and the C(ip) command from iproute2.
author: liqo.fabric developers (@liqo-fabric)
version_added: 0.1.0
extends_documentation_fragment:
  - connection_pipelining
options:
  netns:
    description:
      - Name of the network namespace (as listed by C(ip netns list)).
      - Defaults to the inventory host name (C(ansible_host)).
    type: str
    vars:
      - name: ansible_host
      - name: ansible_netns_name
    env:
      - name: ANSIBLE_NETNS_NAME
  ip_executable:
    description: Path of the C(ip) command.
    type: str
    default: ip
    vars:
      - name: ansible_netns_ip_executable
"""

EXAMPLES = r"""
# inventory
# all:
#   hosts:
#     lab-a-node1:
#       ansible_connection: liqo.fabric.netns
#       ansible_netns_name: lfab1a2b-a-n1
#       ansible_python_interpreter: /usr/bin/python3
"""

import os
import shlex

from ansible.errors import AnsibleConnectionFailure
from ansible.plugins.connection.local import Connection as LocalConnection

from ansible_collections.liqo.fabric.plugins.plugin_utils.netns_name import NETNS_RUN_DIR, valid_netns_name


class Connection(LocalConnection):
    """The local connection with every command wrapped in `ip netns exec <netns>`."""

    transport = "liqo.fabric.netns"
    has_pipelining = True

    def _connect(self):
        netns = self.netns_name()
        if not os.path.exists(os.path.join(NETNS_RUN_DIR, netns)):
            raise AnsibleConnectionFailure(f"network namespace {netns!r} does not exist (ip netns list)")
        return super()._connect()

    def netns_name(self):
        """The namespace this host's commands run in (liqo.fabric's in-process host modules join it too)."""
        name = self.get_option("netns") or self._play_context.remote_addr
        if not valid_netns_name(name):
            raise AnsibleConnectionFailure(f"netns: invalid network namespace name {name!r}")
        return name

    def exec_command(self, cmd, in_data=None, sudoable=True):
        prefix = " ".join(shlex.quote(p) for p in (self.get_option("ip_executable"), "netns", "exec", self.netns_name()))
        return super().exec_command(f"{prefix} {cmd}", in_data=in_data, sudoable=sudoable)
