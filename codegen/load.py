"""Load a compiled module directory (``soadyn compile`` output) as a Python package."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import types
from pathlib import Path

STAMP = "soadyn_stamp.json"


def _stamp(path: Path) -> dict:
    try:
        return json.loads((path / STAMP).read_text())
    except (OSError, ValueError):
        return {}


def load(path: str | os.PathLike) -> types.ModuleType:
    """Import the compiled module in directory ``path`` (e.g. ``generated/scratch_tree``).

    The package is registered under its directory name, so a later ``import <name>`` (with the parent
    directory on ``sys.path``) gives the same module.  If a different build is already imported under that
    name (the robot changed and was recompiled in the same process, or another output directory), this one
    is registered under a unique alias instead: both stay usable.
    """
    path = Path(path).resolve()
    init = path / "__init__.py"
    if not init.is_file():
        raise FileNotFoundError(f"{path} is not a compiled soadyn module (no __init__.py): build it with "
                                f"'soadyn compile ROBOT -o {path.parent}'")
    key = _stamp(path).get("key", "")
    name = path.name
    for candidate in (name, f"_soadyn_{name}_{key[:16]}"):
        mod = sys.modules.get(candidate)
        if mod is None:
            return _import(candidate, init, path)
        if getattr(mod, "cache_key", None) == key and Path(mod.__file__).resolve() == init:
            return mod
    i = 2
    while f"_soadyn_{name}_{key[:16]}_{i}" in sys.modules:
        i += 1
    return _import(f"_soadyn_{name}_{key[:16]}_{i}", init, path)


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
