r"""Dense reference forms of the free-floating quantities (seed 003, Appendices C-E), floats only.

Independent of the recursions in :mod:`soadyn.symbolic.algorithms.free_floating`: the base inertia and the
coupling inertia are summed body by body from the centre-of-mass Jacobians exactly as Dimitrov writes them
(thesis eq. C.3-C.16, in inertial axes, linear rows first), then mapped to soadyn's coordinates; the
angular reduced forms are obtained column by column from the momentum; ``Hdot_bm qd`` from the dense
operator bias forces.  Same names and meanings as the generic algorithms (see that module's docstring for
the frames and points of every momentum).

Thesis -> soadyn coordinates.  The thesis's base speeds are ``[v_0; w_0]`` (inertial axes, linear first,
``v_0`` of the base centroid); soadyn's are ``x = [w_b; v_b]`` in base axes with ``v_b`` the velocity of
the base *origin*.  With ``R0`` the base attitude, ``[v_0; w_0] = T x`` where ``T = [[0, R0], [R0, 0]]``
when the base centroid is the base origin; in general the reference point below is the base origin, for
which the thesis's derivation (eq. C.3-C.10) holds unchanged with ``r_0`` = base origin.  Hence
``H_b = T^T H_b^thesis T`` and ``H_bm = T^T H_c^thesis``.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from soadyn.model.robot import Robot, require_free
from soadyn.model.rotations import skew
from soadyn.reference import dense as reference

__all__ = [
    "base_inertia", "coupling_inertia", "generalized_inertia", "generalized_bias", "angular_reduced_dynamics",
    "coupling_inertia_rate", "base_velocity", "momentum_frame_twist", "generalized_jacobian",
    "com_jacobians", "thesis_base_inertia",
]


def _ancestors(robot: Robot, k: int) -> list[int]:
    out = []
    while k > 0:
        out.append(k)
        k = robot.parent[k]
    return out


def com_jacobians(robot: Robot, q: ArrayLike) -> tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]]:
    """Per body: CoM position r_i, translational J_Ti and rotational J_Ri (3 x n_joints, inertial axes)
    of the body with the base held still (thesis eq. C.1, 2.26-2.27)."""
    R, p = reference.body_poses(robot, q)
    nj = robot.n_joints
    r, JT, JR = [], [], []
    for i in range(robot.n_bodies):
        ri = p[i] + R[i] @ robot.inertias[i].com
        jt, jr = np.zeros((3, nj)), np.zeros((3, nj))
        for j in _ancestors(robot, i):
            s = R[j] @ robot.joints[j].axis
            c = j - 1
            if robot.joints[j].type == "revolute":
                jr[:, c] = s
                jt[:, c] = np.cross(s, ri - p[j])
            else:
                jt[:, c] = s
        r.append(ri)
        JT.append(jt)
        JR.append(jr)
    return r, JT, JR


def thesis_base_inertia(robot: Robot, q: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """``(H_b, H_c)`` exactly as thesis eq. C.15-C.16: rows ``[P; L_0]``, base speeds ``[v_0; w_0]``, inertial
    axes, about the base origin ``r_0`` (the thesis's base centroid)."""
    require_free(robot, "reference: thesis_base_inertia")
    R, p = reference.body_poses(robot, q)
    r, JT, JR = com_jacobians(robot, q)
    w = robot.total_mass
    rg = sum(robot.inertias[i].mass * r[i] for i in range(robot.n_bodies)) / w
    r0g = rg - p[0]
    Hw = np.zeros((3, 3))
    Hwphi = np.zeros((3, robot.n_joints))
    JTg = np.zeros((3, robot.n_joints))
    for i in range(robot.n_bodies):
        m = robot.inertias[i].mass
        Ii = R[i] @ robot.inertias[i].inertia @ R[i].T          # about the CoM, inertial axes
        r0i = skew(r[i] - p[0])
        Hw += Ii + m * r0i.T @ r0i                              # eq. C.12 (base term included)
        Hwphi += Ii @ JR[i] + m * r0i @ JT[i]                   # eq. C.13
        JTg += m * JT[i]                                        # eq. C.4
    Hb = np.zeros((6, 6))
    Hb[:3, :3] = w * np.eye(3)
    Hb[:3, 3:] = w * skew(r0g).T
    Hb[3:, :3] = w * skew(r0g)
    Hb[3:, 3:] = Hw
    return Hb, np.vstack([JTg, Hwphi])


def _T(robot: Robot, q: ArrayLike) -> np.ndarray:
    R0 = reference.body_poses(robot, q)[0][0]
    T = np.zeros((6, 6))
    T[:3, 3:] = R0
    T[3:, :3] = R0
    return T


def base_inertia(robot: Robot, q: ArrayLike) -> np.ndarray:
    """``H_b`` in soadyn coordinates (about the base origin, base axes, angular first), from eq. C.15."""
    Hb, _ = thesis_base_inertia(robot, q)
    T = _T(robot, q)
    return T.T @ Hb @ T


def coupling_inertia(robot: Robot, q: ArrayLike) -> np.ndarray:
    """``H_bm`` in soadyn coordinates, from eq. C.16."""
    _, Hc = thesis_base_inertia(robot, q)
    return _T(robot, q).T @ Hc


def _manipulator_inertia(robot: Robot, q: ArrayLike) -> np.ndarray:
    """``H_phi = sum_i m_i J_Ti^T J_Ti + J_Ri^T I_i J_Ri`` (thesis eq. D.4), plus the joints' armature
    ``diag(I_a)`` (the drive train, docs/conventions.md)."""
    R, _ = reference.body_poses(robot, q)
    _, JT, JR = com_jacobians(robot, q)
    H = np.diag(reference.drive_parameters(robot)[0][6:])
    for i in range(robot.n_bodies):
        Ii = R[i] @ robot.inertias[i].inertia @ R[i].T
        H += robot.inertias[i].mass * JT[i].T @ JT[i] + JR[i].T @ Ii @ JR[i]
    return H


def generalized_inertia(robot: Robot, q: ArrayLike) -> np.ndarray:
    """``H* = H_phi - H_c^T H_b^-1 H_c`` (thesis eq. E.3) from the eq. C/D sums."""
    Hb, Hc = thesis_base_inertia(robot, q)
    return _manipulator_inertia(robot, q) - Hc.T @ np.linalg.solve(Hb, Hc)


def generalized_bias(robot: Robot, q: ArrayLike, v: ArrayLike, f_ext: ArrayLike | None = None) -> np.ndarray:
    """``c* = c_m - H_bm^T H_b^-1 c_b`` (eq. E.3) with the dense operator bias forces (seed 000 eq. 2.4b)."""
    require_free(robot, "reference: generalized_bias")
    c = reference.bias_forces(robot, q, v, f_ext)
    Hb, Hbm = base_inertia(robot, q), coupling_inertia(robot, q)
    return c[6:] - Hbm.T @ np.linalg.solve(Hb, c[:6])


def angular_reduced_dynamics(robot: Robot, q: ArrayLike, v: ArrayLike,
                             f_ext: ArrayLike | None = None) -> tuple[np.ndarray, ...]:
    """``(H~_b, H~_c, H~_phi, c~_b, c~_phi)`` in base axes about the system CoM, built independently:

    * ``H~_b``, ``H~_c`` column by column as the angular momentum about the CoM (``reference.momentum``) of a
      unit base angular velocity / unit joint rate, rotated to base axes (thesis eq. C.18, 4.5);
    * ``H~_phi = H_phi - J_Tg^T J_Tg / w`` and ``c~`` from eq. E.2 with the eq. C/D matrices and the dense
      bias forces.
    """
    require_free(robot, "reference: angular_reduced_dynamics")
    nv = robot.nv
    R0 = reference.body_poses(robot, q)[0][0]
    cols = []
    for k in list(range(3)) + list(range(6, nv)):
        e = np.zeros(nv)
        e[k] = 1.0
        cols.append(R0.T @ reference.momentum(robot, q, e)[:3])
    cols = np.array(cols).T
    Hb_t, Hc_t = cols[:, :3], cols[:, 3:]
    _, Hc = thesis_base_inertia(robot, q)
    JTg = Hc[:3]
    w = robot.total_mass
    Hp_t = _manipulator_inertia(robot, q) - JTg.T @ JTg / w
    c = reference.bias_forces(robot, q, v, f_ext)
    # base linear row (soadyn: base-axes force) -> eliminate with the CoM offset r (base axes)
    _, Rp = reference.body_poses(robot, q)
    rg = reference.center_of_mass(robot, q)
    r = R0.T @ (rg - Rp[0])
    cb_t = c[:3] - skew(r) @ c[3:6]
    # J_Tg in base axes is R0^T J_Tg; c~_phi = c_m - J_Tg^T c_b^v / w (eq. E.2) with c_b^v in inertial axes
    cp_t = c[6:] - (JTg.T @ (R0 @ c[3:6])) / w
    return Hb_t, Hc_t, Hp_t, cb_t, cp_t


def coupling_inertia_rate(robot: Robot, q: ArrayLike, qd: ArrayLike) -> np.ndarray:
    """``Hdot_bm qd``: base rows of the dense bias forces at ``v = [0; qd]`` without gravity (eq. 3.6)."""
    require_free(robot, "reference: coupling_inertia_rate")
    r0 = robot.replace(gravity=np.zeros(3))
    v = np.concatenate([np.zeros(6), np.asarray(qd, float)])
    return reference.bias_forces(r0, q, v)[:6]


def _ho(robot: Robot, q: ArrayLike, h: ArrayLike) -> np.ndarray:
    R, p = reference.body_poses(robot, q)
    R0 = R[0]
    h = np.asarray(h, float)
    Lo = h[:3] + np.cross(reference.center_of_mass(robot, q) - p[0], h[3:])
    return np.concatenate([R0.T @ Lo, R0.T @ h[3:]])


def base_velocity(robot: Robot, q: ArrayLike, qd: ArrayLike, h: ArrayLike) -> np.ndarray:
    """Base twist ``[w_b; v_b]`` (base axes) from joint rates and momentum ``h = [L_c; P]`` (eq. C.17)."""
    require_free(robot, "reference: base_velocity")
    Hb, Hbm = base_inertia(robot, q), coupling_inertia(robot, q)
    return np.linalg.solve(Hb, _ho(robot, q, h) - Hbm @ np.asarray(qd, float))


def momentum_frame_twist(robot: Robot, q: ArrayLike, h: ArrayLike, frame: str) -> np.ndarray:
    """``J_b H_b^-1 h_o`` (thesis eq. E.6, second term), inertial-aligned ``[w; v]`` of the frame."""
    require_free(robot, "reference: momentum_frame_twist")
    J = reference.jacobian(robot, q, frame, world_aligned=True)
    return J[:, :6] @ np.linalg.solve(base_inertia(robot, q), _ho(robot, q, h))


def generalized_jacobian(robot: Robot, q: ArrayLike, frame: str) -> np.ndarray:
    """``J* = J_m - J_b H_b^-1 H_bm`` (thesis eq. E.3, E.6) with the eq. C.15-C.16 inertias."""
    require_free(robot, "reference: generalized_jacobian")
    J = reference.jacobian(robot, q, frame, world_aligned=True)
    return J[:, 6:] - J[:, :6] @ np.linalg.solve(base_inertia(robot, q), coupling_inertia(robot, q))
