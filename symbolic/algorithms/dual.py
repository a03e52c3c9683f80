"""The dual articulated-body recursion of seed 000 (section 3.1, Algorithms 4 and 5) for trees.

Conventional quantities (Algorithm 2/3, subscript p in seed 000) treat body 0 as the base: ``P(k)`` is the
articulated inertia at O_k of the *subtree* of k.  The dual quantities (subscript s) are the articulated
inertia and residual force, seen at O_k, of everything that is **not** in the subtree of k, i.e. of the
rest of the system hanging on body k through hinge k.  For a serial chain this is seed 000's recursion
with the tip (link 1) as base; for a tree it is the scatter form of section 3.4: it runs base to tip,
and at a branch body p the complement of subtree(k) is body p, the complement of subtree(p) (already
known as ``S(p)``) and the *articulated* subtrees of k's siblings (their ``P+`` from the conventional
sweep).

Derivation (the OCR of eq. 3.3-3.5 is garbled; this is derived again and checked numerically).  Let
``f(k)`` be the spatial force that the parent exerts on body k across hinge k (at O_k, k coordinates),
``alpha+(k) = phi*(p, k) alpha(p)`` the acceleration of the parent-fixed frame at O_k, and
``alpha(k) = alpha+(k) + H*(k) betadot(k) + a(k)`` (eq. 2.1).  The complement of subtree(k) is an
articulated body with handle at O_k (fixed in p)::

    -f(k) = S+(k) alpha+(k) + z_s+(k)                                        (3.11, first form)

Force balance of body p with its other children c (``f(c) = P+(c) alpha+(c) + z+(c)``, eq. 3.7) and its
own complement (``-f(p) = S(p) alpha(p) + z_s(p)``) gives, with phi(k, p) = phi(p, k)^-1::

    S+(k)   = phi(k, p) [M(p) + S(p) + sum_{c != k} phi(p, c) P+(c) phi*(p, c)] phi*(k, p)
    z_s+(k) = phi(k, p) [z_s(p) + b(p) + sum_{c != k} phi(p, c) z+(c)]

(seed 000 eq. 3.3 first line and eq. 3.5a first line, with M(k+1) + S(k+1) of the serial chain
replaced by the gathered inertia of the branch body).  Articulating across hinge k, whose torque is
``T(k) = H(k) f(k)``, and writing ``y = z_s+(k) - S+(k) a(k)``::

    D_s(k)  = H S+ H*                  Gs(k) = S+ H* D_s^-1
    S(k)    = S+ - Gs D_s Gs*          (= taubar_s S+, taubar_s = I - Gs H)
    eps_s   = T(k) + H y               nu_s = D_s^-1 eps_s
    z_s(k)  = y - Gs eps_s
    -f(k)   = S(k) alpha(k) + z_s(k)                                         (3.11, second form)
    betadot(k) = nu_s(k) + Gs*(k) alpha(k)                                   (3.13, dual form)

Signs: seed 000 writes ``G_s = -S+ H* D_s^-1`` because the hinge map reverses sign in the dual
direction; here H keeps its conventional sign and ``Gs = -G_s(Jain)``, so ``taubar_s = I - Gs H`` and
eq. 3.13 reads ``nu_s + Gs* alpha``.  The Coriolis term enters as ``- S+ a(k)`` (the dual a_s of eq. 3A
is ``-a(k)`` moved to the other side of the hinge), with a(k) the conventional term of
:mod:`.kinematics` for every hinge type.

Base: a free base has nothing beyond it, ``S(0) = 0`` and ``z_s(0) = -T(0)`` (the base wrench is the
force across its 6-DOF hinge, ``f(0) = T(0)``).  For a fixed base the complement of every subtree
contains the ground, whose inertia is unbounded: ``S`` does not exist and :func:`dual_articulated_body`
raises.

Staged names: every quantity of this sweep starts with ``S`` (inertias) or ``Zs`` (residual forces);
the conventional sweep (:func:`conventional_residuals`) uses ``P``/``U``/``D``/``G``/``Pp`` (as in
:mod:`.articulated_body`) and ``Zp``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from soadyn.model.robot import require_free
from soadyn.symbolic.algorithms.articulated_body import ArticulatedBody, articulate_hinge
from soadyn.symbolic.algorithms.forward_dynamics import residual_forces
from soadyn.symbolic.algorithms.kinematics import Kinematics
from soadyn.symbolic.scalar import ScalarContext

#: why the dual recursions need a free base (the note of :func:`~soadyn.model.robot.require_free`)
FIXED_BASE_NOTE = (" (seed 000 section 3: for a fixed base the inertia beyond every hinge includes the "
                   "ground and is unbounded; use forward_dynamics / inverse_operational_space_inertias "
                   "instead)")


@dataclass
class DualArticulatedBody:
    """Per-body dual quantities (index = body; entry 0 is the free base: S = 0, no hinge terms)."""

    kin: Kinematics
    Splus: list[Any]      # S+(k), 6x6 (None for k = 0)
    S: list[Any]          # S(k), 6x6 (None for k = 0, meaning zero)
    Us: list[Any]         # S+(k) H*(k)
    Ds: list[Any]         # H S+ H*
    Dsinv: list[Any]
    Gs: list[Any]         # S+ H* Ds^-1  (= -G_s of seed 000)

    def S_or_zero(self, k: int) -> np.ndarray:
        return self.kin.ctx.zeros((6, 6)) if self.S[k] is None else self.S[k]


def _others(robot: Any, p: int, k: int) -> list[int]:
    return [c for c in robot.children[p] if c != k]


def dual_articulated_body(robot: Any, ctx: ScalarContext, q: np.ndarray, ab: ArticulatedBody,
                          kin: Kinematics | None = None) -> DualArticulatedBody:
    """Algorithm 4 of seed 000 in tree (scatter) form: S+(k), D_s, G_s, S(k), base to tip.

    Only the conventional ``P+`` of *siblings* at branch bodies is read from ``ab``; on a serial chain the
    sweep uses nothing but kinematics and the body inertias.
    """
    require_free(robot, "the dual articulated-body recursion", FIXED_BASE_NOTE)
    kin = ab.kin if kin is None else kin
    n = robot.n_bodies
    Splus: list[Any] = [None] * n
    S: list[Any] = [None] * n
    Us: list[Any] = [None] * n
    Ds: list[Any] = [None] * n
    Dsinv: list[Any] = [None] * n
    Gs: list[Any] = [None] * n
    for k in range(1, n):
        p = robot.parent[k]
        Q = kin.spatial_inertia(p)
        if S[p] is not None:
            Q = Q + S[p]
        for c in _others(robot, p, k):
            if ab.Pplus[c] is not None:
                Q = Q + kin.X[c].inertia_to_parent(ab.Pplus[c])
        Splus[k] = ctx.stage_symmetric(f"Sp{k}", kin.X[k].inertia_to_child(Q))
        Us[k], Ds[k], Dsinv[k], Gs[k], S[k] = articulate_hinge(robot, ctx, kin, k, Splus[k],
                                                               ("Su", "Sd", "Sdi", "Sg", "S"))
    return DualArticulatedBody(kin, Splus, S, Us, Ds, Dsinv, Gs)


def conventional_residuals(ab: ArticulatedBody, T: np.ndarray, a: list[Any], b: list[Any]
                           ) -> tuple[list[Any], list[Any], list[Any]]:
    """Eq. 2.13a (Algorithm 3, tip to base), returning (z, z+, nu) with staged names ``Zp...``, so the
    conventional block of the decoupled algorithm is recognisable by name."""
    return residual_forces(ab, T, a, b, prefix="Zp")


def dual_residual_forces(dab: DualArticulatedBody, T: np.ndarray, a: list[Any], b: list[Any],
                         zplus: list[Any]) -> tuple[list[Any], list[Any]]:
    """Algorithm 5 of seed 000 (eq. 3.5a) in tree form, base to tip: returns (z_s, nu_s) per body.

    ``zplus`` are the conventional z+ (only those of siblings at branch bodies are read).
    ``z_s(0) = -T(0)`` for the free base; ``nu_s(0)`` is None.
    """
    kin = dab.kin
    robot, ctx = kin.robot, kin.ctx
    n = robot.n_bodies
    zs: list[Any] = [None] * n
    nus: list[Any] = [None] * n
    zs[0] = -T[0:6]
    for k in range(1, n):
        p = robot.parent[k]
        w = zs[p] + b[p]
        for c in _others(robot, p, k):
            w = w + kin.X[c].force_to_parent(zplus[c])
        zsp = kin.X[k].force_to_child(w)
        y = ctx.stage(f"Zsy{k}", zsp - dab.Splus[k] @ a[k])
        eps = ctx.stage(f"Zseps{k}", T[robot.v_index(k)][0] + kin.hinge(k) @ y)
        zs[k] = ctx.stage(f"Zs{k}", y - dab.Gs[k] * eps)
        nus[k] = ctx.stage(f"Zsnu{k}", eps * dab.Dsinv[k])
    return zs, nus
