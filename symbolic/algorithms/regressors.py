"""Regressors: the generalised forces and the momentum as linear maps of the inertial parameters.

The spatial inertia ``M(k) = [[J, h~], [-h~, m I]]`` (seed 000 section 2; ``h = m p``, J about O_k) is
linear in the ten parameters ``pi_k = [m, h, J_xx, J_xy, J_xz, J_yy, J_yz, J_zz]``
(:mod:`soadyn.model.parameters`), and so is every body-level quantity of Algorithm 1 (seed 000 eq.
2.1-2.2) once the kinematics V(k), alpha(k) are known, because those do not depend on any inertia.

**Body wrench.**  With ``V = [w; u]`` and the conventional acceleration ``alpha = [dw; du]`` (gravity
included as the acceleration of the inertial frame), ``f(k) = M(k) alpha(k) + b(k)`` (eq. 2.1, b of eq.
2.2) reads ``[J dw + w x J w + h x du;  m du + w x (w x h) - h x dw]``; its 6x10 body regressor
``A(k)`` (``f(k) = A(k) pi_k``) has the columns

* m: ``[0; du]``;
* h_i: ``[e_i x du;  w x (w x e_i) + dw x e_i]``;
* J entry (a, b) (symmetric unit E): ``[E dw + w x E w;  0]``.

**Torque regressor** (``tau = Y pi``).  ``f(k)`` reaches every ancestor hinge j through the tip-to-base
sweep ``f(j) = sum_c phi(j, c) f(c) + ...`` (eq. 2.1), so body k's ten columns are
``T(j) = H(j) phi(j, k) A(k)`` for j = k and each ancestor of k: the column-block propagation of the
Newton-Euler mass-matrix factorisation (eq. 2.4a), with A(k) in place of R(k) H*(k).

**Momentum regressor** (``h_O = Y_h pi``).  Body k's momentum about O_k is ``M(k) V(k)`` with columns
m: ``[0; u]``, h_i: ``[e_i x u; w x e_i]``, J (a, b): ``[E w; 0]``; moved to the inertial origin and axes
by ``phi(O, k) = [[R_k, p_k~ R_k], [0, R_k]]`` (link pose R_k, p_k).  ``h_O = [angular about the inertial
origin; linear]`` in inertial coordinates, which -- unlike the momentum about the system CoM -- is linear
in pi.

Columns exist only for the robot's parameterised bodies (``robot.param_bodies``, in that order); the
constant bodies add ``tau(q, v, a; params = 0)`` (respectively ``h_O(q, v; params = 0)``), which vanishes
when every body is parameterised.  Structural zeros stay exact.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from soadyn.model.parameters import J_ENTRIES, param_indices
from soadyn.symbolic.algorithms.kinematics import joint_transforms, link_poses, velocities
from soadyn.symbolic.algorithms.newton_euler import _force_cols_to_parent, _hinge_rows, body_accelerations
from soadyn.symbolic.scalar import ScalarContext
from soadyn.symbolic.spatial import cross


def _unit(ctx: ScalarContext, i: int) -> np.ndarray:
    e = ctx.zeros(3)
    e[i] = ctx.one()
    return e


def _sym_unit_times(ctx: ScalarContext, a: int, b: int, x: np.ndarray) -> np.ndarray:
    """``E x`` for the symmetric unit matrix E with ones at (a, b) and (b, a)."""
    out = ctx.zeros(3)
    out[a] = x[b]
    out[b] = x[a]
    return out


def body_wrench_regressor(ctx: ScalarContext, V: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    """``A`` (6x10) with ``M alpha + b = A pi`` for one body (module docstring)."""
    w, dw, du = V[:3], alpha[:3], alpha[3:]
    z3 = ctx.zeros(3)
    cols = [np.concatenate([z3, du])]
    for i in range(3):
        e = _unit(ctx, i)
        cols.append(np.concatenate([cross(e, du), cross(w, cross(w, e)) + cross(dw, e)]))
    for a, b in J_ENTRIES:
        cols.append(np.concatenate([_sym_unit_times(ctx, a, b, dw) + cross(w, _sym_unit_times(ctx, a, b, w)),
                                    z3]))
    return np.stack(cols, axis=1)


def body_momentum_regressor(ctx: ScalarContext, V: np.ndarray) -> np.ndarray:
    """``A`` (6x10) with ``M V = A pi`` for one body (momentum about O_k, body axes)."""
    w, u = V[:3], V[3:]
    z3 = ctx.zeros(3)
    cols = [np.concatenate([z3, u])]
    for i in range(3):
        e = _unit(ctx, i)
        cols.append(np.concatenate([cross(e, u), cross(w, e)]))
    for a, b in J_ENTRIES:
        cols.append(np.concatenate([_sym_unit_times(ctx, a, b, w), z3]))
    return np.stack(cols, axis=1)


def inverse_dynamics_regressor(robot: Any, ctx: ScalarContext, q: np.ndarray, v: np.ndarray,
                               a: np.ndarray) -> np.ndarray:
    """``Y`` (nv x 10 n_param_bodies) with ``tau = Y pi + tau(params = 0)`` (module docstring; seed 000
    eq. 2.1 with the column propagation of eq. 2.4a)."""
    kin = joint_transforms(robot, ctx, q)
    vt = velocities(kin, v, need_b=False)
    alpha = body_accelerations(kin, vt, a)
    idx = param_indices(robot)
    Y = ctx.zeros((robot.nv, 10 * len(idx)))
    for col, k in enumerate(idx):
        cols = slice(10 * col, 10 * col + 10)
        F = ctx.stage(f"Yf{k}", body_wrench_regressor(ctx, vt.V[k], alpha[k]))
        j = k
        while True:
            if j > 0 or robot.is_free:
                Y[robot.v_index(j), cols] = _hinge_rows(kin, j, F)
            if robot.parent[j] < 0:
                break
            F = _force_cols_to_parent(kin, j, F)
            j = robot.parent[j]
            if j == 0 and not robot.is_free:
                break
            F = ctx.stage(f"Yf{k}_{j}", F)
    return Y


def momentum_regressor(robot: Any, ctx: ScalarContext, q: np.ndarray, v: np.ndarray) -> np.ndarray:
    """``Y_h`` (6 x 10 n_param_bodies) with ``h_O = Y_h pi + h_O(params = 0)``: momentum about the inertial
    origin, inertial axes, ``[angular; linear]`` (module docstring)."""
    kin = joint_transforms(robot, ctx, q)
    vt = velocities(kin, v, need_b=False)
    Rw, pw = link_poses(kin)
    idx = param_indices(robot)
    Y = ctx.zeros((6, 10 * len(idx)))
    for col, k in enumerate(idx):
        A = ctx.stage(f"Yh{k}", body_momentum_regressor(ctx, vt.V[k]))
        R, p = Rw[k], pw[k]
        for c in range(10):
            F = R @ A[3:, c]
            Y[:3, 10 * col + c] = R @ A[:3, c] + cross(p, F)
            Y[3:, 10 * col + c] = F
    return Y
