"""Analytic derivatives of the recursive Newton-Euler algorithm (Carpentier & Mansard 2018), written in
base-aligned spatial coordinates.

Every spatial quantity below is a Featherstone spatial vector ``[w; v]`` (motion) or ``[n; F]`` (force)
expressed in the axes of the base body at the base origin.  In those coordinates the free base's motion
subspace is ``S_0 = I6`` and the tangent ``q (+) delta`` of docs/conventions.md moves the whole tree
rigidly, so that only gravity (constant in inertial axes) sees the base attitude.  A fixed base with one
child body uses that child's axes at its origin instead (:func:`reference_body`): the entries are
scalars ``S_i . x``, the same in any axes the bodies share, and there the first joint drops out of every
pose; gravity is turned into those axes once.  For body k with parent lambda and joint columns ``S_k``
(a 6 x n_k matrix)::

    v_k = v_lambda + S_k qd_k                                     (velocity)
    a_k = a_lambda + S_k qdd_k + v_lambda x S_k qd_k              (spatial acceleration, a_root = -g)
    f_k = I_k a_k + v_k x* I_k v_k - f_ext,k                      (body force)
    BC_k x = v_k x* (I_k x) - I_k (v_k x x) + x x* (I_k v_k)      (Coriolis operator of the derivatives)

composites over the subtree, ``Ic_i = sum I_k``, ``BCc_i = sum BC_k``, ``F_i = sum f_k``, and
``tau_i = S_i^T F_i``.  A joint motion ``delta_j`` moves the subtree of j rigidly with the twist
``S_j delta_j``: the covariant part of every change cancels in ``S_i^T F_i`` when j is on the path of
i, and what is left is the change of the velocities and accelerations relative to the parent of j
(the recursions of the paper, re-derived here for our frames).  With, per column of joint j,

    u_j     = S_j x v_lambda                 (d v_k / d q_j = S_j x v_k - u_j)
    alpha_j = S_j x a_lambda - u_j x v_lambda
    beta_j  = S_j x (v_j + v_lambda)         (d a_k / d qd_j = S_j x v_k - beta_j; = 2 u_j for a
                                              one-column joint, v_j = v_lambda + S_j qd_j, S_j x S_j = 0)
    phi_j   = S_j x* F_j - Ic_j alpha_j - BCc_j u_j
    psi_j   = BCc_j S_j - Ic_j beta_j

and, per row of body i, ``Fr_i = Ic_i S_i`` and ``Gr_i = BCc_i^T S_i``::

    j on the path to i (j = i included):  dtau_i/dq_j = -(Fr_i . alpha_j + Gr_i . u_j)
                                          dtau_i/dqd_j = Gr_i . S_j - Fr_i . beta_j
    i a strict ancestor of j:             dtau_i/dq_j = S_i . phi_j,   dtau_i/dqd_j = S_i . psi_j

and zero elsewhere (the tree's sparsity).  On the diagonal of a one-column joint with a moving ancestor
``S_j . phi_j = -(Fr_j . alpha_j + Gr_j . u_j)`` (as ``S_j . (S_j x* F_j) = 0``) and ``S_j . psi_j =
Gr_j . S_j - Fr_j . beta_j``: a 6-term dot product instead of a 9-term one, where it is fewer operations.
``BCc_j`` enters through half its top-left block, ``Kc_j`` (the sum of :func:`coriolis_half` over the
subtree: no angular momentum needed), and the linear momentum ``Pc_j``, applied to doubled vectors (``2 u_j
= beta_j``); each body inertia ``R J_c R^T`` through the factors of :func:`_rotated_inertia`.

Within a chain of at least :data:`CHAIN_PRODUCT` moving joints
the first kind are two masked products ``-[Fr_i Gr_i] [alpha_j; u_j]`` and ``-[Fr_i Gr_i] [beta_j; -S_j]``
over the lower triangle of the chain's block (``ctx.matmul(..., mask=)``: vector loops in the C; ``Gr``'s
linear half is zero, so each is a 9-term dot product).  For the free base, whose lambda is the inertial frame
(``v_lambda = 0``, ``a_lambda = -g``), the position columns are exact zeros and the attitude columns
carry gravity alone.  Exact zeros of ``S_0 = I6`` and of the unit hinge axes stay exact.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from soadyn.symbolic.algorithms.kinematics import (
    Kinematics,
    gravity_acceleration,
    hinge_map,
    link_poses,
)
from soadyn.symbolic.parameters import body_inertia
from soadyn.symbolic.spatial import RigidInertia, Xform, cross


def motion_cross(m: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``m x x`` for spatial motions ``[w; v]``."""
    return np.concatenate([cross(m[:3], x[:3]), cross(m[:3], x[3:]) + cross(m[3:], x[:3])])


def force_cross(m: np.ndarray, f: np.ndarray) -> np.ndarray:
    """``m x* f`` for a spatial motion ``m`` and force ``f = [n; F]``."""
    return np.concatenate([cross(m[:3], f[:3]) + cross(m[3:], f[3:]), cross(m[:3], f[3:])])


def inertia_apply(inert: RigidInertia, x: np.ndarray) -> np.ndarray:
    """``I x = [J w + h x u; m u - h x w]`` for a rigid inertia (m, h, J) and ``x = [w; u]``."""
    w, u = x[:3], x[3:]
    return np.concatenate([inert.J @ w + cross(inert.h, u), inert.m * u - cross(inert.h, w)])


def coriolis_half(inert: RigidInertia, V: np.ndarray) -> np.ndarray:
    """``Kh = (C - L~) / 2``, half the top-left block of the Coriolis operator of one body, a 3x3 matrix.

    ``BC x = V x* (I x) - I (V x x) + x x* (I V)`` (the operator of Carpentier & Mansard 2018, with
    Featherstone's cross products) has, for ``I = [[J, h~], [-h~, m]]``, ``V = [w; v]`` and momentum
    ``I V = [L; P]``, the block form ``BC = [[C - L~, 0], [-2 P~, 0]] = 2 [[Kh, 0], [-P~, 0]]`` with
    ``C = w~ J - J w~ - (v~ h~ + h~ v~)``: the columns of the linear part of x vanish because ``P = m v + w x
    h``.  With ``L = J w + h x v``, ``(J w)~ = tr(J) w~ - w~ J - J w~`` (J symmetric) and ``(h x v)~ = v h^T
    - h v^T``::

        Kh = w~ J' - v h^T + (v.h) I,    J' = J - tr(J) I / 2

    (33 + 9 + 14 operations, no momentum needed).  ``BC V = 2 V x* (I V)``, so ``V x* (I V) = [Kh w; w x
    P]``: the body force's velocity term (15 operations instead of 21 on top, and no ``L``).  Only Kh and P
    are carried, never the 6x6."""
    w, v, J, h = V[:3], V[3:], inert.J, inert.h
    tau = (J[0, 0] + J[1, 1] + J[2, 2]) / 2
    Jp = J.copy()
    for i in range(3):
        Jp[i, i] = J[i, i] - tau
    K = np.stack([cross(w, Jp[:, c]) for c in range(3)], axis=1) - np.outer(v, h)
    d = v @ h
    for i in range(3):
        K[i, i] = K[i, i] + d
    return K


def coriolis_apply(Kh: np.ndarray, P: np.ndarray, x2: np.ndarray) -> np.ndarray:
    """``BC x = [Kh x2_w; x2_w x P]`` for ``BC`` given by ``Kh`` (:func:`coriolis_half`) and the momentum's
    linear part ``P``, with ``x2 = 2 x`` (the doubled vector the caller has: ``beta = 2 u``)."""
    xw = x2[:3]
    return np.concatenate([Kh @ xw, cross(xw, P)])


def coriolis_transpose_apply(Kh: np.ndarray, P: np.ndarray, s2: np.ndarray) -> np.ndarray:
    """``BC^T s = [Kh^T s2_w + P x s2_v; 0]`` with ``s2 = 2 s``."""
    top = Kh.T @ s2[:3] + cross(P, s2[3:])
    return np.concatenate([top, np.zeros_like(top)])


def _base_inertia(robot: Any, ctx: Any, k: int, X: Xform) -> RigidInertia:
    """Body k's inertia about the base origin in base axes, through its centre of mass:
    ``c = p + R c_k``, ``J = R J_c R^T + m (c.c I - c c^T)``, ``h = m c`` (cheaper than moving J about
    O_k); ``R J_c R^T`` by :func:`_rotated_inertia`."""
    if X.R is None:
        return body_inertia(robot, ctx, k).rigid()
    ri = robot.inertias[k]
    c = ctx.stage(f"cb{k}", X.R @ ctx.const(ri.com) + X.l)
    RJR = _rotated_inertia(ctx, X.R, ri.inertia)
    J = ctx.zeros((3, 3))
    cc = c @ c
    for i in range(3):
        for j in range(i, 3):
            J[i, j] = J[j, i] = RJR[i][j] + ri.mass * ((cc if i == j else 0) - c[i] * c[j])
    return RigidInertia(ri.mass, ctx.stage(f"Ibh{k}", ri.mass * c), ctx.stage_symmetric(f"IbJ{k}", J))


def _rotated_inertia(ctx: Any, R: np.ndarray, Jc: np.ndarray) -> list[list[Any]]:
    """The entries ``[i][j]``, ``i <= j``, of ``R Jc R^T`` for a rotation R and a constant symmetric Jc, in
    the form of fewest operations (symbolically; the first numerically) among ``(R Jc) R^T`` and
    ``shift I + sum_m w_m (R l_m)(R l_m)^T`` for each factorisation ``Jc = shift I + sum_m w_m l_m l_m^T``
    of :func:`_inertia_factors` (R's exact zeros decide: a full Jc costs 75 operations as ``(R Jc) R^T``
    and 57 as ``L D L^T`` when R has none, a diagonal one 39 and 27)."""
    Jc = np.asarray(Jc, dtype=float)
    RJ = R @ ctx.const(Jc)
    forms = [[[RJ[i] @ R[j] if j >= i else None for j in range(3)] for i in range(3)]]
    if not getattr(ctx, "symbolic", False):
        return forms[0]
    for shift, pairs in _inertia_factors(Jc):
        rs = [R @ ctx.const(l) for _, l in pairs]
        ws = [ctx.const(w) * r for (w, _), r in zip(pairs, rs)]
        forms.append([[sum((w[i] * r[j] for w, r in zip(ws, rs)), ctx.const(shift) if i == j else 0)
                       if j >= i else None for j in range(3)] for i in range(3)])
    return min(forms, key=lambda f: _operations([e for row in f for e in row if e is not None]))


def _inertia_factors(Jc: np.ndarray) -> list[tuple[float, list[tuple[float, np.ndarray]]]]:
    """The factorisations ``Jc = shift I + sum_m w_m l_m l_m^T`` of :func:`_rotated_inertia` for a
    constant symmetric positive definite 3x3 Jc (none otherwise, e.g. a massless link): a diagonal Jc
    as ``Jc_ss I`` plus two unit-vector terms (for each s), any other as ``L D L^T`` in each of the six
    orders of the axes (``l_m`` the columns of P L, the last a unit vector).  Plain float arithmetic: the
    same bits on every machine."""
    eye = np.eye(3)
    d = [float(Jc[i, i]) for i in range(3)]
    if min(d) <= 0:
        return []
    if not (Jc[0, 1] or Jc[0, 2] or Jc[1, 2]):
        return [(d[s], [(d[m] - d[s], eye[m]) for m in range(3) if m != s]) for s in range(3)]
    out = []
    for order in ((0, 1, 2), (0, 2, 1), (1, 0, 2), (1, 2, 0), (2, 0, 1), (2, 1, 0)):
        A = Jc[np.ix_(order, order)]
        L = np.eye(3)
        piv = [0.0, 0.0, 0.0]
        for j in range(3):
            piv[j] = float(A[j, j]) - sum(L[j, m] * L[j, m] * piv[m] for m in range(j))
            if not piv[j] > 0:
                return []
            for i in range(j + 1, 3):
                L[i, j] = (float(A[i, j]) - sum(L[i, m] * L[j, m] * piv[m] for m in range(j))) / piv[j]
        P = eye[:, order]                   # column m of P L: l_m in the original axes
        out.append((0.0, [(piv[m], P @ L[:, m]) for m in range(3)]))
    return out


def _cheaper(ctx: Any, *forms: Any) -> Any:
    """The form of fewest operations (:func:`_operations`) of one quantity; numerically the first."""
    if not getattr(ctx, "symbolic", False):
        return forms[0]
    return min(forms, key=lambda e: _operations([e]))


def _operations(exprs: list[Any]) -> int:
    """Additions and multiplications of SymEngine expressions, each distinct subexpression once (a cost
    model for :func:`_rotated_inertia` and :func:`_cheaper`; constants +-1 multiply for free)."""
    seen: set = set()
    n = 0
    stack = [e for e in exprs if hasattr(e, "args")]
    while stack:
        e = stack.pop()
        if e in seen or not e.args:
            continue
        seen.add(e)
        if e.is_Add:
            n += len(e.args) - 1
        elif e.is_Mul:
            n += sum(1 for a in e.args if not (a.is_Number and abs(a) == 1)) - 1
        else:
            n += 1
        stack.extend(e.args)
    return n


def _is_path(robot: Any, j: int, i: int) -> bool:
    """True if j is i or an ancestor of i."""
    while i >= 0:
        if i == j:
            return True
        i = robot.parent[i]
    return False


@dataclass
class Sweep:
    """The per-body quantities of the two sweeps, base-aligned coordinates (module docstring): joint
    columns S, velocities V, accelerations A, body inertias I and, per subtree, composite inertia Ic,
    half Coriolis block Kc (:func:`coriolis_half`), linear momentum Pc, force F (None for a fixed root);
    ``grav`` is ``a_root = -g``; ``U[k] = S_k x v_lambda`` of a one-column joint (the ``u_j`` of the module
    docstring, which the acceleration's velocity product reuses: ``v_lambda x S_k qd_k = -qd_k u_k``), None
    elsewhere."""

    grav: np.ndarray
    S: list[list[np.ndarray]]
    V: list[np.ndarray]
    A: list[np.ndarray]
    inert: list[RigidInertia]
    Ic: list[RigidInertia]
    Kc: list[np.ndarray]
    Pc: list[np.ndarray]
    F: list[np.ndarray]
    U: list[np.ndarray | None]


def rnea_derivatives(kin: Kinematics, v: np.ndarray, a: np.ndarray, f_ext: np.ndarray | None = None,
                     base_q: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """(dtau/dq, dtau/dv) of inverse dynamics at (q, v, a) by the analytic recursions (module docstring).

    ``base_q=False`` leaves the free base's columns of dtau/dq at zero (for a caller that has them in
    closed form, see :func:`soadyn.symbolic.algorithms.derivatives.forward_dynamics_derivatives`)."""
    return rnea_entries(kin, base_aligned_sweep(kin, v, a, f_ext), base_q)


def base_aligned_sweep(kin: Kinematics, v: np.ndarray, a: np.ndarray | None,
                       f_ext: np.ndarray | None = None) -> Sweep:
    """Base to tip (S, V, A, body forces), tip to base (Ic, Kc, Pc, F) at (q, v, a); ``a=None``: the
    bias sweep, every joint acceleration (and the free base's) zero."""
    robot, ctx = kin.robot, kin.ctx
    n = robot.n_bodies
    top = reference_body(robot)
    if top is None:
        Rb, pb = link_poses(kin, relative=True)
        grav = ctx.stage("gb", gravity_acceleration(kin))
    else:                       # the axes of the fixed base's one child: its joint drops out of every pose
        Rb, pb = _poses_from(kin, top)
        g, Rt = gravity_acceleration(kin), kin.X[top].R
        grav = ctx.stage("gb", g if Rt is None else np.concatenate([g[:3], Rt.T @ g[3:]]))
    S: list[list[np.ndarray]] = [[] for _ in range(n)]
    V: list[np.ndarray] = [None] * n  # type: ignore[list-item]
    A: list[np.ndarray] = [None] * n  # type: ignore[list-item]
    inert: list[RigidInertia] = [None] * n  # type: ignore[list-item]
    f: list[np.ndarray] = [None] * n  # type: ignore[list-item]
    hb: list[np.ndarray] = [None] * n  # type: ignore[list-item]
    Cb: list[np.ndarray] = [None] * n  # type: ignore[list-item]
    U: list[np.ndarray | None] = [None] * n
    zero6 = ctx.zeros(6)
    # ---- base to tip: joint columns, velocities, accelerations, body forces (base coordinates) --------
    for k in range(n):
        X = Xform(None if k in (0, top) else Rb[k], None if k in (0, top) else pb[k])
        if k == 0:
            if robot.is_free:
                S[0] = [ctx.eye(6)[:, m] for m in range(6)]
                V[0], A[0] = v[0:6], grav if a is None else ctx.stage("ab0", grav + a[0:6])
            else:
                V[0], A[0] = zero6, grav
        else:
            p = robot.parent[k]
            col = ctx.stage(f"Sb{k}", X.motion_to_parent(ctx.const(hinge_map(robot, k))))
            S[k] = [col]
            qd = v[robot.v_index(k)][0]
            V[k] = ctx.stage(f"vb{k}", V[p] + col * qd)
            U[k] = ctx.stage(f"u{k}", motion_cross(col, V[p]))
            acc = A[p] - U[k] * qd          # v_lambda x S_k qd_k, from u_k (needed by the derivatives)
            A[k] = ctx.stage(f"ab{k}", acc if a is None else acc + col * a[robot.v_index(k)][0])
        if k in ctx.parameters:      # run-time parameters: (m, h, J about O_k) moved to the base
            body = body_inertia(robot, ctx, k).rigid()
            if k > 0:
                body = body.to_parent(X)
                body = RigidInertia(body.m, ctx.stage(f"Ibh{k}", body.h),
                                    ctx.stage_symmetric(f"IbJ{k}", body.J))
        else:
            body = _base_inertia(robot, ctx, k, X)
        inert[k] = body
        if k == 0 and not robot.is_free:
            continue
        w = V[k][:3]
        P = ctx.stage(f"hb{k}", inertia_apply(body, V[k])[3:])            # the momentum's linear part
        Kh = ctx.stage(f"Cb{k}", coriolis_half(body, V[k]))
        fk = inertia_apply(body, A[k]) + np.concatenate([Kh @ w, cross(w, P)])     # I a + v x* I v
        if f_ext is not None:
            fk = fk - X.force_to_parent(f_ext[k])
        if robot.children[k]:       # named, so that the composites below add one term per child (latency)
            fk = ctx.stage(f"fb{k}", fk)
        f[k], hb[k], Cb[k] = fk, P, Kh
    # ---- tip to base: composite inertia, Coriolis operator and force of each subtree -------------------
    Ic: list[RigidInertia] = [None] * n  # type: ignore[list-item]
    Kc: list[np.ndarray] = [None] * n  # type: ignore[list-item]
    Pc: list[np.ndarray] = [None] * n  # type: ignore[list-item]
    F: list[np.ndarray] = [None] * n  # type: ignore[list-item]
    for k in reversed(range(n)):
        if f[k] is None:
            continue
        Ik, Kk, Pk, Fk = inert[k], Cb[k], hb[k], f[k]
        for c in robot.children[k]:
            Ik, Kk, Pk, Fk = Ik + Ic[c], Kk + Kc[c], Pk + Pc[c], Fk + F[c]
        Ic[k] = RigidInertia(Ik.m, ctx.stage(f"Ich{k}", Ik.h), ctx.stage_symmetric(f"IcJ{k}", Ik.J))
        Kc[k] = ctx.stage(f"Kc{k}", Kk)
        Pc[k] = ctx.stage(f"Pc{k}", Pk)
        F[k] = ctx.stage(f"Fc{k}", Fk)
    return Sweep(grav, S, V, A, inert, Ic, Kc, Pc, F, U)


def reference_body(robot: Any) -> int | None:
    """The body whose axes the sweep of a fixed base uses: the base's one child (None for a free base, or a
    fixed base with several children, whose sweep keeps the base's axes).

    The entries of dtau/dq and dtau/dv are scalars (``S_i . x``), the same in any axes that all the bodies
    share; in the child's own axes its joint drops out of every pose (its hinge, its inertia and the next
    hinge are constants there), where the base's axes carry its rotation into every body below (the
    gravity of the base turns with it instead, three products, or none when the joint turns about the
    gravity's line)."""
    if robot.is_free or len(robot.children[0]) != 1:
        return None
    return robot.children[0][0]


def _poses_from(kin: Kinematics, top: int) -> tuple[list[Any], list[Any]]:
    """Attitude and origin of every body in the axes of body ``top`` at its origin (:func:`reference_body`;
    every body but the base lies below it); None for ``top`` itself (the identity), and for the base."""
    robot, ctx = kin.robot, kin.ctx
    n = robot.n_bodies
    R: list[Any] = [None] * n
    p: list[Any] = [None] * n
    for k in range(1, n):
        if k == top:
            continue
        par, X = robot.parent[k], kin.X[k]
        Rp, pp = R[par], p[par]
        if Rp is None:
            R[k] = ctx.eye(3) if X.R is None else X.R
        else:
            R[k] = Rp if X.R is None else ctx.stage(f"Rc{k}", Rp @ X.R)
        off = None if X.l is None else (X.l if Rp is None else Rp @ X.l)
        if off is None:
            p[k] = ctx.zeros(3) if pp is None else pp
        else:
            p[k] = ctx.stage(f"pc{k}", off if pp is None else pp + off)
    return R, p


def rnea_entries(kin: Kinematics, sw: Sweep, base_q: bool = True, split: bool = False
                 ) -> tuple[np.ndarray, np.ndarray]:
    """dtau/dq, dtau/dv from the sweeps' quantities: per body its rows and columns, then the entries of
    the pairs on one path (module docstring); ``base_q`` as in :func:`rnea_derivatives`.  ``split``: a
    long chain's masked products are cut where the chain branches, each piece over the rows of its whole
    subtree (:func:`_chain_pieces`; the forward-dynamics derivatives, whose block products read them)."""
    robot, ctx = kin.robot, kin.ctx
    n, nv = robot.n_bodies, robot.nv
    grav, S, V, A, Ic, Kc, Pc, F = sw.grav, sw.S, sw.V, sw.A, sw.Ic, sw.Kc, sw.Pc, sw.F
    zero6 = ctx.zeros(6)
    # ---- per body: rows (Fr, Gr) and columns (u, alpha, beta, phi, psi) --------------------------------
    rows: dict[int, list[tuple[np.ndarray, np.ndarray, np.ndarray]]] = {}
    cols: dict[int, list[tuple[np.ndarray, ...]]] = {}
    for j in range(n):
        if not S[j]:
            continue
        rows[j] = [(s, ctx.stage(f"Fr{j}", inertia_apply(Ic[j], s)),
                    ctx.stage(f"Gr{j}", coriolis_transpose_apply(Kc[j], Pc[j], 2 * s))) for s in S[j]]
        p = robot.parent[j]
        vl, al = (zero6, grav) if p < 0 else (V[p], A[p])
        # a moving ancestor: every body but the base moves; the base only when it is free (S[0])
        has_anc = robot.parent[j] > 0 or (robot.parent[j] == 0 and bool(S[0]))
        cj = []
        for s in S[j]:
            u = ctx.stage(f"u{j}", motion_cross(s, vl)) if sw.U[j] is None else sw.U[j]
            alpha = ctx.stage(f"al{j}", motion_cross(s, al) - motion_cross(u, vl))
            if p < 0:           # the free base: six columns of S_0 = I6
                beta = ctx.stage(f"be{j}", motion_cross(s, V[j] + vl))
            else:               # one column: S_j x (2 v_lambda + S_j qd_j) = 2 u_j, as S_j x S_j = 0
                beta = 2 * u
            phi = psi = None
            if has_anc:
                phi = ctx.stage(f"phi{j}", force_cross(s, F[j]) - inertia_apply(Ic[j], alpha)
                                - coriolis_apply(Kc[j], Pc[j], 2 * u))
                psi = ctx.stage(f"psi{j}", coriolis_apply(Kc[j], Pc[j], 2 * s) - inertia_apply(Ic[j], beta))
            cj.append((s, u, alpha, beta, phi, psi))
        cols[j] = cj
    # ---- assemble: the path of i (j on it) and the subtree below i (i on the path of j) ----------------
    dq = ctx.zeros((nv, nv))
    dv = ctx.zeros((nv, nv))
    chains = [ks for ks in _chains(robot, rows) if len(ks) >= CHAIN_PRODUCT]
    pieces = [pc for ks in chains for pc in _chain_pieces(robot, ks, rows, split)]
    covered = {(i, j) for cs_, rs_ in pieces for i in rs_ for j in cs_ if _is_path(robot, j, i)}
    for j, cj in cols.items():
        cs = robot.v_index(j).start
        for i, ri_ in rows.items():
            rs = robot.v_index(i).start
            below = _is_path(robot, j, i)
            if not below and not _is_path(robot, i, j):
                continue
            if (i, j) in covered:
                continue                # j on the path of i in one long chain: the products below
            skip_q = j == 0 and not base_q
            for r, (s_i, Fr, Gr) in enumerate(ri_):
                for c, (s, u, alpha, beta, phi, psi) in enumerate(cj):
                    if below and phi is not None and i == j and r == c:   # S_j . (S_j x* F_j) = 0: 6 terms
                        dq[rs + r, cs + c] = _cheaper(ctx, -(Fr @ alpha + Gr @ u), s_i @ phi)
                        dv[rs + r, cs + c] = _cheaper(ctx, Gr @ s - Fr @ beta, s_i @ psi)
                    elif below:
                        if not skip_q:
                            dq[rs + r, cs + c] = -(Fr @ alpha + Gr @ u)
                        dv[rs + r, cs + c] = Gr @ s - Fr @ beta
                    else:
                        dq[rs + r, cs + c] = s_i @ phi
                        dv[rs + r, cs + c] = s_i @ psi
    dq, dv = ctx.stage("dtau_dq", dq), ctx.stage("dtau_dv", dv)
    for ks, rk in pieces:           # j on the path of i within a long chain: two masked products
        row0, col0 = robot.v_index(rk[0]).start, robot.v_index(ks[0]).start
        mask = np.array([[_is_path(robot, j, i) for j in ks] for i in rk], dtype=bool)
        Fr_, Gr_ = (np.array([rows[k][0][c] for k in rk], dtype=object) for c in (1, 2))
        s_, u_, al_, be_ = (np.array([cols[k][0][c] for k in ks], dtype=object).T for c in (0, 1, 2, 3))
        A = np.concatenate([Fr_, Gr_[:, :3]], axis=1)          # Gr_i's last three entries are zero
        for out, name, right in ((dq, "dqL", np.concatenate([al_, u_[:3]])),
                                 (dv, "dvL", np.concatenate([be_, -s_[:3]]))):
            P = ctx.matmul(name, A, right, mask=mask)
            for r, c in zip(*np.nonzero(mask)):
                out[row0 + r, col0 + c] = -P[r, c]
    return dq, dv


def _chain_pieces(robot: Any, ks: list[int], rows: dict, split: bool) -> list[tuple[list[int], list[int]]]:
    """The (columns, rows) of the masked products of a long chain ``ks`` (:func:`_chains`): the chain's
    lower triangle, or with ``split`` one piece per stretch of the chain that ends where it branches (a
    body with several children: G1's waist, inboard of both arms), each over the rows of every body of
    its first body's subtree where those are one-column bodies with consecutive indices (the subtree's
    rows of j on the path of i are then each a run of the piece's columns), else of the rest of the
    chain.  So each piece's entries lie in the columns of one block of ``-M^-1 dtau/dx``
    (:func:`soadyn.symbolic.algorithms.derivatives.product_blocks`: columns with the same rows), and the
    pairs of a branch with the stretch inboard of it are entries of its products, not statements."""
    if not split:
        return [(ks, ks)]
    stretches: list[list[int]] = [[]]
    for k in ks:
        stretches[-1].append(k)
        if sum(c in rows for c in robot.children[k]) > 1 and k != ks[-1]:
            stretches.append([])
    out = []
    for cs in stretches:
        sub = robot.subtree(cs[0])
        v0 = robot.v_index(sub[0]).start
        whole = all(k in rows and len(rows[k]) == 1 and k == sub[0] + t and robot.v_index(k).start == v0 + t
                    for t, k in enumerate(sub))
        out.append((cs, sub if whole else ks[ks.index(cs[0]):]))
    return out


#: the fewest bodies of a chain whose pairs with j on the path of i (the lower triangle of its block) are
#: two masked products, ``-[Fr Gr] [alpha; u]`` and ``-[Fr Gr] [beta; -S]`` (vector loops of the C, the
#: second reading ``[Fr Gr]`` from the first's scratch array); shorter chains keep one statement per entry.
#: Measured (callgrind instructions per call of a C loop over states, -O2 -march=native -mno-avx512f; ns:
#: the fast build, 5 rounds alternating fresh copies, load 8-10), statements -> products: xArm7 free (a
#: chain of 7) 11,108 -> 10,478 Ir; xArm7 fixed (6: the first joint, on the fixed base, has constant
#: columns and stays out) 8,761 -> 8,581 Ir, 758-803 -> 732-764 ns; B1 + Z1 (the arm's 6) 22,422 ->
#: 22,135 Ir, 2,199-2,240 -> 2,095-2,193 ns.  UR10 fixed (a chain of 5) with products: 6,062 -> 6,351 Ir,
#: hence none.  The pairs with i a strict ancestor of j as products too (``S^T [phi psi]``): 10,528 against
#: 10,482 Ir without them on the xArm7 free (before the shared ``[Fr Gr]``), and slower.
CHAIN_PRODUCT = 6


def _chains(robot: Any, rows: dict) -> list[list[int]]:
    """The runs of at least two one-column bodies ``k, k + 1, ...`` whose parents move, each the parent of
    the next, with consecutive velocity indices: within a run, body j is on the path of body i exactly
    when j <= i, so that those pairs are the lower triangle (with the diagonal) of a block of dtau/dq and
    dtau/dv."""
    out: list[list[int]] = []
    for k in sorted(rows):
        # a joint on a fixed base has constant columns (u = 0, alpha = -g x S): its entries stay statements
        one = k > 0 and len(rows[k]) == 1 and robot.parent[k] in rows
        if (one and out and out[-1][-1] == k - 1 and robot.parent[k] == k - 1
                and robot.v_index(k).start == robot.v_index(k - 1).start + 1):
            out[-1].append(k)
        elif one:
            out.append([k])
    return [c for c in out if len(c) > 1]
