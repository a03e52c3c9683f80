"""Centre of mass, momentum and kinetic energy (sums over bodies of the per-body quantities)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..spatial import cross
from .kinematics import joint_transforms, link_poses, velocities


def _com_positions(robot: Any, ctx: Any, Rw: list, pw: list) -> list[np.ndarray]:
    return [pw[k] + Rw[k] @ ctx.const(robot.inertias[k].com) for k in range(robot.n_bodies)]


def center_of_mass(robot: Any, ctx: Any, q: np.ndarray) -> np.ndarray:
    """System centre of mass in the inertial frame: sum_k m_k c_k / m."""
    kin = joint_transforms(robot, ctx, q)
    Rw, pw = link_poses(kin)
    total = ctx.zeros(3)
    for k, c in enumerate(_com_positions(robot, ctx, Rw, pw)):
        total = total + robot.inertias[k].mass * c
    return total * (1.0 / robot.total_mass)


def momentum(robot: Any, ctx: Any, q: np.ndarray, v: np.ndarray) -> np.ndarray:
    """[angular momentum about the system CoM; linear momentum], inertial coordinates.

    h = sum_k [R_k I_c,k w_k + m_k (c_k - c) x vc_k;  m_k vc_k] with vc_k = R_k (v_k + w_k x p_k).
    """
    kin = joint_transforms(robot, ctx, q)
    Rw, pw = link_poses(kin)
    vt = velocities(kin, v, need_b=False)
    cs = _com_positions(robot, ctx, Rw, pw)
    mtot = robot.total_mass
    c = ctx.zeros(3)
    for k in range(robot.n_bodies):
        c = c + robot.inertias[k].mass * cs[k]
    c = ctx.stage("com", c * (1.0 / mtot))
    L = ctx.zeros(3)
    P = ctx.zeros(3)
    for k in range(robot.n_bodies):
        inert = robot.inertias[k]
        w, vo = vt.V[k][:3], vt.V[k][3:]
        vc = ctx.stage(f"vc{k}", Rw[k] @ (vo + cross(w, ctx.const(inert.com))))
        mv = inert.mass * vc
        L = L + Rw[k] @ (ctx.const(inert.inertia) @ w) + cross(cs[k] - c, mv)
        P = P + mv
    return np.concatenate([L, P])


def kinetic_energy(robot: Any, ctx: Any, q: np.ndarray, v: np.ndarray) -> Any:
    """1/2 sum_k V(k)* M(k) V(k)."""
    kin = joint_transforms(robot, ctx, q)
    vt = velocities(kin, v, need_b=False)
    T = 0
    for k in range(robot.n_bodies):
        V = vt.V[k]
        T = T + V @ (kin.spatial_inertia(k) @ V)
    return 0.5 * T
