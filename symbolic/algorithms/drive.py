"""The drive train of the joints: armature, viscous damping and smoothed Coulomb friction (issue 25).

Each moving joint k may carry (``soadyn.model.robot.Joint``; docs/conventions.md, "Drive train")

* an **armature** ``I_a = I_m n^2``: the rotor inertia I_m reflected through the gear ratio n.  The rotor
  spins at ``n qd`` relative to the link that carries its stator; keeping only its kinetic energy
  ``1/2 I_a qd^2`` (the rotor's absolute angular velocity, hence its gyroscopic coupling with the links,
  is neglected, as in MuJoCo's and Pinocchio's ``armature``) adds ``I_a`` to the diagonal of the mass
  matrix, ``M_d = M + diag(I_a)``, and ``I_a qdd`` to the joint's generalised force.  In the
  articulated-body recursion of seed 000 (Algorithm 2, eq. 2.6) the hinge equation of body k reads
  ``T(k) = H(k) f(k) + I_a(k) qdd(k)``; eliminating ``qdd(k)`` gives ``D(k) = H P H* + I_a(k)`` with
  G, P+ and every later step unchanged in form, so the innovations factors (eq. 2.10) factor ``M_d``
  exactly and Algorithm 3 solves with it.
* a **viscous damping** d: joint force ``d qd``;
* a **Coulomb friction** f, smoothed: joint force ``f qd / sqrt(qd^2 + v_s^2)`` with the joint's velocity
  scale v_s (``friction_velocity``, default 0.01): odd, smooth, ``f qd / v_s`` near rest and ``f sign(qd)``
  for ``|qd| >> v_s`` (algebraic rather than tanh smoothing: it needs only a square root, which the
  generated C has).

Damping and friction are *passive* joint forces ``tau_p(qd)``: the equations of motion become
``M_d qdd + C + tau_p = tau``.  Inverse dynamics adds ``I_a qdd + tau_p``; forward dynamics runs on
``tau - tau_p``; ``dtau/dv`` gains ``diag(d + f v_s^2 / (qd^2 + v_s^2)^(3/2))``.  The values are constants
of the generated code (not run-time parameters).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from soadyn.symbolic.scalar import ScalarContext


def armature(robot: Any, k: int) -> float:
    """The armature of body k's joint (0 for the base)."""
    j = robot.joints[k]
    return 0.0 if j is None else float(j.armature)


def _coordinate(robot: Any, k: int) -> int:
    return robot.v_index(k).start


def passive_torques(robot: Any, ctx: ScalarContext, v: np.ndarray) -> np.ndarray | None:
    """``tau_p(v)``: damping ``d qd`` plus smoothed Coulomb friction ``f qd / sqrt(qd^2 + v_s^2)`` per joint
    (zero on the free base's rows); None when no joint has damping or friction."""
    if not any(j is not None and (j.damping or j.friction) for j in robot.joints):
        return None
    out = ctx.zeros(robot.nv)
    for k in range(1, robot.n_bodies):
        j = robot.joints[k]
        if not (j.damping or j.friction):
            continue
        i = _coordinate(robot, k)
        qd = v[i]
        t = 0
        if j.damping:
            t = t + j.damping * qd
        if j.friction:
            s = ctx.stage(f"fric{k}", ctx.sqrt(qd * qd + j.friction_velocity ** 2))
            t = t + j.friction * qd / s
        out[i] = t
    return out


def passive_damping_matrix(robot: Any, ctx: ScalarContext, v: np.ndarray) -> dict[int, Any]:
    """``d tau_p / d v`` (diagonal): coordinate -> ``d + f v_s^2 / (qd^2 + v_s^2)^(3/2)``."""
    out: dict[int, Any] = {}
    for k in range(1, robot.n_bodies):
        j = robot.joints[k]
        if not (j.damping or j.friction):
            continue
        i = _coordinate(robot, k)
        t = 0
        if j.damping:
            t = t + j.damping
        if j.friction:
            vs2 = j.friction_velocity ** 2
            r = ctx.stage(f"dfric{k}", 1 / ctx.sqrt(v[i] * v[i] + vs2))
            t = t + (j.friction * vs2) * (r * r * r)
        out[i] = t
    return out


def drive_torques(robot: Any, ctx: ScalarContext, v: np.ndarray, a: np.ndarray) -> np.ndarray | None:
    """``I_a qdd + tau_p(v)``: what the drive train adds to the rigid-body inverse dynamics; None when the
    robot has no drive-train term (then nothing is added and the derived program is unchanged)."""
    if not robot.has_drive:
        return None
    out = passive_torques(robot, ctx, v)
    if out is None:
        out = ctx.zeros(robot.nv)
    for k in range(1, robot.n_bodies):
        ia = armature(robot, k)
        if ia:
            i = _coordinate(robot, k)
            out[i] = out[i] + ia * a[i]
    return out


def add_armature(robot: Any, M: np.ndarray) -> np.ndarray:
    """``M + diag(I_a)`` in place (the joint-space mass matrix of the drive train); M returned."""
    for k in range(1, robot.n_bodies):
        ia = armature(robot, k)
        if ia:
            i = _coordinate(robot, k)
            M[i, i] = M[i, i] + ia
    return M


def add_damping_derivative(robot: Any, ctx: ScalarContext, v: np.ndarray, dtau_dv: np.ndarray) -> np.ndarray:
    """``dtau/dv + d tau_p/dv`` in place; returned."""
    for i, d in passive_damping_matrix(robot, ctx, v).items():
        dtau_dv[i, i] = dtau_dv[i, i] + d
    return dtau_dv
