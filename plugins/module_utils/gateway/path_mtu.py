# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The path MTU between a gateway and its peer, found by probing through the tunnel (``spec.mtu: auto``).

What is sent: don't-fragment ICMP echo requests through the WireGuard interface to the peer's transit address.
WireGuard carries each one in a UDP datagram of the tunnel's own port, so the probe crosses exactly the path, the
firewalls and the NAT the tunnel's traffic crosses. An inner packet of ``s`` bytes leaves as an outer datagram of
``pad(s) + 60`` bytes over IPv4 (``+ 80`` over IPv6): 20/40 (IP) + 8 (UDP) + 16 (WireGuard header) + 16
(authentication tag), the inner packet padded to a multiple of 16 but never beyond the interface MTU. The probed
inner sizes and the tunnel MTUs chosen are multiples of 16, so that the padding adds nothing: the outer size of
every probe is exact, and a tunnel MTU found this way never sends a datagram larger than the path.

A reply means the outer size crosses the path; no reply within the timeout (a black hole: the path drops the
datagram and the ICMP "fragmentation needed" that would say so) or a "fragmentation needed" (seen as the route
exception the kernel records for the peer's endpoint) means it does not. A binary search runs between 1280 and the
MTU of the local interface towards the peer's endpoint.

Sizes above the interface's current MTU need the interface raised for the probe: it is raised once to the largest
size tried, for the probe alone, and put back (or set to the size found) right after. Flows already running are
not touched: their segments are bounded by the MSS negotiated under the old MTU and the path MTU their senders
learnt; a TCP flow opened during the probe may be clamped to the raised MTU, and its first larger segment then gets
a "fragmentation needed" from the gateway host itself (the interface is back at the path's size), which the
sender honours: it loses one round trip, never the flow.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import ipaddress
import os
import re
import subprocess
import time

from ansible_collections.liqo.fabric.plugins.module_utils.health.tunnel_probe import ping
from ansible_collections.liqo.fabric.plugins.module_utils.wireguard.interface import read_interface

MIN_PATH = 1280                 # IPv6's minimum link MTU: the floor of the search
OVERHEAD = {4: 60, 6: 80}       # outer IP + UDP + WireGuard header + tag, by the underlay's address family
PAD = 16                        # WireGuard pads the inner packet to a multiple of this
ICMP_HEADERS = 28               # IPv4 + ICMP echo headers of the probe (inner packets are IPv4)
PROBE_TIMEOUT = 0.3             # seconds without a reply that make a size "does not cross"
PROBE_COUNT = 2                 # echo requests per size: one lost on a healthy path does not shrink the MTU
SOURCES = ("probed", "configured", "default")
LOCK_DIR = "/run/lock" if os.path.isdir("/run/lock") else "/tmp"
LOCK_WAIT = 15                  # seconds a probe waits for another one's lock (a probe takes about 1 s)
_ROUTE_MTU = re.compile(r"\bmtu (\d+)")
_ROUTE_DEV = re.compile(r"\bdev (\S+)")


class PathMtuError(RuntimeError):
    """The probe could not run (no endpoint, no route to it); the message says why."""


def overhead(endpoint_ip):
    """WireGuard's overhead over the underlay of `endpoint_ip`: 60 bytes over IPv4, 80 over IPv6."""
    return OVERHEAD[ipaddress.ip_address(endpoint_ip).version]


def floor_pad(size):
    return size - size % PAD


def tunnel_mtu(path_mtu, endpoint_ip):
    """The tunnel MTU for a path MTU: the largest multiple of 16 whose outer datagram fits the path."""
    return floor_pad(path_mtu - overhead(endpoint_ip))


def outer_size(inner, interface_mtu, endpoint_ip):
    """The outer datagram of an inner packet of `inner` bytes on an interface of `interface_mtu`: WireGuard pads to
    a multiple of 16 bytes, never beyond the interface MTU."""
    padded = min(inner + (-inner) % PAD, interface_mtu)
    return padded + overhead(endpoint_ip)


def candidates(local_mtu, endpoint_ip):
    """The tunnel MTUs the search tries, ascending: multiples of 16 from the one of a 1280-byte path to the one of
    the local interface's MTU."""
    low, high = tunnel_mtu(MIN_PATH, endpoint_ip), tunnel_mtu(local_mtu, endpoint_ip)
    return list(range(low, high + 1, PAD)) if high >= low else []


def search(sizes, crosses):
    """The largest of the ascending `sizes` for which crosses(size) is true, assuming that it is true up to some
    size and false beyond (a binary search); None when even the smallest does not cross. Returns (size or None,
    [(size, crossed)] in the order tried)."""
    tried = []
    low, high, best = 0, len(sizes) - 1, None
    while low <= high:
        mid = (low + high) // 2
        ok = bool(crosses(sizes[mid]))
        tried.append((sizes[mid], ok))
        if ok:
            best, low = sizes[mid], mid + 1
        else:
            high = mid - 1
    return best, tried


def route_to(endpoint_ip, run=subprocess.run):
    """(device, cached path MTU or None) of the route towards the peer's endpoint: the MTU is the exception the
    kernel records when an ICMP "fragmentation needed" arrives from the path."""
    proc = run(["ip", "route", "get", endpoint_ip], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise PathMtuError("no route to the peer's endpoint %s: %s" % (endpoint_ip, proc.stderr.strip()))
    dev = _ROUTE_DEV.search(proc.stdout)
    mtu = _ROUTE_MTU.search(proc.stdout)
    return (dev.group(1) if dev else None), (int(mtu.group(1)) if mtu else None)


def link_mtu(ifname):
    with open("/sys/class/net/%s/mtu" % ifname, encoding="ascii") as f:
        return int(f.read())


def set_link_mtu(ifname, mtu, run=subprocess.run):
    proc = run(["ip", "link", "set", "dev", ifname, "mtu", str(int(mtu))], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise PathMtuError("ip link set dev %s mtu %s: %s" % (ifname, mtu, proc.stderr.strip()))


@contextlib.contextmanager
def exclusive(interface, lock_dir=None):
    """One probe of an interface's path at a time on the machine: a gateway's build (gateway_dataplane) and its live
    watch run in different processes, and a probe that read the interface's MTU while the other had raised it would
    put it back at the raised size. An flock on a file named after the interface, released with the process."""
    path = os.path.join(lock_dir or LOCK_DIR, "liqo-fabric-path-mtu-%s.lock" % interface)
    try:
        f = open(path, "a", encoding="ascii")  # pylint: disable=consider-using-with  # closed below
    except OSError:   # a read-only file system: the probe runs unlocked rather than not at all
        yield
        return
    try:
        deadline = time.monotonic() + LOCK_WAIT
        while True:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise PathMtuError("another probe of %s's path has held %s for %d s" % (interface, path, LOCK_WAIT))
                time.sleep(0.05)
        yield
    finally:
        f.close()   # releases the lock


@dataclasses.dataclass
class Probe:
    """One probe of a tunnel's path: what it found and what it tried."""
    tunnel_mtu: int | None        # the largest tunnel MTU whose datagrams cross (None: not even 1280 bytes)
    path_mtu: int | None          # its outer size
    local_mtu: int                # the local interface's MTU (the search's ceiling)
    device: str | None
    endpoint: str
    icmp_mtu: int | None          # the path MTU an ICMP "fragmentation needed" reported, if any
    tried: list
    seconds: float
    reason: str = "build"         # why it ran: build, first, periodic, frag-needed, endpoint, reconnected

    def to_result(self):
        return dataclasses.asdict(self)


def probe(interface, address, endpoint_ip, current_mtu, send=None, run=subprocess.run, settle=0.05):
    """Finds the tunnel MTU of `interface` towards its peer (transit `address`, underlay `endpoint_ip`), leaving the
    interface at `current_mtu`. `send(inner_size) -> bool` replaces the pings (tests)."""
    t0 = time.monotonic()
    device, icmp_mtu = route_to(endpoint_ip, run)
    if device is None:
        raise PathMtuError("the route to the peer's endpoint %s names no device" % endpoint_ip)
    local = link_mtu(device)
    sizes = candidates(local, endpoint_ip)
    if not sizes:
        raise PathMtuError("the local interface %s towards %s has an MTU of %d, below the %d bytes the search starts at"
                           % (device, endpoint_ip, local, MIN_PATH))
    top = sizes[-1]
    send = send or (lambda inner: ping(interface, address, inner - ICMP_HEADERS, count=PROBE_COUNT,
                                       timeout=PROBE_TIMEOUT)[0])

    def crosses(inner):
        if not send(inner):
            return False
        # a reply may have come fragmented: the kernel split the datagram after a "fragmentation needed"
        cached = route_to(endpoint_ip, run)[1]
        return cached is None or inner + overhead(endpoint_ip) <= cached

    raised = top > current_mtu
    if raised:
        set_link_mtu(interface, top, run)
        time.sleep(settle)  # wireguard-go learns the new MTU from a netlink event: its padding follows it
    try:
        found, tried = search(sizes, crosses)
    finally:
        if raised:
            set_link_mtu(interface, current_mtu, run)
    icmp_mtu = route_to(endpoint_ip, run)[1]
    return Probe(found, found + overhead(endpoint_ip) if found else None, local, device, endpoint_ip, icmp_mtu, tried,
                 round(time.monotonic() - t0, 3))


class Hysteresis:
    """When a probed tunnel MTU becomes the tunnel's: a smaller one at once (packets are being lost), a larger one
    only after `confirm` consecutive probes found at least that size (a path that is stable), and then the smallest
    of those probes. Changes counts the changes made, by direction."""

    def __init__(self, current, confirm=3):
        self.current = current
        self.confirm = confirm
        self._larger = []
        self.changes = {"lower": 0, "raise": 0}

    def follow(self, current):
        """The interface's MTU as it is now, when something else set it (a rebuild of the gateway, whose own probe or
        plan decided): the base of the next changes, larger sizes seen before it forgotten."""
        if current != self.current:
            self.current, self._larger = current, []

    def observe(self, found):
        """The MTU to set after a probe that found `found` (None: nothing crossed), or None to keep the current."""
        if found is None:
            self._larger = []
            return None
        if found < self.current:
            self._larger = []
            self.current = found
            self.changes["lower"] += 1
            return found
        if found == self.current:
            self._larger = []
            return None
        self._larger.append(found)
        if len(self._larger) < self.confirm:
            return None
        self.current = min(self._larger)
        self._larger = []
        self.changes["raise"] += 1
        return self.current


def floor_mtu(endpoint_ip="0.0.0.0"):
    """The tunnel MTU of the smallest path the search assumes (1280 bytes): what a probing gateway checks its tunnel
    with before it knows the path."""
    return tunnel_mtu(MIN_PATH, endpoint_ip)


def peer_endpoint_ip(interface, public_key=None):
    """The underlay address of the interface's peer (a client's configured endpoint, or where a server last heard
    from its client), or None before the first handshake."""
    view = read_interface(interface)
    for peer in view.get("peers") or []:
        if public_key and peer.get("public_key") != public_key:
            continue
        endpoint = peer.get("endpoint")
        if endpoint:
            host = endpoint.rsplit(":", 1)[0]
            return host.strip("[]")
    return None


def mtu_status(found, endpoint_ip, cap=None, current=None):
    """status.mtu after a probe: the tunnel MTU to run (the probe's, capped by the peer's announced one; the current
    one when nothing crossed), its source and what the probe found."""
    if found is None:
        return {"value": current, "source": "probed" if current else "default"}
    value = min(found, cap) if cap else found
    return {"value": value, "source": "probed", "probed": found, "pathMTU": found + overhead(endpoint_ip)}


def probe_and_set(interface, address, public_key=None, cap=None, run=subprocess.run, grow=True):
    """One probe of the path of a built tunnel, the interface then set to what it found (capped by the peer's
    announced MTU `cap`). grow=False: set only if smaller (a tunnel whose MTU a live watch already set: a larger size
    becomes the tunnel's through the watch's hysteresis, not at a rebuild). Returns {mtu_status, probe, changed} or
    {error} when it could not probe (no handshake yet: no endpoint; no route to it)."""
    endpoint = peer_endpoint_ip(interface, public_key)
    if not endpoint:
        return {"error": "the peer of %s has no endpoint yet (no handshake): nothing to probe" % interface}
    try:
        with exclusive(interface):
            current = link_mtu(interface)
            result = probe(interface, address, endpoint, current, run=run)
            status = mtu_status(result.tunnel_mtu, endpoint, cap, current)
            if not grow and status["value"] > current:
                status["value"] = current
            changed = status["value"] != current
            if changed:
                set_link_mtu(interface, status["value"], run)
    except (PathMtuError, OSError) as exc:
        return {"error": str(exc)}
    return {"mtu_status": status, "probe": result.to_result(), "changed": changed}


PERIOD = 10.0      # seconds between two probes of a path that gives no sign of change
CONFIRM = 3        # probes in a row that must find a larger size before the tunnel grows


class Watch:
    """The live side of auto: re-probes a built tunnel's path periodically and at once when it may have changed (an
    ICMP "fragmentation needed" recorded for the peer's endpoint below the tunnel's size, a new peer endpoint, the
    peer answering again after a failure: kick()), and sets the interface through a Hysteresis: lower at once, larger
    only once confirmed. The first probe sets what it finds either way (the tunnel was built before its path was
    known). step() returns the new status.mtu when the tunnel's MTU changed, else None."""

    def __init__(self, interface, address, public_key=None, cap=None, period=PERIOD, confirm=CONFIRM,
                 run=subprocess.run, send=None, clock=time.monotonic):
        self.interface, self.address, self.public_key, self.cap = interface, address, public_key, cap
        self.period, self.confirm, self.run, self.send, self.clock = period, confirm, run, send, clock
        self.hysteresis = None
        self.endpoint = None
        self.last = None            # clock() of the last probe
        self.kicked = None
        self.status = None          # status.mtu after the last probe
        self.result = None          # the last Probe
        self.error = None
        self.probes = 0
        self.probing_from = None    # the interface's MTU while a probe may have raised it (see restore)

    def kick(self, why):
        """Probe at the next step (the tunnel answered again after a failure: a failover, a new path)."""
        self.kicked = why

    def due(self):
        """Why the path should be probed now, or None."""
        endpoint = peer_endpoint_ip(self.interface, self.public_key)
        if endpoint is None:
            return None
        if self.last is None:
            return "first"
        if endpoint != self.endpoint:
            return "endpoint"
        if self.kicked:
            return self.kicked
        cached = route_to(endpoint, self.run)[1]
        if cached and self.hysteresis and cached < self.hysteresis.current + overhead(endpoint):
            return "frag-needed"
        if self.clock() - self.last >= self.period:
            return "periodic"
        return None

    def step(self):
        try:
            why = self.due()
            if why is None:
                return None
            return self._probe(why)
        except (PathMtuError, OSError) as exc:
            self.error = str(exc)[:300]
            self.last = self.clock()
            return None

    def _probe(self, why):
        with exclusive(self.interface):
            return self._probe_locked(why)

    def _probe_locked(self, why):
        self.kicked = None
        self.endpoint = peer_endpoint_ip(self.interface, self.public_key)
        current = link_mtu(self.interface)
        kw = {"send": self.send, "settle": 0} if self.send else {}
        self.probing_from = current
        try:
            self.result = probe(self.interface, self.address, self.endpoint, current, run=self.run, **kw)
        finally:
            self.probing_from = None
        self.result.reason = why
        self.last, self.error = self.clock(), None
        self.probes += 1
        found = self.result.tunnel_mtu
        capped = min(found, self.cap) if found and self.cap else found
        if self.hysteresis is None:
            self.hysteresis = Hysteresis(current, self.confirm)
            new = capped if capped and capped != current else None
            if new:
                self.hysteresis.current = new
        else:
            self.hysteresis.follow(current)
            new = self.hysteresis.observe(capped)
        if found is not None:
            self.status = mtu_status(found, self.endpoint, self.cap, current)
        if not new or new == current:
            if self.status:
                self.status["value"] = current
            return None
        set_link_mtu(self.interface, new, self.run)
        self.status["value"] = new
        return dict(self.status)

    def interface_mtu(self):
        """The tunnel's MTU: the interface's, or while a probe raised it, the MTU it is put back to (the metric's)."""
        probing = self.probing_from
        return probing if probing is not None else link_mtu(self.interface)

    def restore(self):
        """The interface back at its MTU if a probe is cut short (its process stopping) while it raised it."""
        if self.probing_from is not None:
            set_link_mtu(self.interface, self.probing_from, self.run)

    def snapshot(self):
        return {"status": self.status, "error": self.error, "probes": self.probes,
                "changes": dict(self.hysteresis.changes) if self.hysteresis else {"lower": 0, "raise": 0},
                "last_probe": self.result.to_result() if self.result else None}


PLURALS = {"GatewayServer": "gatewayservers", "GatewayClient": "gatewayclients"}
GATEWAY_PATH = "/apis/networking.liqo.io/v1beta1/namespaces/%s/%s/%s/status"
CONNECTION_PATH = "/apis/networking.liqo.io/v1beta1/namespaces/%s/connections/%s/status"


class Live:
    """A Watch as a live health probe runs it in its own thread (the agentless host's probe process, health/daemon.py;
    the active gateway pod's peer health, controller/peer_health.py): one step a second, what it found written to the
    gateway's status and its Connection (write_status) whenever it differs from what was last written. A probe of a
    black hole waits for its timeouts: the thread keeps it away from the pings the peer's health depends on."""

    def __init__(self, watch, api, kind, namespace, name, interval=1.0, on_change=None):
        self.watch, self.api, self.kind, self.namespace, self.name = watch, api, kind, namespace, name
        self.interval = interval
        self.on_change = on_change  # on_change(old MTU, new status.mtu, why the probe ran) when the tunnel's MTU changed,
        #                             on_change(None, {error}, "error") when the watch meets a new error
        self.written = None         # status.mtu last written
        self.write_error = None
        self.reported = None        # the watch's error last given to on_change

    def tick(self):
        """One step of the watch, then the write if due; returns the new status.mtu when the tunnel's MTU changed."""
        try:
            before = self.watch.hysteresis.current if self.watch.hysteresis else None
            changed = self.watch.step()
            if changed and self.on_change:
                self.on_change(before, changed, self.watch.result.reason if self.watch.result else None)
            if self.watch.error and self.watch.error != self.reported and self.on_change:
                self.on_change(None, {"error": self.watch.error}, "error")
            self.reported = self.watch.error
            status = self.watch.status
            if status and status != self.written and self.api is not None:
                write_status(self.api, self.kind, self.namespace, self.name, status)
                self.written, self.write_error = dict(status), None
            return changed
        except Exception as exc:  # pylint: disable=broad-except  # the API, a vanished interface: the next tick retries
            self.write_error = str(exc)[:300]
            return None

    def run(self, stopping):
        """Ticks until the threading.Event `stopping` is set, then puts back an interface a probe left raised."""
        try:
            while not stopping.is_set():
                self.tick()
                stopping.wait(self.interval)
        finally:
            try:
                self.watch.restore()
            except Exception:  # pylint: disable=broad-except  # the interface is gone: nothing to put back
                pass

    def snapshot(self):
        return dict(self.watch.snapshot(), written=self.written, write_error=self.write_error)


def write_status(api, kind, namespace, name, status):
    """status.mtu of the gateway and of its Connection (same name), by merge patches of their status subresources.
    `api`: anything with request(method, path, body=..., content_type=...) (module_utils' Kube)."""
    patch = "application/merge-patch+json"
    if kind in PLURALS:
        api.request("PATCH", GATEWAY_PATH % (namespace, PLURALS[kind], name), body={"status": {"mtu": status}},
                    content_type=patch)
    api.request("PATCH", CONNECTION_PATH % (namespace, name),
                body={"status": {"mtu": {"value": status["value"], "source": status["source"]}}}, content_type=patch)
