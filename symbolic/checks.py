"""Checks of a robot model that need the dynamics core, and the checked robot-file loader.

:func:`soadyn.model.read_robot_file` checks a robot file's syntax, schema and per-body physics; a model that
passes can still have a singular mass matrix (a moving joint that carries no inertia, a free base that
cannot resist every motion).  Finding that takes a float run of the articulated-body recursion, so it lives
here, above the model: :func:`load_robot`, the one robot-file loader, is that reader plus
:func:`check_mass_matrix`, and is what ``soadyn.load_robot`` exports.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from soadyn.model import read_robot_file
from soadyn.model.names import brief
from soadyn.model.robot import Robot
from soadyn.symbolic.algorithms.articulated_body import articulated_body
from soadyn.symbolic.scalar import NUMERIC

__all__ = ["check_mass_matrix", "load_robot"]


def load_robot(path: str | Path, base: str | None = None, *, mimic: str = "couple") -> Robot:
    """Load a robot file (YAML, URDF or MJCF, read by :func:`soadyn.model.read_robot_file`) and check that
    its mass matrix is not singular (:func:`check_mass_matrix`).

    Any problem raises :class:`~soadyn.model.RobotFileError` (a ``ValueError``) naming the file, field
    (the body, or the URDF joint or link with its line) and fix.
    """
    return read_robot_file(path, base, mimic=mimic, check=check_mass_matrix)


def check_mass_matrix(robot: Robot, n_configs: int = 2) -> tuple[int, str] | None:
    """Find a joint (or the free base) whose articulated inertia is singular, i.e. a singular mass matrix.

    Runs the articulated-body recursion (seed 000, Alg. 2: P(k), D(k) = H P H*) at the neutral
    configuration and at a fixed pseudo-random one.  Returns ``(k, problem)`` for the first body ``k``
    (tip to base) whose hinge inertia ``D(k)`` vanishes (``k = 0``: the free base's 6x6 articulated
    inertia is singular), else None.  M is positive definite iff every D(k) is (innovations
    factorisation, seed 000 Lemma 2.1).  A vanishing D(k) only spoils the quantities inboard of k, which
    are checked after it.
    """
    rng = np.random.default_rng(12345)
    robot = robot.uncoupled()   # mimic couplings: M = G^T M_full G is positive definite when M_full is
    for c in range(n_configs):
        q = robot.neutral()
        if c > 0:
            q[robot.base_nq:] = rng.uniform(-1.0, 1.0, robot.n_joints)
        with np.errstate(divide="ignore", invalid="ignore"):
            ab = articulated_body(robot, NUMERIC, q)
        for k in range(robot.n_bodies - 1, 0, -1):
            D, norm = float(ab.D[k]), float(np.max(np.abs(ab.P[k])))
            if not D > 1e-10 * norm or D <= 0.0:
                j = robot.joints[k]
                what = ("moment of inertia about its axis" if j.type == "revolute"
                        else "mass along its axis")
                return k, (f"joint {brief(j.name)} carries zero {what} (body {brief(robot.body_names[k])} "
                           "and "
                           "everything outboard of it), so the mass matrix would be singular; give a "
                           "moving body outboard of the joint mass and inertia, or make the joint fixed")
        if robot.is_free:
            P0 = np.asarray(ab.P[0], dtype=float)
            ev = np.linalg.eigvalsh(0.5 * (P0 + P0.T))
            if not ev[0] > 1e-10 * max(ev[-1], 0.0):
                return 0, (f"the free-floating base's articulated inertia is singular (eigenvalues "
                           f"{', '.join(f'{e:.3g}' for e in ev)}): the base body "
                           f"{brief(robot.body_names[0])} "
                           "and "
                           "the joints cannot resist all base motions; give the base mass and inertia "
                           "(or use base: fixed)")
    return None
