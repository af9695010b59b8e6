# -*- coding: utf-8 -*-
# Copyright: liqo.fabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""IPv4 address management for remote clusters' pod and external CIDRs.

Pure Python (stdlib ``ipaddress`` only), shared by the ``liqo.fabric.ipam`` module, ``roles/ipam`` and
the controller.

Model
-----
* *Taken* space: the local pod CIDR(s), service CIDR, external CIDR, internal CIDR and the reserved
  subnets (set at construction, never handed out), plus every prefix currently allocated to a remote
  cluster. Taken intervals are pairwise disjoint, so a sorted list of starts plus ``bisect`` answers
  "does this prefix overlap anything taken?" (ancestor or descendant) in O(log n).
* *Pools* (default 10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16), each with a sorted list of free
  intervals (pool minus taken). First fit walks the free intervals of the pools in pool order; a free
  interval holds a block of size S iff its start rounded up to a multiple of S still fits. Equal-size
  allocations pack contiguously, so the walk stays short (see tests/benchmarks/bench_ipam.py).
* An allocation is keyed by ``(owner, field)``: owner is ``"<namespace>/<name>"`` of the
  Configuration, field is ``"pod"`` or ``"external"``. The remote CIDR is kept when nothing taken
  overlaps it; otherwise the first free prefix of the same length, in pool order, is used.

The result depends only on the set of taken prefixes, never on the order they were taken in: the same
state always yields the same answer, and a state rebuilt from the API answers like the original.

State lives in the Kubernetes API: ``to_state()``/``from_state()`` (and ``dumps``/``loads``) give a
JSON document meant for one dedicated object (e.g. ConfigMap ``liqo-ipam`` in namespace ``liqo``, key
``state.json``) written with its resourceVersion, so two allocators can never both commit the same
prefix. ``adopt_configurations()`` rebuilds allocations from Configurations' status when that object
is lost, and ``release_missing()`` frees prefixes of deleted Configurations.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import bisect
import ipaddress
import json

DEFAULT_POOLS = ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16")
DEFAULT_EXTERNAL_CIDR = "10.70.0.0/16"
DEFAULT_INTERNAL_CIDR = "10.80.0.0/16"
FIELDS = ("pod", "external")
# A remote pod/external CIDR smaller than this cannot hold a network (/31, /32).
MAX_REMOTE_PREFIXLEN = 30
STATE_VERSION = 1


class IpamError(Exception):
    """Base class. ``reason`` is CamelCase for a Kubernetes condition; ``str(e)`` names field and value."""

    reason = "IpamError"

    def __init__(self, message, field=None, value=None):
        super(IpamError, self).__init__(message)
        self.message = message
        self.field = field
        self.value = value


class InvalidCidrError(IpamError):
    """A CIDR that does not parse, is not IPv4, or has host bits set."""

    reason = "InvalidCIDR"


class InvalidCidrSizeError(IpamError):
    """A remote CIDR whose prefix length no pool can hold (or too small to be a network)."""

    reason = "InvalidCIDRSize"


class PoolTooSmallError(IpamError):
    """A (valid) remote CIDR larger than every pool: the pools must grow, not the Configuration change."""

    reason = "PoolTooSmall"


class LocalCidrOverlapError(IpamError):
    """A local CIDR (pod, service, external, internal) overlapping a reserved one or another local one."""

    reason = "LocalCIDROverlap"


class PoolsExhaustedError(IpamError):
    """No free prefix of the requested length is left in any pool."""

    reason = "PoolsExhausted"


class InvalidStateError(IpamError):
    """A serialised state that cannot be loaded."""

    reason = "InvalidIPAMState"


def parse_cidr(value, field):
    """Return an IPv4Network for ``value`` or raise InvalidCidrError naming ``field``."""
    if not isinstance(value, str):
        raise InvalidCidrError("%s: %r is not a CIDR string" % (field, value), field, value)
    try:
        net = ipaddress.ip_network(value, strict=True)
    except ValueError as exc:
        if "host bits set" in str(exc):
            raise InvalidCidrError("%s: '%s' has host bits set (did you mean '%s'?)"
                                   % (field, value, ipaddress.ip_network(value, strict=False)), field, value)
        raise InvalidCidrError("%s: '%s' is not a valid CIDR" % (field, value), field, value)
    if net.version != 4:
        raise InvalidCidrError("%s: '%s' is not an IPv4 CIDR" % (field, value), field, value)
    return net


def one_cidr(value, field):
    """The CIDR of a Configuration's field: a string (v1alpha1, the seeds) or Liqo's list of one (v1beta1)."""
    if isinstance(value, list):
        if len(value) != 1:
            raise InvalidCidrError("%s: %s has %d CIDRs; give exactly one (one Configuration per remote CIDR)"
                                   % (field, value, len(value)), field, str(value))
        return value[0]
    return value


def _iv(net):
    """(first, last) integer interval of a network."""
    return int(net.network_address), int(net.broadcast_address)


def _net(start, size):
    return ipaddress.IPv4Network((start, 32 - (size.bit_length() - 1)))


def translate(address, from_cidr, to_cidr):
    """Map an address (or a subnet) from one CIDR to another of the same length, keeping host bits.

    ``translate('10.243.1.7', '10.243.0.0/16', '10.71.0.0/16') == '10.71.1.7'``; a subnet such as
    ``'10.243.1.0/24'`` maps to ``'10.71.1.0/24'``. Raises InvalidCidrError when the address is not
    inside ``from_cidr`` or the two CIDRs differ in length.
    """
    src = parse_cidr(str(one_cidr(from_cidr, "from_cidr")), "from_cidr")
    dst = parse_cidr(str(one_cidr(to_cidr, "to_cidr")), "to_cidr")
    if src.prefixlen != dst.prefixlen:
        raise InvalidCidrError("to_cidr: '%s' has not the length of from_cidr '%s'" % (dst, src), "to_cidr", str(to_cidr))
    text = str(address)
    try:
        if "/" in text:
            sub = ipaddress.ip_network(text, strict=True)
            first = ipaddress.ip_address(sub.network_address)
        else:
            sub = None
            first = ipaddress.ip_address(text)
    except ValueError:
        raise InvalidCidrError("address: '%s' is not a valid IPv4 address or CIDR" % text, "address", text)
    if first.version != 4 or first not in src or (sub is not None and (sub.prefixlen < src.prefixlen)):
        raise InvalidCidrError("address: '%s' is not inside '%s'" % (text, src), "address", text)
    host = int(first) - int(src.network_address)
    mapped = ipaddress.IPv4Address(int(dst.network_address) + host)
    if sub is None:
        return str(mapped)
    return "%s/%d" % (mapped, sub.prefixlen)


class _FreeList:
    """Sorted, disjoint free intervals of one pool."""

    __slots__ = ("pool", "starts", "ends")

    def __init__(self, pool):
        self.pool = pool
        first, last = _iv(pool)
        self.starts = [first]
        self.ends = [last]

    def take(self, first, last):
        """Remove [first, last] (which is free or outside the pool) from the free intervals."""
        starts, ends = self.starts, self.ends
        i = max(bisect.bisect_right(starts, first) - 1, 0)
        while i < len(starts) and starts[i] <= last:
            s, e = starts[i], ends[i]
            if e < first:
                i += 1
                continue
            pieces = []
            if s < first:
                pieces.append((s, first - 1))
            if e > last:
                pieces.append((last + 1, e))
            starts[i:i + 1] = [p[0] for p in pieces]
            ends[i:i + 1] = [p[1] for p in pieces]
            i += len(pieces)

    def give(self, first, last):
        """Add back [first, last] (clipped to the pool), merging with neighbours."""
        pfirst, plast = _iv(self.pool)
        first, last = max(first, pfirst), min(last, plast)
        if first > last:
            return
        starts, ends = self.starts, self.ends
        i = bisect.bisect_left(starts, first)
        if i > 0 and ends[i - 1] + 1 >= first:
            i -= 1
            first = starts[i]
            last = max(last, ends[i])
            del starts[i]
            del ends[i]
        while i < len(starts) and starts[i] <= last + 1:
            last = max(last, ends[i])
            del starts[i]
            del ends[i]
        starts.insert(i, first)
        ends.insert(i, last)

    def first_fit(self, size):
        """Lowest start of a free, size-aligned block of ``size`` addresses, or None."""
        mask = size - 1
        for s, e in zip(self.starts, self.ends):
            if e - s + 1 < size:
                continue
            a = (s + mask) & ~mask
            if a + mask <= e:
                return a
        return None


class Allocation:
    """One remote CIDR and the prefix it was given (equal to it when kept)."""

    __slots__ = ("owner", "field", "original", "remapped")

    def __init__(self, owner, field, original, remapped):
        self.owner = owner
        self.field = field
        self.original = original
        self.remapped = remapped

    @property
    def is_remapped(self):
        return self.original != self.remapped

    def to_dict(self):
        return {"owner": self.owner, "field": self.field, "original": str(self.original), "remapped": str(self.remapped)}

    def __repr__(self):
        return "Allocation(%r, %r, %s -> %s)" % (self.owner, self.field, self.original, self.remapped)


class Ipam:
    """IPAM for remote pod and external CIDRs of one local cluster."""

    def __init__(self, pod_cidrs=(), service_cidr=None, external_cidr=DEFAULT_EXTERNAL_CIDR,
                 internal_cidr=DEFAULT_INTERNAL_CIDR, reserved=(), pools=DEFAULT_POOLS):
        if isinstance(pod_cidrs, str):
            pod_cidrs = [pod_cidrs]
        self.config = {
            "pools": [str(p) for p in pools],
            "pod_cidrs": [str(p) for p in pod_cidrs],
            "service_cidr": str(service_cidr) if service_cidr else None,
            "external_cidr": str(external_cidr) if external_cidr else None,
            "internal_cidr": str(internal_cidr) if internal_cidr else None,
            "reserved": [str(r) for r in reserved],
        }
        if not self.config["pools"]:
            raise InvalidCidrError("pools: at least one pool is required", "pools", [])
        self._pools = [_FreeList(parse_cidr(p, "pools[%d]" % i)) for i, p in enumerate(self.config["pools"])]
        self._min_prefixlen = min(fl.pool.prefixlen for fl in self._pools)
        # Sorted disjoint taken intervals: starts / ends, and what holds each start.
        self._starts = []
        self._ends = []
        self._holder = {}
        self._allocs = {}

        local = [("pod_cidrs[%d]" % i, c) for i, c in enumerate(self.config["pod_cidrs"])]
        for name in ("service_cidr", "external_cidr", "internal_cidr"):
            if self.config[name]:
                local.append((name, self.config[name]))
        local_nets = [(name, parse_cidr(c, name)) for name, c in local]
        reserved_nets = [("reserved[%d]" % i, parse_cidr(c, "reserved[%d]" % i)) for i, c in enumerate(self.config["reserved"])]
        for name, net in local_nets:
            for rname, rnet in reserved_nets:
                if net.overlaps(rnet):
                    raise LocalCidrOverlapError("%s: '%s' overlaps %s '%s'" % (name, net, rname, rnet), name, str(net))
        for i, (name, net) in enumerate(local_nets):
            for oname, onet in local_nets[:i]:
                if net.overlaps(onet):
                    raise LocalCidrOverlapError("%s: '%s' overlaps %s '%s'" % (name, net, oname, onet), name, str(net))
        for name, net in local_nets:
            self._take(net, ("local", name))
        # Reserved subnets may overlap each other: take their union.
        for net in ipaddress.collapse_addresses(rnet for dummy, rnet in reserved_nets):
            self._take(net, ("reserved", str(net)))

    # ----- taken intervals
    def _overlapping(self, net):
        """Holders of taken intervals overlapping ``net`` (ancestors, descendants or equal)."""
        first, last = _iv(net)
        i = bisect.bisect_right(self._starts, last) - 1
        found = []
        while i >= 0 and self._ends[i] >= first:  # disjoint and sorted: ends decrease going left
            found.append(self._holder[self._starts[i]])
            i -= 1
        return found

    def _is_free(self, net):
        first, last = _iv(net)
        i = bisect.bisect_right(self._starts, last) - 1
        return i < 0 or self._ends[i] < first

    def _take(self, net, holder):
        first, last = _iv(net)
        i = bisect.bisect_left(self._starts, first)
        self._starts.insert(i, first)
        self._ends.insert(i, last)
        self._holder[first] = holder
        for fl in self._pools:
            fl.take(first, last)

    def _give(self, net):
        first, last = _iv(net)
        i = bisect.bisect_left(self._starts, first)
        del self._starts[i]
        del self._ends[i]
        del self._holder[first]
        for fl in self._pools:
            fl.give(first, last)

    # ----- public API
    def _check_remote(self, cidr, path):
        net = parse_cidr(one_cidr(cidr, path), path)
        if net.prefixlen < self._min_prefixlen:
            pools = ", ".join(self.config["pools"])
            raise PoolTooSmallError("pools %s too small: %s '%s' needs a free /%d, the largest pool is a /%d; add a pool"
                                    " of /%d or larger (pools, role variable ipam_pools)"
                                    % (pools, path, net, net.prefixlen, self._min_prefixlen, net.prefixlen), path, str(net))
        if net.prefixlen > MAX_REMOTE_PREFIXLEN:
            raise InvalidCidrSizeError("%s: '%s' has an invalid size: a remote CIDR must hold a network (/%d or larger)"
                                       % (path, net, MAX_REMOTE_PREFIXLEN), path, str(net))
        return net

    def _find(self, net):
        """The prefix ``net`` would get: itself when free, else the first free one of its length."""
        if self._is_free(net):
            return net
        size = net.num_addresses
        for fl in self._pools:
            if fl.pool.prefixlen > net.prefixlen:
                continue
            start = fl.first_fit(size)
            if start is not None:
                return _net(start, size)
        return None

    def allocation(self, owner, field):
        """The current Allocation of (owner, field), or None."""
        return self._allocs.get((owner, field))

    def allocations(self):
        """All allocations, sorted by owner then field order (pod, external)."""
        return [self._allocs[k] for k in sorted(self._allocs, key=lambda k: (k[0], _field_rank(k[1])))]

    def allocate(self, owner, field, cidr):
        """Allocate (or return the existing allocation of) ``cidr`` for (owner, field).

        ``field`` is ``pod`` or ``external``; error messages name ``spec.remote.cidr.<field>``. An existing
        allocation for a different original CIDR is replaced. On error nothing changes.
        """
        path = "spec.remote.cidr.%s" % field
        net = self._check_remote(cidr, path)
        key = (owner, field)
        old = self._allocs.get(key)
        if old is not None:
            if old.original == net:
                return old
            self._give(old.remapped)
            del self._allocs[key]
        found = self._find(net)
        if found is None:
            if old is not None:  # restore: nothing changes on error
                self._take(old.remapped, key)
                self._allocs[key] = old
            raise PoolsExhaustedError("%s: '%s' overlaps %s and no free /%d is left in pools %s"
                                      % (path, net, _describe(self._overlapping(net)), net.prefixlen, ", ".join(self.config["pools"])),
                                      path, str(net))
        alloc = Allocation(owner, field, net, found)
        self._take(found, key)
        self._allocs[key] = alloc
        return alloc

    def allocate_remote(self, owner, pod, external=None):
        """Allocate a remote cluster's pod and external CIDRs together: both succeed or nothing changes.

        Returns ``{"pod": "<remapped>", "external": "<remapped>"}`` (external only when given).
        """
        before = {f: self._allocs.get((owner, f)) for f in FIELDS}
        result = {}
        try:
            result["pod"] = str(self.allocate(owner, "pod", pod).remapped)
            if external is not None:
                result["external"] = str(self.allocate(owner, "external", external).remapped)
        except IpamError:
            for f in FIELDS:
                self._restore(owner, f, before[f])
            raise
        return result

    def _restore(self, owner, field, alloc):
        key = (owner, field)
        cur = self._allocs.pop(key, None)
        if cur is not None:
            self._give(cur.remapped)
        if alloc is not None:
            self._take(alloc.remapped, key)
            self._allocs[key] = alloc

    def release(self, owner, field=None):
        """Release (owner, field), or every field of owner. Returns the released Allocations."""
        released = []
        for f in (FIELDS if field is None else (field,)):
            alloc = self._allocs.pop((owner, f), None)
            if alloc is not None:
                self._give(alloc.remapped)
                released.append(alloc)
        return released

    def owners(self):
        return sorted({k[0] for k in self._allocs})

    def is_taken(self, cidr):
        """True when ``cidr`` overlaps anything taken (local, reserved or allocated)."""
        return not self._is_free(parse_cidr(cidr, "cidr"))

    def to_remapped(self, owner, field, address):
        """Map an address of the remote cluster's original CIDR into the remapped one."""
        alloc = self._require(owner, field)
        return translate(address, alloc.original, alloc.remapped)

    def to_original(self, owner, field, address):
        """Map an address of the remapped CIDR back into the remote cluster's original one."""
        alloc = self._require(owner, field)
        return translate(address, alloc.remapped, alloc.original)

    def _require(self, owner, field):
        alloc = self._allocs.get((owner, field))
        if alloc is None:
            raise IpamError("%s: no allocation for field '%s'" % (owner, field), field, owner)
        return alloc

    # ----- state in the Kubernetes API
    def to_state(self):
        """JSON-able state: configuration and allocations (deterministic order)."""
        return {"version": STATE_VERSION, "config": dict(self.config), "allocations": [a.to_dict() for a in self.allocations()]}

    def dumps(self):
        """Canonical JSON text of ``to_state()`` (sorted keys): equal states give equal text."""
        return json.dumps(self.to_state(), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_state(cls, state, **overrides):
        """Rebuild from ``to_state()`` output. ``overrides`` replace config entries (e.g. new pools).

        Allocations are re-taken in their recorded order; one that no longer fits (it overlaps a local
        or reserved CIDR of the new configuration, or an earlier allocation) is re-allocated. Raises
        InvalidStateError on a malformed document.
        """
        if not isinstance(state, dict) or state.get("version") != STATE_VERSION:
            raise InvalidStateError("state: unsupported or missing version (expected %d)" % STATE_VERSION, "state.version",
                                    state.get("version") if isinstance(state, dict) else state)
        config = dict(state.get("config") or {})
        config.update(overrides)
        ipam = cls(**config)
        for i, item in enumerate(state.get("allocations") or []):
            try:
                owner, field, original, remapped = item["owner"], item["field"], item["original"], item["remapped"]
            except (TypeError, KeyError):
                raise InvalidStateError("state.allocations[%d]: owner, field, original and remapped are required" % i,
                                        "state.allocations[%d]" % i, item)
            if field not in FIELDS:
                raise InvalidStateError("state.allocations[%d].field: '%s' is not one of %s" % (i, field, ", ".join(FIELDS)),
                                        "state.allocations[%d].field" % i, field)
            try:
                ipam.adopt(owner, field, original, remapped)
            except PoolTooSmallError:
                ipam._keep_recorded(owner, field, original, remapped)
        return ipam

    def _keep_recorded(self, owner, field, original, remapped):
        """A ledger allocation larger than every (new) pool: kept as recorded when its prefix is still free
        (pools only bound new remaps), so the load does not fail as a whole; its own Configuration, when
        reconciled, is reported PoolTooSmall by name."""
        try:
            net, rnet = parse_cidr(original, "original"), parse_cidr(remapped, "remapped")
        except InvalidCidrError:
            return
        if rnet.prefixlen == net.prefixlen and (owner, field) not in self._allocs and self._is_free(rnet):
            self._take(rnet, (owner, field))
            self._allocs[(owner, field)] = Allocation(owner, field, net, rnet)

    @classmethod
    def loads(cls, text, **overrides):
        try:
            state = json.loads(text)
        except ValueError as exc:
            raise InvalidStateError("state: not valid JSON (%s)" % exc, "state", text)
        return cls.from_state(state, **overrides)

    def adopt(self, owner, field, original, remapped, allocate=True):
        """Record an allocation found in the API (state object or a Configuration's status).

        Kept when ``remapped`` is a valid prefix of ``original``'s length that overlaps nothing taken;
        otherwise ``original`` is allocated afresh (with ``allocate=False``: nothing happens and the
        Allocation is None). Returns (Allocation, adopted: bool).
        """
        net = self._check_remote(original, "spec.remote.cidr.%s" % field)
        key = (owner, field)
        old = self._allocs.get(key)
        try:
            rnet = parse_cidr(remapped, "status.remote.cidr.%s" % field) if remapped else None
        except InvalidCidrError:
            rnet = None
        if old is not None and rnet is not None and old.original == net and old.remapped == rnet:
            return old, True
        if rnet is not None and rnet.prefixlen == net.prefixlen:
            if old is not None:
                self._give(old.remapped)
                del self._allocs[key]
            if self._is_free(rnet):
                alloc = Allocation(owner, field, net, rnet)
                self._take(rnet, key)
                self._allocs[key] = alloc
                return alloc, True
            if old is not None:
                self._take(old.remapped, key)
                self._allocs[key] = old
        if not allocate:
            return None, False
        return self.allocate(owner, field, str(net)), False

    def adopt_configurations(self, configurations):
        """Rebuild allocations from Configuration objects (dicts as the API returns them).

        Two passes, Configurations oldest first (creationTimestamp, then namespace/name): first every
        status prefix that is still valid and free is kept, then the rest is allocated. So when two
        statuses claim overlapping prefixes the older one keeps its prefix, and only the prefixes that
        must move do. Returns a list of ``(owner, {"pod": ..., "external": ...}, changed)`` where
        changed says the status must be (re)written; a Configuration that cannot be served (invalid
        spec, pools exhausted or too small) is reported as ``(owner, IpamError, True)`` and keeps the
        allocations it held, in the error's ``kept`` (``{}`` when it had none).
        """
        confs = []
        for conf in sorted(configurations, key=_conf_sort_key):
            owner = configuration_owner(conf)
            spec = ((conf.get("spec") or {}).get("remote") or {}).get("cidr") or {}
            status = remote_status(conf.get("status"))
            try:
                wanted = dict((f, self._check_remote(spec[f], "spec.remote.cidr.%s" % f)) for f in FIELDS if spec.get(f) is not None)
            except IpamError as exc:
                confs.append((owner, self._refused(owner, exc), status))
                continue
            confs.append((owner, wanted, status))
        # pass 1: keep what the API already says, where still possible
        for owner, wanted, status in confs:
            if isinstance(wanted, IpamError):
                continue
            for f, net in wanted.items():
                self.adopt(owner, f, str(net), status.get(f), allocate=False)
        # pass 2: allocate the rest
        results = []
        for owner, wanted, status in confs:
            if isinstance(wanted, IpamError):
                results.append((owner, wanted, True))
                continue
            before = {f: self._allocs.get((owner, f)) for f in FIELDS}
            try:
                out = dict((f, str(self.allocate(owner, f, str(net)).remapped)) for f, net in wanted.items())
            except IpamError as exc:
                for f in FIELDS:  # both fields or neither: the allocations in use stay as they were
                    self._restore(owner, f, before[f])
                results.append((owner, self._refused(owner, exc), True))
                continue
            results.append((owner, out, any(status.get(f) != v for f, v in out.items())))
        return results

    def _refused(self, owner, exc):
        """`exc` with `kept`: the allocations `owner` holds, which a refused spec or pool setting does not take
        away (a live connection routes through them); an owner that never got one holds nothing."""
        exc.kept = dict((f, str(self._allocs[(owner, f)].remapped)) for f in FIELDS if (owner, f) in self._allocs)
        return exc

    def release_missing(self, owners):
        """Release every allocation whose owner is not in ``owners``. Returns the released Allocations."""
        keep = set(owners)
        released = []
        for owner in self.owners():
            if owner not in keep:
                released.extend(self.release(owner))
        return released


def remote_status(status):
    """The remapped CIDRs a Configuration's status shows, {field: cidr} (v1beta1's list of one read as its CIDR)."""
    cidr = ((status or {}).get("remote") or {}).get("cidr") or {}
    return dict((f, v[0] if isinstance(v, list) and len(v) == 1 else v) for f, v in cidr.items() if v)


def configuration_owner(conf):
    """Allocation owner of a Configuration dict: ``"<namespace>/<name>"``."""
    meta = conf.get("metadata") or {}
    return "%s/%s" % (meta.get("namespace") or "default", meta.get("name"))


def _conf_sort_key(conf):
    meta = conf.get("metadata") or {}
    return (meta.get("creationTimestamp") or "", meta.get("namespace") or "default", meta.get("name") or "")


def _field_rank(field):
    return FIELDS.index(field) if field in FIELDS else len(FIELDS)


def _describe(holders):
    parts = []
    for h in holders:
        if h[0] == "local":
            parts.append("local %s" % h[1])
        elif h[0] == "reserved":
            parts.append("reserved %s" % h[1])
        else:
            parts.append("%s of %s" % (h[1], h[0]))
    return ", ".join(parts) or "nothing"
