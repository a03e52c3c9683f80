"""soadyn.model: the robot model (immutable data), robot files (YAML read and write, URDF import, schema,
validation) and the SO(3) helpers every layer uses.  It imports no other soadyn package."""

from __future__ import annotations

from pathlib import Path

from soadyn.model.robot import Robot
from soadyn.model.robotfile import RobotFileError, check_base, load_yaml

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
        from soadyn.model.urdf import load_urdf

        return load_urdf(path, base, mimic=mimic)
    raise RobotFileError(path, "", f"unknown file type {suffix or '(no suffix)'!r}; "
                         "use a .yaml/.yml robot file or a .urdf file")


__all__ = ["Robot", "RobotFileError", "load_robot"]
