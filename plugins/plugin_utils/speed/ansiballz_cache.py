# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Bytecode cache for Ansible module payloads (AnsiballZ), installed into a Python as a .pth file.

Every module run imports its module and module_utils from a fresh zip with zipimport, which never caches
bytecode and, in Python 3.11, compiles each module twice (`get_filename` compiles to learn the path, then
`get_code` compiles again), a good part of a short module run. This path hook serves those zips through a
zipimporter that finds paths without compiling and takes code objects from a cache keyed by SHA-256 of (bytecode
magic, optimisation level, module name, source): an unchanged file is compiled once per machine and user.

Only paths inside an AnsiballZ payload (`.../ansible_<module>_payload.zip[/...]`) are touched. The cache is
~/.cache/liqo-fabric/ansiballz (LIQO_FABRIC_ANSIBALLZ_CACHE=<dir> moves it, =off disables it), created 0700;
a directory not owned by the user or writable by group/others is never read. Deleting it is always safe.
LIQO_FABRIC_SPEED_PATHS=off (every speed path of the collection off) leaves the hook out (switch.py decides both);
a payload naming or a zipimporter without the internals relied on (`_files`) falls back to zipimport's own behaviour.

`make setup` copies this file and switch.py into the venv's site-packages as the package `liqo_fabric_speed` (the
collection is not importable at a Python's start) and a .pth calls `install()`: standard library only, and no
module imported that a Python's start has not imported already until a payload is imported.
"""
import marshal
import os
import sys
import zipimport

from . import switch

ENV = switch.CACHE_ENV


class _Cache:
    """Resolved on first use, so a Python that never imports a payload pays nothing but the hook."""
    directory = None
    salt = None
    ready = False

    @classmethod
    def setup(cls):
        cls.ready = True
        if not switch.enabled("ansiballz_cache").on:
            return
        path = os.environ.get(ENV, "") or os.path.join(os.path.expanduser("~"), ".cache", "liqo-fabric", "ansiballz")
        try:
            os.makedirs(path, mode=0o700, exist_ok=True)
            st = os.stat(path)
        except OSError:
            return
        if st.st_uid != os.getuid() or st.st_mode & 0o022:
            return  # someone else could plant code objects here
        from importlib.util import MAGIC_NUMBER  # pylint: disable=import-outside-toplevel
        cls.salt = MAGIC_NUMBER + b"%d\0" % sys.flags.optimize
        cls.directory = path


class PayloadImporter(zipimport.zipimporter):
    """zipimporter for AnsiballZ payloads: no compile to find a path, cached code objects."""

    def get_filename(self, fullname):
        files = getattr(self, "_files", None)
        if files is None:  # another zipimport implementation: its own (compiling) path lookup
            return super().get_filename(fullname)
        base = self.prefix + fullname.rpartition(".")[2]
        for suffix in (os.sep + "__init__.py", ".py"):
            if base + suffix in files:
                return self.archive + os.sep + base + suffix
        return super().get_filename(fullname)

    def get_code(self, fullname):
        try:
            source = self.get_source(fullname)
        except zipimport.ZipImportError:
            source = None
        if source is None:  # bytecode-only or missing member: zipimport's own handling
            return super().get_code(fullname)
        filename = self.get_filename(fullname)
        if not _Cache.ready:
            _Cache.setup()
        if _Cache.directory is None:
            return compile(source, filename, "exec", dont_inherit=True)
        import hashlib  # pylint: disable=import-outside-toplevel
        key = hashlib.sha256(_Cache.salt + fullname.encode() + b"\0" + source.encode("utf-8")).hexdigest()
        entry = os.path.join(_Cache.directory, key)
        try:
            with open(entry, "rb") as f:
                code = marshal.loads(f.read())
        except (OSError, ValueError, EOFError, TypeError):
            code = None
        if code is not None:
            import _imp  # pylint: disable=import-outside-toplevel
            _imp._fix_co_filename(code, filename)  # pylint: disable=protected-access  # tracebacks name this zip
            return code
        code = compile(source, filename, "exec", dont_inherit=True)
        _store(entry, marshal.dumps(code))
        return code


def _store(entry, data):
    tmp = "%s.%d.tmp" % (entry, os.getpid())
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, entry)  # atomic: concurrent module runs see the whole entry or none
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass


def payload_hook(path):
    """sys.path_hooks entry: the payload zip itself or a package directory inside it."""
    sep = ".zip" + os.sep
    archive = path.split(sep, 1)[0] + ".zip" if sep in path else path
    name = os.path.basename(archive)
    if name.startswith("ansible_") and name.endswith("_payload.zip"):
        return PayloadImporter(path)
    raise ImportError("not an AnsiballZ payload")


def install():
    if not switch.enabled("ansiballz_hook").on:
        return
    if payload_hook not in sys.path_hooks:
        sys.path_hooks.insert(0, payload_hook)
        sys.path_importer_cache.clear()
