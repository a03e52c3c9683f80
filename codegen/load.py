"""Load a compiled module directory (``soadyn compile`` output) as a Python package."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import keyword
import os
import sys
import types
from pathlib import Path

from soadyn.codegen.cache import read_stamp, verify


def _stamp(path: Path) -> dict:
    return read_stamp(path) or {}


def _importable_as(name: str, init: Path) -> bool:
    """True when ``import name`` would find exactly this package (its parent directory is on
    ``sys.path``) and no other module of that name is imported: only then is the bare name registered."""
    if not name.isidentifier() or name.startswith("_") or keyword.iskeyword(name):
        return False
    mod = sys.modules.get(name)
    if mod is not None:
        return False
    try:
        spec = importlib.machinery.PathFinder.find_spec(name)
    except (ImportError, ValueError):
        return False
    return spec is not None and spec.origin is not None and Path(spec.origin).resolve() == init


def load(path: str | os.PathLike, *, verified: bool = False) -> types.ModuleType:
    """Import the compiled module in directory ``path`` (e.g. ``generated/scratch_tree``).

    The package is registered in ``sys.modules`` under a private alias ``_soadyn_<name>_<key>``, and also
    under its directory name when that is what ``import <name>`` would import anyway (the parent
    directory is on ``sys.path`` and nothing else of that name is imported), so a later ``import <name>``
    gives the same module.  A module is never registered under a name another module owns (a robot
    called ``scipy`` does not become ``sys.modules['scipy']``).  If a different build is already imported
    under an alias (the robot changed and was recompiled in the same process, or another output
    directory), this one gets a numbered alias: both stay usable.  ``verified``: the caller has just
    checked every file against the stamp (the compile pipeline, under its module lock): not hashed again.
    """
    path = Path(path).resolve()
    init = path / "__init__.py"
    if not init.is_file():
        raise FileNotFoundError(f"{path} is not a compiled soadyn module (no __init__.py): build it with "
                                f"'soadyn compile ROBOT -o {path.parent}'")
    stamp = _stamp(path)
    key = stamp.get("key", "")
    if not verified and "files" in stamp and not verify(path):
        raise ImportError(f"{path}: the module's files do not match the sha256 recorded at build time "
                          "(damaged or edited); rebuild it with 'soadyn compile ROBOT --force'")
    name = path.name
    mod = sys.modules.get(name)
    if mod is not None and getattr(mod, "cache_key", None) == key and key and \
            Path(getattr(mod, "__file__", "") or "").resolve() == init:
        return mod
    alias = f"_soadyn_{name}_{key[:16]}"
    i = 2
    while True:
        mod = sys.modules.get(alias)
        if mod is None:
            module = _import(alias, init, path)
            if _importable_as(name, init):
                sys.modules[name] = module
            return module
        if getattr(mod, "cache_key", None) == key and Path(mod.__file__).resolve() == init:
            return mod
        alias = f"_soadyn_{name}_{key[:16]}_{i}"
        i += 1


def _import(name: str, init: Path, path: Path) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, init, submodule_search_locations=[str(path)])
    if spec is None or spec.loader is None:  # pragma: no cover
        raise ImportError(f"cannot import {init}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module
