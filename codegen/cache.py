"""The compiled-module cache: content hashes, a per-module lock, stale temporaries, name collisions.

A compiled module directory ``<out>/<module>/`` is served from the cache only when its stamp
(``soadyn_stamp.json``) carries the expected cache key *and* the sha256 of every file in the directory
(C source and header, ``__init__.py``, the extension) matches the bytes on disk: a truncated, garbage or
edited file (even a patched constant in the extension) makes it a miss, and the module is rebuilt.

Builds are transactions (:func:`module_lock`): one process (or thread) at a time builds, swaps into place
and loads a given ``<out>/<module>``, holding an exclusive ``flock`` on ``<out>/.<module>.lock``.  So a
caller always loads the build it made or verified, never one that another process swapped in between,
and the temporary directories ``.<module>.tmp-*`` / ``.<module>.old-*`` found while holding the lock
belong to builds that died (``kill -9``): :func:`clean_stale` removes them.

Two different robots whose names map to one module name (``a-b`` and ``a_b`` -> ``a_b``) in one output
directory are an error (:class:`ModuleCollisionError`), not a race on who wins.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

from soadyn.model.names import brief

STAMP = "soadyn_stamp.json"
#: never hashed or compared (Python's own byte-code cache of __init__.py)
IGNORED = frozenset({"__pycache__"})


class ModuleCollisionError(ValueError):
    """Another robot already owns this module name in this output directory."""


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def file_digests(module_dir: Path) -> dict[str, str]:
    """sha256 of every regular file of a module directory except the stamp (sorted by name)."""
    module_dir = Path(module_dir)
    return {p.name: sha256_file(p) for p in sorted(module_dir.iterdir())
            if p.name != STAMP and p.name not in IGNORED and p.is_file()}


def read_stamp(module_dir: Path) -> dict | None:
    try:
        stamp = json.loads((Path(module_dir) / STAMP).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return stamp if isinstance(stamp, dict) else None


def verify(module_dir: Path, key: str | None = None) -> bool:
    """True when ``module_dir`` holds a complete module whose files all match the stamp's sha256 (and
    whose key is ``key``, if given).  Any missing, extra, truncated or edited file gives False."""
    module_dir = Path(module_dir)
    stamp = read_stamp(module_dir)
    if not stamp or (key is not None and stamp.get("key") != key):
        return False
    recorded = stamp.get("files")
    if not isinstance(recorded, dict) or not {"__init__.py", stamp.get("extension")} <= set(recorded):
        return False
    try:
        return file_digests(module_dir) == recorded
    except OSError:
        return False


def check_owner(target: Path, robot_name: str, expected_files: set[str]) -> None:
    """Refuse to replace ``target`` when it belongs to another robot (its stamp names a different robot)
    or is not a soadyn module at all (files other than ``expected_files`` and no stamp)."""
    if not target.exists() and not target.is_symlink():
        return
    if not target.is_dir() or target.is_symlink():
        raise ModuleCollisionError(f"{target} exists and is not a compiled-module directory; remove it or "
                                   "choose another output directory (-o)")
    stamp = read_stamp(target)
    if stamp is not None:
        other = stamp.get("robot")
        if isinstance(other, str) and other != robot_name:
            raise ModuleCollisionError(
                f"robots {_short(other)} and {_short(robot_name)} both map to module {target.name!r} in "
                f"{target.parent}; rename one of the robots or compile it into another output directory (-o)")
        return
    names = {p.name for p in target.iterdir()} - IGNORED
    if (target / STAMP).exists():
        return  # an unreadable stamp: a damaged module of ours, rebuilt
    if not names <= expected_files:
        raise ModuleCollisionError(f"{target} exists and is not a soadyn module (it holds "
                                   f"{len(names - expected_files)} other files); remove it or choose another "
                                   "output directory (-o)")


def _short(name: str) -> str:
    return brief(name, 40)


_THREAD_LOCKS: dict[str, threading.Lock] = {}
_THREAD_LOCKS_GUARD = threading.Lock()


@contextlib.contextmanager
def module_lock(out: Path, module_name: str) -> Iterator[None]:
    """Exclusive lock of ``<out>/<module_name>`` across processes (``flock``) and threads.

    The lock file ``<out>/.<module_name>.lock`` exists only while held: the holder removes it before
    releasing, and a waiter that wakes up on a removed (or replaced) file tries again, so no lock file
    is left behind and no two holders can lock different files of the same name.
    """
    lock_path = Path(out) / f".{module_name}.lock"
    with _THREAD_LOCKS_GUARD:
        tlock = _THREAD_LOCKS.setdefault(str(lock_path), threading.Lock())
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX: threads of this process only
        fcntl = None
    with tlock:
        while True:
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o666)
            if fcntl is None:  # pragma: no cover
                break
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                same = os.stat(lock_path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
        try:
            yield
        finally:
            with contextlib.suppress(OSError):
                os.unlink(lock_path)
            os.close(fd)  # releases the flock


def clean_stale(out: Path, module_name: str) -> list[Path]:
    """Remove ``.<module>.tmp-*`` and ``.<module>.old-*`` left by builds that died (call with
    :func:`module_lock` held: no live build of this module can own them then)."""
    removed = []
    for pattern in (f".{module_name}.tmp-*", f".{module_name}.old-*"):
        for p in Path(out).glob(pattern):
            shutil.rmtree(p, ignore_errors=True)
            removed.append(p)
    return removed
