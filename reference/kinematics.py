"""Float forward kinematics of frames: pose, velocity and acceleration of every body and named frame.

Plain base-to-tip composition of placements and joint motions in inertial coordinates, independent of the
recursions of :mod:`soadyn.symbolic.algorithms` and of the dense operators of :mod:`soadyn.reference.dense`
(so it can check both).  :func:`soadyn.structure.map_state` uses it to carry a state from one model to a
model derived from it.

Per body ``k`` with parent ``p``, joint placement ``P`` and joint motion ``M(a, q)`` (inertial
coordinates; ``r = R_p P.p`` the vector O_p -> O_k, ``s = R_p P.R a`` the joint axis)::

    R_k = R_p P M,   p_k = p_p + r
    revolute:  w_k = w_p + s qd,  v_k = v_p + w_p x r,
               dw_k = dw_p + s qdd + w_p x s qd,  dv_k = dv_p + dw_p x r + w_p x (w_p x r)
    prismatic: w_k = w_p,  v_k = v_p + w_p x r + s qd,  dw_k = dw_p,
               dv_k = dv_p + dw_p x r + w_p x (w_p x r) + 2 w_p x s qd + s qdd

The free base's twist ``v[:6] = [w; v]`` is in base axes; ``a[:6]`` is its time derivative, so the
inertial origin acceleration is ``R0 (a[3:6] + w x v)``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from soadyn.model.motion import FrameMotion
from soadyn.model.robot import Robot, state_vector
from soadyn.model.rotations import cross, quaternion_to_matrix

__all__ = ["FrameMotion", "body_motion", "frame_motion"]


def body_motion(
    robot: Robot, q: np.ndarray, v: np.ndarray | None = None, a: np.ndarray | None = None
) -> tuple[list, list, list, list, list, list]:
    """Per body, inertial coordinates: R, origin p, angular velocity w, origin velocity vo, dw/dt, dvo/dt.

    ``v`` and ``a`` default to zero (then only R and p are of interest)."""
    n = robot.n_bodies
    v = np.zeros(robot.nv) if v is None else v
    a = np.zeros(robot.nv) if a is None else a
    R, p, w, vo, wd, ao = ([None] * n for _ in range(6))
    if robot.is_free:
        R0 = quaternion_to_matrix(q[3:7])
        R[0], p[0] = R0, q[:3].copy()
        w[0], vo[0] = R0 @ v[0:3], R0 @ v[3:6]
        wd[0], ao[0] = R0 @ a[0:3], R0 @ (a[3:6] + cross(v[0:3], v[3:6]))
    else:
        R[0], p[0] = np.eye(3), np.zeros(3)
        w[0] = vo[0] = wd[0] = ao[0] = np.zeros(3)
    for k in range(1, n):
        j = robot.joints[k]
        par = robot.parent[k]
        qk, qdk, qddk = q[robot.q_index(k)], v[robot.v_index(k)][0], a[robot.v_index(k)][0]
        X = j.placement * j.motion(qk)
        R[k] = R[par] @ X.R
        r = R[par] @ X.p
        p[k] = p[par] + r
        s = R[par] @ j.placement.R @ np.asarray(j.axis, dtype=float)
        wp = w[par]
        base_acc = ao[par] + cross(wd[par], r) + cross(wp, cross(wp, r))
        if j.type == "revolute":
            w[k] = wp + s * qdk
            vo[k] = vo[par] + cross(wp, r)
            wd[k] = wd[par] + s * qddk + cross(wp, s * qdk)
            ao[k] = base_acc
        else:
            w[k] = wp
            vo[k] = vo[par] + cross(wp, r) + s * qdk
            wd[k] = wd[par]
            ao[k] = base_acc + 2 * cross(wp, s * qdk) + s * qddk
    return R, p, w, vo, wd, ao


def frame_motion(
    robot: Robot, q: Any, v: Any | None = None, a: Any | None = None, frame: str | None = None
) -> FrameMotion | dict[str, FrameMotion]:
    """Motion of one frame (or of every body and named frame, as a dict) by plain forward kinematics.

    Raises ``ValueError`` for a state of the wrong size or with non-finite entries and ``KeyError``
    (naming the known frames) for an unknown ``frame``.
    """
    who = f"frame_motion({robot.name!r})"
    q = state_vector(q, robot.nq, "q", who)
    v = np.zeros(robot.nv) if v is None else state_vector(v, robot.nv, "v", who)
    a = np.zeros(robot.nv) if a is None else state_vector(a, robot.nv, "a", who)
    if robot.is_coupled:  # mimic: the uncoupled tree at q_full = G q + b, G v, G a (its own dense G)
        G, b = robot.expansion()
        nb, nbv = robot.base_nq, robot.base_nv
        q = np.concatenate([q[:nb], G[nbv:, nbv:] @ q[nb:] + b])
        v, a, robot = G @ v, G @ a, robot.uncoupled()
    R, p, w, vo, wd, ao = body_motion(robot, q, v, a)

    def one(name: str) -> FrameMotion:
        k, X = robot.frame_of(name)
        d = R[k] @ X.p
        return FrameMotion(
            R[k] @ X.R,
            p[k] + d,
            w[k],
            vo[k] + cross(w[k], d),
            wd[k],
            ao[k] + cross(wd[k], d) + cross(w[k], cross(w[k], d)),
        )

    if frame is not None:
        return one(frame)
    return {nm: one(nm) for nm in [*robot.body_names, *robot.frame_names]}
