"""WireGuard keys: X25519 against RFC 7748 and `wg pubkey`, base64/hex forms, validation messages, key files."""
import base64
import os
import shutil
import stat
import subprocess
import sys

import pytest
from hypothesis import given, strategies as st

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                "build", "collections"))
from ansible_collections.liqo.fabric.plugins.module_utils.wireguard import keys as wg_keys  # noqa: E402
from ansible_collections.liqo.fabric.plugins.module_utils.wireguard.errors import (  # noqa: E402
    ValidationError, WireGuardError)
from ansible_collections.liqo.fabric.plugins.module_utils.wireguard.keys import (  # noqa: E402
    decode_key, encode_key, generate_keypair, generate_private_key, hex_to_key, key_to_hex, public_key,
    public_key_bytes, read_private_key_file, write_private_key_file)

# RFC 7748 section 6.1 (Alice)
RFC_PRIV = bytes.fromhex("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a")
RFC_PUB = bytes.fromhex("8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a")


def test_rfc7748_vector():
    assert public_key_bytes(RFC_PRIV) == RFC_PUB
    assert public_key(base64.b64encode(RFC_PRIV).decode()) == base64.b64encode(RFC_PUB).decode()


def test_no_pure_python_fallback(monkeypatch):
    """Without cryptography, keys fail with a message naming the library (no non-constant-time fallback)."""
    assert not hasattr(wg_keys, "_x25519_base_pure")
    monkeypatch.setattr(wg_keys, "HAS_CRYPTOGRAPHY", False)
    with pytest.raises(WireGuardError, match="need the Python library 'cryptography'"):
        public_key_bytes(RFC_PRIV)
    with pytest.raises(WireGuardError, match="need the Python library 'cryptography'"):
        generate_private_key()


@pytest.mark.skipif(shutil.which("wg") is None, reason="wireguard-tools (wg) not installed")
def test_generated_keys_match_wg_pubkey_and_wg_genkey_keys_match_ours():
    for _attempt in range(10):
        priv, pub = generate_keypair()
        out = subprocess.run(["wg", "pubkey"], input=priv + "\n", capture_output=True, text=True, check=True)
        assert out.stdout.strip() == pub
        theirs = subprocess.run(["wg", "genkey"], capture_output=True, text=True, check=True).stdout.strip()
        their_pub = subprocess.run(["wg", "pubkey"], input=theirs, capture_output=True, text=True, check=True).stdout.strip()
        assert public_key(theirs) == their_pub


def test_generated_private_keys_are_clamped_like_wg_genkey():
    for _attempt in range(20):
        raw = base64.b64decode(generate_private_key())
        assert len(raw) == 32 and raw[0] & 7 == 0 and raw[31] & 0x80 == 0 and raw[31] & 0x40


@given(st.binary(min_size=32, max_size=32))
def test_hex_base64_roundtrip(raw):
    b64 = base64.b64encode(raw).decode()
    assert key_to_hex(b64) == raw.hex()
    assert hex_to_key(raw.hex()) == b64


GOOD = base64.b64encode(bytes(range(32))).decode()


@pytest.mark.parametrize("value, fragment", [
    ("abc", "not a WireGuard key (44 base64"),
    (GOOD[:-2] + "==", "canonical base64 encoding of 32 bytes"),     # 44 chars but 31 bytes
    ("!" * 43 + "=", "not valid base64"),
    ("A" * 20 + "=" + "A" * 22 + "=", "not valid base64"),
    (GOOD[:42] + "B=", "not a canonical base64"),                    # unused low bits set
    (12345, "expected a base64 key string"),
])
def test_decode_key_errors_name_the_field(value, fragment):
    with pytest.raises(ValidationError) as e:
        decode_key(value, "peers[3].public_key")
    assert str(e.value).startswith("peers[3].public_key:")
    assert fragment in str(e.value)


def test_secret_keys_are_not_echoed_in_errors():
    bad = GOOD[:42] + "B="
    with pytest.raises(ValidationError) as e:
        decode_key(bad, "private_key", secret=True)
    assert bad not in str(e.value) and "private_key" in str(e.value)


@pytest.mark.parametrize("hexstr", ["zz", "00" * 31, "00" * 33])
def test_hex_to_key_rejects(hexstr):
    with pytest.raises(ValidationError):
        hex_to_key(hexstr)


def test_private_key_file_written_0600_once_and_readable_back(tmp_path):
    path = str(tmp_path / "k")
    priv, pub = generate_keypair()
    assert write_private_key_file(path, priv) is True
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert write_private_key_file(path, generate_private_key()) is False   # never overwritten
    assert encode_key(read_private_key_file(path)) == priv


def test_private_key_file_readable_by_others_is_refused(tmp_path):
    path = tmp_path / "k"
    path.write_text(generate_private_key())
    os.chmod(path, 0o644)
    with pytest.raises(ValidationError) as e:
        read_private_key_file(str(path))
    assert "private_key_file" in str(e.value) and "0644" in str(e.value)
