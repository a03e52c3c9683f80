"""Spatial algebra over a generic scalar (floats or SymEngine expressions).

Conventions (seed 000, section 2): spatial velocities ``V = [w; v]`` (angular
first, ``v`` the velocity of the frame origin), spatial forces ``f = [n; F]``
(moment about the frame origin first), both in the coordinates of the frame
they refer to.

The rigid-body transformation operator ``phi(p, k)`` of seed 000 maps a spatial
force at O_k to the equivalent force at O_p.  In coordinates, with ``R`` =
pR_k (frame k's axes in frame p) and ``l`` the vector from O_p to O_k in
p-coordinates::

    phi(p, k) = [[R, l~ R], [0, R]]          phi*(p, k) = [[R^T, 0], [-R^T l~, R^T]]

``phi*(p, k)`` maps the spatial velocity of frame p to that of a frame rigidly
attached to p at O_k.  The functions below apply these products in factored
form (rotation, then translation) so that symbolic runs produce few operations;
:func:`soadyn.reference.dense.phi_matrix` is the dense 6x6 of the reference path.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from soadyn.model.rotations import cross, quaternion_to_matrix, skew

__all__ = ["RigidInertia", "Xform", "cross", "quaternion_to_matrix", "rotation_about_axis",
           "skew"]


def rotation_about_axis(ctx: Any, axis: np.ndarray, c: Any, s: Any) -> np.ndarray:
    """Rodrigues' rotation ``c I + s a~ + (1 - c) a a^T`` for a unit axis ``a`` (constant).

    For a coordinate axis the formula is written out so that exact zeros stay exact.
    """
    a = np.asarray(axis, dtype=float)
    for i in range(3):
        for sign in (1.0, -1.0):
            if np.array_equal(a, sign * np.eye(3)[i]):
                R = ctx.zeros((3, 3))
                j, k = (i + 1) % 3, (i + 2) % 3
                R[i, i] = ctx.one()
                R[j, j] = c
                R[k, k] = c
                R[k, j] = sign * s
                R[j, k] = -sign * s
                return R
    A = ctx.const(a)
    K = skew(A)
    I3 = ctx.eye(3)
    return c * I3 + s * K + (1 - c) * np.outer(A, A)


class Xform:
    """The operator ``phi(p, k)`` as (R, l); ``R is None`` means identity, ``l is None`` means zero."""

    __slots__ = ("R", "l")

    def __init__(self, R: np.ndarray | None = None, l: np.ndarray | None = None) -> None:
        self.R = R
        self.l = l

    # --- velocities / accelerations: phi*(p, k) ----------------------------------------------
    def motion_to_child(self, V: np.ndarray) -> np.ndarray:
        """``phi*(p, k) V``: a spatial velocity of frame p expressed as that of O_k in k coordinates."""
        w, v = V[:3], V[3:]
        if self.l is not None:
            v = v + cross(w, self.l)
        if self.R is not None:
            w, v = self.R.T @ w, self.R.T @ v
        return np.concatenate([w, v])

    def motion_to_parent(self, V: np.ndarray) -> np.ndarray:
        """``phi*(p, k)^-1 V = phi*(k, p) V``: frame-k velocity expressed at O_p in p coordinates."""
        w, v = V[:3], V[3:]
        if self.R is not None:
            w, v = self.R @ w, self.R @ v
        if self.l is not None:
            v = v - cross(w, self.l)
        return np.concatenate([w, v])

    # --- forces: phi(p, k) -------------------------------------------------------------------
    def force_to_parent(self, f: np.ndarray) -> np.ndarray:
        """``phi(p, k) f``: a spatial force at O_k (k coordinates) moved to O_p (p coordinates)."""
        n, F = f[:3], f[3:]
        if self.R is not None:
            n, F = self.R @ n, self.R @ F
        if self.l is not None:
            n = n + cross(self.l, F)
        return np.concatenate([n, F])

    def force_to_child(self, f: np.ndarray) -> np.ndarray:
        """``phi(p, k)^-1 f = phi(k, p) f``: a force at O_p (p coordinates) moved to O_k (k coordinates)."""
        n, F = f[:3], f[3:]
        if self.l is not None:
            n = n - cross(self.l, F)
        if self.R is not None:
            n, F = self.R.T @ n, self.R.T @ F
        return np.concatenate([n, F])

    # --- inertias: phi(p, k) P phi*(p, k) -----------------------------------------------------
    def inertia_to_parent(self, P: np.ndarray) -> np.ndarray:
        """``phi(p, k) P phi*(p, k)`` for a symmetric 6x6 ``P`` (result symmetric by construction)."""
        A, B, C = P[:3, :3], P[:3, 3:], P[3:, 3:]
        if self.R is not None:
            R = self.R
            A, B, C = _symmetric_product(R, A), R @ B @ R.T, _symmetric_product(R, C)
        if self.l is not None:
            L = skew(self.l)
            W = B + L @ C                       # top-right block
            A = A + L @ B.T - W @ L             # l~ B^T + B l~^T + l~ C l~^T, with l~^T = -l~
            B = W
        out = np.empty((6, 6), dtype=P.dtype)
        out[:3, :3], out[:3, 3:], out[3:, :3], out[3:, 3:] = A, B, B.T, C
        return _symmetrize(out)

    def inertia_to_child(self, P: np.ndarray) -> np.ndarray:
        """``phi(k, p) P phi*(k, p)`` (inverse transform), used by the dual recursions."""
        return Xform(None if self.R is None else self.R.T,
                     None if self.l is None else -(self.R.T @ self.l if self.R is not None else self.l)
                     ).inertia_to_parent(P)

    # --- composition --------------------------------------------------------------------------
    def then(self, inner: Xform) -> Xform:
        """``phi(p, j) phi(j, k)`` where ``self = phi(p, j)`` and ``inner = phi(j, k)``."""
        R1, l1, R2, l2 = self.R, self.l, inner.R, inner.l
        R = R2 if R1 is None else (R1 if R2 is None else R1 @ R2)
        if l2 is None:
            l = l1
        else:
            l2p = l2 if R1 is None else R1 @ l2
            l = l2p if l1 is None else l1 + l2p
        return Xform(R, l)


def _symmetrize(P: np.ndarray) -> np.ndarray:
    for i in range(6):
        for j in range(i + 1, 6):
            P[j, i] = P[i, j]
    return P


class RigidInertia:
    """A rigid-body (or composite) spatial inertia kept in its 10-parameter form (m, h = m p, J).

    ``J`` is the rotational inertia about the frame origin and ``h`` the first mass moment, so that
    ``M = [[J, h~], [-h~, m I]]`` (seed 000, section 2).  Composite inertias of the Newton-Euler
    factorisation stay rigid, and transforming them in this form costs about a third of a general
    6x6 congruence; the mass stays an exact constant, so the ``m I`` block never picks up
    ``cos^2 + sin^2`` terms in a symbolic run.
    """

    __slots__ = ("m", "h", "J")

    def __init__(self, m: Any, h: np.ndarray, J: np.ndarray) -> None:
        self.m, self.h, self.J = m, h, J

    def __add__(self, other: RigidInertia) -> RigidInertia:
        return RigidInertia(self.m + other.m, self.h + other.h, self.J + other.J)

    def to_parent(self, X: Xform) -> RigidInertia:
        """``phi(p, k) M phi*(p, k)`` in rigid form.

        Rotate (``h' = R h``, ``J' = R J R^T``), then move the origin by ``l`` (O_p -> O_k):
        ``h_p = h' + m l`` and ``J_p = J' - (l~ h'~ + h'~ l~) - m l~ l~``, expanded with
        ``a~ b~ = b a^T - (a.b) I`` into outer products.
        """
        h, J = self.h, self.J
        if X.R is not None:
            h = X.R @ h
            J = _symmetric_product(X.R, J)
        if X.l is not None:
            l = X.l
            lh = np.outer(l, h)
            # l~ h~ + h~ l~ = (h l^T + l h^T) - 2 (l.h) I ;  l~ l~ = l l^T - (l.l) I
            S = lh + lh.T
            d = l @ h
            L2 = np.outer(l, l)
            ll = l @ l
            J = J - S - self.m * L2
            for i in range(3):
                J[i, i] = J[i, i] + 2 * d + self.m * ll
            h = h + self.m * l
        return RigidInertia(self.m, h, _sym3(J))

    def spatial(self) -> np.ndarray:
        """The 6x6 spatial inertia ``[[J, h~], [-h~, m I]]``."""
        H = skew(self.h)
        top = np.concatenate([self.J, H], axis=1)
        mI = np.eye(3, dtype=object if isinstance(self.h, np.ndarray) and self.h.dtype == object else float)
        mI = mI * self.m
        bottom = np.concatenate([-H, mI], axis=1)
        return np.concatenate([top, bottom], axis=0)


def _sym3(J: np.ndarray) -> np.ndarray:
    for i in range(3):
        for j in range(i + 1, 3):
            J[j, i] = J[i, j]
    return J


def _symmetric_product(R: np.ndarray, A: np.ndarray) -> np.ndarray:
    """R A R^T for symmetric A, computing the upper triangle only."""
    RA = R @ A
    out = np.empty((3, 3), dtype=RA.dtype)
    for i in range(3):
        for j in range(i, 3):
            out[i, j] = out[j, i] = RA[i, 0] * R[j, 0] + RA[i, 1] * R[j, 1] + RA[i, 2] * R[j, 2]
    return out
