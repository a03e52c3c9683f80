"""Schur-complement ("constraint force", CF) factorisation of M^-1 (seed 002), floating or fixed base.

Derived again in our notation (the OCR of seed 002 is badly garbled).  Solve ``M x = F`` where
``F = tau - C(q, v)`` (C: Newton-Euler bias forces with gravity and external wrenches, seed 002 step 1),
so the linear problem is the one at rest without gravity.  For every hinge k >= 1 (parent p) split the
force that p exerts on k, f(k) (at O_k, k coordinates), along the hinge map h = H*(k) and an orthonormal
basis W(k) (6x5) of its complement (seed 002 eq. 3.1-3.3)::

    f(k) = h_hat F(k) + W(k) F_S(k),     h_hat = h / |h|^2,  W^T h = 0,  W^T W = I5

F(k) = H(k) f(k) is the (known) hinge force and F_S(k) the 5 unknown constraint-force components.
Body accelerations follow from each body's own Newton-Euler equation (seed 002 eq. 2.8, 4.3)::

    alpha(j) = M(j)^-1 [f(j) - sum_{c child of j} phi(j, c) f(c)]        f(0) = F(0) for a free base;
                                                                          alpha(0) = 0 for a fixed base
    Delta(k) = alpha(k) - phi*(p, k) alpha(p) = H*(k) x(k)              (eq. 2.7)

The constraint ``W^T Delta = 0`` is a linear system in F_S.  Writing Delta = Delta_T + A W F_S, where
Delta_T is Delta evaluated with F_S = 0::

    A'  F_S = -W^T Delta_T                                              (eq. 3.17, 4.12)
    A'(k, k) = W^T M(k)^-1 W + Z^T M(p)^-1 Z,      Z(k) = phi(p, k) W(k)
    A'(p, k) = -W(p)^T M(p)^-1 Z(k)               (k a child of p >= 1)
    A'(j, k) = Z(j)^T M(p)^-1 Z(k)                 (j, k siblings, children of p)

For a free base the base inverse inertia ``M(0)^-1`` enters A'(k, k) of the hinges on the base (and
couples them): that is seed 002's rank-one (block) modification A' = A + W I0^-1 W^T of eq. 4.13.  For a
fixed base M(0)^-1 is replaced by 0 (the ground does not accelerate) and A' = A.  Then
``x(k) = h_hat . Delta(k)`` and, for a free base, ``x(0) = alpha(0)``.  In matrix form this is
``M^-1 = C - B^T A'^-1 B`` (eq. 3.20): C maps F to x with F_S = 0, B = W^T(Delta_T as a function of F),
see :func:`soadyn.reference.invariant.schur_factors`.

Structure and cost: on a serial chain A' is block tridiagonal (5x5 blocks).  On a tree, hinge k couples
to its parent hinge, its children and its *siblings* (through the parent's M^-1); eliminating the hinges
in reverse depth-first order (leaves first) creates no fill-in, because the neighbours of k that remain
(parent hinge and lower-numbered siblings) are already coupled to each other.  So the solve is O(N) for
serial chains and O(sum of squared branch degrees) for trees; both are implemented by the same block
LDL^T elimination.  Requirement: every moving body needs an invertible spatial inertia (no massless
links), since the algorithm uses M(k)^-1.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import soadyn.model.exact as exact
from soadyn.symbolic.algorithms.kinematics import Kinematics, hinge_map, joint_transforms, velocities
from soadyn.symbolic.algorithms.linalg import ldl
from soadyn.symbolic.algorithms.newton_euler import _newton_euler
from soadyn.symbolic.parameters import inverse_spatial_inertia
from soadyn.symbolic.scalar import ScalarContext


def complement_basis(h: np.ndarray) -> np.ndarray:
    """Orthonormal 6x5 basis W of the complement of the hinge map h (float; exact for coordinate axes)."""
    h = np.asarray(h, dtype=float)
    nz = np.flatnonzero(h)
    if len(nz) == 1:
        return np.delete(np.eye(6), nz[0], axis=1)
    # Gram-Schmidt from h/|h| over e_1..e_6 in a fixed order, with correctly rounded dot products and
    # norms (soadyn.model.exact): the same basis on every machine (LAPACK's QR is not)
    basis = [h / exact.norm(h)]
    for i in range(6):
        w = np.eye(6)[i]
        for b in basis:
            w = w - exact.dot(b, w) * b
        for b in basis:  # second pass: orthogonal to round-off
            w = w - exact.dot(b, w) * b
        n = exact.norm(w)
        if n > 0.5 and len(basis) < 6:
            basis.append(w / n)
    W = np.column_stack(basis[1:6])
    W[np.abs(W) < 1e-15] = 0.0
    return W


def body_inverse_inertias(robot: Any) -> list[np.ndarray | None]:
    """M(k)^-1 (floats) of every body that moves; None for a fixed base's body 0.  Raises on a singular
    spatial inertia (massless or flat link), which the CF algorithm cannot handle."""
    out: list[np.ndarray | None] = []
    for k in range(robot.n_bodies):
        if k == 0 and not robot.is_free:
            out.append(None)
            continue
        Mk = robot.inertias[k].spatial()
        ev = np.linalg.eigvalsh(Mk)
        if ev[0] <= 1e-12 * max(1.0, ev[-1]):
            raise ValueError(
                f"robot {robot.name!r}: body {robot.body_names[k]!r} has a singular spatial inertia "
                f"(mass {robot.inertias[k].mass}, smallest eigenvalue {ev[0]:.3g}); the Schur-complement "
                "(constraint-force) algorithm of seed 002 needs M(k)^-1 of every moving body. "
                "Give the body a mass and a positive-definite inertia in the robot file, or use "
                "forward_dynamics.")
        Mi = exact.inverse(Mk)  # exact rational inverse, rounded once: machine-independent constants
        out.append(0.5 * (Mi + Mi.T))
    return out


class _CF:
    """Constants and the accelerations operator of the CF algorithm for one configuration."""

    def __init__(self, kin: Kinematics) -> None:
        robot, ctx = kin.robot, kin.ctx
        self.kin, self.robot, self.ctx = kin, robot, ctx
        n = robot.n_bodies
        self.Mi = [None if m is None else ctx.const(m) for m in body_inverse_inertias(robot)]
        for k in ctx.parameters:            # parameterised bodies: M(k)^-1 in closed form of pi
            if k > 0 or robot.is_free:
                self.Mi[k] = inverse_spatial_inertia(robot, ctx, k)
        self.W: list[Any] = [None] * n
        self.hhat: list[Any] = [None] * n
        for k in range(1, n):
            h = hinge_map(robot, k)
            self.W[k] = ctx.const(complement_basis(h))
            self.hhat[k] = ctx.const(h / exact.dot(h, h))

    def accelerations(self, F0: np.ndarray | None, f: list[Any], tag: str) -> tuple[list[Any], list[Any]]:
        """alpha(j) of every body and Delta(k) across every hinge for hinge forces f (k >= 1)."""
        robot, ctx, kin = self.robot, self.ctx, self.kin
        n = robot.n_bodies
        alpha: list[Any] = [None] * n
        for j in range(n):
            if j == 0 and not robot.is_free:
                alpha[0] = None
                continue
            net = F0 if j == 0 else f[j]
            for c in robot.children[j]:
                net = net - kin.X[c].force_to_parent(f[c])
            alpha[j] = ctx.stage(f"Cfa{tag}{j}", self.Mi[j] @ net)
        delta: list[Any] = [None] * n
        for k in range(1, n):
            p = robot.parent[k]
            d = alpha[k] if alpha[p] is None else alpha[k] - kin.X[k].motion_to_child(alpha[p])
            delta[k] = d
        return alpha, delta


def _block(A: dict, i: int, j: int) -> Any:
    if (i, j) in A:
        return A[(i, j)]
    if (j, i) in A:
        return A[(j, i)].T
    return None


def schur_solve(kin: Kinematics, F: np.ndarray) -> np.ndarray:
    """x = M^-1 F by the CF factorisation M^-1 = C - B^T A'^-1 B (seed 002 eq. 3.20, 4.12-4.13)."""
    robot, ctx = kin.robot, kin.ctx
    n = robot.n_bodies
    cf = _CF(kin)
    F0 = F[0:6] if robot.is_free else None
    fT: list[Any] = [None] * n
    for k in range(1, n):
        fT[k] = cf.hhat[k] * F[robot.v_index(k)][0]
    # right-hand side -W^T Delta_T
    _, dT = cf.accelerations(F0, fT, "T")
    r: dict[int, Any] = {k: ctx.stage(f"Cfr{k}", -(cf.W[k].T @ dT[k])) for k in range(1, n)}

    # blocks of A' (lower triangle, key (i, j) with i > j or i == j)
    Z: list[Any] = [None] * n
    for k in range(1, n):
        Wk = cf.W[k]
        Z[k] = ctx.stage(f"CfZ{k}", np.stack([kin.X[k].force_to_parent(Wk[:, c]) for c in range(5)], axis=1))
    A: dict[tuple[int, int], Any] = {}
    nb: dict[int, list[int]] = {}
    for k in range(1, n):
        p = robot.parent[k]
        Mp = cf.Mi[p]
        Akk = cf.W[k].T @ cf.Mi[k] @ cf.W[k]
        if Mp is not None:
            MZk = Mp @ Z[k]
            Akk = Akk + Z[k].T @ MZk
        nb[k] = []
        if p >= 1:
            A[(k, p)] = (-(cf.W[p].T @ MZk)).T          # A'(k, p) = A'(p, k)^T
            nb[k].append(p)
        if Mp is not None:
            for j in robot.children[p]:
                if j < k:
                    A[(k, j)] = Z[k].T @ (Mp @ Z[j])
                    nb[k].append(j)
        A[(k, k)] = Akk
    for key in list(A):
        A[key] = ctx.stage(f"CfA{key[0]}_{key[1]}", A[key]) if key[0] != key[1] else \
            ctx.stage_symmetric(f"CfA{key[0]}_{key[1]}", _sym(A[key]))

    # block LDL^T elimination, leaves first (reverse depth-first order): no fill-in (see module doc)
    sol_r: dict[int, Any] = {}
    sol_A: dict[tuple[int, int], Any] = {}
    for k in reversed(range(1, n)):
        fac = ldl(ctx, A[(k, k)], f"CfD{k}")
        sol_r[k] = fac.solve(r[k], f"Cfy{k}")
        for j in nb[k]:
            sol_A[(k, j)] = fac.solve(_block(A, k, j), f"CfX{k}_{j}")       # D_k^-1 A'(k, j)
        for i in nb[k]:
            Aik = _block(A, i, k)
            r[i] = ctx.stage(f"Cfr{i}", r[i] - Aik @ sol_r[k])
            for j in nb[k]:
                if j <= i:
                    upd = A[(i, j)] - Aik @ sol_A[(k, j)]
                    A[(i, j)] = ctx.stage_symmetric(f"CfA{i}_{j}", _sym(upd)) if i == j else \
                        ctx.stage(f"CfA{i}_{j}", upd)
    FS: dict[int, Any] = {}
    for k in range(1, n):
        x = sol_r[k]
        for j in nb[k]:
            x = x - sol_A[(k, j)] @ FS[j]
        FS[k] = ctx.stage(f"CfS{k}", x)

    f: list[Any] = [None] * n
    for k in range(1, n):
        f[k] = ctx.stage(f"Cff{k}", fT[k] + cf.W[k] @ FS[k])
    alpha, delta = cf.accelerations(F0, f, "")
    x = ctx.zeros(robot.nv)
    if robot.is_free:
        x[0:6] = alpha[0]
    for k in range(1, n):
        x[robot.v_index(k)] = cf.hhat[k] @ delta[k]
    return x


def _sym(Y: np.ndarray) -> np.ndarray:
    Y = np.array(Y, dtype=Y.dtype)
    m = Y.shape[0]
    for i in range(m):
        for j in range(i + 1, m):
            Y[j, i] = Y[i, j]
    return Y


def forward_dynamics_schur(robot: Any, ctx: ScalarContext, q: np.ndarray, v: np.ndarray, tau: np.ndarray,
                           f_ext: np.ndarray | None = None) -> np.ndarray:
    """betadot by the CF algorithm (seed 002 section IV, steps 1-5): Newton-Euler bias forces, then
    ``M^-1 (tau - C)`` through the Schur-complement factorisation.  Same result as ``forward_dynamics``."""
    if any(j is not None and j.armature for j in robot.joints):
        raise ValueError(f"forward_dynamics_schur: robot {robot.name!r} has joint armature, which the "
                         "constraint-force factorisation of the rigid bodies does not model; use "
                         "forward_dynamics")
    kin = joint_transforms(robot, ctx, q)
    vt = velocities(kin, v, f_ext)
    bias = _newton_euler(kin, vt, ctx.zeros(robot.nv), v)   # with the drive's damping and friction
    F = ctx.array([ctx.stage(f"CfF{i}", tau[i] - bias[i]) for i in range(robot.nv)])
    return schur_solve(kin, F)


def mass_matrix_inverse_schur(robot: Any, ctx: ScalarContext, q: np.ndarray) -> np.ndarray:
    """M^-1 column by column through :func:`schur_solve` (for checks; O(N^2))."""
    kin = joint_transforms(robot, ctx, q)
    nv = robot.nv
    cols = []
    for j in range(nv):
        e = ctx.zeros(nv)
        e[j] = 1
        cols.append(schur_solve(kin, e))
    return np.stack(cols, axis=1)
