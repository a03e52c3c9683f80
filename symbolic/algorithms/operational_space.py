"""Operational-space inertia of every link (seed 000 section 4), for trees.

``Lambda(k)^-1 = J(k) M^-1 J*(k)`` (eq. 4.2) with J(k) the Jacobian of body k's spatial velocity at O_k
in body coordinates.  Two routes:

* :func:`inverse_operational_space_inertias`: the Upsilon recursion of eq. 4.7, base to tip after the
  conventional articulated-body sweep (scatter form for trees)::

      Upsilon(0)  = P(0)^-1  (free base)    or  0  (fixed base: the ground does not move)
      Upsilon+(k) = phi*(p, k) Upsilon(p) phi(p, k)
      Upsilon(k)  = taubar*(k) Upsilon+(k) taubar(k) + H*(k) D^-1(k) H(k)

  It works for both base types; for a fixed base Upsilon(k) is singular for links with fewer than six
  degrees of freedom between them and the ground.
* :func:`operational_space_inertias`: Lemma 4.1, ``Lambda(k) = P(k) + S(k)`` (eq. 4.10a/4.11), from the
  conventional and the dual (:mod:`.dual`) sweeps, which are independent of each other.  Free base only:
  for a fixed base Lambda(k) does not exist (Upsilon(k) is singular) and a ``ValueError`` is raised.

:func:`inverse_operational_space_inertias_dual` is eq. 4.9 (the dual Upsilon recursion, tip to base),
kept as a check: on a tree each body's Upsilon is taken from its first child; a leaf starts from
``(M + S)^-1``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from soadyn.model.robot import require_free
from soadyn.symbolic.algorithms.articulated_body import articulated_body
from soadyn.symbolic.algorithms.dual import dual_articulated_body
from soadyn.symbolic.algorithms.kinematics import joint_transforms
from soadyn.symbolic.algorithms.linalg import ldl
from soadyn.symbolic.scalar import ScalarContext


def _congruence(fn: Any, Y: np.ndarray) -> np.ndarray:
    """``A Y A^T`` for a symmetric Y, where ``fn`` applies A to a 6-vector."""
    Z = np.stack([fn(Y[:, j]) for j in range(6)], axis=1)        # A Y
    out = np.stack([fn(Z[i, :]) for i in range(6)], axis=0)     # (A (A Y)^T)^T = A Y A^T
    return out


def _symmetrize(ctx: ScalarContext, name: str, Y: np.ndarray) -> np.ndarray:
    Y = ctx.array(Y)
    for i in range(6):
        for j in range(i + 1, 6):
            Y[j, i] = Y[i, j]
    return ctx.stage_symmetric(name, Y)


def _hinge_update(Yp: np.ndarray, g: np.ndarray, h: np.ndarray, dinv: Any) -> np.ndarray:
    """``(I - g h^T)^T Yp (I - g h^T) + h dinv h^T``."""
    Yg = Yp @ g
    return Yp - np.outer(h, Yg) - np.outer(Yg, h) + (g @ Yg) * np.outer(h, h) + dinv * np.outer(h, h)


def inverse_operational_space_inertias(robot: Any, ctx: ScalarContext, q: np.ndarray) -> np.ndarray:
    """(n_bodies, 6, 6): Upsilon(k) = Lambda(k)^-1 by eq. 4.7, body frame, angular first."""
    kin = joint_transforms(robot, ctx, q)
    ab = articulated_body(robot, ctx, q, kin)
    n = robot.n_bodies
    Y: list[Any] = [None] * n
    if robot.is_free:
        Y[0] = _symmetrize(ctx, "Ups0", ab.Dinv[0].inverse("P0inv"))
    else:
        Y[0] = ctx.zeros((6, 6))
    for k in range(1, n):
        Yp = _congruence(kin.X[k].motion_to_child, Y[robot.parent[k]])
        Yp = _symmetrize(ctx, f"Upsp{k}", Yp)
        Y[k] = _symmetrize(ctx, f"Ups{k}", _hinge_update(Yp, ab.G[k], kin.hinge(k), ab.Dinv[k]))
    out = ctx.zeros((n, 6, 6))
    for k in range(n):
        out[k] = Y[k]
    return out


def operational_space_inertias(robot: Any, ctx: ScalarContext, q: np.ndarray) -> np.ndarray:
    """(n_bodies, 6, 6): Lambda(k) = P(k) + S(k) (Lemma 4.1), in body_names order, each at its body frame
    origin in body coordinates, angular first.  Free base only."""
    require_free(robot, "operational_space_inertias", " (Lambda(k) exists only for a free base; "
                 "inverse_operational_space_inertias gives Upsilon = Lambda^-1 for any base)")
    kin = joint_transforms(robot, ctx, q)
    ab = articulated_body(robot, ctx, q, kin)
    dab = dual_articulated_body(robot, ctx, q, ab, kin)
    n = robot.n_bodies
    out = ctx.zeros((n, 6, 6))
    out[0] = ab.P[0]
    for k in range(1, n):
        out[k] = ctx.stage_symmetric(f"Lam{k}", ab.P[k] + dab.S[k])
    return out


def inverse_operational_space_inertias_dual(robot: Any, ctx: ScalarContext, q: np.ndarray) -> np.ndarray:
    """(n_bodies, 6, 6): Upsilon(k) by the dual recursion eq. 4.9 (tip to base).  Free base only."""
    kin = joint_transforms(robot, ctx, q)
    ab = articulated_body(robot, ctx, q, kin)
    dab = dual_articulated_body(robot, ctx, q, ab, kin)
    n = robot.n_bodies
    Y: list[Any] = [None] * n
    for k in reversed(range(n)):
        if not robot.children[k]:
            Y[k] = _symmetrize(ctx, f"Upsd{k}", ldl(ctx, ab.P[k] + dab.S_or_zero(k), f"Upsd{k}f")
                               .inverse(f"Upsd{k}i"))
            continue
        c = robot.children[k][0]
        # Upsilon+(c) from the dual side of hinge c, then moved to body k: phi*(p,c)^-1 Y phi(p,c)^-1
        Ypc = _hinge_update(Y[c], dab.Gs[c], kin.hinge(c), dab.Dsinv[c])
        Y[k] = _symmetrize(ctx, f"Upsd{k}", _congruence(kin.X[c].motion_to_parent, Ypc))
    out = ctx.zeros((n, 6, 6))
    for k in range(n):
        out[k] = Y[k]
    return out
