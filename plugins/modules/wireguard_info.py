#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: wireguard_info
short_description: Read a WireGuard interface back, with per-peer handshake age and traffic counters
version_added: 0.1.0
description:
  - Reads the configuration and the live state of a WireGuard interface in the network namespace the task
    runs in, from the kernel (generic netlink) or from wireguard-go (UAPI C(get=1)).
  - Meant for health checks, for example waiting until the tunnel has a recent handshake.
  - Never returns the private key or preshared keys, only the public key and whether a preshared key is set.
author: liqo.fabric developers (@liqo-fabric)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - liqo.fabric.attributes.no_diff
requirements:
  - pyroute2
options:
  name:
    description: Interface name.
    type: str
    required: true
  handshake_timeout:
    description:
      - A peer counts as connected (RV(interface.peers[].connected)) when its latest handshake is at most
        this many seconds old. WireGuard renews handshakes every two minutes on an active tunnel.
    type: int
    default: 180
seealso:
  - module: liqo.fabric.wireguard_interface
"""

EXAMPLES = r"""
- name: Wait until the tunnel has a fresh handshake
  liqo.fabric.wireguard_info:
    name: liqo-tunnel
  register: tunnel
  until: tunnel.interface.peers | selectattr('connected') | list | length > 0
  retries: 30
  delay: 1
"""

RETURN = r"""
exists:
  description: Whether the interface exists.
  returned: always
  type: bool
interface:
  description: State of the interface; C(state=absent) and nothing else when it does not exist.
  returned: always
  type: dict
  contains:
    name:
      description: Interface name.
      type: str
    state:
      description: V(present) or V(absent).
      type: str
    backend:
      description: V(kernel) or V(wireguard-go).
      type: str
    pid:
      description: PID of the wireguard-go process, null for the kernel backend.
      type: int
    public_key:
      description: Public key of the interface.
      type: str
    listen_port:
      description: UDP listen port.
      type: int
    fwmark:
      description: Firewall mark, 0 when none.
      type: int
    mtu:
      description: MTU.
      type: int
    up:
      description: Whether the link is up.
      type: bool
    addresses:
      description: Addresses with prefix length (IPv6 link-local excepted).
      type: list
      elements: str
    peers:
      description: Peers.
      type: list
      elements: dict
      contains:
        public_key:
          description: Public key of the peer.
          type: str
        endpoint:
          description: Current endpoint (V(ip:port)), null when unknown.
          type: str
        allowed_ips:
          description: CIDRs routed to this peer.
          type: list
          elements: str
        persistent_keepalive:
          description: Keepalive interval in seconds, 0 when off.
          type: int
        preshared_key_set:
          description: Whether a preshared key is configured.
          type: bool
        latest_handshake:
          description: Unix time of the latest handshake, null if none.
          type: int
        latest_handshake_age:
          description: Seconds since the latest handshake, null if none.
          type: float
        connected:
          description: Whether latest_handshake_age is at most O(handshake_timeout).
          type: bool
        rx_bytes:
          description: Bytes received from the peer.
          type: int
        tx_bytes:
          description: Bytes sent to the peer.
          type: int
  sample:
    name: liqo-tunnel
    state: present
    backend: wireguard-go
    pid: 4242
    public_key: gPcH5ew9HYctno8aXsSTgQbIXT6xLC4fWiFgFwRVxho=
    listen_port: 51820
    fwmark: 0
    mtu: 1340
    up: true
    addresses: [10.80.0.1/30]
    peers:
      - public_key: 3z1XuIcwYOspm06G0IsbgatzJSEmcrVCReig0/V8dl0=
        endpoint: 192.168.77.2:51820
        allowed_ips: [10.80.0.2/32]
        persistent_keepalive: 25
        preshared_key_set: false
        latest_handshake: 1795000000
        latest_handshake_age: 3.2
        connected: true
        rx_bytes: 1234
        tx_bytes: 5678
"""

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.liqo.fabric.plugins.module_utils.wireguard.errors import WireGuardError
from ansible_collections.liqo.fabric.plugins.module_utils.wireguard.interface import read_interface
from ansible_collections.liqo.fabric.plugins.module_utils.wireguard.link import HAS_PYROUTE2, PYROUTE2_IMPORT_ERROR


def main():
    module = AnsibleModule(
        argument_spec=dict(
            name=dict(type="str", required=True),
            handshake_timeout=dict(type="int", default=180),
        ),
        supports_check_mode=True,
    )
    if not HAS_PYROUTE2:
        module.fail_json(msg=missing_required_lib("pyroute2"), exception=PYROUTE2_IMPORT_ERROR)
    try:
        view = read_interface(module.params["name"])
    except WireGuardError as e:
        module.fail_json(msg=str(e))
    timeout = module.params["handshake_timeout"]
    for peer in view.get("peers", []):
        age = peer.get("latest_handshake_age")
        peer["connected"] = age is not None and age <= timeout
    module.exit_json(changed=False, exists=view["state"] == "present", interface=view)


if __name__ == "__main__":
    main()
