r"""Dense reference forms for the base-invariant quantities (seed 000 sections 3-4, Appendix A) and the
Schur-complement factorisation of M^-1 (seed 002).  Plain numpy on floats, built from the dense operators
of :mod:`soadyn.reference.dense` and not from the recursions of :mod:`soadyn.symbolic.algorithms` (nothing
here imports them), so
the tests can hold the two routes against each other.  Slow (O(N^3)); for verification only.

* :func:`operational_space_inertias` / :func:`inverse_operational_space_inertias`: eq. 4.2,
  ``Lambda(k)^-1 = J(k) M^-1 J*(k)`` with the body-frame Jacobian of each body.
* :func:`dual_articulated_inertias`: S(k) by *definition*, without Lemma 4.1: the articulated inertia at
  O_k, through the free hinge k, of the bodies outside subtree(k) (the Schur complement of their mass
  matrix in the coordinates [V(k); hinge rates]).
* :func:`link_motion`: link accelerations alpha (eq. 2.3b) and hinge forces f (eq. 2.3c) of the true
  motion, for checking ``f = P (alpha - a) + z`` (3.7) and ``-f = S alpha + z_s`` (3.11).
* :func:`schur_factors`: the matrices A', B, C of seed 002 eq. 3.14-3.16 / 4.12-4.13 with
  ``M^-1 = C - B^T A'^-1 B`` (3.20), assembled from ``Acal = (I - E_phi)^T Minv_blk (I - E_phi)``
  (seed 002's ``P^T I^-1 P``): ``A' = W^T Acal W``, ``B = W^T Acal Hh``, ``C = Hh^T Acal Hh`` where
  ``Hh = diag(h_hat(k))`` (I6 for the free base) and ``W = diag(W(k))`` (no columns for the base).
  The free base's M(0)^-1 inside Acal is seed 002's rank-one modification; ``A`` (returned too) is the
  same with M(0)^-1 set to zero (eq. 3.14 for a grounded base).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from soadyn.model.robot import Inertia, Robot, require_free
from soadyn.reference import dense as reference

__all__ = [
    "LinkMotion", "SchurFactors", "dual_articulated_inertias", "inverse_operational_space_inertias",
    "link_motion", "operational_space_inertias", "schur_factors",
]


def inverse_operational_space_inertias(robot: Robot, q: ArrayLike) -> np.ndarray:
    """(n_bodies, 6, 6): ``J(k) M^-1 J*(k)`` (eq. 4.2), body frames, angular first."""
    Minv = np.linalg.inv(reference.mass_matrix(robot, q))
    out = np.empty((robot.n_bodies, 6, 6))
    for k, name in enumerate(robot.body_names):
        J = reference.jacobian(robot, q, name)
        out[k] = J @ Minv @ J.T
    return out


def operational_space_inertias(robot: Robot, q: ArrayLike) -> np.ndarray:
    """(n_bodies, 6, 6): Lambda(k) = (J(k) M^-1 J*(k))^-1; free base only (singular otherwise)."""
    require_free(robot, "reference: operational_space_inertias",
                 " (Lambda(k) is not defined, J M^-1 J* is singular; use inverse_operational_space_inertias)")
    return np.linalg.inv(inverse_operational_space_inertias(robot, q))


def dual_articulated_inertias(robot: Robot, q: ArrayLike) -> np.ndarray:
    """(n_bodies, 6, 6): S(k) (body k frame, at O_k) by definition; S(0) = 0.  Free base only.

    S(k) is the articulated inertia, felt at O_k through the free hinge k, of the bodies outside
    subtree(k).  Take them alone (subtree(k) made massless) and describe their motion by ``x = [V(k);
    qd_c]``: the twist of body k and the rates of hinge k and of every joint outside subtree(k).  The
    old coordinates follow from ``V(k) = J_b V(0) + J_q qd`` (the body Jacobian of k):
    ``V(0) = J_b^-1 (V(k) - J_q qd_c)``, i.e. ``v = T x``, so their kinetic energy is
    ``1/2 x* (T* M_c T) x = 1/2 x* [[A, B], [B*, C]] x``.  With the hinges free (no hinge forces) the
    rates take the value that minimises it, which leaves ``1/2 V(k)* (A - B C^-1 B*) V(k)``, so
    ``S(k) = A - B C^-1 B*``.
    """
    require_free(robot, "reference: dual_articulated_inertias")
    out = np.zeros((robot.n_bodies, 6, 6))
    massless = Inertia(0.0, np.zeros(3), np.zeros((3, 3)))
    for k in range(1, robot.n_bodies):
        sub = set(robot.subtree(k))
        rest = robot.replace(inertias=[massless if j in sub else ine for j, ine in enumerate(robot.inertias)])
        cols = [robot.v_index(j).start for j in range(1, robot.n_bodies) if j == k or j not in sub]
        Jk = reference.jacobian(robot, q, robot.body_names[k])
        Jb_inv = np.linalg.inv(Jk[:, :6])
        T = np.zeros((robot.nv, 6 + len(cols)))
        T[:6, :6] = Jb_inv
        T[:6, 6:] = -Jb_inv @ Jk[:, cols]
        T[cols, 6 + np.arange(len(cols))] = 1.0
        Ms = T.T @ reference.mass_matrix(rest, q) @ T
        A, B, C = Ms[:6, :6], Ms[:6, 6:], Ms[6:, 6:]
        S = A - B @ np.linalg.solve(C, B.T)
        out[k] = 0.5 * (S + S.T)
    return out


@dataclass
class LinkMotion:
    """Per body (rows): alpha (link spatial acceleration, eq. 2.3b, with gravity as in ``reference``),
    f (force of the parent on the body across its hinge, eq. 2.3c) and the Coriolis terms a."""

    alpha: np.ndarray
    f: np.ndarray
    a: np.ndarray
    qdd: np.ndarray


def link_motion(robot: Robot, q: ArrayLike, v: ArrayLike, tau: ArrayLike,
                f_ext: ArrayLike | None = None) -> LinkMotion:
    qdd = reference.forward_dynamics(robot, q, v, tau, f_ext)
    o = reference.operators(robot, q, v, f_ext)
    alpha = o.phi.T @ (o.H.T @ qdd + o.a)
    f = o.phi @ (o.M @ alpha + o.b)
    n = robot.n_bodies
    a = o.a.reshape(n, 6).copy()
    # reference folds gravity into a(0); the recursions keep a(0) velocity-only
    if robot.is_free:
        a[0, 3:] += o.R[0].T @ np.asarray(robot.gravity, float)
    else:
        a[0, 3:] += np.asarray(robot.gravity, float)
    return LinkMotion(alpha.reshape(n, 6), f.reshape(n, 6), a, qdd)


@dataclass
class SchurFactors:
    """Dense matrices of seed 002: M^-1 = C - B^T Ap^-1 B; A is Ap without the base's M(0)^-1."""

    Ap: np.ndarray
    A: np.ndarray
    B: np.ndarray
    C: np.ndarray
    W: np.ndarray
    Hh: np.ndarray


def _complement_basis(h: np.ndarray) -> np.ndarray:
    """6x5 orthonormal basis of the complement of the hinge map ``h`` (rows 1-5 of the SVD of h*)."""
    return np.linalg.svd(h.reshape(1, 6))[2][1:].T


def schur_factors(robot: Robot, q: ArrayLike) -> SchurFactors:
    o = reference.operators(robot, q)
    n, N = robot.n_bodies, robot.nv
    Mblk = np.zeros((6 * n, 6 * n))
    for k in range(0 if robot.is_free else 1, n):      # a fixed base's body never moves: no M(0)^-1
        Mblk[6 * k:6 * k + 6, 6 * k:6 * k + 6] = np.linalg.inv(robot.inertias[k].spatial())
    IE = np.eye(6 * n) - o.E_phi
    Acal = IE.T @ Mblk @ IE
    Mblk0 = Mblk.copy()
    Mblk0[:6, :6] = 0.0
    Acal0 = IE.T @ Mblk0 @ IE
    Hh = np.zeros((6 * n, N))
    W = np.zeros((6 * n, 5 * (n - 1)))
    if robot.is_free:
        Hh[:6, :6] = np.eye(6)
    for k in range(1, n):
        h = o.Hstar[k][:, 0]
        Hh[6 * k:6 * k + 6, robot.v_index(k)] = (h / (h @ h)).reshape(6, 1)
        W[6 * k:6 * k + 6, 5 * (k - 1):5 * k] = _complement_basis(h)
    return SchurFactors(W.T @ Acal @ W, W.T @ Acal0 @ W, W.T @ Acal @ Hh, Hh.T @ Acal @ Hh, W, Hh)
