"""Free-floating base: inertia blocks, reduced (generalised) dynamics and momentum maps (seed 003).

Generic over the scalar (run on floats or staged symbolically for the code generator), like every
algorithm of this package.  Notation of Dimitrov's thesis (seed 003) mapped to ours:

* Our velocity is ``v = [w_b; v_b; qd]``: base angular velocity and base-origin velocity, both in base
  axes, then the joint rates (thesis: ``[v_b; w_b; phidot]``, inertial axes, linear first).
* ``M = [[H_b, H_bm], [H_bm^T, H_m]]`` (thesis eq. 3.1 / D.5 with ``H_c = H_bm``).  The base rows of
  ``M v`` are the system's spatial momentum *about the base-frame origin, in base axes*,
  ``h_o = [L_o; P]`` (thesis eq. C.17, which uses the base centroid as the reference point; here the
  base origin need not be the base centroid).  ``H_b`` is the locked system's spatial inertia about the
  base origin; ``H_bm`` the coupling inertia (6 x n_joints).  Both depend on the joint angles only.
* ``momentum()`` elsewhere in soadyn is ``[L_c; P]``: angular momentum about the *system centre of
  mass* and linear momentum, *inertial* axes.  Then ``h_o = R0^T [L_c + r x P; P]`` with ``r`` the vector
  from the base origin to the system CoM; in base axes ``r`` is read off ``H_b``: its top-right block is
  ``m r~`` (m = total mass).

Reduced forms (thesis Appendix E):

* generalised inertia (eq. E.3) ``H* = H_m - H_bm^T H_b^-1 H_bm`` and bias ``c* = c_m - H_bm^T H_b^-1 c_b``
  (c = bias forces incl. gravity and minus external wrenches): with no base wrench the joint
  accelerations obey ``H* qdd + c* = tau_m``.
* angular-only (eq. E.2): eliminate the base linear acceleration with the linear-momentum row.
  With ``H_b = [[A, B], [B^T, m I]]`` (angular first):
  ``H~_b = A - B B^T / m`` (locked inertia about the system CoM),
  ``H~_c = H_bm[:3] - B H_bm[3:] / m``, ``H~_phi = H_m - H_bm[3:]^T H_bm[3:] / m``,
  ``c~_b = c_b[:3] - B c_b[3:] / m``, ``c~_phi = c_m - H_bm[3:]^T c_b[3:] / m``.
  All in base axes.  They give the angular momentum about the system CoM, ``R0^T L_c = H~_b w_b + H~_c qd``
  (thesis eq. 4.5 / C.18 without the ``r_g x P`` term, which is the moment of P about the inertial origin),
  and the dynamics (zero base force; a base moment ``n_b`` enters the first row)
  ``H~_b wdot_b + H~_c qdd + c~_b = n_b``, ``H~_c^T wdot_b + H~_phi qdd + c~_phi = tau_m``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from soadyn.model.robot import require_free
from soadyn.symbolic.algorithms.jacobians import _rotated, base_block_times, frame_origin
from soadyn.symbolic.algorithms.kinematics import joint_transforms, velocities
from soadyn.symbolic.algorithms.linalg import ldl
from soadyn.symbolic.algorithms.newton_euler import _newton_euler, composite_inertias, mass_matrix_from
from soadyn.symbolic.parameters import total_mass
from soadyn.symbolic.scalar import ScalarContext


def base_inertia(robot: Any, ctx: ScalarContext, q: np.ndarray) -> np.ndarray:
    """``H_b`` (6x6): the locked system's spatial inertia about the base origin, base axes, angular first.

    Composite-body inertia of the whole tree at the base, ``R(0)`` (seed 000 eq. 2.4a base block)."""
    require_free(robot, "base_inertia")
    return composite_inertias(joint_transforms(robot, ctx, q))[0]


def coupling_inertia(robot: Any, ctx: ScalarContext, q: np.ndarray) -> np.ndarray:
    """``H_bm`` (6 x n_joints): base-joint coupling inertia (thesis eq. C.16, D.3 B), base axes.

    Column j is ``phi(0, j) R(j) H*(j)``, the momentum at the base origin of a unit rate of joint j
    (seed 000 eq. 2.4a off-diagonal blocks)."""
    require_free(robot, "coupling_inertia")
    M = mass_matrix_from(joint_transforms(robot, ctx, q))
    return M[:6, 6:]


def _schur(ctx: ScalarContext, M: np.ndarray, c: np.ndarray | None) -> tuple[np.ndarray, np.ndarray | None]:
    """``H_m - H_bm^T H_b^-1 H_bm`` and ``c_m - H_bm^T H_b^-1 c_b`` (symmetric: upper triangle mirrored)."""
    Hb, Hbm, Hm = M[:6, :6], M[:6, 6:], M[6:, 6:]
    fac = ldl(ctx, Hb, "Hb")
    X = fac.solve(Hbm, "HbiHbm")                 # H_b^-1 H_bm
    n = Hm.shape[0]
    G = ctx.zeros((n, n))
    for i in range(n):
        for j in range(i, n):
            G[i, j] = G[j, i] = Hm[i, j] - Hbm[:, i] @ X[:, j]
    cg = None
    if c is not None:
        cg = c[6:] - X.T @ c[:6]
    return G, cg


def generalized_inertia(robot: Any, ctx: ScalarContext, q: np.ndarray) -> np.ndarray:
    """``H* = H_m - H_bm^T H_b^-1 H_bm`` (thesis eq. E.3, 'generalised inertia matrix'), n_joints^2."""
    require_free(robot, "generalized_inertia")
    M = mass_matrix_from(joint_transforms(robot, ctx, q))
    return _schur(ctx, M, None)[0]


def _mass_and_bias(robot: Any, ctx: ScalarContext, q: np.ndarray, v: np.ndarray,
                   f_ext: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    kin = joint_transforms(robot, ctx, q)
    vt = velocities(kin, v, f_ext)
    c = _newton_euler(kin, vt, ctx.zeros(robot.nv), v)
    return mass_matrix_from(kin), c


def generalized_bias(robot: Any, ctx: ScalarContext, q: np.ndarray, v: np.ndarray,
                     f_ext: np.ndarray | None = None) -> np.ndarray:
    """``c* = c_m - H_bm^T H_b^-1 c_b`` (thesis eq. E.3, 'generalised nonlinear term'), n_joints.

    ``c`` are the bias forces (Coriolis, centrifugal, gravity, minus external wrenches).  With zero base
    wrench the joint accelerations satisfy ``H* qdd + c* = tau_m``."""
    require_free(robot, "generalized_bias")
    M, c = _mass_and_bias(robot, ctx, q, v, f_ext)
    return _schur(ctx, M, c)[1]


def angular_reduced_dynamics(robot: Any, ctx: ScalarContext, q: np.ndarray, v: np.ndarray,
                             f_ext: np.ndarray | None = None) -> tuple[np.ndarray, ...]:
    """Angular-only reduced dynamics (thesis eq. E.2 / 4.4), base axes, about the system CoM.

    Returns ``(H~_b (3x3), H~_c (3 x nj), H~_phi (nj x nj), c~_b (3), c~_phi (nj))``; see the module
    docstring for the definitions and the equations they satisfy."""
    require_free(robot, "angular_reduced_dynamics")
    M, c = _mass_and_bias(robot, ctx, q, v, f_ext)
    if not robot.total_mass > 0:
        raise ValueError(f"robot {robot.name!r} has zero total mass; give the bodies masses")
    inv_m = 1.0 / total_mass(robot, ctx)
    A, B = M[:3, :3], M[:3, 3:6]
    Ca, Cl = M[:3, 6:], M[3:6, 6:]
    Hb = ctx.zeros((3, 3))
    for i in range(3):
        for j in range(i, 3):
            Hb[i, j] = Hb[j, i] = A[i, j] - (B[i, :] @ B[j, :]) * inv_m
    Hc = Ca - (B @ Cl) * inv_m
    nj = robot.n_joints
    Hp = ctx.zeros((nj, nj))
    for i in range(nj):
        for j in range(i, nj):
            Hp[i, j] = Hp[j, i] = M[6 + i, 6 + j] - (Cl[:, i] @ Cl[:, j]) * inv_m
    cb = c[:3] - (B @ c[3:6]) * inv_m
    cp = c[6:] - (Cl.T @ c[3:6]) * inv_m
    return Hb, Hc, Hp, cb, cp


def coupling_inertia_rate(robot: Any, ctx: ScalarContext, q: np.ndarray, qd: np.ndarray) -> np.ndarray:
    """``Hdot_bm qd`` (6, base axes, about the base origin), thesis eq. 3.6 / 3.15.

    ``H_bm`` depends on the joint angles only, so ``Hdot_bm qd = sum_j (dH_bm/dq_j qd_j) qd``.  With the base
    at rest the base rows of the equations of motion read ``H_b a_b + H_bm qdd + c_b = tau_b`` where
    ``c_b`` is the rate of change of the momentum ``H_bm qd`` at zero base and joint acceleration, hence
    ``Hdot_bm qd = c_b(q, [0; qd])`` evaluated without gravity or external wrenches (Newton-Euler,
    seed 000 eq. 2.1)."""
    require_free(robot, "coupling_inertia_rate")
    r0 = robot if not np.any(robot.gravity) else replace(robot, gravity=np.zeros(3))
    kin = joint_transforms(r0, ctx, q)
    v = np.concatenate([ctx.zeros(6), np.asarray(qd)])
    vt = velocities(kin, v, None)
    tau = _newton_euler(kin, vt, ctx.zeros(robot.nv), v)
    return tau[:6]


def _base_momentum_from_com(ctx: ScalarContext, robot: Any, R0: np.ndarray, Hb: np.ndarray,
                            h: np.ndarray) -> np.ndarray:
    """``h_o`` (about the base origin, base axes) from ``h = [L_c; P]`` (about the CoM, inertial axes)."""
    inv_m = 1.0 / total_mass(robot, ctx)
    B = Hb[:3, 3:]
    r = ctx.array([B[2, 1], B[0, 2], B[1, 0]]) * inv_m
    Lb = R0.T @ h[:3]
    Pb = R0.T @ h[3:6]
    from soadyn.symbolic.spatial import cross

    return np.concatenate([Lb + cross(r, Pb), Pb])


def base_velocity(robot: Any, ctx: ScalarContext, q: np.ndarray, qd: np.ndarray, h: np.ndarray) -> np.ndarray:
    """Base twist ``[w_b; v_b]`` (base axes) from the joint rates and the momentum (momentum conservation).

    ``h = [L_c; P]``: angular momentum about the system CoM and linear momentum, inertial axes (the
    convention of ``momentum()``).  ``H_b v_base + H_bm qd = h_o``, so ``v_base = H_b^-1 (h_o - H_bm qd)``
    (thesis eq. C.17 solved for the base, as in eq. E.6; seed 001 eq. 21)."""
    require_free(robot, "base_velocity")
    kin = joint_transforms(robot, ctx, q)
    M = mass_matrix_from(kin)
    Hb, Hbm = M[:6, :6], M[:6, 6:]
    ho = _base_momentum_from_com(ctx, robot, kin.R0, Hb, np.asarray(h))
    rhs = ctx.stage("ho_rhs", ho - Hbm @ np.asarray(qd))
    return ldl(ctx, Hb, "Hb").solve(rhs, "vbase")


def momentum_frame_twist(robot: Any, ctx: ScalarContext, q: np.ndarray, h: np.ndarray,
                         frame: str) -> np.ndarray:
    """The momentum term of the generalised Jacobian (thesis eq. E.6): ``J_b H_b^-1 h_o`` (6).

    The twist ``[w; v]`` (inertial axes, frame origin) of ``frame`` is
    ``generalized_jacobian(q, frame) @ qd + momentum_frame_twist(q, h, frame)``; the second term vanishes
    when the momentum ``h = [L_c; P]`` (about the CoM, inertial axes) is zero."""
    require_free(robot, "momentum_frame_twist")
    kin = joint_transforms(robot, ctx, q)
    M = mass_matrix_from(kin)
    Hb = M[:6, :6]
    ho = _base_momentum_from_com(ctx, robot, kin.R0, Hb, np.asarray(h))
    vb = ldl(ctx, Hb, "Hb").solve(ctx.stage("ho", ho), "vb0")
    pf = frame_origin(robot, ctx, kin, frame)
    vw = ctx.stage("vb0_w", _rotated(kin.R0, vb))          # the same for every frame of a family
    return base_block_times(kin.R0 @ pf, vw)              # J_b vb, inertial axes
