#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: overlay_dataplane_batch
short_description: Apply the overlay of many hosts from one task on the controller host
version_added: 0.1.0
description:
  - Runs M(liqo.fabric.overlay_dataplane) for every host of O(hosts) whose connection the controller host can act
    for, C(local) or C(liqo.fabric.netns) (a child forked from the task's worker joins the host's network
    namespace, as that connection's in-process path does). One task instead of one per host. At 100 nodes, Ansible's
    per-host task (a worker, the templating, the result) costs more than the module's own work.
  - Each host gets exactly what M(liqo.fabric.overlay_dataplane) would do and return there (the same argument
    checks, check mode, diff, manifest); at most O(parallel) children run at once.
  - A host that cannot be applied this way (another connection, C(become), C(liqo_fabric_in_process=false), the
    speed paths off) is not touched and is returned in RV(unbatched) with the reason, for a per-host task. So is a
    host whose apply failed here, so that a per-host run reports its error in Ansible's usual way.
  - Action plugin only; run it once (C(run_once)) on the controller host.
author: liqo.fabric developers (@liqo-fabric)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - liqo.fabric.attributes
attributes:
  diff_mode:
    details: One diff per applied host, its headers prefixed with the host's name.
options:
  hosts:
    description:
      - Inventory host name -> that host's plan, C(hosts[<node>]) of M(liqo.fabric.overlay_plan) (the O(liqo.fabric.overlay_dataplane#module:node)
        of M(liqo.fabric.overlay_dataplane)).
    type: dict
    required: true
  table:
    description: The routing table of the overlay.
    type: int
    default: 18952
  state:
    description: As O(liqo.fabric.overlay_dataplane#module:state).
    type: str
    default: present
    choices: [present, absent]
  parallel:
    description: How many hosts are applied at once (forked children).
    type: int
    default: 4
  enabled:
    description: V(false) applies nothing and returns every host in RV(unbatched) (the per-host path).
    type: bool
    default: true
notes:
  - Needs CAP_NET_ADMIN on the controller host (and CAP_SYS_ADMIN to join a network namespace).
seealso:
  - module: liqo.fabric.overlay_dataplane
  - module: liqo.fabric.overlay_plan
"""

EXAMPLES = r"""
- name: Plan the overlay of the cluster
  liqo.fabric.overlay_plan:
    kubeconfig: /etc/liqo/kubeconfig
  delegate_to: localhost
  run_once: true
  register: overlay

- name: Overlay of the nodes the controller host reaches, in one task (hosts named after their Nodes)
  liqo.fabric.overlay_dataplane_batch:
    hosts: "{{ dict(ansible_play_hosts | ansible.builtin.zip(ansible_play_hosts | map('ansible.builtin.extract', overlay.hosts))) }}"
  delegate_to: localhost
  run_once: true
  register: batch

- name: Overlay of the other nodes, one task each
  liqo.fabric.overlay_dataplane:
    node: "{{ overlay.hosts[inventory_hostname] }}"
  when: inventory_hostname in batch.unbatched
"""

RETURN = r"""
applied:
  description: Host -> the M(liqo.fabric.overlay_dataplane) result of each host applied here (all succeeded).
  returned: always
  type: dict
  sample: {"a-n2": {"changed": true, "writes": 3, "links": {}, "routes": {}, "rules": {}, "nat": {}, "table": 18952}}
unbatched:
  description: Host -> why it was not applied here (its connection, a failure of its apply); apply these per host.
  returned: always
  type: dict
  sample: {"a-n7": "connection ssh is not local or liqo.fabric.netns"}
"""
