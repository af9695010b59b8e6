#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: wireguard_interface
short_description: Manage a WireGuard interface and its peers (kernel or wireguard-go)
version_added: 0.1.0
description:
  - Creates, updates or removes a WireGuard interface with its private key, listen port, fwmark, MTU,
    addresses and peers, in the network namespace the task runs in.
  - Two backends, chosen automatically and reported in the result as RV(backend). C(kernel) when the
    kernel has the C(wireguard) module (configured over generic netlink with pyroute2), otherwise
    C(wireguard-go), started as C(wireguard-go -f NAME) in its own session and configured over its UAPI
    socket C(/var/run/wireguard/NAME.sock) in one exchange per run, whatever the number of peers.
  - An existing interface keeps the backend it was created with.
  - The state is read back and only the difference is written; a second identical run writes nothing.
  - C(/var/run/wireguard) is shared by all network namespaces of a host, so wireguard-go interface names
    must be unique per host. A name used by wireguard-go in another namespace is an error.
  - Private and preshared keys are never returned; the diff shows public keys only.
author: liqo.fabric developers (@liqo-fabric)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - liqo.fabric.attributes
requirements:
  - pyroute2
  - wireguard-go (when the kernel has no wireguard module)
options:
  name:
    description: Interface name (at most 15 characters).
    type: str
    required: true
  state:
    description:
      - V(present) creates or updates the interface.
      - V(absent) deletes the link and, for wireguard-go, stops its process (by the PID recorded when it was
        started) and removes its socket.
    type: str
    choices: [present, absent]
    default: present
  private_key:
    description:
      - Private key, base64 as printed by C(wg genkey).
      - Exactly one of O(private_key) and O(private_key_file) is required with O(state=present).
    type: str
  private_key_file:
    description:
      - File holding the base64 private key. It must not be readable by group or others.
    type: path
  listen_port:
    description: UDP port to listen on. When omitted the port is not managed (a random one is picked at creation).
    type: int
  fwmark:
    description: Firewall mark of outgoing tunnel packets; V(0) removes it. When omitted it is not managed.
    type: int
  mtu:
    description: MTU of the interface.
    type: int
    default: 1340
  addresses:
    description:
      - Exact list of addresses with prefix length (for example V(10.80.0.1/30)); others are removed
        (IPv6 link-local addresses excepted). When omitted addresses are not managed.
    type: list
    elements: str
  peers:
    description: Peers of the interface. Peers not listed are kept unless O(exclusive=true).
    type: list
    elements: dict
    default: []
    suboptions:
      public_key:
        description: Public key of the peer, base64.
        type: str
        required: true
      endpoint:
        description:
          - V(host:port) or V([ipv6]:port); a host name is resolved once, on the target.
          - When omitted the endpoint is not managed (a server learns it from the peer's packets).
        type: str
      allowed_ips:
        description: Exact list of CIDRs routed to this peer; an address with host bits counts as its network.
        type: list
        elements: str
        default: []
      persistent_keepalive:
        description: Keepalive interval in seconds; V(0) disables it.
        type: int
        default: 0
      preshared_key:
        description: Optional preshared key, base64. Omitting it removes a preshared key the peer had.
        type: str
  exclusive:
    description: Remove peers of the interface that are not listed in O(peers).
    type: bool
    default: false
  backend:
    description:
      - Backend for a new interface. V(auto) is V(kernel) when the kernel has the wireguard module,
        V(wireguard-go) otherwise.
    type: str
    choices: [auto, kernel, wireguard-go]
    default: auto
seealso:
  - module: liqo.fabric.wireguard_info
  - module: liqo.fabric.wireguard_keypair
"""

EXAMPLES = r"""
- name: Gateway tunnel towards the remote cluster
  liqo.fabric.wireguard_interface:
    name: liqo-tunnel
    private_key_file: /etc/liqo/wireguard/private.key
    listen_port: 51820
    addresses: [10.80.0.1/30]
    peers:
      - public_key: "{{ remote_public_key }}"
        endpoint: "{{ remote_gateway_ip }}:51820"
        allowed_ips: [10.80.0.2/32, 10.71.0.0/16]
        persistent_keepalive: 25
    exclusive: true

- name: Remove it (wireguard-go process and socket included)
  liqo.fabric.wireguard_interface:
    name: liqo-tunnel
    state: absent
"""

RETURN = r"""
backend:
  description: Backend serving the interface, V(kernel) or V(wireguard-go); null when absent.
  returned: always
  type: str
  sample: wireguard-go
created:
  description: Whether the interface was (or, in check mode, would be) created by this run.
  returned: when state is present
  type: bool
pid:
  description: PID of the wireguard-go process serving the interface.
  returned: when the backend is wireguard-go
  type: int
  sample: 4242
writes:
  description: Number of write exchanges with WireGuard and netlink in this run (0 when nothing changed).
  returned: when state is present
  type: int
  sample: 0
interface:
  description: The interface as configured (public key only, no secrets).
  returned: when state is present
  type: dict
  contains:
    name:
      description: Interface name.
      type: str
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
    addresses:
      description: Addresses with prefix length.
      type: list
      elements: str
    peers:
      description: Peers with public_key, endpoint, allowed_ips, persistent_keepalive and preshared_key_set.
      type: list
      elements: dict
  sample:
    name: liqo-tunnel
    state: present
    public_key: gPcH5ew9HYctno8aXsSTgQbIXT6xLC4fWiFgFwRVxho=
    listen_port: 51820
    fwmark: 0
    mtu: 1340
    addresses: [10.80.0.1/30]
    up: true
    peers:
      - public_key: 3z1XuIcwYOspm06G0IsbgatzJSEmcrVCReig0/V8dl0=
        endpoint: 192.168.77.2:51820
        allowed_ips: [10.80.0.2/32]
        persistent_keepalive: 25
        preshared_key_set: false
"""

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.liqo.fabric.plugins.module_utils.wireguard.errors import WireGuardError
from ansible_collections.liqo.fabric.plugins.module_utils.wireguard.interface import ensure_absent, ensure_present
from ansible_collections.liqo.fabric.plugins.module_utils.wireguard.link import HAS_PYROUTE2, PYROUTE2_IMPORT_ERROR
from ansible_collections.liqo.fabric.plugins.module_utils.wireguard.model import DEFAULT_MTU
from ansible_collections.liqo.fabric.plugins.module_utils.wireguard.validation import validate_interface


def main():
    module = AnsibleModule(
        argument_spec=dict(
            name=dict(type="str", required=True),
            state=dict(type="str", choices=["present", "absent"], default="present"),
            private_key=dict(type="str", no_log=True),
            private_key_file=dict(type="path", no_log=False),
            listen_port=dict(type="int"),
            fwmark=dict(type="int"),
            mtu=dict(type="int", default=DEFAULT_MTU),
            addresses=dict(type="list", elements="str"),
            peers=dict(type="list", elements="dict", default=[], options=dict(
                public_key=dict(type="str", required=True, no_log=False),
                endpoint=dict(type="str"),
                allowed_ips=dict(type="list", elements="str", default=[]),
                persistent_keepalive=dict(type="int", default=0),
                preshared_key=dict(type="str", no_log=True),
            )),
            exclusive=dict(type="bool", default=False),
            backend=dict(type="str", choices=["auto", "kernel", "wireguard-go"], default="auto"),
        ),
        mutually_exclusive=[("private_key", "private_key_file")],
        required_if=[("state", "present", ("private_key", "private_key_file"), True)],
        supports_check_mode=True,
    )
    if not HAS_PYROUTE2:
        module.fail_json(msg=missing_required_lib("pyroute2"), exception=PYROUTE2_IMPORT_ERROR)
    p = module.params
    try:
        if p["state"] == "absent":
            result = ensure_absent(p["name"], check_mode=module.check_mode)
        else:
            spec = validate_interface(p)
            result = ensure_present(spec, check_mode=module.check_mode, backend=p["backend"])
    except WireGuardError as e:
        module.fail_json(msg=str(e))
    if not module._diff:
        result.pop("diff", None)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
