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

from typing import Any

import numpy as np

from soadyn.model.motion import FrameMotion
from soadyn.model.robot import Robot, state_vector
from soadyn.symbolic.algorithms.coupling import expand_q, expand_v
from soadyn.symbolic.algorithms.derivatives import frame_acceleration
from soadyn.symbolic.algorithms.frames import frame_pose as algorithm_frame_pose
from soadyn.symbolic.algorithms.jacobians import _frame_pose
from soadyn.symbolic.algorithms.kinematics import joint_transforms, link_poses
from soadyn.symbolic.scalar import NUMERIC

__all__ = ["FrameMotion", "frame_motion", "frame_pose"]


def _poses(robot: Robot, q: np.ndarray) -> tuple[list[np.ndarray], list[np.ndarray]]:
    return link_poses(joint_transforms(robot, NUMERIC, q))


def _uncoupled(robot: Robot, q: np.ndarray, *vs: np.ndarray) -> tuple[Robot, np.ndarray, ...]:
    """A coupled robot (mimic) as its uncoupled tree with the state expanded (q_full = G q + b, G v); other
    robots as they are."""
    if not robot.is_coupled:
        return (robot, q, *vs)
    return (robot.uncoupled(), expand_q(robot, q), *(expand_v(robot, x) for x in vs))


def frame_pose(robot: Robot, q: Any, frame: str) -> tuple[np.ndarray, np.ndarray]:
    """``(R, p)``: rotation (frame to inertial axes) and origin (inertial frame) of the body or named frame
    ``frame`` at configuration ``q``, by the core's link poses on floats.

    Raises ``ValueError`` for a configuration of the wrong size or with non-finite entries and
    ``KeyError`` (naming the known frames) for an unknown frame.
    """
    q = state_vector(q, robot.nq, "q", f"frame_pose({robot.name!r})")
    robot, q = _uncoupled(robot, q)
    R, p = algorithm_frame_pose(robot, NUMERIC, q, frame)
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
    robot, q, v, a = _uncoupled(robot, q, v, a)
    Rw, pw = _poses(robot, q)

    def one(name: str) -> FrameMotion:
        _, R, p = _frame_pose(robot, NUMERIC, Rw, pw, name)
        V, A = frame_acceleration(robot, NUMERIC, q, v, a, name)
        return FrameMotion(np.array(R, dtype=float), np.array(p, dtype=float), V[:3], V[3:], A[:3], A[3:])

    if frame is not None:
        return one(frame)
    return {nm: one(nm) for nm in [*robot.body_names, *robot.frame_names]}
