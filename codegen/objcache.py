"""Object-file cache: a translation unit whose text, dependencies, compiler and flags are unchanged is not
compiled again (when only some functions of a robot changed, only their units are rebuilt).

Objects live in :func:`default_dir` (``$SOADYN_OBJECT_CACHE``, else ``$XDG_CACHE_HOME/soadyn/objects``
or ``~/.cache/soadyn/objects``; ``SOADYN_OBJECT_CACHE=off`` disables the cache) as ``<sha256>.o``, named
by the hash of everything that decides them; they are written to a temporary name and renamed, so a
concurrent or interrupted build never leaves a partial object under a valid name.  If linking fails while
cached objects were used, the build compiles every unit afresh (:func:`soadyn.codegen.build.build_extension`).
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from soadyn.codegen.profiles import machine_id


def default_dir() -> Path | None:
    """The object cache directory, or None when disabled (``SOADYN_OBJECT_CACHE`` = ``off``/``0``/empty)."""
    env = os.environ.get("SOADYN_OBJECT_CACHE")
    if env is not None:
        return None if env.strip().lower() in ("", "0", "off", "no", "false") else Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "soadyn" / "objects"

#: at most this many objects are kept (the least recently used are removed after a build)
MAX_OBJECTS = 4000
#: objects served from the cache / compiled and stored in this process (tests use them)
STATS = {"hits": 0, "stores": 0}


@functools.lru_cache(maxsize=8)
def compiler_identity(compiler: tuple[str, ...]) -> str:
    """``<cc> --version`` (the same command name may be another compiler on another machine)."""
    try:
        return subprocess.run([*compiler, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return ""


def object_key(text: str, dependency: str, compiler: list[str], flags: list[str], include: str) -> str:
    """Hash of everything that decides an object: its source and dependencies, the compiler (by version),
    the flags, Python's include directory, and for ``-march=native`` the CPU it resolves to (the cache
    directory may be shared by machines of several kinds, e.g. a home directory on a cluster)."""
    machine = machine_id() if any("native" in f for f in flags) else ""
    h = hashlib.sha256()
    for part in (text, dependency, "\0".join(compiler), compiler_identity(tuple(compiler)), "\0".join(flags),
                 include, machine):
        h.update(part.encode("utf-8", "surrogatepass"))
        h.update(b"\0\1")
    return h.hexdigest()


def fetch(cache_dir: Path | None, key: str, target: Path) -> bool:
    """Copy the cached object ``key`` to ``target``; False when there is none."""
    if cache_dir is None:
        return False
    src = cache_dir / f"{key}.o"
    try:
        shutil.copyfile(src, target)
        os.utime(src)
    except OSError:
        return False
    STATS["hits"] += 1
    return True


def store(cache_dir: Path | None, key: str, obj: Path) -> None:
    """Put a freshly compiled object into the cache (atomically; errors are ignored: it is a cache)."""
    if cache_dir is None:
        return
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".o", dir=cache_dir)
        os.close(fd)
        shutil.copyfile(obj, tmp)
        os.replace(tmp, cache_dir / f"{key}.o")
        STATS["stores"] += 1
    except OSError:
        return


def prune(cache_dir: Path | None, keep: int = MAX_OBJECTS) -> None:
    """Remove the least recently used objects beyond ``keep``, and stale temporary files."""
    if cache_dir is None or not cache_dir.is_dir():
        return
    try:
        files = sorted(cache_dir.glob("*.o"), key=lambda p: p.stat().st_mtime, reverse=True)
    except OSError:
        return
    for p in files[keep:]:
        p.unlink(missing_ok=True)
    for p in cache_dir.glob(".tmp-*"):
        try:
            if time.time() - p.stat().st_mtime > 3600:
                p.unlink(missing_ok=True)
        except OSError:
            pass
