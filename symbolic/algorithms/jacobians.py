"""Frame Jacobians and the generalised Jacobian of a free-floating system.

``jacobian`` evaluates the block row ``J(k) = B*(k) phi* H*`` of seed 000 eq. 4.3 (moved to a frame
rigidly attached to body k) column by column from the absolute link poses: the column of hinge i is
``phi*(i, f) H*(i)``, i.e. ``[s_i; s_i x (p_f - p_i)]`` for a revolute and ``[0; s_i]`` for a prismatic
hinge (inertial-aligned axes), and ``[[R_0, 0], [-(p_f - p_0)~ R_0, R_0]]`` for the free base, whose
velocity is given in base coordinates.  Frame coordinates rotate both halves by R_f^T.

``generalized_jacobian`` is Umetani & Yoshida's Jacobian (seed 003 eq. E.5): with zero total momentum,
``H_b V_0 + H_bm qd = 0`` (the base rows of M v are the system momentum at O_0, seed 003 eq. 2.x), so
``J* = J_m - J_b H_b^-1 H_bm``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from soadyn.model.robot import require_free
from soadyn.symbolic.algorithms.kinematics import joint_transforms, link_poses
from soadyn.symbolic.algorithms.linalg import ldl
from soadyn.symbolic.algorithms.newton_euler import mass_matrix_from
from soadyn.symbolic.scalar import ScalarContext
from soadyn.symbolic.spatial import cross, skew


def _frame_pose(robot: Any, ctx: ScalarContext, Rw: list, pw: list,
                frame: str) -> tuple[int, np.ndarray, np.ndarray]:
    k, X = robot.frame_of(frame)
    R = Rw[k] @ ctx.const(X.R) if not np.array_equal(X.R, np.eye(3)) else Rw[k]
    p = pw[k] + Rw[k] @ ctx.const(X.p) if np.any(X.p) else pw[k]
    return k, R, p


def _jacobian(robot: Any, ctx: ScalarContext, kin: Any, frame: str, world_aligned: bool) -> np.ndarray:
    """Columns in base coordinates first (the base pose drops out), then one rotation to the frame's
    axes (``R_0f^T``) or the inertial axes (``R_0``)."""
    J, _, Rf = _base_axes_jacobian(robot, ctx, kin, frame)
    R = kin.R0 if world_aligned else Rf.T
    if R is not None and not (world_aligned and not robot.is_free):
        J = _rotated(R, J)
    return J


def _rotated(R: Any, J: np.ndarray) -> np.ndarray:
    """Both 3-row halves of ``J`` (a 6-vector or 6 x n) rotated by ``R``."""
    return np.concatenate([R @ J[:3], R @ J[3:]])


def base_block_times(pf: np.ndarray, X: np.ndarray) -> np.ndarray:
    """``J_b X`` for the base columns ``J_b = [[I, 0], [-pf~, I]]`` of a free-base frame Jacobian
    (:func:`_base_axes_jacobian`; ``pf``: the frame origin from the base origin; ``pf`` and ``X`` in one
    set of axes): ``[X_t; X_b - pf x X_t]``, ``X`` a 6-vector or 6 x n, without multiplying out the
    6 x 6 block (its identity and zero blocks): 12 operations per column instead of 66."""
    top, bottom = X[:3], X[3:]
    if top.ndim == 1:
        return np.concatenate([top, bottom - cross(pf, top)])
    if top.shape[1] == 0:                # no columns (a free base without joints)
        return np.concatenate([top, bottom])
    return np.concatenate([top, bottom - np.stack([cross(pf, top[:, c]) for c in range(top.shape[1])],
                                                    axis=1)])


def frame_origin(robot: Any, ctx: ScalarContext, kin: Any, frame: str) -> np.ndarray:
    """The origin ``pf`` of ``frame`` from the base origin, base axes (staged)."""
    Rb, pb = link_poses(kin, relative=True)
    return _base_axes_pose(robot, ctx, Rb, pb, frame)[2]


def _base_axes_pose(robot: Any, ctx: ScalarContext, Rb: list, pb: list,
                    frame: str) -> tuple[int, np.ndarray, np.ndarray]:
    """The body carrying ``frame``, the frame rotation ``R_0f`` and origin ``pf`` (staged), base axes."""
    k, Rf, pf = _frame_pose(robot, ctx, Rb, pb, frame)
    tag = "".join(ch if ch.isalnum() else "_" for ch in frame)
    return k, Rf, ctx.stage(f"pf_{tag}", pf)


def _base_axes_jacobian(robot: Any, ctx: ScalarContext, kin: Any,
                        frame: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The frame Jacobian in base axes (6 x nv), the frame origin ``pf`` from the base origin and the frame
    rotation ``R_0f``, both in base axes."""
    Rb, pb = link_poses(kin, relative=True)
    k, Rf, pf = _base_axes_pose(robot, ctx, Rb, pb, frame)
    J = ctx.zeros((6, robot.nv))
    i = k
    while i > 0:
        j = robot.joints[i]
        s = Rb[i] @ ctx.const(j.axis)
        col = (np.concatenate([s, cross(s, pf - pb[i])]) if j.type == "revolute"
               else np.concatenate([ctx.zeros(3), s]))
        J[:, robot.v_index(i)] = col.reshape(6, 1)
        i = robot.parent[i]
    if robot.is_free:
        J[:3, 0:3] = ctx.eye(3)
        J[3:, 3:6] = ctx.eye(3)
        J[3:, 0:3] = -skew(pf)
    return J, pf, Rf


def jacobian(robot: Any, ctx: ScalarContext, q: np.ndarray, frame: str,
             world_aligned: bool = False) -> np.ndarray:
    """6 x nv Jacobian of the frame's [w; v] (origin velocity), frame or inertial-aligned coordinates."""
    return _jacobian(robot, ctx, joint_transforms(robot, ctx, q), frame, world_aligned)


def generalized_jacobian(robot: Any, ctx: ScalarContext, q: np.ndarray, frame: str) -> np.ndarray:
    """Generalised Jacobian (seed 003 eq. E.5), 6 x n_joints, inertial-aligned [w; v] of the frame."""
    require_free(robot, "the generalised Jacobian")
    kin = joint_transforms(robot, ctx, q)
    J, pf, _ = _base_axes_jacobian(robot, ctx, kin, frame)
    M = mass_matrix_from(kin)
    fac = ldl(ctx, M[:6, :6], "Hb")
    X = fac.solve(M[:6, 6:], "HbiHbm")               # H_b^-1 H_bm (base axes)
    # J_m - J_b H_b^-1 H_bm in the inertial axes: H_b^-1 H_bm rotated once for every frame of a family,
    # then the base block of J_b, [[I, 0], [-pf~, I]] in the inertial axes, applied without multiplying it out
    Xw = ctx.stage("HbiHbm_w", _rotated(kin.R0, X))
    return _rotated(kin.R0, J[:, 6:]) - base_block_times(kin.R0 @ pf, Xw)
