"""Algorithm 1 of seed 000 (Newton-Euler inverse dynamics) and the Newton-Euler factorisation of the
mass matrix ``M = H phi M phi* H*`` (eq. 2.4a) evaluated by composite bodies.

Tree form: the tip-to-base force recursion gathers ``phi(k, c) f(c)`` over the children c of k.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from soadyn.symbolic.algorithms.drive import add_armature, drive_torques
from soadyn.symbolic.algorithms.kinematics import (
    Kinematics,
    gravity_acceleration,
    joint_transforms,
    velocities,
)
from soadyn.symbolic.parameters import body_inertia
from soadyn.symbolic.scalar import ScalarContext, reuse
from soadyn.symbolic.spatial import RigidInertia


def _hinge_force(kin: Kinematics, k: int, f: np.ndarray) -> np.ndarray:
    """T(k) = H(k) f(k); the free base's hinge map is I6."""
    if k == 0:
        return f
    return np.array([kin.hinge(k) @ f], dtype=f.dtype)


def inverse_dynamics(robot: Any, ctx: ScalarContext, q: np.ndarray, v: np.ndarray, a: np.ndarray,
                     f_ext: np.ndarray | None = None) -> np.ndarray:
    """Generalised forces ``T = M betadot + C`` by Algorithm 1 (eq. 2.1) of seed 000.

    Base-to-tip: ``alpha(k) = phi*(k+1,k) alpha(k+1) + H*(k) betadot(k) + a(k)``;
    tip-to-base: ``f(k) = sum_c phi(k,c) f(c) + M(k) alpha(k) + b(k)``, ``T(k) = H(k) f(k)``.
    """
    kin = joint_transforms(robot, ctx, q)
    vt = velocities(kin, v, f_ext)
    return _newton_euler(kin, vt, a, v)


def _newton_euler(kin: Kinematics, vt: Any, a: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Algorithm 1 from the velocity terms ``vt`` of ``v``; plus the drive train's ``I_a qdd + tau_p(v)``
    (:func:`~soadyn.symbolic.algorithms.drive.drive_torques`) when the robot has one."""
    robot, ctx = kin.robot, kin.ctx
    n = robot.n_bodies
    alpha = body_accelerations(kin, vt, a)
    f: list[np.ndarray] = [None] * n  # type: ignore[list-item]
    tau = ctx.zeros(robot.nv)
    for k in reversed(range(n)):
        fk = kin.inertia_times(k, alpha[k]) + vt.b[k]
        for c in robot.children[k]:
            fk = fk + kin.X[c].force_to_parent(f[c])
        f[k] = ctx.stage(f"f{k}", fk)
        if k > 0 or robot.is_free:
            tau[robot.v_index(k)] = _hinge_force(kin, k, f[k])
    drive = drive_torques(robot, ctx, v, a)
    return tau if drive is None else tau + drive


def body_accelerations(kin: Kinematics, vt: Any, a: np.ndarray) -> list[np.ndarray]:
    """Base-to-tip half of Algorithm 1: ``alpha(k) = phi*(k+1,k) alpha(k+1) + H*(k) betadot(k) + a(k)``,
    gravity entering as the acceleration of the inertial frame."""
    robot, ctx = kin.robot, kin.ctx
    n = robot.n_bodies
    alpha: list[np.ndarray] = [None] * n  # type: ignore[list-item]
    for k in range(n):
        if k == 0:
            acc = gravity_acceleration(kin) + vt.a[0]
            if robot.is_free:
                acc = acc + a[0:6]
        else:
            p = robot.parent[k]
            acc = kin.X[k].motion_to_child(alpha[p]) + kin.hinge(k) * a[robot.v_index(k)][0] + vt.a[k]
        alpha[k] = ctx.stage(f"alpha{k}", acc)
    return alpha


def bias_forces(robot: Any, ctx: ScalarContext, q: np.ndarray, v: np.ndarray,
                f_ext: np.ndarray | None = None) -> np.ndarray:
    """C of eq. 2.4b plus gravity (and minus external wrenches): inverse dynamics with betadot = 0."""
    return inverse_dynamics(robot, ctx, q, v, ctx.zeros(robot.nv), f_ext)


def composite_inertias(kin: Kinematics) -> list[np.ndarray]:
    """R(k) = M(k) + sum_c phi(k,c) R(c) phi*(k,c): the inertia of the subtree at k, about O_k.

    The sum stays a rigid-body inertia, so it is accumulated in the 10-parameter form
    (:class:`~soadyn.symbolic.spatial.RigidInertia`) and expanded to 6x6 only at the end.
    """
    robot, ctx = kin.robot, kin.ctx
    Rc: list[RigidInertia] = [None] * robot.n_bodies  # type: ignore[list-item]
    for k in reversed(range(robot.n_bodies)):
        Rk = body_inertia(robot, ctx, k).rigid()
        for c in robot.children[k]:
            Rk = Rk + Rc[c].to_parent(kin.X[c])
        Rc[k] = RigidInertia(Rk.m, ctx.stage(f"Rh{k}", Rk.h), ctx.stage_symmetric(f"RJ{k}", Rk.J))
    return [r.spatial() for r in Rc]


def mass_matrix_from(kin: Kinematics) -> np.ndarray:
    """Blocks of eq. 2.4a: ``M(i, j) = H(i) phi(i, j) R(j) H*(j)`` for i an ancestor of j (or i = j)."""
    return reuse(kin.ctx, "mass_matrix", (kin,), lambda: _mass_matrix(kin)).copy()


def _mass_matrix(kin: Kinematics) -> np.ndarray:
    """Eq. 2.4a by composite bodies, plus the drive train's armature on the diagonal."""
    robot, ctx = kin.robot, kin.ctx
    Rc = composite_inertias(kin)
    M = ctx.zeros((robot.nv, robot.nv))
    first = 0 if robot.is_free else 1
    for j in range(first, robot.n_bodies):
        F = Rc[j] if j == 0 else ctx.stage(f"F{j}", Rc[j] @ kin.hinge(j))   # R(j) H*(j)
        if F.ndim == 1:
            F = F.reshape(6, 1)
        sj = robot.v_index(j)
        M[sj, sj] = _hinge_rows(kin, j, F)
        i = j
        while robot.parent[i] >= 0 and (robot.parent[i] > 0 or robot.is_free):
            F = _force_cols_to_parent(kin, i, F)
            i = robot.parent[i]
            F = ctx.stage(f"F{j}_{i}", F)
            si = robot.v_index(i)
            blk = _hinge_rows(kin, i, F)
            M[si, sj] = blk
            M[sj, si] = blk.T
    return add_armature(robot, M)


def _hinge_rows(kin: Kinematics, k: int, F: np.ndarray) -> np.ndarray:
    if k == 0:
        return F
    return (kin.hinge(k) @ F).reshape(1, -1)


def _force_cols_to_parent(kin: Kinematics, k: int, F: np.ndarray) -> np.ndarray:
    cols = [kin.X[k].force_to_parent(F[:, c]) for c in range(F.shape[1])]
    return np.stack(cols, axis=1)


def mass_matrix(robot: Any, ctx: ScalarContext, q: np.ndarray) -> np.ndarray:
    """The mass matrix by the Newton-Euler factorisation ``M = H phi M phi* H*`` (eq. 2.4a)."""
    return mass_matrix_from(joint_transforms(robot, ctx, q))
