"""Kinematics of frames for planners and viewers: poses of a frame and of every body, a frame's twist.

Forward kinematics of the links (``link_poses``: ``R_k = R_p R_pk(q_k)``, ``p_k = p_p + R_p l_k``, the
base-to-tip half of seed 000 eq. 2.1 for positions) moved to a body's named frame by its constant
placement; the twist of a frame is the first output of
:func:`soadyn.symbolic.algorithms.derivatives.frame_acceleration` (seed 000 eq. 2.1: ``V(k) = phi*(p, k)
V(p) + H*(k) beta(k)``, then the rigid offset ``v_f = v_k + w x l``), without its acceleration.  All in
inertial axes; the twist is ``[w; v]`` with ``v`` the velocity of the frame origin.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from soadyn.symbolic.algorithms.derivatives import frame_acceleration
from soadyn.symbolic.algorithms.jacobians import _frame_pose
from soadyn.symbolic.algorithms.kinematics import joint_transforms, link_poses
from soadyn.symbolic.scalar import ScalarContext


def frame_pose(robot: Any, ctx: ScalarContext, q: np.ndarray, frame: str) -> tuple[np.ndarray, np.ndarray]:
    """(R, p): rotation (frame -> inertial) and origin (inertial) of a body or named frame."""
    Rw, pw = link_poses(joint_transforms(robot, ctx, q))
    _, R, p = _frame_pose(robot, ctx, Rw, pw, frame)
    return R, p


def body_poses(robot: Any, ctx: ScalarContext, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(R, p) of every body: (n_bodies, 3, 3) rotations (body -> inertial) and (n_bodies, 3) origins."""
    Rw, pw = link_poses(joint_transforms(robot, ctx, q))
    return np.stack(Rw), np.stack(pw)


def frame_twist(robot: Any, ctx: ScalarContext, q: np.ndarray, v: np.ndarray, frame: str) -> np.ndarray:
    """``[w; v_o]`` of a body or named frame (origin velocity), inertial axes."""
    return frame_acceleration(robot, ctx, q, v, ctx.zeros(robot.nv), frame)[0]
