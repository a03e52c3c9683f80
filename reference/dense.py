r"""Numeric reference path: the *dense operator forms* of the seeds, for tree topologies.

Everything here is plain numpy on floats and deliberately **not** recursive: the
spatial operators of Jain & Rodriguez (seed 000, section 2) are assembled as dense
block matrices and multiplied.  The O(N) recursions of :mod:`soadyn.symbolic.algorithms`
are an independent route to the same numbers; the tests make the two agree.  This
module is slow (O(N^3)) and meant for verification only.

Operators (``n`` bodies, ``N = robot.nv``; block index = our body index)
------------------------------------------------------------------------
* ``E_phi`` (6n x 6n): block ``(parent(k), k) = phi(parent(k), k)``, the force
  transformation from O_k to O_parent(k) in body coordinates, including the
  rotation: ``phi(p, k) = [[R, l~ R], [0, R]]`` with ``R = pR_k`` and ``l`` the
  vector O_p -> O_k in p coordinates (:func:`phi_matrix`).  Seed 000
  writes the tip-to-base chain with the subdiagonal (k+1, k); for a tree the
  non-zero blocks sit at (parent(k), k).  The root hinge (inertial frame ->
  body 0) is not a block of E_phi: the inertial frame ("link n+1") is not a body.
* ``phi = (I - E_phi)^-1`` (eq. 2.5); block (i, j) = phi(i, j) when i is j or an
  ancestor of j, else 0.
* ``H`` (N x 6n) = diag(H(k)) with H(base) = I6 for a free base and no rows for
  a fixed base (its hinge has no degrees of freedom).  ``H*(k) = [axis; 0]``
  for a revolute and ``[0; axis]`` for a prismatic joint (axis in body k).
* ``M`` = diag(M(k)), spatial inertias about the body-frame origins (section 2).

Velocities and accelerations
----------------------------
``V = phi* H* beta`` (eq. 2.3a) with ``beta = v``.  Accelerations are Jain's
*conventional* accelerations ``alpha(k) = [dw/dt; dv/dt]``: inertial time
derivatives of the frame's angular velocity and of its origin's velocity,
resolved in body-k coordinates.  Then (eq. 2.1)
``alpha(k) = phi*(p, k) alpha(p) + H*(k) dbeta(k) + a(k)`` with the Coriolis term
``a(k)`` derived as follows.  Let ``w_p`` be the parent's angular velocity,
``l`` the vector O_p -> O_k, and ``[w_r; v_r] = H*(k) beta(k)`` the relative
(hinge) velocity, all resolved in k coordinates.  Then ``w_k = w_p + w_r`` and
``v_k = v_p + w_p x l + v_r``.  The hinge axis is fixed in the parent, so
``d(w_r)/dt = H* dbeta + w_p x w_r``; ``l`` changes as ``dl/dt = w_p x l + v_r``
and ``d(v_r)/dt = H* dbeta + w_p x v_r``.  Differentiating::

    a(k) = [ w_p x w_r ;  w_p x (w_p x l) + 2 w_p x v_r ]

For a revolute hinge (``v_r = 0``) this is eq. 2.2 of seed 000,
``[w~(p) w(k); w~(p)(v(k) - v(p))]``.  For a prismatic hinge eq. 2.2 misses one
``w_p x v_r`` (it contains only ``w_p x (v_k - v_p) = w_p x (w_p x l + v_r)``);
seed 001 eq. 9 has the same omission.  The extra Coriolis term comes from the
slider axis turning with the parent.

Free base: the generalised speeds of the root hinge are the body-frame
components ``[w; v]`` of the base's own twist, whose time derivatives are
``d/dt(R^T w_I) = R^T dw_I/dt`` and ``d/dt(R^T v_I) = R^T dv_I/dt - w x v``.  Hence
``alpha(0) = dbeta(0) + a(0)`` with ``a(0) = [0; w x v]``.  Gravity enters as an
acceleration ``-g`` of the inertial frame (link n+1), carried into body 0 by
``phi*(root, 0)``: ``a(0) += [0; -R0^T g]`` (free base) or ``[0; -g]`` (fixed base,
whose body frame is the inertial frame).  Because everything is linear in
``a``, this adds gravity to every formula (eq. 2.3b-2.4b, 2.11) at once.

Gyroscopic forces (eq. 2.2): ``b(k) = [w x J w; m w x (w x p)]`` with J the
inertia about O_k and p the CoM offset.  External wrenches ``f_ext(k)`` (at O_k,
body coordinates, acting ON body k) are moved to the other side of the
Newton-Euler equation: ``b(k) -> b(k) - f_ext(k)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from soadyn.model.robot import Robot, require_free, state_vector
from soadyn.model.rotations import quaternion_to_matrix, rodrigues, skew

__all__ = [
    "Operators", "ArticulatedBody", "operators", "mass_matrix", "bias_forces", "inverse_dynamics",
    "articulated_body", "innovations_factors", "mass_matrix_inverse", "forward_dynamics",
    "jacobian", "center_of_mass", "momentum", "kinetic_energy", "generalized_jacobian",
    "body_poses", "frame_pose", "phi_matrix",
]


def phi_matrix(R: np.ndarray, l: ArrayLike) -> np.ndarray:
    """Dense ``phi(p, k) = [[R, l~ R], [0, R]]`` (seed 000 section 2; floats)."""
    out = np.zeros((6, 6))
    out[:3, :3] = R
    out[3:, 3:] = R
    out[:3, 3:] = skew(np.asarray(l, dtype=float)) @ R
    return out


def _phi_star(R: np.ndarray, l: np.ndarray) -> np.ndarray:
    return phi_matrix(R, l).T


def _check_q(robot: Robot, q: ArrayLike) -> np.ndarray:
    q = state_vector(q, robot.nq, "q", "reference")
    if robot.is_free and float(q[3:7] @ q[3:7]) == 0.0:
        raise ValueError("reference: q[3:7] (base quaternion [x, y, z, w]) is zero; use e.g. [0, 0, 0, 1]")
    return q


@dataclass
class Operators:
    """Dense spatial operators of seed 000 at one configuration (and optionally one velocity).

    ``R[k]``, ``p[k]``: body-k frame orientation (body to inertial) and origin, inertial frame.
    ``local[k]``: (R, l) of ``phi(parent(k), k)``; for k = 0 the root hinge from the inertial frame.
    ``Hstar[k]``: 6 x r(k) hinge map transpose (empty for a fixed base's body 0).
    Velocity-dependent entries (``V``, ``a``, ``b``) are ``None`` unless ``v`` was given.
    """

    n: int
    R: list[np.ndarray]
    p: list[np.ndarray]
    local: list[tuple[np.ndarray, np.ndarray]]
    Hstar: list[np.ndarray]
    E_phi: np.ndarray
    phi: np.ndarray
    H: np.ndarray
    M: np.ndarray
    V: np.ndarray | None = None
    a: np.ndarray | None = None
    b: np.ndarray | None = None

    def block(self, k: int) -> slice:
        return slice(6 * k, 6 * k + 6)


def body_poses(robot: Robot, q: ArrayLike) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Orientation (body -> inertial) and origin (inertial frame) of every body frame."""
    ops = operators(robot, q)
    return ops.R, ops.p


def operators(robot: Robot, q: ArrayLike, v: ArrayLike | None = None,
              f_ext: ArrayLike | None = None, gravity: bool = True) -> Operators:
    """Assemble E_phi, phi, H, M (and V, a, b when ``v`` is given) at ``q``.

    ``a`` contains the Coriolis accelerations of the derivation above plus gravity (unless
    ``gravity=False``); ``b`` the gyroscopic forces minus ``f_ext``.
    """
    q = _check_q(robot, q)
    n, nv = robot.n_bodies, robot.nv
    R: list[np.ndarray] = []
    p: list[np.ndarray] = []
    local: list[tuple[np.ndarray, np.ndarray]] = []
    Hstar: list[np.ndarray] = []
    for k in range(n):
        if k == 0:
            if robot.is_free:
                Rk, lk = quaternion_to_matrix(q[3:7]), q[:3].copy()
                Hstar.append(np.eye(6))
            else:
                Rk, lk = np.eye(3), np.zeros(3)
                Hstar.append(np.zeros((6, 0)))
            local.append((Rk, lk))
            R.append(Rk)
            p.append(lk)
            continue
        j = robot.joints[k]
        x = q[robot.q_index(k)]
        Rj, pj = np.asarray(j.placement.R, float), np.asarray(j.placement.p, float)
        axis = np.asarray(j.axis, float)
        h = np.zeros((6, 1))
        if j.type == "revolute":
            Rk, lk = Rj @ rodrigues(axis, x), pj
            h[:3, 0] = axis
        elif j.type == "prismatic":
            Rk, lk = Rj, pj + Rj @ axis * x
            h[3:, 0] = axis
        else:  # pragma: no cover - the model merges fixed joints
            raise ValueError(f"reference: joint {j.name!r} has unsupported type {j.type!r}")
        local.append((Rk, lk))
        Hstar.append(h)
        par = robot.parent[k]
        R.append(R[par] @ Rk)
        p.append(p[par] + R[par] @ lk)

    E_phi = np.zeros((6 * n, 6 * n))
    for k in range(1, n):
        par = robot.parent[k]
        E_phi[6 * par:6 * par + 6, 6 * k:6 * k + 6] = phi_matrix(*local[k])
    phi = np.linalg.inv(np.eye(6 * n) - E_phi)
    H = np.zeros((nv, 6 * n))
    for k in range(n):
        cols = robot.v_index(k)
        H[cols, 6 * k:6 * k + 6] = Hstar[k].T
    M = np.zeros((6 * n, 6 * n))
    for k in range(n):
        M[6 * k:6 * k + 6, 6 * k:6 * k + 6] = robot.inertias[k].spatial()
    ops = Operators(n, R, p, local, Hstar, E_phi, phi, H, M)
    if v is None:
        return ops

    v = state_vector(v, nv, "v", "reference")
    V = phi.T @ H.T @ v                                    # eq. 2.3a
    a = np.zeros(6 * n)
    b = np.zeros(6 * n)
    g = np.asarray(robot.gravity, float) if gravity else np.zeros(3)
    for k in range(n):
        s = slice(6 * k, 6 * k + 6)
        w, vk = V[s][:3], V[s][3:]
        if k == 0:
            if robot.is_free:
                a[s][3:] = np.cross(w, vk) - R[0].T @ g
            else:
                a[s][3:] = -g
        else:
            Rk, lk = local[k]
            Vp = _phi_star(Rk, lk) @ V[6 * robot.parent[k]:6 * robot.parent[k] + 6]
            wp = Vp[:3]                                    # parent angular velocity, k coordinates
            rel = Hstar[k] @ v[robot.v_index(k)]           # [w_r; v_r]
            l_k = Rk.T @ lk
            a[s][:3] = np.cross(wp, rel[:3])
            a[s][3:] = np.cross(wp, np.cross(wp, l_k)) + 2.0 * np.cross(wp, rel[3:])
        Mk = M[s, s]
        J, mp = Mk[:3, :3], robot.inertias[k].mass * np.asarray(robot.inertias[k].com, float)
        b[s][:3] = np.cross(w, J @ w)
        b[s][3:] = np.cross(w, np.cross(w, mp))
    if f_ext is not None:
        fe = np.asarray(f_ext, dtype=float)
        if fe.shape != (n, 6):
            raise ValueError(f"reference: f_ext must have shape ({n}, 6) (one [n; f] wrench per body), "
                             f"got {fe.shape}")
        if not np.all(np.isfinite(fe)):
            raise ValueError("reference: f_ext contains NaN or inf")
        b = b - fe.ravel()
    ops.V, ops.a, ops.b = V, a, b
    return ops


# ---- drive train (docs/conventions.md "Drive train") ---------------------------------------------------
def drive_parameters(robot: Robot) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(armature, damping, friction, friction velocity scale) per generalised velocity (zeros on the free
    base's rows; scale 1 there)."""
    arm, damp, fric, vs = np.zeros(robot.nv), np.zeros(robot.nv), np.zeros(robot.nv), np.ones(robot.nv)
    for k in range(1, robot.n_bodies):
        j, i = robot.joints[k], robot.v_index(k)
        arm[i], damp[i], fric[i], vs[i] = j.armature, j.damping, j.friction, j.friction_velocity
    return arm, damp, fric, vs


def passive_forces(robot: Robot, v: ArrayLike) -> np.ndarray:
    """Damping and smoothed Coulomb friction ``d v + f v / sqrt(v^2 + v_s^2)`` per coordinate; a coupled
    robot's in its reduced coordinates, ``G^T tau_p(G v)`` of its uncoupled tree (as :func:`inverse_dynamics`
    applies them)."""
    if robot.is_coupled:
        G, _ = robot.expansion()
        return G.T @ passive_forces(robot.uncoupled(), G @ state_vector(v, robot.nv, "v", "reference"))
    _, damp, fric, vs = drive_parameters(robot)
    v = np.asarray(v, dtype=float)
    return damp * v + fric * v / np.sqrt(v * v + vs * vs)


# ---- Newton-Euler factorisation ------------------------------------------------------------------
def mass_matrix(robot: Robot, q: ArrayLike) -> np.ndarray:
    """Mass matrix ``H phi M phi* H* + diag(armature)`` (seed 000 eq. 2.4a and the drive train)."""
    o = operators(robot, q)
    return o.H @ o.phi @ o.M @ o.phi.T @ o.H.T + np.diag(drive_parameters(robot)[0])


def inverse_dynamics(robot: Robot, q: ArrayLike, v: ArrayLike, a: ArrayLike,
                     f_ext: ArrayLike | None = None) -> np.ndarray:
    """Generalised forces for accelerations ``a``: eq. 2.3b-d, ``T = H phi (M alpha + b)``, plus the drive
    train's ``armature a + passive_forces(v)``."""
    o = operators(robot, q, v, f_ext)
    a = state_vector(a, robot.nv, "a", "reference")
    alpha = o.phi.T @ (o.H.T @ a + o.a)
    return o.H @ o.phi @ (o.M @ alpha + o.b) + drive_parameters(robot)[0] * a + passive_forces(robot, v)


def bias_forces(robot: Robot, q: ArrayLike, v: ArrayLike, f_ext: ArrayLike | None = None) -> np.ndarray:
    """Coriolis, centrifugal and gravity forces ``C = H phi (M phi* a + b)`` (eq. 2.4b with gravity in a),
    plus the drive train's damping and friction."""
    o = operators(robot, q, v, f_ext)
    return o.H @ o.phi @ (o.M @ o.phi.T @ o.a + o.b) + passive_forces(robot, v)


# ---- articulated-body quantities (non-recursive) ------------------------------------------------------
@dataclass
class ArticulatedBody:
    """Quantities of seed 000 Algorithm 2 / eq. 2.7-2.9, per body and as dense operators.

    Per-body lists (index = body): ``P_k`` (6x6), ``D_k`` (r x r), ``G_k`` (6 x r),
    ``tau_bar_k`` (6x6), ``P_plus_k`` (6x6).  Dense: ``P``, ``D`` (N x N), ``G`` (6n x N),
    ``K = E_phi G``, ``tau_bar = I - G H``, ``P_plus = tau_bar P``, ``E_psi = E_phi tau_bar``,
    ``psi = (I - E_psi)^-1``.  ``ops`` are the operators they were built from.
    """

    P_k: list[np.ndarray]
    D_k: list[np.ndarray]
    G_k: list[np.ndarray]
    tau_bar_k: list[np.ndarray]
    P_plus_k: list[np.ndarray]
    P: np.ndarray
    D: np.ndarray
    G: np.ndarray
    K: np.ndarray
    tau_bar: np.ndarray
    P_plus: np.ndarray
    E_psi: np.ndarray
    psi: np.ndarray
    ops: Operators


def articulated_body(robot: Robot, q: ArrayLike) -> ArticulatedBody:
    """P, D, G, K, tau-bar, psi without the Riccati recursion.

    ``P(k)`` is the articulated inertia at O_k of the subtree rooted at k with all its joints
    free.  Treat that subtree as a free-floating system whose base is k (base speeds = V(k) in
    k coordinates): its mass matrix, built from the principal sub-blocks of phi and M, is
    ``[[A, B], [B*, C]]`` and ``P(k) = A - B C^-1 B*`` (the Schur complement, i.e. the inverse of
    the base block of its inverse).  D, G, K, tau-bar, P+, E_psi, psi then follow from their
    definitions eq. 2.7 and 2.9 of seed 000.
    """
    o = operators(robot, q)
    n, nv = o.n, robot.nv
    arm = drive_parameters(robot)[0]
    P_k = []
    for k in range(n):
        sub = robot.subtree(k)
        idx = np.concatenate([np.arange(6 * j, 6 * j + 6) for j in sub])
        phi_s, M_s = o.phi[np.ix_(idx, idx)], o.M[np.ix_(idx, idx)]
        m = len(sub) - 1
        Hs = np.zeros((6 + m, 6 * len(sub)))
        Hs[:6, :6] = np.eye(6)
        for i, j in enumerate(sub[1:]):
            Hs[6 + i, 6 * (i + 1):6 * (i + 2)] = o.Hstar[j].T
        Ms = Hs @ phi_s @ M_s @ phi_s.T @ Hs.T
        Ms[6:, 6:] += np.diag([float(arm[robot.v_index(j)][0]) for j in sub[1:]])   # outboard rotors
        A, B, C = Ms[:6, :6], Ms[:6, 6:], Ms[6:, 6:]
        Pk = A - B @ np.linalg.solve(C, B.T) if m else A
        P_k.append(0.5 * (Pk + Pk.T))

    D_k, G_k, tau_k, Pp_k = [], [], [], []
    P = np.zeros((6 * n, 6 * n))
    D = np.zeros((nv, nv))
    G = np.zeros((6 * n, nv))
    tau = np.zeros((6 * n, 6 * n))
    for k in range(n):
        Hs = o.Hstar[k]
        Dk = Hs.T @ P_k[k] @ Hs + (np.diag(arm[robot.v_index(k)]) if k > 0 else 0.0)
        Gk = P_k[k] @ Hs @ np.linalg.inv(Dk) if Hs.shape[1] else np.zeros((6, 0))
        tk = np.eye(6) - Gk @ Hs.T
        D_k.append(Dk)
        G_k.append(Gk)
        tau_k.append(tk)
        Pp_k.append(tk @ P_k[k])
        s, c = slice(6 * k, 6 * k + 6), robot.v_index(k)
        P[s, s] = P_k[k]
        D[c, c] = Dk
        G[s, c] = Gk
        tau[s, s] = tk
    K = o.E_phi @ G
    P_plus = tau @ P
    E_psi = o.E_phi @ tau
    psi = np.linalg.inv(np.eye(6 * n) - E_psi)
    return ArticulatedBody(P_k, D_k, G_k, tau_k, Pp_k, P, D, G, K, tau, P_plus, E_psi, psi, o)


def innovations_factors(robot: Robot, q: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """``(L, D)`` with ``L = I + H phi K`` and ``M = L D L*`` (seed 000 eq. 2.10a)."""
    ab = articulated_body(robot, q)
    o = ab.ops
    L = np.eye(robot.nv) + o.H @ o.phi @ ab.K
    return L, ab.D


def mass_matrix_inverse(robot: Robot, q: ArrayLike) -> np.ndarray:
    """``M^-1 = (I - H psi K)* D^-1 (I - H psi K)`` (seed 000 eq. 2.10c)."""
    ab = articulated_body(robot, q)
    Linv = np.eye(robot.nv) - ab.ops.H @ ab.psi @ ab.K
    return Linv.T @ np.linalg.solve(ab.D, Linv)


def forward_dynamics(robot: Robot, q: ArrayLike, v: ArrayLike, tau: ArrayLike,
                     f_ext: ArrayLike | None = None) -> np.ndarray:
    """Accelerations by seed 000 eq. 2.11:
    ``dbeta = (I - H psi K)* D^-1 [T - H psi (K T + P a + b)] - K* psi* a``.

    The OCR of eq. 2.11 ends in ``K* psi* H* a``, which does not conform (a is 6n); from eq. 2.12:
    z = psi (K T + P a + b), nu = D^-1 (T - H z), alpha = psi* (H* nu + a) and
    dbeta = nu - K* alpha, which gives the last term ``K* psi* a``.
    """
    ab = articulated_body(robot, q)
    o = operators(robot, q, v, f_ext)
    T = state_vector(tau, robot.nv, "tau", "reference") - passive_forces(robot, v)
    H, psi, K = o.H, ab.psi, ab.K
    Linv = np.eye(robot.nv) - H @ psi @ K
    eps = T - H @ psi @ (K @ T + ab.P @ o.a + o.b)
    return Linv.T @ np.linalg.solve(ab.D, eps) - K.T @ (psi.T @ o.a)


# ---- kinematics, momentum ----------------------------------------------------------------------------
def frame_pose(robot: Robot, q: ArrayLike, frame: str) -> tuple[np.ndarray, np.ndarray]:
    """(R, p): orientation (frame -> inertial) and origin (inertial frame) of a body or named frame."""
    k, X = robot.frame_of(frame)
    o = operators(robot, q)
    return o.R[k] @ X.R, o.p[k] + o.R[k] @ X.p


def jacobian(robot: Robot, q: ArrayLike, frame: str, world_aligned: bool = False) -> np.ndarray:
    """6 x nv Jacobian of a body or named frame: rows ``[w; v]`` of the frame (v = its origin's
    velocity), in frame coordinates or, with ``world_aligned``, in inertial-frame axes.

    ``V(frame) = phi*(k, f) B_k phi* H* v`` where ``B_k`` selects body k's block (eq. 2.3a).
    """
    k, X = robot.frame_of(frame)
    o = operators(robot, q)
    J = _phi_star(X.R, X.p) @ (o.phi.T @ o.H.T)[6 * k:6 * k + 6, :]
    if world_aligned:
        Rf = o.R[k] @ X.R
        J = np.vstack([Rf @ J[:3], Rf @ J[3:]])
    return J


def center_of_mass(robot: Robot, q: ArrayLike) -> np.ndarray:
    """System centre of mass in the inertial frame."""
    o = operators(robot, q)
    m = robot.total_mass
    if m <= 0:
        raise ValueError(f"reference: robot {robot.name!r} has zero total mass; give the bodies masses")
    c = sum(i.mass * (o.p[k] + o.R[k] @ i.com) for k, i in enumerate(robot.inertias))
    return c / m


def momentum(robot: Robot, q: ArrayLike, v: ArrayLike) -> np.ndarray:
    """Spatial momentum ``[angular about the system CoM; linear]`` in inertial coordinates.

    Each body's momentum ``M(k) V(k)`` (about O_k, body axes) is moved to the CoM and rotated.
    """
    o = operators(robot, q, v, gravity=False)
    c = center_of_mass(robot, q)
    h = np.zeros(6)
    for k in range(o.n):
        s = slice(6 * k, 6 * k + 6)
        hk = o.M[s, s] @ o.V[s]
        L, P = o.R[k] @ hk[:3], o.R[k] @ hk[3:]
        h[:3] += L + np.cross(o.p[k] - c, P)
        h[3:] += P
    return h


def kinetic_energy(robot: Robot, q: ArrayLike, v: ArrayLike) -> float:
    """``1/2 V* M V`` summed over the bodies, plus the rotors' ``1/2 armature v^2``."""
    o = operators(robot, q, v, gravity=False)
    vv = np.asarray(v, dtype=float)
    return 0.5 * float(o.V @ o.M @ o.V) + 0.5 * float(drive_parameters(robot)[0] @ (vv * vv))


def generalized_jacobian(robot: Robot, q: ArrayLike, frame: str) -> np.ndarray:
    """Generalised Jacobian (Umetani-Yoshida; seed 003 eq. E.4-E.7): 6 x n_joints map from joint
    rates to the frame twist ``[w; v]`` in inertial-aligned axes when the total momentum is zero.

    The base rows of ``M v`` are the system momentum about O_0 in base axes, so zero momentum
    means ``v_base = -M_bb^-1 M_bm qdot`` and ``J_g = J_m - J_b M_bb^-1 M_bm``.
    """
    require_free(robot, "reference: generalized_jacobian")
    Mq = mass_matrix(robot, q)
    J = jacobian(robot, q, frame, world_aligned=True)
    return J[:, 6:] - J[:, :6] @ np.linalg.solve(Mq[:6, :6], Mq[:6, 6:])


# ---- mimic couplings: the reduced coordinates (docs/conventions.md "Mimic couplings") -----------------
def _full_state(robot: Robot, q: ArrayLike, *vs: ArrayLike) -> tuple:
    """(q_full, G v, ...) of a coupled robot: joint positions ``G_j q_j + b``, velocities ``G v``."""
    G, b = robot.expansion()
    q = state_vector(q, robot.nq, "q", "reference")
    nb, nbv = robot.base_nq, robot.base_nv
    qf = np.concatenate([q[:nb], G[nbv:, nbv:] @ q[nb:] + b])
    return (qf, *(G @ state_vector(x, robot.nv, "v", "reference") for x in vs))


def _reduced(fn, kind: str):
    """The dense reference ``fn`` for a coupled robot: run on :meth:`Robot.uncoupled` with expanded inputs
    (``kind``: 'q' positions only, 'qv' positions and one vector, 'qvv' two) and ``G^T`` / ``G`` applied to
    the result (``out`` below)."""
    nvec, out = {"q": (0, "-"), "qv": (1, "-"), "qvv": (2, "-"), "M": (0, "GtXG"), "tau": (2, "GtX"),
                 "C": (1, "GtX"), "J": (0, "XG")}[kind]

    def wrapped(robot: Robot, q: ArrayLike, *args, **kw):
        if not robot.is_coupled:
            return fn(robot, q, *args, **kw)
        G, _ = robot.expansion()
        full = _full_state(robot, q, *args[:nvec])
        res = fn(robot.uncoupled(), *full, *args[nvec:], **kw)
        if out == "GtXG":
            return G.T @ res @ G
        if out == "GtX":
            return G.T @ res
        if out == "XG":
            return res @ G
        return res

    wrapped.__doc__, wrapped.__name__ = fn.__doc__, fn.__name__
    return wrapped


def _coupled_forward_dynamics(robot: Robot, q: ArrayLike, v: ArrayLike, tau: ArrayLike,
                              f_ext: ArrayLike | None = None) -> np.ndarray:
    """Coupled robot: ``(G^T M G)^-1 (tau - G^T C)`` with the dense M and C of the full tree."""
    G, _ = robot.expansion()
    qf, vf = _full_state(robot, q, v)
    full = robot.uncoupled()
    M = G.T @ _full_mass_matrix(full, qf) @ G
    tau = state_vector(tau, robot.nv, "tau", "reference")
    return np.linalg.solve(M, tau - G.T @ _full_bias(full, qf, vf, f_ext))


def _coupled_minv(robot: Robot, q: ArrayLike) -> np.ndarray:
    G, _ = robot.expansion()
    return np.linalg.inv(G.T @ _full_mass_matrix(robot.uncoupled(), _full_state(robot, q)[0]) @ G)


_full_mass_matrix, _full_bias = mass_matrix, bias_forces
_full_fd, _full_minv = forward_dynamics, mass_matrix_inverse
mass_matrix = _reduced(mass_matrix, "M")
bias_forces = _reduced(bias_forces, "C")
inverse_dynamics = _reduced(inverse_dynamics, "tau")
jacobian = _reduced(jacobian, "J")
center_of_mass = _reduced(center_of_mass, "q")
momentum = _reduced(momentum, "qv")
kinetic_energy = _reduced(kinetic_energy, "qv")
frame_pose = _reduced(frame_pose, "q")
body_poses = _reduced(body_poses, "q")


def forward_dynamics(robot: Robot, q: ArrayLike, v: ArrayLike, tau: ArrayLike,  # noqa: F811
                     f_ext: ArrayLike | None = None) -> np.ndarray:
    """Accelerations: seed 000 eq. 2.11 (uncoupled robots), ``(G^T M G)^-1 (tau - G^T C)`` (coupled)."""
    if robot.is_coupled:
        return _coupled_forward_dynamics(robot, q, v, tau, f_ext)
    return _full_fd(robot, q, v, tau, f_ext)


def mass_matrix_inverse(robot: Robot, q: ArrayLike) -> np.ndarray:  # noqa: F811
    """``M^-1``: seed 000 eq. 2.10c (uncoupled robots), ``(G^T M G)^-1`` (coupled)."""
    return _coupled_minv(robot, q) if robot.is_coupled else _full_minv(robot, q)
