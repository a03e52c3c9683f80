r"""Dense reference forms for the base-invariant quantities (seed 000 sections 3-4, Appendix A) and the
Schur-complement factorisation of M^-1 (seed 002).  Plain numpy on floats, built from the dense operators
of :mod:`soadyn.reference.dense` and not from the recursions of :mod:`soadyn.symbolic.algorithms`, so
the tests can hold the two routes against each other.  Slow (O(N^3)); for verification only.

* :func:`operational_space_inertias` / :func:`inverse_operational_space_inertias`: eq. 4.2,
  ``Lambda(k)^-1 = J(k) M^-1 J*(k)`` with the body-frame Jacobian of each body.
* :func:`dual_articulated_inertias`: S(k) by *definition*, without Lemma 4.1: re-root the system at body
  k (Appendix A, :func:`soadyn.structure.operations.invert`); the old parent of k becomes a child of k and
  its subtree in the new model is exactly the complement of subtree(k).  Its articulated inertia across
  the (reversed) hinge k, ``P+`` of that child in the new model, moved to O_k, is S(k).
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

from soadyn.model.robot import Robot, require_free
from soadyn.reference import dense as reference
from soadyn.symbolic.spatial import phi_matrix

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
    """(n_bodies, 6, 6): S(k) (body k frame) from the model re-rooted at k; S(0) = 0.  Free base only."""
    from soadyn.structure.rebase import rebase, rebase_transform

    out = np.zeros((robot.n_bodies, 6, 6))
    for k in range(1, robot.n_bodies):
        new = rebase(robot, robot.body_names[k])
        qn = rebase_transform(robot, new, q).q_new
        old_parent = robot.body_names[robot.parent[k]]
        jname = robot.joints[k].name
        c = next(i for i in new.children[0]
                 if new.body_names[i].startswith(old_parent + "__") and new.joints[i].name == jname)
        ab = reference.articulated_body(new, qn)
        X = phi_matrix(*ab.ops.local[c])                      # phi(k, c) in the new model
        out[k] = X @ ab.P_plus_k[c] @ X.T
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


def schur_factors(robot: Robot, q: ArrayLike) -> SchurFactors:
    from soadyn.symbolic.algorithms.kinematics import hinge_map
    from soadyn.symbolic.algorithms.schur import body_inverse_inertias, complement_basis

    o = reference.operators(robot, q)
    n, N = robot.n_bodies, robot.nv
    Mi = body_inverse_inertias(robot)
    Mblk = np.zeros((6 * n, 6 * n))
    for k in range(n):
        if Mi[k] is not None:
            Mblk[6 * k:6 * k + 6, 6 * k:6 * k + 6] = Mi[k]
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
        h = hinge_map(robot, k)
        Hh[6 * k:6 * k + 6, robot.v_index(k)] = (h / (h @ h)).reshape(6, 1)
        W[6 * k:6 * k + 6, 5 * (k - 1):5 * k] = complement_basis(h)
    return SchurFactors(W.T @ Acal @ W, W.T @ Acal0 @ W, W.T @ Acal @ Hh, Hh.T @ Acal @ Hh, W, Hh)
