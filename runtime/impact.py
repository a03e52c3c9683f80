"""Impulse-momentum contact at the grasp between a chaser (compiled robot module) and a rigid target.

Seed 003 (Dimitrov) splits a capture into approach, impact and post-impact (thesis Fig. 4.1); during the
impact the contact forces are large and short, so positions are constant and only velocities jump.  The
model here is the classical impulse-momentum one written with Yoshida's *extended inversed inertia
tensor*: the inverse inertia seen at the contact point.

Chaser (free-floating robot, coordinates ``v``, mass matrix ``M`` (seed 003 eq. 2.37 / 3.1)): a wrench
impulse ``F = [n; f]`` (moment about the hand-frame origin; force; inertial axes) applied at the hand frame
changes the generalised momentum by ``M dv = J^T F`` where ``J`` is the world-aligned Jacobian of the hand
frame (``module.jacobian(q, hand, world_aligned=True)``, twist ``[w; v]`` of the frame origin).  The hand
twist then jumps by ``dV_h = G_c F`` with

    G_c = J M^-1 J^T        (6 x 6; ``module.mass_matrix_inverse``),

the extended inversed inertia tensor of the free-flying chaser (base motion included: the free base's
columns of ``J`` and ``M`` carry the base's reaction).

Target (one rigid body, mass ``m``, inertia ``I_c`` about its CoM ``c``, generalised velocity
``nu = [w; v_c]``, inertial axes): the twist of the material point at the contact point ``p`` is
``J_t nu`` with ``J_t = [[E, 0], [-(p - c)~, E]]``, its inertia is ``M_t = diag(R I_c R^T, m E)`` and it
receives ``-F``, so ``G_t = J_t M_t^-1 J_t^T``.

Contact law (Newton restitution on the constrained directions).  The impulse acts along the columns of a
direction matrix ``D`` (6 x k): ``D = E_6`` for a rigid grasp (all six relative motions stopped), or one
force direction ``[0; n]`` for a frictionless normal contact.  With the relative twist ``u = D^T (V_h -
V_t)`` before the impact and the restitution coefficient ``e`` in [0, 1], the post-impact relative twist
is ``-e u``:

    lambda = -(1 + e) (D^T (G_c + G_t) D)^-1 u,     F = D lambda,
    dv = M^-1 J^T F,   dnu = -M_t^-1 J_t^T F.

The pair's momentum is conserved exactly (``F`` and ``-F`` act at the same point) and the kinetic energy
changes by ``-(1 - e^2)/2 u^T (D^T G D)^-1 u <= 0`` (``G = G_c + G_t`` is positive definite), i.e. it never
grows; ``e = 1`` conserves it, ``e = 0`` is the plastic limit.

Capture = a contact (any ``e``, any ``D``) followed by the gripper's latch, a plastic grasp
(``e = 0``, ``D = E_6``) that makes the target move rigidly with the hand.  Because ``G`` does not change
while the positions are frozen, the state after the latch does not depend on ``e`` or ``D`` of the first
contact (only the contact impulse does); it is the state of the chaser with the target attached as a body
of the hand (:func:`attach_target`), the post-impact model of :mod:`soadyn.runtime.campaign`.

Why attach the target as a body rather than a weld loop: after the latch the hand and the target move as one
rigid body, the attached model has the chaser's coordinates unchanged (a ``fixed`` joint adds none, the
target's inertia is merged into the hand's link), so the post-impact state is the chaser state itself, the
generated O(N) tree dynamics apply without constraint stabilisation, and the total momentum of the
attached model equals the pair's (tested).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from soadyn.model.rotations import quaternion_to_matrix as rotation_matrix
from soadyn.model.rotations import skew

__all__ = [
    "RigidBody",
    "ImpactResult",
    "hand_inverse_inertia",
    "body_inverse_inertia",
    "impact",
    "capture",
    "pair_momentum",
    "attach_target",
    "GRASP",
]

#: direction matrix of a rigid grasp: all six relative motions (angular and linear) stopped
GRASP = np.eye(6)


@dataclass(frozen=True)
class RigidBody:
    """A free rigid body: ``mass``, ``inertia`` (3x3 about the CoM, body axes), ``position`` of the CoM
    (inertial), ``quaternion`` [x, y, z, w] (body to inertial), ``angular_velocity`` and the CoM's
    ``linear_velocity`` (both inertial axes)."""

    mass: float
    inertia: np.ndarray
    position: np.ndarray
    quaternion: np.ndarray
    angular_velocity: np.ndarray
    linear_velocity: np.ndarray

    @property
    def rotation(self) -> np.ndarray:
        return rotation_matrix(np.asarray(self.quaternion, float))

    def inertia_world(self) -> np.ndarray:
        """Inertia about the CoM in inertial axes, ``R I R^T``."""
        R = self.rotation
        return R @ np.asarray(self.inertia, float) @ R.T

    def nu(self) -> np.ndarray:
        """Generalised velocity ``[w; v_c]`` (inertial axes)."""
        return np.concatenate([self.angular_velocity, self.linear_velocity]).astype(float)

    def point_jacobian(self, point: np.ndarray) -> np.ndarray:
        """``J_t``: twist ``[w; v]`` of the body's material point at ``point`` from ``nu``."""
        J = np.eye(6)
        J[3:, :3] = -skew(np.asarray(point, float) - self.position)
        return J

    def momentum(self) -> np.ndarray:
        """``[angular momentum about the inertial origin; linear momentum]``."""
        P = self.mass * np.asarray(self.linear_velocity, float)
        L = self.inertia_world() @ self.angular_velocity + np.cross(self.position, P)
        return np.concatenate([L, P])

    def kinetic_energy(self) -> float:
        w, v = np.asarray(self.angular_velocity, float), np.asarray(self.linear_velocity, float)
        return float(0.5 * w @ self.inertia_world() @ w + 0.5 * self.mass * v @ v)


@dataclass
class ImpactResult:
    """Outcome of :func:`impact`.  ``impulse``: ``F = [n; f]`` on the chaser at the contact point (the
    target gets ``-F``), inertial axes; ``lam``: its components along the directions; ``v``/``target``: the
    post-impact chaser velocity and target; ``relative_before/after``: ``V_h - V_t`` (6, inertial axes);
    ``energy_before/after``: kinetic energy of the pair; ``G_c``, ``G_t``: the inverse inertias."""

    impulse: np.ndarray
    lam: np.ndarray
    v: np.ndarray
    target: RigidBody
    relative_before: np.ndarray
    relative_after: np.ndarray
    energy_before: float
    energy_after: float
    G_c: np.ndarray
    G_t: np.ndarray


def hand_inverse_inertia(module: Any, q: Any, hand: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(G_c, J, M^-1)``: the chaser's extended inversed inertia tensor ``G_c = J M^-1 J^T`` at the
    origin of frame ``hand`` (inertial axes) from the generated ``jacobian`` and ``mass_matrix_inverse``."""
    q = np.asarray(q, float)
    J = np.asarray(module.jacobian(q, hand, world_aligned=True), float)
    Minv = np.asarray(module.mass_matrix_inverse(q), float)
    G = J @ Minv @ J.T
    return 0.5 * (G + G.T), J, Minv


def body_inverse_inertia(body: RigidBody, point: Any) -> np.ndarray:
    """``G_t = J_t M_t^-1 J_t^T`` of a rigid body at ``point`` (inertial axes)."""
    Jt = body.point_jacobian(np.asarray(point, float))
    Mi = np.zeros((6, 6))
    Mi[:3, :3] = np.linalg.inv(body.inertia_world())
    Mi[3:, 3:] = np.eye(3) / body.mass
    G = Jt @ Mi @ Jt.T
    return 0.5 * (G + G.T)


def _directions(directions: Any) -> np.ndarray:
    D = GRASP if directions is None else np.asarray(directions, float)
    if D.ndim == 1:
        D = D.reshape(6, 1)
    if D.ndim != 2 or D.shape[0] != 6 or not 1 <= D.shape[1] <= 6 or not np.all(np.isfinite(D)):
        raise ValueError(
            f"impact: directions must be a finite 6 x k matrix (1 <= k <= 6), got shape {D.shape}"
        )
    if np.linalg.matrix_rank(D) < D.shape[1]:
        raise ValueError("impact: the impulse directions are linearly dependent")
    return D


def impact(module: Any, q: Any, v: Any, hand: str, target: RigidBody, point: Any, restitution: float = 0.0,
           directions: Any = None) -> ImpactResult:
    """Impulse-momentum contact between the chaser's frame ``hand`` and ``target`` at ``point``, the
    hand-frame origin (inertial; see the module docstring).  ``directions``: None (rigid grasp, 6
    directions) or a 6 x k matrix of wrench directions ``[moment; force]``
    (e.g. ``[0, 0, 0, *n]`` for a normal contact)."""
    e = float(restitution)
    if not 0.0 <= e <= 1.0:
        raise ValueError(f"impact: restitution must be in [0, 1], got {e}")
    D = _directions(directions)
    q, v = np.asarray(q, float), np.asarray(v, float)
    G_c, J, Minv = hand_inverse_inertia(module, q, hand)
    p = np.asarray(point, float)
    Jt = target.point_jacobian(p)
    G_t = body_inverse_inertia(target, p)
    nu = target.nu()
    rel = J @ v - Jt @ nu
    A = D.T @ (G_c + G_t) @ D
    lam = -(1.0 + e) * np.linalg.solve(A, D.T @ rel)
    F = D @ lam
    v_plus = v + Minv @ (J.T @ F)
    Mt_inv_w = np.linalg.solve(target.inertia_world(), -(Jt.T @ F)[:3])
    nu_plus = nu + np.concatenate([Mt_inv_w, -(Jt.T @ F)[3:] / target.mass])
    tgt = replace(target, angular_velocity=nu_plus[:3], linear_velocity=nu_plus[3:])
    ke_c = lambda vv: float(np.asarray(module.kinetic_energy(q, vv)))  # noqa: E731
    return ImpactResult(F, lam, v_plus, tgt, rel, J @ v_plus - Jt @ nu_plus,
                        ke_c(v) + target.kinetic_energy(), ke_c(v_plus) + tgt.kinetic_energy(), G_c, G_t)


def capture(module: Any, q: Any, v: Any, hand: str, target: RigidBody, point: Any, restitution: float = 0.0,
            directions: Any = None) -> tuple[ImpactResult, ImpactResult]:
    """Contact (``restitution``, ``directions``) then the gripper's latch (plastic rigid grasp) at
    ``point`` (the hand-frame origin, inertial).  Returns ``(contact, latch)``; ``latch.v`` is the
    post-capture chaser velocity, which is also the velocity of the model with the target attached."""
    first = impact(module, q, v, hand, target, point, restitution, directions)
    second = impact(module, q, first.v, hand, first.target, point, 0.0, None)
    return first, second


def pair_momentum(module: Any, q: Any, v: Any, target: RigidBody) -> np.ndarray:
    """Momentum of chaser + target: ``[angular about the inertial origin; linear]``, inertial axes.

    The module's ``momentum`` is about the system CoM; it is moved to the origin with ``r_com x P``."""
    q, v = np.asarray(q, float), np.asarray(v, float)
    h = np.asarray(module.momentum(q, v), float)
    c = np.asarray(module.center_of_mass(q), float)
    chaser = np.concatenate([h[:3] + np.cross(c, h[3:]), h[3:]])
    return chaser + target.momentum()


def attach_target(
    robot: Any,
    hand: str,
    mass: float,
    inertia: Any,
    grasp_xyz: Any,
    grasp_rpy: Any = (0, 0, 0),
    name: str | None = None,
) -> Any:
    """The chaser with the target rigidly attached at frame ``hand`` (a ``fixed`` joint, so the target is
    merged into the hand's link and the coordinates do not change).  ``grasp_xyz``/``grasp_rpy``: the
    target's CoM frame in the hand frame; ``inertia``: 3x3 about the CoM in target axes (or 3 principal
    moments).  The new model is named ``name`` (default ``<robot>_with_target``)."""
    from soadyn.model.robot import Inertia, Joint, Placement
    from soadyn.structure.operations import add_body

    I = np.asarray(inertia, float)
    if I.shape == (3,):
        I = np.diag(I)
    joint = Joint(
        "target_grasp", "fixed", np.array([0.0, 0.0, 1.0]), Placement.from_xyz_rpy(grasp_xyz, grasp_rpy)
    )
    out = add_body(robot, "target", hand, joint, Inertia(float(mass), np.zeros(3), I))
    return out.replace(name=name or f"{robot.name}_with_target")
