"""Float kinematics of frames for production code: pose, twist and acceleration of bodies and named frames.

This is the float face of the generic core: the recursions of :mod:`soadyn.symbolic.algorithms`
(``joint_transforms`` and ``link_poses``, seed 000 eq. 2.1; the base-to-tip accelerations of
:func:`~soadyn.symbolic.algorithms.derivatives.frame_acceleration`, seed 000 eq. 2.1-2.2) run on floats
(:data:`~soadyn.symbolic.scalar.NUMERIC`), the same definitions that :mod:`soadyn.codegen` turns into C.
Structure operations, the runtime, examples and users who need a frame pose call these functions (or a
compiled module); the dense path :mod:`soadyn.reference` is an oracle for tests and ``soadyn verify`` only.

``frame_pose(robot, q, frame) -> (R, p)``
    rotation (frame to inertial) and origin of a body or named frame.
``frame_motion(robot, q, v=None, a=None, frame=None) -> FrameMotion`` (or a dict of every frame)
    pose, angular velocity, origin velocity and their inertial time derivatives (no gravity), all in
    inertial axes; ``FrameMotion.body_twist()`` / ``body_acceleration()`` give them in the frame's axes
    with the free-base convention of docs/conventions.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from soadyn.model.robot import Robot, state_vector
from soadyn.symbolic.algorithms.derivatives import frame_acceleration
from soadyn.symbolic.algorithms.jacobians import _frame_pose
from soadyn.symbolic.algorithms.kinematics import joint_transforms, link_poses
from soadyn.symbolic.scalar import NUMERIC
from soadyn.symbolic.spatial import cross

__all__ = ["FrameMotion", "frame_motion", "frame_pose"]


@dataclass(frozen=True)
class FrameMotion:
    """Pose, velocity and acceleration of a frame, all in inertial coordinates (origin quantities):
    rotation ``R`` (frame to inertial), origin ``p``, angular velocity ``w``, origin velocity ``v`` and
    their inertial time derivatives ``wdot``, ``vdot`` (without gravity)."""

    R: np.ndarray
    p: np.ndarray
    w: np.ndarray
    v: np.ndarray
    wdot: np.ndarray
    vdot: np.ndarray

    def body_twist(self) -> np.ndarray:
        """``[w; v]`` in the frame's own axes (the convention of the free base's ``v[:6]``)."""
        return np.concatenate([self.R.T @ self.w, self.R.T @ self.v])

    def body_acceleration(self) -> np.ndarray:
        """Time derivative of :meth:`body_twist` (the convention of the free base's ``a[:6]``)."""
        wb, vb = self.R.T @ self.w, self.R.T @ self.v
        return np.concatenate([self.R.T @ self.wdot, self.R.T @ self.vdot - cross(wb, vb)])


def _poses(robot: Robot, q: np.ndarray) -> tuple[list[np.ndarray], list[np.ndarray]]:
    return link_poses(joint_transforms(robot, NUMERIC, q))


def frame_pose(robot: Robot, q: Any, frame: str) -> tuple[np.ndarray, np.ndarray]:
    """``(R, p)``: rotation (frame to inertial axes) and origin (inertial frame) of the body or named frame
    ``frame`` at configuration ``q``, by the core's link poses on floats.

    Raises ``ValueError`` for a configuration of the wrong size or with non-finite entries and
    ``KeyError`` (naming the known frames) for an unknown frame.
    """
    q = state_vector(q, robot.nq, "q", f"frame_pose({robot.name!r})")
    Rw, pw = _poses(robot, q)
    _, R, p = _frame_pose(robot, NUMERIC, Rw, pw, frame)
    return np.array(R, dtype=float), np.array(p, dtype=float)


def frame_motion(
    robot: Robot, q: Any, v: Any | None = None, a: Any | None = None, frame: str | None = None
) -> FrameMotion | dict[str, FrameMotion]:
    """Motion of one frame (or, with ``frame=None``, of every body and named frame as a dict) at the
    state ``(q, v, a)``; ``v`` and ``a`` default to zero.

    Raises ``ValueError`` for a state of the wrong size or with non-finite entries and ``KeyError``
    (naming the known frames) for an unknown ``frame``.
    """
    who = f"frame_motion({robot.name!r})"
    q = state_vector(q, robot.nq, "q", who)
    v = np.zeros(robot.nv) if v is None else state_vector(v, robot.nv, "v", who)
    a = np.zeros(robot.nv) if a is None else state_vector(a, robot.nv, "a", who)
    Rw, pw = _poses(robot, q)

    def one(name: str) -> FrameMotion:
        _, R, p = _frame_pose(robot, NUMERIC, Rw, pw, name)
        V, A = frame_acceleration(robot, NUMERIC, q, v, a, name)
        return FrameMotion(np.array(R, dtype=float), np.array(p, dtype=float), V[:3], V[3:], A[:3], A[3:])

    if frame is not None:
        return one(frame)
    return {nm: one(nm) for nm in [*robot.body_names, *robot.frame_names]}
