# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A gateway's own keys from the user's Secret (``spec.secretRef``, Liqo's declarative keys).

Pure Python, no Ansible imports. Liqo writes a gateway key Secret with ``data.privateKey`` (and
``data.publicKey``) holding the raw 32 bytes of the key; the fabric's own Secrets hold the base64 text of
the key. Both are read here: Secret data arrives from the API base64-encoded once, so a decoded value of
32 bytes is a raw key and a decoded value of 44 ASCII characters is the base64 text of one. The public key
is always derived from the private key; a ``publicKey`` that is present must match it. Error messages name
the field and the Secret, never a key.
"""

from __future__ import annotations

import base64
import binascii

from ansible_collections.liqo.fabric.plugins.module_utils.wireguard.errors import ValidationError
from ansible_collections.liqo.fabric.plugins.module_utils.wireguard.keys import (
    KEY_LEN, decode_key, encode_key, public_key_bytes)


class GatewayKeyError(ValueError):
    """The user's key Secret cannot be used; ``reason`` is for the gateway's condition."""

    def __init__(self, reason, message):
        ValueError.__init__(self, message)
        self.reason = reason


def _raw_key(value, field, where):
    """Secret data value (base64, as the API returns it) -> the 32 raw bytes of the key."""
    try:
        decoded = base64.b64decode(value or "", validate=True)
    except (binascii.Error, ValueError, TypeError):
        raise GatewayKeyError("InvalidSecretKey", "%s: data.%s is not base64 (Secret data as the API returns it)"
                              % (where, field))
    if len(decoded) == KEY_LEN:
        return decoded
    try:
        return decode_key(decoded.decode("ascii"), field, secret=True)
    except (UnicodeDecodeError, ValidationError):
        raise GatewayKeyError("InvalidSecretKey", "%s: data.%s holds %d bytes; a WireGuard key is %d raw bytes (as Liqo "
                              "stores it) or the base64 text of them (44 characters)" % (where, field, len(decoded), KEY_LEN))


def keys_from_secret(secret, kind, namespace, name):
    """(public key, private key), both base64 text, from the Secret named by the gateway's spec.secretRef.
    Raises GatewayKeyError naming the field and the Secret (never a key)."""
    secret_name = ((secret or {}).get("metadata") or {}).get("name", "?")
    where = "spec.secretRef: Secret %s/%s of %s %s" % (namespace, secret_name, kind, name)
    data = (secret or {}).get("data") or {}
    if "privateKey" not in data:
        raise GatewayKeyError("InvalidSecretKey", "%s has no data.privateKey (the gateway's WireGuard private key)" % where)
    private_raw = _raw_key(data["privateKey"], "privateKey", where)
    if private_raw == bytes(KEY_LEN):
        raise GatewayKeyError("InvalidSecretKey", "%s: data.privateKey is all zero bytes" % where)
    public = encode_key(public_key_bytes(private_raw))
    if data.get("publicKey"):
        given = encode_key(_raw_key(data["publicKey"], "publicKey", where))
        if given != public:
            raise GatewayKeyError("InvalidSecretKey", "%s: data.publicKey %s is not the public key of data.privateKey "
                                  "(derived: %s); remove it or correct it" % (where, given, public))
    return public, encode_key(private_raw)
