# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Restart a WireGuard peer's session now instead of waiting for WireGuard's own timers.

When the remote end restarts (a new wireguard-go, a new gateway pod) it has no session, and the server side has
no endpoint to reach us at. Our end keeps sending with the old session until WireGuard gives it up: a new
handshake only 15 s after the last packet it received (KEEPALIVE + REKEY_TIMEOUT), so a gateway that came back
at once is unreachable for ~12-15 s more. The health probe knows sooner (3 lost pings): it removes the peer and
adds it back with the same configuration in one request, which drops the session, so the next packet (the
probe's next ping) starts a handshake; WireGuard retries it every 5 s while packets wait.

A client (whose listen port nobody manages) also moves to a new random port (`rebind`): a new source port is a
new flow for every NAT between the peers, so a stale binding there cannot keep sending the new handshakes to the
old gateway pod. kube-proxy (before Kubernetes 1.21) leaves a NodePort's UDP conntrack entry pointing at the
Service's old endpoint for as long as packets keep it alive, which a client's keepalives and retries do.

Only peers with an endpoint are restarted: without one this end cannot start a handshake and must wait for the
peer's. The configuration written back is what was read, under the lock the modules take for their own
read-then-write (wireguard.UserspaceBackend.config_lock), so a concurrent reconcile neither sees a difference nor
gets its change undone.
"""

from __future__ import absolute_import, division, print_function

import time

from ansible_collections.liqo.fabric.plugins.module_utils.wireguard.interface import choose_backend
from ansible_collections.liqo.fabric.plugins.module_utils.wireguard.link import IPRoute, _require_pyroute2, read_link
from ansible_collections.liqo.fabric.plugins.module_utils.wireguard.model import DeviceChange, PeerChange
from ansible_collections.liqo.fabric.plugins.module_utils.wireguard.userspace import RUN_DIR
from ansible_collections.liqo.fabric.plugins.module_utils.wireguard.validation import validate_ifname


def _readd(pub, peer, endpoint, persistent_keepalive):
    """The peer `pub` removed and added back (a fresh session) with its key material and allowed IPs, and
    `endpoint` / `persistent_keepalive`; the removal first, both in one request."""
    return [PeerChange(pub, remove=True),
            PeerChange(pub, new=True, preshared_key=peer.preshared_key, endpoint=endpoint,
                       persistent_keepalive=persistent_keepalive, allowed_ips=list(peer.allowed_ips))]


def restart_changes(dev, public_key=None, rebind=False):
    """The DeviceChange restarting the sessions of `public_key` (every peer when None) that have an endpoint;
    empty when none qualifies. Removal and re-add of one key in one request: the removal is rendered first.
    `rebind`: the interface also moves to a new random listen port (listen_port 0)."""
    change = DeviceChange()
    for pub, peer in dev.peers.items():
        if (public_key is not None and pub != public_key) or not peer.endpoint:
            continue
        change.peers += _readd(pub, peer, peer.endpoint, peer.persistent_keepalive)
    if rebind and change.peers:
        change.listen_port = 0
    return change


def _apply(interface, run_dir, make_change):
    """Reads the interface's device, applies make_change(device) unless empty; the public keys changed ([] when
    the interface is gone or nothing qualifies). Under the interface's lock: a module replacing the peer (a key
    rotation) between our read and our write would otherwise see the old peer added back."""
    validate_ifname(interface, "interface")
    _require_pyroute2()
    with IPRoute() as ipr:
        link = read_link(ipr, interface)
    if link is None:
        return []
    backend = choose_backend(interface, link, run_dir=run_dir)
    with backend.config_lock():
        change = make_change(backend.read())
        if change.empty():
            return []
        backend.apply(change)
    return sorted({pc.public_key for pc in change.peers})


def restart_session(interface, public_key=None, run_dir=RUN_DIR, rebind=False):
    """Restarts the session of the interface's peer `public_key` (every peer with an endpoint when None), on a
    new random listen port with `rebind` (only for an interface whose port nobody manages: a client).
    Returns the public keys restarted; [] when the interface is gone or no peer has an endpoint."""
    return _apply(interface, run_dir, lambda dev: restart_changes(dev, public_key, rebind))


def activate_changes(dev, endpoint, persistent_keepalive):
    """The DeviceChange giving a warm standby's peer (the one peer without an endpoint) its endpoint and
    keepalive; empty when the device has no such peer (already active, or not built yet).

    The peer is removed and added back with them, on a new random listen port. A standby's peer is not fresh:
    every packet routed into its tunnel made WireGuard try a handshake, which fails without an endpoint but
    still stamps the peer's last attempt, and a handshake is not sent again within 5 s of one (REKEY_TIMEOUT):
    setting the endpoint and keepalive on that peer sends nothing for up to 5 s.
    A re-added peer has no attempt behind it, so turning its keepalive on starts the handshake at once; the new
    port is a new flow for every NAT on the way (as a session restart's `rebind`)."""
    change = DeviceChange()
    for pub, peer in dev.peers.items():
        if not peer.endpoint:
            change.peers += _readd(pub, peer, endpoint, persistent_keepalive)
    if change.peers:
        change.listen_port = 0
    return change


def activate(interface, endpoint, persistent_keepalive, run_dir=RUN_DIR):
    """A client standby taking over: its peer, added back fresh, gets `endpoint` and the keepalive now, which
    sends the first handshake at once (turning a keepalive on does), instead of after the active pod's first playbook run (which
    then finds the peer as it plans it). Returns the public keys changed; [] when there was nothing to do."""
    return _apply(interface, run_dir, lambda dev: activate_changes(dev, endpoint, persistent_keepalive))


# WireGuard's REJECT_AFTER_TIME: a session whose last handshake is older carries nothing any more
LIVE_SESSION = 180.0


def trial_changes(dev, public_key, endpoint, now, private_key=None):
    """The DeviceChange adding `public_key` as a trial beside the interface's one live peer (a handshake within
    LIVE_SESSION): no allowed IPs, so it carries nothing, and a 1 s keepalive, which sends its handshake at once,
    to `endpoint` (a client's configured one) or, for a server (None), to where the live peer's packets come from.
    Empty when there is no live session to protect, the key is already a peer, no endpoint is known, or the
    interface's own key is about to change too (`private_key`, 32 bytes, differs: the peer expects the new one,
    which the trial cannot use, and the change ends the live session anyway)."""
    change = DeviceChange()
    live = [p for p in dev.peers.values() if p.last_handshake and now - p.last_handshake < LIVE_SESSION]
    endpoint = endpoint or (live[0].endpoint if live else None)
    if len(dev.peers) != 1 or not live or public_key in dev.peers or not endpoint:
        return change
    if private_key is not None and dev.private_key != private_key:
        return change
    change.peers.append(PeerChange(public_key, new=True, endpoint=endpoint, persistent_keepalive=1, allowed_ips=[]))
    return change


def try_peer_key(interface, public_key, endpoint, wait, run_dir=RUN_DIR, now=time.time, sleep=time.sleep,
                 private_key=None):
    """Whether a new public key of the peer completes a handshake before it replaces the live peer (`endpoint`:
    a client's configured one; None for a server, which tries the live peer's).

    None: nothing to try (the interface is gone, its peer has no live session, the key is already there, or its
    own `private_key` changes in the same build).
    True: the trial peer completed a handshake within `wait` seconds; it stays (the build then gives it the
    allowed IPs and keeps its session, and removes the old peer). False: it did not; it is removed and the live
    peer is left as it was. A wrong key (the peer does not hold its private key) never completes one, so a
    PublicKey replaced by mistake does not take the tunnel down."""
    if not _apply(interface, run_dir, lambda dev: trial_changes(dev, public_key, endpoint, now(), private_key)):
        return None
    with IPRoute() as ipr:
        link = read_link(ipr, interface)
    backend = choose_backend(interface, link, run_dir=run_dir)
    deadline = now() + wait
    while True:
        peer = backend.read().peers.get(public_key)
        if peer is not None and peer.last_handshake:
            return True
        if now() >= deadline:
            break
        sleep(0.05)
    _apply(interface, run_dir, lambda dev: _remove_trial(dev, public_key))
    return False


def _remove_trial(dev, public_key):
    change = DeviceChange()
    if public_key in dev.peers and len(dev.peers) > 1:
        change.peers.append(PeerChange(public_key, remove=True))
    return change
