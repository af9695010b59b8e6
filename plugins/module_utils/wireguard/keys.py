# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""WireGuard keys: base64 and hex forms, X25519 public keys, generation, key files.

Private keys live only in memory (bytes); nothing here returns or prints them. X25519 only through the
`cryptography` library (constant time)."""
from __future__ import absolute_import, division, print_function

import base64
import binascii
import os

from ansible_collections.liqo.fabric.plugins.module_utils.wireguard.errors import ValidationError, WireGuardError

try:
    from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
    from cryptography.hazmat.primitives import serialization
    HAS_CRYPTOGRAPHY = True
except ImportError:
    HAS_CRYPTOGRAPHY = False

KEY_LEN = 32
ZERO_KEY = bytes(KEY_LEN)


def _clamp(raw):
    k = bytearray(raw)
    k[0] &= 248
    k[31] = (k[31] & 127) | 64
    return bytes(k)


def encode_key(raw):
    return base64.b64encode(raw).decode("ascii")


def key_to_hex(b64):
    return decode_key(b64, "key").hex()


def hex_to_key(hexstr):
    try:
        raw = bytes.fromhex(hexstr)
    except ValueError:
        raise ValidationError("not a hex key: %r" % (hexstr,))
    if len(raw) != KEY_LEN:
        raise ValidationError("hex key must encode %d bytes, got %d" % (KEY_LEN, len(raw)))
    return encode_key(raw)


def decode_key(value, field, secret=False):
    """Base64 WireGuard key -> 32 bytes. `secret` keys are never echoed in the error message."""
    shown = "" if secret else " %r" % (value,)
    if not isinstance(value, str):
        raise ValidationError("%s: expected a base64 key string, got %s" % (field, type(value).__name__))
    v = value.strip()
    if len(v) != 44 or not v.endswith("="):
        raise ValidationError("%s:%s is not a WireGuard key (44 base64 characters encoding 32 bytes)" % (field, shown))
    try:
        raw = base64.b64decode(v, validate=True)
    except (binascii.Error, ValueError):
        raise ValidationError("%s:%s is not valid base64" % (field, shown))
    if len(raw) != KEY_LEN or encode_key(raw) != v:
        raise ValidationError("%s:%s is not a canonical base64 encoding of 32 bytes" % (field, shown))
    return raw


def _require_cryptography():
    # X25519 only through `cryptography` (constant time); a host without it gets this, not a slower, leakier fallback
    if not HAS_CRYPTOGRAPHY:
        raise WireGuardError("WireGuard keys need the Python library 'cryptography' on this host (python3-cryptography "
                             "or pip install cryptography)")


def public_key_bytes(private_raw):
    _require_cryptography()
    pub = X25519PrivateKey.from_private_bytes(private_raw).public_key()
    return pub.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


# A check-mode plan's stand-ins for the keys a real run generates (gateway_api.ensure_key_secret): they pass
# the PublicKey schema and read as what they are in a diff; never configured on an interface.
CHECK_MODE_PUBLIC_KEY = "CHECK+MODE+key+generated+by+the+real+run+xA="
CHECK_MODE_PRIVATE_KEY = "A" * 43 + "="


def public_key(private_key_b64):
    """Public key (base64) of a base64 private key, as `wg pubkey` prints it."""
    if private_key_b64 == CHECK_MODE_PRIVATE_KEY:
        return CHECK_MODE_PUBLIC_KEY
    return encode_key(public_key_bytes(decode_key(private_key_b64, "private_key", secret=True)))


def generate_private_key():
    """A new private key, base64, clamped like `wg genkey` output."""
    _require_cryptography()
    raw = X25519PrivateKey.generate().private_bytes(
        serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption())
    return encode_key(_clamp(raw))


def generate_keypair():
    """(private_key, public_key), both base64."""
    priv = generate_private_key()
    return priv, public_key(priv)


def read_private_key_file(path, field="private_key_file"):
    """Reads a key file; refuses files other users can read."""
    try:
        st = os.stat(path)
        with open(path, "r", encoding="ascii") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise ValidationError("%s: cannot read %r: %s" % (field, path, getattr(e, "strerror", None) or e))
    if st.st_mode & 0o077:
        raise ValidationError("%s: %r is accessible by group/others (mode %04o); it must be 0600 or stricter"
                              % (field, path, st.st_mode & 0o777))
    return decode_key(text.strip(), field, secret=True)


def write_private_key_file(path, private_key_b64):
    """Creates `path` with mode 0600 and the key; never overwrites (O_EXCL). Returns False if it existed."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w", encoding="ascii") as f:
        f.write(private_key_b64 + "\n")
    return True
