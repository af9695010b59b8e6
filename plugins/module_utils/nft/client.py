# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Runs nftables command buffers in-process through libnftables (ctypes), or through `nft` when the
library is missing.

One `Nft` object = one libnftables context. `run(text)` sends a whole buffer in one call, which nft
commits as one kernel transaction (all or nothing). `list_table_json()` reads a table back as parsed
JSON. Everything happens in the network namespace of the calling thread.

Pure Python, standard library only (the Debian `nftables` Python binding is not required).
"""
from __future__ import annotations

import ctypes
import ctypes.util
import json
import shlex
import shutil
import subprocess
import threading

LIBRARY_NAMES = ("libnftables.so.1", "libnftables.so")
NFT_CTX_DEFAULT = 0
NFT_CTX_OUTPUT_JSON = 1 << 4


class NftError(RuntimeError):
    """An nftables command failed; `.error` is nft's own message, `.rc` its return code."""

    def __init__(self, message: str, error: str = "", rc: int = 1):
        super().__init__(message)
        self.error = error
        self.rc = rc


def _load_library():
    names = list(LIBRARY_NAMES)
    found = ctypes.util.find_library("nftables")
    if found and found not in names:
        names.append(found)
    for name in names:
        try:
            lib = ctypes.CDLL(name, use_errno=True)
        except OSError:
            continue
        try:
            lib.nft_ctx_new.restype = ctypes.c_void_p
            lib.nft_ctx_new.argtypes = [ctypes.c_uint32]
            lib.nft_ctx_free.restype = None
            lib.nft_ctx_free.argtypes = [ctypes.c_void_p]
            lib.nft_ctx_output_get_flags.restype = ctypes.c_uint
            lib.nft_ctx_output_get_flags.argtypes = [ctypes.c_void_p]
            lib.nft_ctx_output_set_flags.restype = None
            lib.nft_ctx_output_set_flags.argtypes = [ctypes.c_void_p, ctypes.c_uint]
            lib.nft_ctx_buffer_output.restype = ctypes.c_int
            lib.nft_ctx_buffer_output.argtypes = [ctypes.c_void_p]
            lib.nft_ctx_buffer_error.restype = ctypes.c_int
            lib.nft_ctx_buffer_error.argtypes = [ctypes.c_void_p]
            lib.nft_ctx_get_output_buffer.restype = ctypes.c_char_p
            lib.nft_ctx_get_output_buffer.argtypes = [ctypes.c_void_p]
            lib.nft_ctx_get_error_buffer.restype = ctypes.c_char_p
            lib.nft_ctx_get_error_buffer.argtypes = [ctypes.c_void_p]
            lib.nft_run_cmd_from_buffer.restype = ctypes.c_int
            lib.nft_run_cmd_from_buffer.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
        except AttributeError:  # not libnftables, or too old
            continue
        return lib
    return None


_LIB = None
_LIB_LOADED = False
_LIB_LOCK = threading.Lock()


def library():
    """The loaded libnftables (cached), or None when it is not installed."""
    global _LIB, _LIB_LOADED  # pylint: disable=global-statement
    with _LIB_LOCK:
        if not _LIB_LOADED:
            _LIB = _load_library()
            _LIB_LOADED = True
    return _LIB


class _LibBackend:
    name = "libnftables"

    def __init__(self, lib):
        self._lib = lib
        self._ctx = lib.nft_ctx_new(NFT_CTX_DEFAULT)
        if not self._ctx:
            raise NftError("nft_ctx_new failed")
        if lib.nft_ctx_buffer_output(self._ctx) != 0 or lib.nft_ctx_buffer_error(self._ctx) != 0:
            lib.nft_ctx_free(self._ctx)
            self._ctx = None
            raise NftError("could not buffer libnftables output")
        self._base_flags = lib.nft_ctx_output_get_flags(self._ctx)

    def run(self, text: str, json_output: bool = False) -> tuple[int, str, str]:
        flags = self._base_flags | (NFT_CTX_OUTPUT_JSON if json_output else 0)
        self._lib.nft_ctx_output_set_flags(self._ctx, flags)
        rc = self._lib.nft_run_cmd_from_buffer(self._ctx, text.encode())
        # Reading a buffer also rewinds it, so every call starts empty.
        out = self._lib.nft_ctx_get_output_buffer(self._ctx) or b""
        err = self._lib.nft_ctx_get_error_buffer(self._ctx) or b""
        return rc, out.decode(errors="replace"), err.decode(errors="replace")

    def close(self):
        if self._ctx:
            self._lib.nft_ctx_free(self._ctx)
            self._ctx = None


class _CliBackend:
    name = "nft"

    def __init__(self, executable: str):
        self._nft = executable

    def run(self, text: str, json_output: bool = False) -> tuple[int, str, str]:
        if json_output:
            # `nft -j -f` would parse the input as JSON: a listing goes on the command line instead.
            argv = [self._nft, "-j"] + shlex.split(text)
            proc = subprocess.run(argv, capture_output=True, text=True, check=False)
        else:
            proc = subprocess.run([self._nft, "-f", "-"], input=text, capture_output=True, text=True, check=False)
        return proc.returncode, proc.stdout, proc.stderr

    def close(self):
        pass


class Nft:
    """nftables command runner. backend: "auto" (libnftables, else the nft command), "libnftables"
    or "nft". Use as a context manager or call close()."""

    def __init__(self, backend: str = "auto", nft_executable: str | None = None):
        if backend not in ("auto", "libnftables", "nft"):
            raise ValueError(f"unknown nftables backend {backend!r}")
        impl = None
        if backend in ("auto", "libnftables"):
            lib = library()
            if lib is not None:
                impl = _LibBackend(lib)
            elif backend == "libnftables":
                raise NftError("libnftables.so.1 is not installed")
        if impl is None:
            exe = nft_executable or shutil.which("nft") or shutil.which("nft", path="/usr/sbin:/sbin")
            if not exe:
                raise NftError("neither libnftables.so.1 nor the nft command is available")
            impl = _CliBackend(exe)
        self._impl = impl

    @property
    def backend(self) -> str:
        return self._impl.name

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        self._impl.close()

    def run(self, text: str, json_output: bool = False) -> str:
        """Runs a command buffer (one transaction); returns nft's output, raises NftError on failure."""
        rc, out, err = self._impl.run(text, json_output)
        if rc != 0:
            first = err.strip().splitlines()[0] if err.strip() else f"rc={rc}"
            raise NftError(f"nftables command failed: {first}", error=err.strip(), rc=rc)
        return out

    def list_table_json(self, family: str, name: str) -> dict | None:
        """`list table FAMILY NAME` as parsed JSON, or None when the table does not exist."""
        rc, out, err = self._impl.run(f"list table {family} {name}\n", True)
        if rc != 0:
            if "No such file or directory" in err:
                return None
            raise NftError(f"cannot list table {family} {name}: {err.strip()}", error=err.strip(), rc=rc)
        try:
            return json.loads(out)
        except ValueError as e:
            raise NftError(f"nft returned invalid JSON for table {family} {name}: {e}") from e

    def list_tables(self) -> list[tuple[str, str]]:
        """[(family, name)] of every table of the namespace."""
        data = json.loads(self.run("list tables\n", json_output=True) or '{"nftables": []}')
        return [(o["table"]["family"], o["table"]["name"]) for o in data.get("nftables", []) if "table" in o]
