"""Free-floating control toolkit: reaction null space, reactionless motion, RNSC, DMC (seed 003, ch. 3-5).

Every function takes a *module*: a generated module (``soadyn.codegen.compile``) or a
:class:`~soadyn.runtime.numeric_module.NumericModule`; only ``mass_matrix``, ``bias_forces``,
``momentum``, ``center_of_mass`` and ``jacobian`` are needed (the generated free-floating functions are
used when present).  Controllers are objects with ``torque(t, q, v) -> tau (nv)`` for
:func:`soadyn.runtime.simulate.simulate`.

Frames and points (see :mod:`soadyn.symbolic.algorithms.free_floating`):

* ``v = [w_b; v_b; qd]`` with the base twist in base axes.  All 3-row quantities below (``H~_b``,
  ``H~_c``, ``c~_b``, the base angular velocity) are in **base axes**; :func:`partial_momenta` rotates the
  momenta to inertial axes, the thesis's frame.
* The angular coupling inertia ``H~_c = [H~_bm  H~_br]`` (thesis eq. 4.4, E.2) maps joint rates to angular
  momentum about the **system CoM**; ``H~_b w_b + H~_c qd = R0^T L_c`` where ``L_c = momentum(q, v)[:3]``.
  Dimitrov's partial momenta (eq. 4.5) are ``L_b = H~_b w_b`` (base), ``L_bm = H~_bm qd_m`` (coupling
  momentum of the manipulator), ``L_r = H~_br qd_r`` (reaction wheels) and ``L_p = r_g x P`` (moment of the
  linear momentum about the inertial origin); their sum is the angular momentum about the inertial origin.
* The 6-row coupling inertia ``H_bm`` (thesis ``H_c``, eq. 3.4) gives the momentum at the base origin in
  base axes (``angular=False`` below).

Joint subsets (``joints=`` / ``wheels=``) are given as joint names or indices into ``joint_names``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from soadyn.model.robot import require_free
from soadyn.model.rotations import quaternion_to_matrix
from soadyn.runtime.integrate import rk4_step

__all__ = [
    "FreeFloatingState", "state", "partial_momenta", "coupling_matrix", "reaction_null_space",
    "reactionless_rates", "reactionless_accelerations", "joint_torques_for_accelerations",
    "momentum_management_rates", "distributed_momentum_rates", "rnsc_torques", "rnsc_torques_thesis",
    "frame_twist", "ReactionlessController", "ReactionNullSpaceControl", "DistributedMomentumControl",
    "simulate_momentum_management", "pinv_solve",
]


# ---- helpers -----------------------------------------------------------------------------------------------
def joint_indices(module: Any, joints: Sequence[int | str] | None, what: str = "joints") -> np.ndarray:
    """Indices (into the joint list) of a subset given by names or indices; all joints for None."""
    names = list(module.joint_names)
    if joints is None:
        return np.arange(len(names))
    out = []
    for j in joints:
        if isinstance(j, str):
            if j not in names:
                raise ValueError(f"{what}: unknown joint {j!r}; joints: {names}")
            out.append(names.index(j))
        else:
            k = int(j)
            if not 0 <= k < len(names):
                raise ValueError(f"{what}: joint index {k} out of range 0..{len(names) - 1}")
            out.append(k)
    if len(set(out)) != len(out):
        raise ValueError(f"{what}: repeated joints {list(joints)}")
    return np.array(out, dtype=int)


def wheels_and_arm(module: Any, wheels: Sequence[int | str]) -> tuple[np.ndarray, np.ndarray]:
    """(the wheel joints, the other joints: the arm), indices into the joint list of a free-base module."""
    rw = joint_indices(module, wheels, "wheels")
    return rw, np.setdiff1d(np.arange(module.nv - 6), rw)


def pinv_solve(H: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``H^+ b`` with the right pseudoinverse ``H^+ = H^T (H H^T)^-1`` (thesis eq. 3.12); SVD fallback."""
    try:
        return H.T @ np.linalg.solve(H @ H.T, b)
    except np.linalg.LinAlgError:
        return np.linalg.pinv(H) @ b


@dataclass
class FreeFloatingState:
    """Free-floating blocks at one state, base axes (see the module docstring)."""

    M: np.ndarray          # nv x nv mass matrix
    c: np.ndarray          # nv bias forces (gravity, Coriolis, -f_ext)
    Hb: np.ndarray         # 3x3 H~_b  (angular, about the system CoM)
    Hc: np.ndarray         # 3 x nj H~_c
    Hp: np.ndarray         # nj x nj H~_phi
    cb: np.ndarray         # 3 c~_b
    cp: np.ndarray         # nj c~_phi
    R0: np.ndarray         # base attitude (base to inertial)


def state(module: Any, q: Any, v: Any, f_ext: Any = None) -> FreeFloatingState:
    """Mass matrix, bias forces and the angular reduced blocks (thesis eq. E.2) at ``(q, v)``."""
    require_free(module, "state")
    q = np.asarray(q, float)
    v = np.asarray(v, float)
    M = np.asarray(module.mass_matrix(q), float)
    c = np.asarray(module.bias_forces(q, v) if f_ext is None else module.bias_forces(q, v, f_ext), float)
    m = M[3, 3]                                    # linear block of H_b is m I
    A, B, Ca, Cl = M[:3, :3], M[:3, 3:6], M[:3, 6:], M[3:6, 6:]
    Hb = A - B @ B.T / m
    Hc = Ca - B @ Cl / m
    Hp = M[6:, 6:] - Cl.T @ Cl / m
    cb = c[:3] - B @ c[3:6] / m
    cp = c[6:] - Cl.T @ c[3:6] / m
    R0 = quaternion_to_matrix(q[3:7])
    return FreeFloatingState(M, c, 0.5 * (Hb + Hb.T), Hc, 0.5 * (Hp + Hp.T), cb, cp, R0)


def partial_momenta(module: Any, q: Any, v: Any, wheels: Sequence[int | str] = ()) -> dict[str, np.ndarray]:
    """Thesis eq. 4.5 split of the angular momentum, **inertial axes** (3-vectors):

    ``base`` = H~_b w_b, ``manipulator`` = H~_bm qd_m (coupling angular momentum L_bm), ``wheels`` =
    H~_br qd_r (L_r), ``linear`` = r_g x P (L_p, about the inertial origin), ``com`` = their first three
    summed (angular momentum about the system CoM) and ``total`` = all four (about the inertial origin).
    """
    q = np.asarray(q, float)
    v = np.asarray(v, float)
    s = state(module, q, v)
    rw, arm = wheels_and_arm(module, wheels)
    qd = v[6:]
    Lb = s.R0 @ (s.Hb @ v[:3])
    Lbm = s.R0 @ (s.Hc[:, arm] @ qd[arm])
    Lr = s.R0 @ (s.Hc[:, rw] @ qd[rw]) if len(rw) else np.zeros(3)
    h = np.asarray(module.momentum(q, v), float)
    Lp = np.cross(np.asarray(module.center_of_mass(q), float), h[3:])
    return {"base": Lb, "manipulator": Lbm, "wheels": Lr, "linear": Lp, "com": Lb + Lbm + Lr,
            "total": Lb + Lbm + Lr + Lp}


def coupling_matrix(module: Any, q: Any, joints: Sequence[int | str] | None = None,
                    angular: bool = True) -> np.ndarray:
    """The coupling inertia restricted to ``joints``: ``H~_c`` (3 rows, about the CoM; eq. 3.26, 4.4) when
    ``angular`` else ``H_bm`` (6 rows, base origin; eq. 3.4).  Base axes."""
    require_free(module, "coupling_matrix")
    idx = joint_indices(module, joints)
    q = np.asarray(q, float)
    if angular:
        return state(module, q, np.zeros(module.nv)).Hc[:, idx]
    return np.asarray(module.mass_matrix(q), float)[:6, 6 + idx]


def reaction_null_space(module: Any, q: Any, joints: Sequence[int | str] | None = None,
                        angular: bool = True) -> np.ndarray:
    """Projector onto the reaction null space ``R^n = I - H^+ H`` of the coupling inertia (eq. 3.14)."""
    H = coupling_matrix(module, q, joints, angular)
    return np.eye(H.shape[1]) - np.linalg.pinv(H) @ H


def _expand(module: Any, idx: np.ndarray, x: np.ndarray) -> np.ndarray:
    out = np.zeros(module.nv - 6)
    out[idx] = x
    return out


def reactionless_rates(module: Any, q: Any, xi_dot: Any, joints: Sequence[int | str] | None = None,
                       coupling_momentum: Any = None, angular: bool = True) -> np.ndarray:
    """Joint rates (all joints; unselected ones zero) ``qd = H^+ L0 + (I - H^+ H) xi_dot`` (eq. 3.12).

    ``coupling_momentum`` ``L0`` is the coupling momentum to keep (base axes; default zero, i.e. reactionless
    motion from rest); ``xi_dot`` (one entry per selected joint) is projected on the null space."""
    idx = joint_indices(module, joints)
    H = coupling_matrix(module, q, joints, angular)
    xi = np.asarray(xi_dot, float)
    if xi.shape != (len(idx),):
        raise ValueError(f"reactionless_rates: xi_dot must have {len(idx)} entries (one per selected joint)")
    L0 = np.zeros(H.shape[0]) if coupling_momentum is None else np.asarray(coupling_momentum, float)
    qd = pinv_solve(H, L0) + xi - pinv_solve(H, H @ xi)
    return _expand(module, idx, qd)


def reactionless_accelerations(module: Any, q: Any, v: Any, xi_ddot: Any,
                               joints: Sequence[int | str] | None = None, angular: bool = True,
                               base_acceleration: Any = None) -> np.ndarray:
    """Joint accelerations that keep the base's (angular) velocity rate at ``base_acceleration`` (default 0).

    6-row form (``angular=False``), base at rest: ``qdd = -H^+ Hdot qd + (I - H^+ H) xi_ddot`` (eq. 3.15)
    where ``Hdot_bm qd`` is the base part of the bias forces ``c_b``; in general the base rows of the
    equations of motion, ``H_b a_b + H_bm qdd + c_b = 0``, give ``H_bm qdd = -(c_b + H_b a_b)``.
    Angular form (default): ``H~_c qdd = -(c~_b + H~_b wdot_b)`` (eq. 5.1 with ``wdot_b`` given).
    Unselected joints get zero acceleration (servo-locked, thesis section 4.4.2)."""
    idx = joint_indices(module, joints)
    q, v = np.asarray(q, float), np.asarray(v, float)
    s = state(module, q, v)
    xi = np.asarray(xi_ddot, float)
    if xi.shape != (len(idx),):
        raise ValueError(f"reactionless_accelerations: xi_ddot must have {len(idx)} entries")
    if angular:
        H = s.Hc[:, idx]
        ab = np.zeros(3) if base_acceleration is None else np.asarray(base_acceleration, float)
        rhs = -(s.cb + s.Hb @ ab)
    else:
        H = s.M[:6, 6 + idx]
        ab = np.zeros(6) if base_acceleration is None else np.asarray(base_acceleration, float)
        rhs = -(s.c[:6] + s.M[:6, :6] @ ab)
    qdd = pinv_solve(H, rhs) + xi - pinv_solve(H, H @ xi)
    return _expand(module, idx, qdd)


def joint_torques_for_accelerations(module: Any, q: Any, v: Any, qdd: Any, f_ext: Any = None) -> np.ndarray:
    """Generalised forces (nv, base wrench zero) under which the joints accelerate at ``qdd``.

    ``tau_m = H* qdd + c*`` (thesis eq. E.3), evaluated as ``a_b = -H_b^-1 (H_bm qdd + c_b)``,
    ``tau_m = H_bm^T a_b + H_m qdd + c_m``."""
    require_free(module, "joint_torques_for_accelerations")
    q, v, qdd = np.asarray(q, float), np.asarray(v, float), np.asarray(qdd, float)
    M = np.asarray(module.mass_matrix(q), float)
    c = np.asarray(module.bias_forces(q, v) if f_ext is None else module.bias_forces(q, v, f_ext), float)
    ab = -np.linalg.solve(M[:6, :6], M[:6, 6:] @ qdd + c[:6])
    return np.concatenate([np.zeros(6), M[6:, :6] @ ab + M[6:, 6:] @ qdd + c[6:]])


def _mixed_torques(M: np.ndarray, c: np.ndarray, known_acc: np.ndarray, acc: np.ndarray,
                   tau_unknown_free: np.ndarray) -> np.ndarray:
    """``M a + c = tau``: accelerations given on ``known_acc`` (indices into v), generalised forces given
    (``tau_unknown_free``, full nv vector; entries on ``known_acc`` ignored) elsewhere.  Returns tau (nv)."""
    nv = len(c)
    U = np.setdiff1d(np.arange(nv), known_acc)
    K = known_acc
    aU = np.linalg.solve(M[np.ix_(U, U)], tau_unknown_free[U] - c[U] - M[np.ix_(U, K)] @ acc)
    tau = tau_unknown_free.copy()
    tau[K] = M[np.ix_(K, U)] @ aU + M[np.ix_(K, K)] @ acc + c[K]
    return tau


def momentum_management_rates(module: Any, q: Any, v: Any, wheels: Sequence[int | str],
                              L: Any = None, xi_dot: Any = None) -> np.ndarray:
    """Manipulator joint rates of the momentum management law (thesis eq. 4.21), base attitude kept still:

    ``qd_m = H~_bm^+ (L - H~_br qd_r) + (I - H~_bm^+ H~_bm) xi_dot``, base axes, ``L`` the angular momentum
    about the system CoM (default: the current one, ``R0^T momentum(q, v)[:3]``).  Returns qd_m (arm joints,
    in joint order with the wheels removed)."""
    q, v = np.asarray(q, float), np.asarray(v, float)
    s = state(module, q, v)
    rw, arm = wheels_and_arm(module, wheels)
    Lc = s.R0.T @ np.asarray(module.momentum(q, v), float)[:3] if L is None else np.asarray(L, float)
    Hbm, Hbr = s.Hc[:, arm], s.Hc[:, rw]
    out = pinv_solve(Hbm, Lc - Hbr @ v[6 + rw])
    if xi_dot is not None:
        xi = np.asarray(xi_dot, float)
        out = out + xi - pinv_solve(Hbm, Hbm @ xi)
    return out


def distributed_momentum_rates(module: Any, q: Any, v: Any, wheels: Sequence[int | str] = ()) -> np.ndarray:
    """Desired manipulator rates of Distributed Momentum Control (thesis eq. 5.6), base axes:
    ``qd_m^d = H~_bm^+ (H~_bm qd_m + H~_b w_b)``: the arm takes over the base's angular momentum."""
    q, v = np.asarray(q, float), np.asarray(v, float)
    return _dmc_rates(state(module, q, v), v, wheels_and_arm(module, wheels)[1])


def _dmc_rates(s: FreeFloatingState, v: np.ndarray, arm: np.ndarray) -> np.ndarray:
    """Eq. 5.6 from the blocks of :func:`state` (arm: joint indices of the manipulator)."""
    Hbm = s.Hc[:, arm]
    return pinv_solve(Hbm, Hbm @ v[6 + arm] + s.Hb @ v[:3])


def rnsc_torques(module: Any, q: Any, v: Any, wheels: Sequence[int | str], tau_r: Any, u_b: Any, u_m: Any,
                 f_ext: Any = None) -> np.ndarray:
    """Reaction Null Space Control (thesis eq. 5.1-5.3), general form; returns tau (nv, base wrench zero).

    Solves the angular reduced equations (eq. 4.4) for manipulator accelerations with the base angular
    acceleration equal to ``u_b`` (base axes) and the null-space acceleration ``(I - H^+ H) u_m``:
    with ``qdd_r = H~_rr^-1 (tau_r - c~_r - H~_br^T u_b - H~_rm qdd_m)`` (wheel rows),
    ``H^ qdd_m = -(H~_b u_b + c~_b + H~_br H~_rr^-1 (tau_r - c~_r - H~_br^T u_b))`` with
    ``H^ = H~_bm - H~_br H~_rr^-1 H~_rm``, then ``tau_m`` from the manipulator rows.  When the wheels and the
    arm are not inertially coupled (``H~_rm = 0``, as in the thesis's model) this is exactly eq. 5.3."""
    q, v = np.asarray(q, float), np.asarray(v, float)
    s = state(module, q, v, f_ext)
    rw, arm = wheels_and_arm(module, wheels)
    ub = np.asarray(u_b, float)
    um = np.asarray(u_m, float)
    tr = np.asarray(tau_r, float).reshape(len(rw))
    Hbm, Hbr = s.Hc[:, arm], s.Hc[:, rw]
    Hmm, Hmr = s.Hp[np.ix_(arm, arm)], s.Hp[np.ix_(arm, rw)]
    Hrm, Hrr = s.Hp[np.ix_(rw, arm)], s.Hp[np.ix_(rw, rw)]
    cm, cr = s.cp[arm], s.cp[rw]
    if len(rw):
        Z = np.linalg.solve(Hrr, np.column_stack([tr - cr - Hbr.T @ ub, Hrm]))
        w0, Wm = Z[:, 0], Z[:, 1:]                       # qdd_r = w0 - Wm qdd_m
        Hhat = Hbm - Hbr @ Wm
        rhs = -(s.Hb @ ub + s.cb + Hbr @ w0)
    else:
        w0, Wm = np.zeros(0), np.zeros((0, len(arm)))
        Hhat, rhs = Hbm, -(s.Hb @ ub + s.cb)
    qdd_m = pinv_solve(Hhat, rhs) + um - pinv_solve(Hhat, Hhat @ um)
    qdd_r = w0 - Wm @ qdd_m
    tau = np.zeros(module.nv)
    tau[6 + arm] = Hbm.T @ ub + Hmm @ qdd_m + Hmr @ qdd_r + cm
    tau[6 + rw] = tr
    return tau


def rnsc_torques_thesis(module: Any, q: Any, v: Any, wheels: Sequence[int | str], tau_r: Any, u_b: Any,
                        u_m: Any) -> np.ndarray:
    """Eq. 5.2-5.3 literally (bar matrices, zero arm-wheel coupling assumed); tau (nv).  For comparison."""
    q, v = np.asarray(q, float), np.asarray(v, float)
    s = state(module, q, v)
    rw, arm = wheels_and_arm(module, wheels)
    Hbm, Hbr = s.Hc[:, arm], s.Hc[:, rw]
    Hm, Hr = s.Hp[np.ix_(arm, arm)], s.Hp[np.ix_(rw, rw)]
    Hp = np.linalg.pinv(Hbm)
    Rn = np.eye(len(arm)) - Hp @ Hbm
    Hbar_r = Hm @ Hp @ Hbr @ np.linalg.inv(Hr)
    Hbar = Hbm.T - Hm @ Hp @ s.Hb + Hbar_r @ Hbr.T
    cbar = s.cp[arm] - Hm @ Hp @ s.cb + Hbar_r @ s.cp[rw]
    tr = np.asarray(tau_r, float)
    tau = np.zeros(module.nv)
    tau[6 + arm] = Hbar @ np.asarray(u_b, float) - Hbar_r @ tr + cbar + Hm @ Rn @ np.asarray(u_m, float)
    tau[6 + rw] = tr
    return tau


def frame_twist(module: Any, q: Any, frame: str, qd: Any, h: Any) -> np.ndarray:
    """Twist ``[w; v]`` (inertial axes) of ``frame`` predicted from joint rates and momentum (thesis eq. E.6):
    ``J* qd + J_b H_b^-1 h_o`` with ``h = [L_c; P]`` (about the CoM, inertial axes)."""
    require_free(module, "frame_twist")
    q, qd, h = np.asarray(q, float), np.asarray(qd, float), np.asarray(h, float)
    if hasattr(module, "momentum_frame_twist"):
        return np.asarray(module.generalized_jacobian(q, frame), float) @ qd + np.asarray(
            module.momentum_frame_twist(q, h, frame), float)
    M = np.asarray(module.mass_matrix(q), float)
    J = np.asarray(module.jacobian(q, frame, world_aligned=True), float)
    R0 = quaternion_to_matrix(q[3:7])
    r = R0.T @ (np.asarray(module.center_of_mass(q), float) - q[:3])
    ho = np.concatenate([R0.T @ h[:3] + np.cross(r, R0.T @ h[3:]), R0.T @ h[3:]])
    vb = np.linalg.solve(M[:6, :6], ho - M[:6, 6:] @ qd)
    return J[:, :6] @ vb + J[:, 6:] @ qd


# ---- controllers -------------------------------------------------------------------------------------------
def _time_fn(x: Any, n: int, what: str) -> Callable[[float, np.ndarray, np.ndarray], np.ndarray]:
    if x is None:
        z = np.zeros(n)
        return lambda t, q, v: z
    if callable(x):
        return lambda t, q, v: np.asarray(x(t, q, v), float).reshape(n)
    a = np.asarray(x, float)
    if a.shape != (n,):
        raise ValueError(f"{what} must be a function (t, q, v) or have {n} entries, got shape {a.shape}")
    return lambda t, q, v: a


class ReactionlessController:
    """Torques for reactionless motion (thesis eq. 3.15 / 5.1): joint accelerations
    ``qdd = H^+ (-(c~_b + H~_b wdot_des)) + (I - H^+ H) xi_ddot`` with ``wdot_des = -k_base w_b``
    (feedback that removes integration drift; 0 by default), realised with
    :func:`joint_torques_for_accelerations`.

    ``xi_ddot``: array (one per selected joint) or ``f(t, q, v)``; ``joints``: the moving joints (others
    locked).
    ``angular=False`` keeps the whole base twist constant instead (6-row coupling inertia)."""

    def __init__(self, module: Any, xi_ddot: Any = None, joints: Sequence[int | str] | None = None,
                 angular: bool = True, k_base: float = 0.0) -> None:
        require_free(module, "ReactionlessController")
        self.module = module
        self.joints = joints
        self.angular = angular
        self.k_base = float(k_base)
        self._xi = _time_fn(xi_ddot, len(joint_indices(module, joints)), "xi_ddot")

    def torque(self, t: float, q: np.ndarray, v: np.ndarray) -> np.ndarray:
        ab = -self.k_base * (v[:3] if self.angular else v[:6])
        qdd = reactionless_accelerations(self.module, q, v, self._xi(t, q, v), self.joints, self.angular, ab)
        return joint_torques_for_accelerations(self.module, q, v, qdd)


class ReactionNullSpaceControl:
    """Reaction Null Space Control (thesis eq. 5.5): ``u_b = -K_b w_b``, ``u_m = -K_m qd_m``, wheel torques
    ``tau_r`` (array or ``f(t, q, v)``).  Thesis gains (section 5.3): K_b = 25, K_m = 10."""

    def __init__(self, module: Any, wheels: Sequence[int | str] = (), tau_r: Any = None, K_b: float = 25.0,
                 K_m: float = 10.0) -> None:
        require_free(module, "ReactionNullSpaceControl")
        self.module = module
        self.wheels = list(wheels)
        rw, self.arm = wheels_and_arm(module, self.wheels)
        self.K_b, self.K_m = float(K_b), float(K_m)
        self._tau_r = _time_fn(tau_r, len(rw), "tau_r")

    def torque(self, t: float, q: np.ndarray, v: np.ndarray) -> np.ndarray:
        return rnsc_torques(self.module, q, v, self.wheels, self._tau_r(t, q, v), -self.K_b * v[:3],
                            -self.K_m * v[6 + self.arm])


class DistributedMomentumControl:
    """Distributed Momentum Control (thesis eq. 5.6) with a joint-rate servo: the arm accelerates as
    ``qdd_m = K_v (qd_m^d - qd_m)`` towards the DMC rates; wheels get ``tau_r``; base wrench zero."""

    def __init__(self, module: Any, wheels: Sequence[int | str] = (), tau_r: Any = None,
                 K_v: float = 20.0) -> None:
        require_free(module, "DistributedMomentumControl")
        self.module = module
        self.wheels = list(wheels)
        self.rw, self.arm = wheels_and_arm(module, self.wheels)
        self.K_v = float(K_v)
        self._tau_r = _time_fn(tau_r, len(self.rw), "tau_r")

    def torque(self, t: float, q: np.ndarray, v: np.ndarray) -> np.ndarray:
        s = state(self.module, q, v)          # one mass matrix and bias for the rates and the torques
        acc = self.K_v * (_dmc_rates(s, np.asarray(v, float), self.arm) - v[6 + self.arm])
        tau = np.zeros(self.module.nv)
        tau[6 + self.rw] = self._tau_r(t, q, v)
        return _mixed_torques(s.M, s.c, 6 + self.arm, acc, tau)


# ---- kinematic-level simulation of the momentum management law ---------------------------------------------
def simulate_momentum_management(module: Any, q0: Any, wheels: Sequence[int | str], wheel_torque: Any,
                                 duration: float, dt: float = 0.01, L: Any = None,
                                 wheel_rates0: Any = None) -> dict[str, np.ndarray]:
    """Thesis section 4.5.2.3, 'simulation at kinematic level' (steps 1-6), with RK4 on SO(3).

    Wheel rates follow ``qdd_r = H~_rr^-1 tau_r`` (the thesis writes ``H~_br^-1``, which is the same matrix
    only when each wheel spins about a base axis through its centroid), the arm follows eq. 4.21 with the
    angular momentum ``L`` about the CoM (base axes, default zero) and no null-space term, and the base
    twist follows from momentum conservation with zero linear momentum (thesis eq. C.17).
    Returns ``t``, ``q``, ``v`` (base twist from :func:`base_velocity` algebra, joint rates)."""
    require_free(module, "simulate_momentum_management")
    rw, arm = wheels_and_arm(module, wheels)
    nj = module.nv - 6
    Lc = np.zeros(3) if L is None else np.asarray(L, float)
    tau_fn = _time_fn(wheel_torque, len(rw), "wheel_torque")
    q = np.asarray(q0, float).copy()
    q[3:7] /= np.linalg.norm(q[3:7])
    wr = np.zeros(len(rw)) if wheel_rates0 is None else np.asarray(wheel_rates0, float).copy()

    def velocity(qq: np.ndarray, wrr: np.ndarray) -> np.ndarray:
        s = state(module, qq, np.zeros(module.nv))
        qd = np.zeros(nj)
        qd[rw] = wrr
        qd[arm] = pinv_solve(s.Hc[:, arm], Lc - s.Hc[:, rw] @ wrr)
        M = s.M
        R0 = s.R0
        h = np.concatenate([R0 @ Lc, np.zeros(3)])
        r = R0.T @ (np.asarray(module.center_of_mass(qq), float) - qq[:3])
        ho = np.concatenate([R0.T @ h[:3] + np.cross(r, R0.T @ h[3:]), R0.T @ h[3:]])
        vb = np.linalg.solve(M[:6, :6], ho - M[:6, 6:] @ qd)
        return np.concatenate([vb, qd])

    def wheel_acc(t: float, qq: np.ndarray, vv: np.ndarray) -> np.ndarray:
        Hp = state(module, qq, np.zeros(module.nv)).Hp
        return np.linalg.solve(Hp[np.ix_(rw, rw)], tau_fn(t, qq, vv))

    def rates(t: float, qq: np.ndarray, wrr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        vv = velocity(qq, wrr)
        return vv, wheel_acc(t, qq, vv)

    n = max(1, int(math.ceil(duration / dt - 1e-9)))
    T, Q, V = [0.0], [q.copy()], [velocity(q, wr)]
    t = 0.0
    for k in range(n):
        h = min(dt, duration - t)
        q, wr = rk4_step(rates, t, q, wr, h, True)
        t = duration if k == n - 1 else (k + 1) * dt
        T.append(t)
        Q.append(q.copy())
        V.append(velocity(q, wr))
    return {"t": np.array(T), "q": np.array(Q), "v": np.array(V)}
