"""soadyn.symbolic: robot models, spatial operator algorithms (generic over the scalar), reference path."""

from __future__ import annotations

from pathlib import Path

from .model import Robot
from .robotfile import RobotFileError, check_base, load_yaml

YAML_SUFFIXES = (".yaml", ".yml")
URDF_SUFFIXES = (".urdf",)


def load_robot(path: str | Path, base: str | None = None, *, mimic: str = "error") -> Robot:
    """Load a robot file: YAML (``.yaml``/``.yml``) or URDF (``.urdf``), chosen by suffix.

    ``base`` ('free' | 'fixed') overrides the file (YAML ``base:``; URDF default is 'free').
    ``mimic`` applies to URDF only: 'error' (default), 'independent' (mimic joints become ordinary
    joints, as in Pinocchio's default) or 'fixed' (locked at zero).
    Any problem raises :class:`RobotFileError` (a ``ValueError``) naming the file, field and fix.
    """
    path = Path(path)
    suffix = path.suffix.lower()
    check_base(base, path)
    if suffix in YAML_SUFFIXES:
        return load_yaml(path, base)
    if suffix in URDF_SUFFIXES:
        from .urdf import load_urdf

        return load_urdf(path, base, mimic=mimic)
    raise RobotFileError(path, "", f"unknown file type {suffix or '(no suffix)'!r}; "
                         "use a .yaml/.yml robot file or a .urdf file")


__all__ = ["Robot", "RobotFileError", "load_robot"]
