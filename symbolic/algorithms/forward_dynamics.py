"""Algorithm 3 of seed 000: O(N) articulated-body forward dynamics (eq. 2.11-2.13).

Tip-to-base (eq. 2.13a), gathering over children::

    z(k)  = sum_c phi(k, c) z+(c) + b(k) + P(k) a(k)
    eps(k) = T(k) - H(k) z(k)
    z+(k) = z(k) + G(k) eps(k)
    nu(k) = D^-1(k) eps(k)

Base-to-tip (eq. 2.13b)::

    alpha+(k) = phi*(k+1, k) alpha(k+1)
    betadot(k) = nu(k) - G*(k) alpha+(k)
    alpha(k)  = alpha+(k) + H*(k) betadot(k) + a(k)

Free base (eq. 3.2): G = I, so ``betadot(n) = nu(n) - alpha+(n)``, where alpha+(n) carries gravity.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from soadyn.symbolic.algorithms.articulated_body import ArticulatedBody, articulated_body, solve_D
from soadyn.symbolic.algorithms.drive import passive_torques
from soadyn.symbolic.algorithms.kinematics import gravity_acceleration, joint_transforms, velocities
from soadyn.symbolic.scalar import ScalarContext


def residual_forces(ab: ArticulatedBody, T: np.ndarray, a: list[Any] | None, b: list[Any] | None,
                    prefix: str = "z") -> tuple[list[Any], list[Any], list[Any]]:
    """Eq. 2.13a: returns (z, z+, nu) per body.  ``a``/``b`` None means zero.

    Staged names are ``{prefix}{k}`` (z), ``{prefix}eps{k}``, ``{prefix}p{k}`` (z+) and ``{prefix}nu{k}``.
    """
    kin = ab.kin
    robot, ctx = kin.robot, kin.ctx
    n = robot.n_bodies
    z: list[Any] = [None] * n
    zplus: list[Any] = [None] * n
    nu: list[Any] = [None] * n
    for k in reversed(range(n)):
        zk = ctx.zeros(6)
        if b is not None:
            zk = zk + b[k]
        if a is not None:
            zk = zk + ab.P[k] @ a[k]
        for c in robot.children[k]:
            if zplus[c] is not None:
                zk = zk + kin.X[c].force_to_parent(zplus[c])
        z[k] = ctx.stage(f"{prefix}{k}", zk)
        if k == 0:
            if robot.is_free:
                eps = ctx.stage(f"{prefix}eps0", T[0:6] - z[0])
                nu[0] = solve_D(ab, 0, eps, f"{prefix}nu0")
            continue
        eps = ctx.stage(f"{prefix}eps{k}", T[robot.v_index(k)][0] - kin.hinge(k) @ z[k])
        zplus[k] = ctx.stage(f"{prefix}p{k}", z[k] + ab.G[k] * eps)
        nu[k] = ctx.stage(f"{prefix}nu{k}", solve_D(ab, k, eps, ""))
    return z, zplus, nu


def accelerations(ab: ArticulatedBody, nu: list[Any], a: list[Any] | None, with_gravity: bool,
                  tag: str = "") -> tuple[np.ndarray, list[Any]]:
    """Eq. 2.13b: returns (betadot, alpha per body)."""
    kin = ab.kin
    robot, ctx = kin.robot, kin.ctx
    n = robot.n_bodies
    alpha: list[Any] = [None] * n
    qdd = ctx.zeros(robot.nv)
    for k in range(n):
        if k == 0:
            aplus = gravity_acceleration(kin) if with_gravity else ctx.zeros(6)
            if robot.is_free:
                bd = ctx.stage(f"qdd{tag}0", nu[0] - aplus)
                qdd[0:6] = bd
                acc = aplus + bd
            else:
                acc = aplus
        else:
            aplus = ctx.stage(f"ap{tag}{k}", kin.X[k].motion_to_child(alpha[robot.parent[k]]))
            bd = ctx.stage(f"qdd{tag}{k}", nu[k] - ab.G[k] @ aplus)
            qdd[robot.v_index(k)] = bd
            acc = aplus + kin.hinge(k) * bd
        if a is not None:
            acc = acc + a[k]
        alpha[k] = ctx.stage(f"alpha{tag}{k}", acc)
    return qdd, alpha


def forward_dynamics(robot: Any, ctx: ScalarContext, q: np.ndarray, v: np.ndarray, tau: np.ndarray,
                     f_ext: np.ndarray | None = None) -> np.ndarray:
    """betadot from eq. 2.11, evaluated in O(N) by Algorithms 1 (velocities), 2 and 3."""
    kin = joint_transforms(robot, ctx, q)
    vt = velocities(kin, v, f_ext)
    ab = articulated_body(robot, ctx, q, kin)
    _, _, nu = residual_forces(ab, net_torques(robot, ctx, v, tau), vt.a, vt.b)
    qdd, _ = accelerations(ab, nu, vt.a, with_gravity=True)
    return qdd


def net_torques(robot: Any, ctx: ScalarContext, v: np.ndarray, tau: np.ndarray) -> np.ndarray:
    """``tau - tau_p(v)``: the applied forces less the drive train's damping and friction
    (:func:`~soadyn.symbolic.algorithms.drive.passive_torques`); ``tau`` itself for ideal joints."""
    tp = passive_torques(robot, ctx, v)
    return tau if tp is None else tau - tp
