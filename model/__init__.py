"""soadyn.model: the robot model (immutable data), robot files (YAML read and write, URDF import, schema,
validation) and the SO(3) helpers every layer uses (:mod:`soadyn.model.rotations`).  It imports no other
soadyn package.

There is one ``load_robot``: :func:`soadyn.load_robot` (= :func:`soadyn.symbolic.checks.load_robot`).  It
reads the file with :func:`read_robot_file`, the model layer's reader (the file, its schema and the physics
of every body), and adds the singular-mass-matrix check, which runs the dynamics and so lives a layer up.
"""

from __future__ import annotations

from pathlib import Path

from soadyn.model.robot import BodySpec, Frame, Inertia, Joint, LoopClosure, Placement, Robot, require_free
from soadyn.model.robotfile import MassCheck, RobotFileError, check_base, load_yaml, to_dict, to_yaml

YAML_SUFFIXES = (".yaml", ".yml")
URDF_SUFFIXES = (".urdf",)
MJCF_SUFFIXES = (".xml", ".mjcf")   # MuJoCo MJCF, read by MuJoCo's parser (soadyn.model.mjcf)


def read_robot_file(path: str | Path, base: str | None = None, *, mimic: str = "couple",
                    check: MassCheck | None = None) -> Robot:
    """Read a robot file: YAML (``.yaml``/``.yml``), URDF (``.urdf``) or MuJoCo MJCF (``.xml``/``.mjcf``,
    through MuJoCo's parser: :mod:`soadyn.model.mjcf`), chosen by suffix.

    The model layer's reader, without the dynamics check: users call :func:`soadyn.load_robot`, which
    passes ``check=`` :func:`soadyn.symbolic.checks.check_mass_matrix`.

    ``base`` ('free' | 'fixed') overrides the file (YAML ``base:``; URDF default is 'free').
    ``mimic`` applies to URDF only: 'couple' (default: a true coupling, no coordinate of its own),
    'independent' (mimic joints become ordinary joints, as in Pinocchio's default), 'fixed' (locked at
    zero) or 'error'.  ``check`` (see
    :data:`~soadyn.model.robotfile.MassCheck`) runs on the built model.
    Any problem raises :class:`RobotFileError` (a ``ValueError``) naming the file, field and fix.
    """
    path = Path(path)
    suffix = path.suffix.lower()
    check_base(base, path)
    if suffix in YAML_SUFFIXES:
        return load_yaml(path, base, check=check)
    if suffix in URDF_SUFFIXES:
        from soadyn.model.urdf import load_urdf  # lazy: lxml and yourdfpy only for URDF files

        return load_urdf(path, base, mimic=mimic, check=check)
    if suffix in MJCF_SUFFIXES:
        from soadyn.model.mjcf import parse_mjcf  # lazy: MuJoCo only for MJCF files

        return parse_mjcf(path, base, check=check)
    raise RobotFileError(path, "", f"unknown file type {suffix or '(no suffix)'!r}; "
                         "use a .yaml/.yml robot file, a .urdf file or an MJCF .xml file")


__all__ = ["BodySpec", "Frame", "Inertia", "Joint", "LoopClosure", "MassCheck", "Placement", "Robot",
           "RobotFileError", "read_robot_file", "require_free", "to_dict", "to_yaml"]
