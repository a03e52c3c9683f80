"""Change of base body of a free-floating system (seed 000 Appendix A).

:func:`rebase` gives the same physical system with another body as the free base.  The re-rooting itself
(reversed joints, moved body frames, renamed bodies with their old frames kept as named frames) is
:func:`soadyn.structure.invert`; this module adds the coordinate maps of Lemma A.1.

Velocity map (eq. A.3-A.5).  With the old coordinates ``beta_n = [V(0); qd]`` and the new ones
``beta_k = [V(k); qd']`` (qd' the same joint rates in the new model's joint order; invert keeps every
joint's coordinate, reversing its axis together with its parent/child roles)::

    beta_k = T_{k,n} beta_n,    T_{k,n} = [[J_k(q)], [Pi]]                       (A.3)

where ``J_k(q) = [X_k H*, phi*(n, k)]`` (A.4) is the body-frame Jacobian of the new base frame in the old
model (6 x N) and ``Pi`` selects the joint rates in the new order.  Its inverse (A.5) is::

    beta_n = T_{n,k} beta_k,    V(0) = phi*(n, k)^-1 [V(k) - X_k H* qd]

The kinetic energy is invariant, so ``M_k = T_{n,k}^* M_n T_{n,k}`` (A.6), generalised forces map as
``tau_k = T_{n,k}^* tau_n`` (same power) and accelerations as
``betadot_k = T_{k,n} betadot_n + d/dt(T_{k,n}) beta_n`` (the second term is the Coriolis part of the new
base's acceleration; :func:`soadyn.structure.map_state` evaluates the whole map by forward
kinematics).  The configuration map places the new base at the pose of its frame in the old model.

A fixed base cannot be rebased this way: moving the weld to another body changes the physical system
(:func:`soadyn.structure.invert` does that on purpose; it is not a change of coordinates).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from soadyn.model.robot import Robot, require_free
from soadyn.structure.operations import invert, map_state
from soadyn.symbolic.algorithms.jacobians import jacobian
from soadyn.symbolic.scalar import NUMERIC


@dataclass
class RebaseMap:
    """Coordinate maps between a robot and its rebased copy at one configuration.

    ``q_new``: configuration of ``new``; ``T_new_from_old`` = T_{k,n} (eq. A.3) and
    ``T_old_from_new`` = T_{n,k} (eq. A.5), so that ``v_new = T_new_from_old @ v_old`` and
    ``M_new = T_old_from_new.T @ M_old @ T_old_from_new`` (eq. A.6).
    """

    q_new: np.ndarray
    T_new_from_old: np.ndarray
    T_old_from_new: np.ndarray

    def velocity(self, v_old: np.ndarray) -> np.ndarray:
        return self.T_new_from_old @ np.asarray(v_old, dtype=float)

    def force(self, tau_old: np.ndarray) -> np.ndarray:
        """Generalised forces in the new coordinates (same power): T_{n,k}^* tau_old."""
        return self.T_old_from_new.T @ np.asarray(tau_old, dtype=float)


def rebase(robot: Robot, body: str) -> Robot:
    """The same free-floating system with ``body`` (a body or named frame) as its free base."""
    require_free(robot, "rebase", " (a change of base body, seed 000 Appendix A, is a change of "
                 "coordinates of a free-floating system only; soadyn.structure.invert welds a different body "
                 "to the ground)")
    return invert(robot, body)


def rebase_transform(robot: Robot, new_robot: Robot, q: np.ndarray) -> RebaseMap:
    """Configuration map and the velocity maps T_{k,n}, T_{n,k} (eq. A.3-A.5) from ``robot`` to
    ``new_robot = rebase(robot, ...)`` at configuration ``q`` of ``robot``."""
    if not (robot.is_free and new_robot.is_free):
        raise ValueError("rebase_transform: both robots must have a free base")
    missing = sorted(set(new_robot.joint_names) ^ set(robot.joint_names))
    if missing:
        raise ValueError(f"rebase_transform: {new_robot.name!r} is not a rebased copy of {robot.name!r} "
                         f"(joints {missing} are not in both)")
    q = np.asarray(q, dtype=float)
    q_new, _, _ = map_state(robot, new_robot, q)
    N = robot.nv
    Jk = jacobian(robot, NUMERIC, q, new_robot.body_names[0])          # [X_k H*, phi*(n, k)] (A.4)
    Pi = np.zeros((N - 6, N))
    for i, name in enumerate(new_robot.joint_names):
        Pi[i, 6 + robot.joint_names.index(name)] = 1.0
    T_kn = np.vstack([Jk, Pi])                                       # (A.3)
    # (A.5): V(0) = phi*(n,k)^-1 [V(k) - X_k H* qd]
    B = np.linalg.inv(Jk[:, :6])
    T_nk = np.zeros((N, N))
    T_nk[:6, :6] = B
    T_nk[:6, 6:] = -B @ Jk[:, 6:] @ Pi[:, 6:].T
    T_nk[6:, 6:] = Pi[:, 6:].T
    return RebaseMap(q_new, T_kn, T_nk)
