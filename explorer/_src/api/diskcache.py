"""A persistent cache of Reports on disk, so that a request compiled once, in any process, is
answered again without a compile worker: the first result of a page load, of a tutorial cell, of
a fresh kernel.

An entry is named by the request's digest (the one the in-memory cache uses: the pickled
function and the request) mixed with everything else that decides the compile's output: the
versions of jax, jaxlib and libtpu, of Python, a digest of the explorer's own source (so that
an edited explorer never reads a Report built by older code) and the XLA flags other than the
device count. Only what the compile returns is stored; a target's prediction is recomputed
from it (explorer._src.report.predict), so the cache never holds a stale prediction.

Safety. Entries are pickles, so nothing is read that this cache did not write:

- the folder is created private (0700, whatever the umask) and used only while it belongs to
  this user and no one outside its group may write to it (group write, as umask 002 leaves a
  folder made by hand, is allowed: the key below is what an entry is checked against);
- each entry carries an HMAC-SHA256 of its bytes under a random key kept in the folder (0600):
  a file written by anyone or anything else, or cut short, fails the check and is a miss;
- the unpickler builds only the explorer's own dataclasses and enums (nothing else can be
  named in an entry), so even a forged entry could not run code.

Concurrent processes share the folder safely: an entry is written to a temporary file and
renamed into place (readers see the old entry or the new one, never part of one), and the key
is created with a hard link, which fails for the second of two racing processes. The folder is
kept under `max_bytes`: after a write, the least recently used entries (a hit refreshes an
entry's time) are removed. A corrupt or unreadable entry is a miss, never an error.

Where: $EXPLORER_CACHE_DIR, else $XDG_CACHE_HOME/sharding-explorer (~/.cache/...). Off when
EXPLORER_DISK_CACHE is 0, off, false or no.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import hmac
import importlib
import io
import logging
import os
import pickle
import secrets
import sys
import threading
import time
import warnings
import zlib
from functools import cache
from importlib import metadata
from pathlib import Path

from explorer._src.report.report import Report

DEFAULT_MAX_BYTES = 256 * 2**20     # a tutorial's reports take ~100 KiB each, compressed
_FORMAT = b"SXRC1\n"                # bumped when the entry layout changes
_MAC_BYTES = 32
_SUFFIX = ".report"
_STALE_TMP_S = 3600                 # a temporary file this old belongs to a writer that died

_log = logging.getLogger(__name__)


class _ReportUnpickler(pickle.Unpickler):
    """Builds the explorer's own dataclasses and enums, and nothing else."""

    def find_class(self, module: str, name: str):
        if module == "explorer" or module.startswith("explorer."):
            obj = getattr(importlib.import_module(module), name, None)
            if isinstance(obj, type) and (dataclasses.is_dataclass(obj)
                                          or issubclass(obj, enum.Enum)):
                return obj
        raise pickle.UnpicklingError(f"{module}.{name} is not an explorer dataclass or enum")


def _loads(data: bytes) -> Report:
    report = _ReportUnpickler(io.BytesIO(data)).load()
    if not isinstance(report, Report):
        raise pickle.UnpicklingError(f"the entry holds a {type(report).__name__}, not a Report")
    return report


@cache
def _source_digest() -> str:
    """sha256 over the explorer's Python files outside the UI: any edit to the code that builds
    a Report names every entry anew."""
    root = Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel.startswith("ui/"):
            continue
        h.update(rel.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "-"


@cache
def environment() -> tuple[str, ...]:
    """What besides the request decides a compile's output, as text (see the module doc)."""
    flags = " ".join(sorted(f for f in os.environ.get("XLA_FLAGS", "").split()
                            if not f.startswith("--xla_force_host_platform_device_count")))
    return (f"python={sys.version_info[0]}.{sys.version_info[1]}",
            *(f"{d}={_version(d)}" for d in ("jax", "jaxlib", "libtpu", "sharding-explorer")),
            f"explorer-source={_source_digest()}", f"XLA_FLAGS={flags}")


class DiskCache:
    """Reports on disk under `directory`, at most about `max_bytes` of them."""

    def __init__(self, directory: str | os.PathLike, max_bytes: int = DEFAULT_MAX_BYTES):
        self.directory = Path(directory)
        self.max_bytes = max_bytes
        self.entries = self.directory / "reports"
        # Each folder made here is made 0700 itself: mkdir(parents=True) would make the cache's
        # own folder with the umask's mode (0775 under umask 002).
        for folder in (self.directory, self.entries):
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._check_private(self.directory)
        self._check_private(self.entries)
        self._key = self._load_key()

    # ------------------------------------------------------------------ set-up

    @staticmethod
    def _check_private(path: Path) -> None:
        """A folder this user owns, which no one outside its group may write to. Group write
        (a folder made under umask 002, the group often the user's own) is allowed: a group
        member can remove entries or the key (a miss, or the cache off), but cannot forge an
        entry without the key, which is this user's alone (0600, checked by `_load_key`)."""
        st = path.stat()
        if st.st_uid != os.getuid():
            raise PermissionError(f"{path} belongs to another user (uid {st.st_uid}); the report "
                                  "cache needs a folder of this user's (set EXPLORER_CACHE_DIR)")
        if st.st_mode & 0o002:
            raise PermissionError(f"every user may write to {path} (mode "
                                  f"{st.st_mode & 0o777:o}); the report cache needs a folder "
                                  "others cannot write to (chmod o-w, or set EXPLORER_CACHE_DIR)")

    def _load_key(self) -> bytes:
        path = self.directory / "key"
        if not path.exists():
            tmp = self.directory / f".key-{secrets.token_hex(8)}"
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(secrets.token_bytes(32))
            try:
                os.link(tmp, path)          # fails if another process made the key first
            except FileExistsError:
                pass
            finally:
                tmp.unlink()
        st = path.stat()
        if st.st_uid != os.getuid() or st.st_mode & 0o077:
            raise PermissionError(f"{path} must be this user's and private (chmod 600)")
        key = path.read_bytes()
        if len(key) != 32:
            raise PermissionError(f"{path} is not a report cache key ({len(key)} bytes)")
        return key

    # ------------------------------------------------------------------ entries

    def path(self, digest: str) -> Path:
        """The entry's file for a request digest (hex), in this environment."""
        name = hashlib.sha256("\0".join((digest, *environment())).encode()).hexdigest()
        return self.entries / (name + _SUFFIX)

    def _mac(self, payload: bytes) -> bytes:
        return hmac.new(self._key, payload, hashlib.sha256).digest()

    def get(self, digest: str) -> Report | None:
        """The Report stored for `digest`, or None: absent, written by something else, cut
        short or unreadable. Never raises."""
        path = self.path(digest)
        try:
            blob = path.read_bytes()
        except OSError:
            return None
        try:
            head, mac = blob[:len(_FORMAT)], blob[len(_FORMAT):len(_FORMAT) + _MAC_BYTES]
            payload = blob[len(_FORMAT) + _MAC_BYTES:]
            if head != _FORMAT or not hmac.compare_digest(mac, self._mac(payload)):
                _log.info("report cache: %s fails its check; ignored", path.name)
                return None
            report = _loads(zlib.decompress(payload))
        except Exception as e:       # a corrupt entry is a miss, whatever it raises
            _log.info("report cache: %s is unreadable (%s); ignored", path.name, e)
            return None
        try:
            os.utime(path)           # most recently used
        except OSError:
            pass
        return report

    def put(self, digest: str, report: Report) -> bool:
        """Store `report` for `digest`; False (nothing stored) when it cannot be, e.g. a disk
        full or a Report holding something the reader would refuse. Never raises."""
        try:
            data = pickle.dumps(report, protocol=pickle.HIGHEST_PROTOCOL)
            _loads(data)             # store only what get() will read back
            payload = zlib.compress(data, 1)
            blob = _FORMAT + self._mac(payload) + payload
            tmp = self.entries / f".tmp-{secrets.token_hex(8)}"
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(blob)
                os.replace(tmp, self.path(digest))
            except BaseException:
                tmp.unlink(missing_ok=True)
                raise
        except Exception as e:
            _log.info("report cache: not stored (%s: %s)", type(e).__name__, e)
            return False
        self.trim()
        return True

    def _scan(self) -> list[tuple[float, int, Path]]:
        """(time last used, size, path) of every entry; stale temporary files are removed."""
        out = []
        now = time.time()
        with os.scandir(self.entries) as it:
            for e in it:
                try:
                    st = e.stat()
                except OSError:
                    continue          # removed meanwhile by another process
                if e.name.startswith(".tmp-"):
                    if now - st.st_mtime > _STALE_TMP_S:
                        Path(e.path).unlink(missing_ok=True)
                elif e.name.endswith(_SUFFIX):
                    out.append((st.st_mtime, st.st_size, Path(e.path)))
        return out

    def size(self) -> int:
        """Bytes held by the entries."""
        return sum(s for _, s, _ in self._scan())

    def trim(self) -> None:
        """Remove the least recently used entries until the folder holds at most 80% of
        `max_bytes` (the margin spares a scan of the folder on every write)."""
        try:
            entries = self._scan()
            total = sum(s for _, s, _ in entries)
            if total <= self.max_bytes:
                return
            for _, size, path in sorted(entries):
                if total <= 0.8 * self.max_bytes:
                    break
                path.unlink(missing_ok=True)
                total -= size
        except OSError as e:
            _log.info("report cache: trimming failed (%s)", e)

    def clear(self) -> None:
        """Remove every entry (the key stays)."""
        for _, _, path in self._scan():
            path.unlink(missing_ok=True)


def default_directory() -> Path:
    explicit = os.environ.get("EXPLORER_CACHE_DIR")
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "sharding-explorer"


def enabled() -> bool:
    return os.environ.get("EXPLORER_DISK_CACHE", "1").strip().lower() not in (
        "0", "off", "false", "no")


_default: dict[Path, DiskCache | None] = {}
_default_lock = threading.Lock()


def default_cache() -> DiskCache | None:
    """The cache the API uses, from the environment (see the module doc); None when it is off
    or its folder cannot be used (said once, as a warning)."""
    if not enabled():
        return None
    directory = default_directory()
    with _default_lock:
        if directory not in _default:
            try:
                _default[directory] = DiskCache(directory)
            except OSError as e:
                warnings.warn(f"sharding-explorer: the report cache at {directory} is off: {e}",
                              RuntimeWarning, stacklevel=3)
                _default[directory] = None
        return _default[directory]
