"""Algorithm 2 of seed 000: the articulated-body (Riccati) recursion, tip to base (eq. 2.6).

    P(k)   = sum_c phi(k, c) P+(c) phi*(k, c) + M(k)
    D(k)   = H(k) P(k) H*(k)
    G(k)   = P(k) H*(k) D^-1(k)
    K(k+1, k) = phi(k+1, k) G(k)
    taubar(k) = I - G(k) H(k)
    P+(k)  = taubar(k) P(k)                      (= P - G D G*, symmetric)
    psi(k+1, k) = phi(k+1, k) taubar(k)

For the free base (eq. 3.1) D = P, G = I, taubar = 0, P+ = 0.  For a 1-DOF hinge whose H*(k) is a
coordinate unit vector e_i, ``H(k) P+(k) = 0`` means row and column i of P+ are exactly zero; that
identity is lost once P is symbolic, so it is imposed by construction.

A joint with an armature I_a (soadyn.symbolic.algorithms.drive) has ``D(k) = H P H* + I_a``; then
``H P+ H* = D - I_a - (D - I_a)^2 / D != 0`` and the zeroing above is not done.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from soadyn.symbolic.algorithms.drive import armature
from soadyn.symbolic.algorithms.kinematics import Kinematics, joint_transforms
from soadyn.symbolic.algorithms.linalg import LDL, ldl
from soadyn.symbolic.scalar import ScalarContext


@dataclass
class ArticulatedBody:
    """Per-body quantities of Algorithm 2 (lists indexed by body; base entries per eq. 3.1)."""

    kin: Kinematics
    P: list[np.ndarray]
    Pplus: list[np.ndarray]
    U: list[np.ndarray | None]      # P(k) H*(k)  (6,) for 1-DOF hinges
    D: list[Any]                    # scalar for 1-DOF hinges, 6x6 for the free base, None for a fixed root
    Dinv: list[Any]                 # 1/D for 1-DOF hinges; LDL factor object for the free base
    G: list[np.ndarray | None]      # (6,) for 1-DOF hinges; None (= I6) for the free base

    def taubar(self, k: int) -> np.ndarray:
        """taubar(k) = I - G(k) H(k) as a dense 6x6 (for the reference comparisons)."""
        ctx = self.kin.ctx
        if k == 0:
            return ctx.zeros((6, 6))
        return ctx.eye(6) - np.outer(self.G[k], self.kin.hinge(k))


def articulated_body(robot: Any, ctx: ScalarContext, q: np.ndarray,
                     kin: Kinematics | None = None) -> ArticulatedBody:
    """Run Algorithm 2 (eq. 2.6) over the tree, gathering P+ from the children of each body."""
    kin = joint_transforms(robot, ctx, q) if kin is None else kin
    n = robot.n_bodies
    P: list[np.ndarray] = [None] * n  # type: ignore[list-item]
    Pplus: list[np.ndarray] = [None] * n  # type: ignore[list-item]
    U: list[Any] = [None] * n
    D: list[Any] = [None] * n
    Dinv: list[Any] = [None] * n
    G: list[Any] = [None] * n
    for k in reversed(range(n)):
        Pk = kin.spatial_inertia(k)
        for c in robot.children[k]:
            if Pplus[c] is not None:
                Pk = Pk + kin.X[c].inertia_to_parent(Pplus[c])
        P[k] = ctx.stage_symmetric(f"P{k}", Pk)
        if k == 0:
            if robot.is_free:
                D[0] = P[0]
                Dinv[0] = ldl(ctx, P[0], "D0")
            continue
        U[k], D[k], Dinv[k], G[k], Pplus[k] = articulate_hinge(robot, ctx, kin, k, P[k],
                                                               ("U", "D", "Dinv", "G", "Pp"))
    return ArticulatedBody(kin, P, Pplus, U, D, Dinv, G)


def articulate_hinge(robot: Any, ctx: ScalarContext, kin: Kinematics, k: int, Pk: np.ndarray,
                     names: tuple[str, str, str, str, str]) -> tuple[Any, Any, Any, Any, np.ndarray]:
    """Articulate the inertia ``Pk`` across the 1-DOF hinge k (eq. 2.6): ``U = P H*``, ``D = H U``,
    ``D^-1``, ``G = U D^-1`` and ``P+ = P - G U*`` (row and column of a unit hinge zeroed exactly), each
    staged under ``names[i] + str(k)``.  Shared by Algorithm 2 and its dual (Algorithm 4, ``S+ -> S``)."""
    nU, nD, nDinv, nG, nPp = names
    h = kin.hinge(k)
    U = ctx.stage(f"{nU}{k}", Pk @ h)
    ia = armature(robot, k)    # the drive train: D = H P H* + I_a (soadyn.symbolic.algorithms.drive)
    D = ctx.stage(f"{nD}{k}", h @ U + ia if ia else h @ U)
    Dinv = ctx.stage(f"{nDinv}{k}", 1 / D)
    G = ctx.stage(f"{nG}{k}", U * Dinv)
    Pp = Pk - np.outer(G, U)
    i = zero_hinge_row(robot, kin, k)
    if i is not None:              # H P+ = 0 exactly (P+ H* = P H* - U = 0)
        Pp[i, :] = 0
        Pp[:, i] = 0
    return U, D, Dinv, G, ctx.stage_symmetric(f"{nPp}{k}", Pp)


def zero_hinge_row(robot: Any, kin: Kinematics, k: int) -> int | None:
    """The i with ``H(k) taubar(k) = 0`` imposed exactly: for a hinge whose ``H*(k)`` is the unit vector
    e_i and with no armature, ``H taubar = H - (H P H* / D) H = 0`` (``D = H U``), so row i of
    ``taubar(k)``, of ``P+(k) = taubar(k) P(k)`` and of every ``taubar(k) g`` is zero, though not in
    rounded arithmetic (``G_i = U_i / D`` is 1 only to within an ulp).  None otherwise (an armature
    makes ``H G != 1``)."""
    i = kin.unit_hinge(k)
    return None if i is None or armature(robot, k) else i


def solve_D(ab: ArticulatedBody, k: int, eps: Any, name: str) -> Any:
    """nu(k) = D^-1(k) eps(k)."""
    if k == 0:
        fac: LDL = ab.Dinv[0]
        return fac.solve(eps, name)
    return eps * ab.Dinv[k]
