# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Host-wide sysctls shared by every gateway of a host, set by the first and restored by the last.

Several gateways (one per peer cluster) run on one host and all need the same host-wide values (forwarding,
loose reverse-path filtering). The record file holds, once per host, the values found before the first
gateway set them and the interfaces of the gateways that run there; it is a valid sysctl.d file (the wanted
values, the rest in comments) so a host can load it at boot. Each gateway that goes leaves the list; the
last one puts the values found before back and removes the file. The record is written before any value
changes, so a crash in between never loses the values to restore.
"""

from __future__ import annotations

import os

from ansible_collections.liqo.fabric.plugins.module_utils.host.atomic_file import write_atomic

PROC_SYS = "/proc/sys"
BEFORE = "# liqo.fabric values before the first gateway:"
GATEWAYS = "# liqo.fabric gateways on this host:"


def _path(name):
    return os.path.join(PROC_SYS, *name.split("."))


def read_value(name):
    with open(_path(name), encoding="ascii") as f:
        return f.read().strip()


def _write_value(name, value):
    with open(_path(name), "w", encoding="ascii") as f:
        f.write(value)


def parse_record(text):
    """(before: {name: value}, gateways: [interface]) of a record's text. A record of an older release
    (values only) gives no values before: nothing is restored from it."""
    before, gateways = {}, []
    for line in text.splitlines():
        if line.startswith(BEFORE):
            for item in line[len(BEFORE):].split():
                name, dummy, value = item.partition("=")
                if name and value:
                    before[name] = value
        elif line.startswith(GATEWAYS):
            gateways = line[len(GATEWAYS):].split()
    return before, gateways


def format_record(wanted, before, gateways):
    return "".join([BEFORE + "".join(" %s=%s" % (n, before[n]) for n in sorted(before)) + "\n",
                    GATEWAYS + "".join(" " + g for g in sorted(gateways)) + "\n"]
                   + ["%s = %s\n" % kv for kv in wanted])


def read_record(record_file):
    """(before, gateways) of `record_file`, or None when there is none."""
    try:
        with open(record_file, encoding="ascii") as f:
            return parse_record(f.read())
    except FileNotFoundError:
        return None


def _store(record_file, text):
    write_atomic(record_file, text, mode=0o644)


def _live(interfaces):
    """The recorded gateways whose interface still exists here (a gateway lost without a teardown, e.g. a
    rebooted host, no longer holds the values)."""
    return {i for i in interfaces if os.path.exists(os.path.join("/sys/class/net", i))}


def _result():
    return {"changed": [], "before": "", "after": "", "restored": {}}


def _values_text(values):
    return "".join("%s = %s\n" % (n, values[n]) for n in sorted(values))


def acquire(wanted, interfaces, record_file=None, check=False):
    """Sets `wanted` ((name, value) pairs) for the gateways `interfaces` of this host. Records the values
    found before (only when there is no record yet) and adds `interfaces` to the record's gateways.
    Returns changed (the names and the record file changed), before/after (text, for a diff)."""
    res = _result()
    current = {name: read_value(name) for name, dummy in wanted}
    record = read_record(record_file) if record_file else None
    if record_file:
        before, gateways = record if record is not None else (current, [])
        text = format_record(wanted, before, _live(gateways) | set(interfaces))
        try:
            with open(record_file, encoding="ascii") as f:
                old = f.read()
        except FileNotFoundError:
            old = ""
        if old != text:
            res["changed"].append(record_file)
            if not check:
                _store(record_file, text)
    res["changed"] += [n for n, v in wanted if current[n] != v]
    res["before"] = _values_text(current)
    res["after"] = _values_text(dict(wanted))
    if not check:
        for name, value in wanted:
            if current[name] != value:
                _write_value(name, value)
    return res


def release(wanted, interfaces, record_file=None, check=False):
    """The gateways `interfaces` leave this host. While others of the record still run, the values and the
    record stay (the record without them); when none is left, the values found before are put back and the
    record is removed. Without a record (none written, or `record_file` unset) nothing changes."""
    res = _result()
    record = read_record(record_file) if record_file else None
    if record is None:
        return res
    before, gateways = record[0], record[1]
    rest = _live(gateways) - set(interfaces)
    if rest:
        text = format_record(wanted, before, rest)
        with open(record_file, encoding="ascii") as f:
            if f.read() != text:
                res["changed"].append(record_file)
                if not check:
                    _store(record_file, text)
        return res
    current = {n: read_value(n) for n in before}
    restore = {n: v for n, v in before.items() if current[n] != v}
    res["changed"] = sorted(restore) + [record_file]
    res["restored"] = restore
    res["before"], res["after"] = _values_text(current), _values_text(dict(current, **restore))
    if not check:
        for name, value in sorted(restore.items()):
            _write_value(name, value)
        os.unlink(record_file)
    return res
