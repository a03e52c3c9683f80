"""The retraction ``q (+) delta`` of the configuration space: its one home (docs/conventions.md,
"Configuration update ``q (+) delta``").

A configuration is ``q = [p (3, inertial); quat (4, [x, y, z, w], base to inertial); q_joints]`` for a free
base and ``q_joints`` for a fixed one; a tangent vector ``delta`` is nv long and ordered like v
(``[delta_w; delta_v; delta_joints]``, base parts in **base axes**).  Then::

    R'  = R Exp(delta_w)            (rotation applied on the body side: quat' = quat (x) exp(delta_w / 2))
    p'  = p + R delta_v             (the shift in the base axes of the *starting* configuration)
    q_j' = q_j + delta_j

with ``R`` the rotation of the normalised ``quat``; the returned quaternion has unit norm.  This is the
tangent of the derivative functions (``q`` moves along ``q (+) delta``), the chart of the RKMK4 integrator
(:mod:`soadyn.runtime.integrate`), the update of the Newton projection onto closed-loop constraints, and the
perturbation of the reference path's finite differences.  To first order it is Pinocchio's free-flyer
``integrate(q, v)`` (with the linear and angular blocks of v swapped).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from soadyn.model.rotations import quat_exp, quat_mul, quaternion_to_matrix

__all__ = ["retract"]


def retract(q: ArrayLike, delta: ArrayLike, free: bool) -> np.ndarray:
    """``q (+) delta`` (module docstring) for a free base (``free=True``: ``len(delta) == len(q) - 1``) or
    a fixed one (``q + delta``).  A new array; ``q`` is not changed."""
    q = np.array(q, dtype=float)
    delta = np.asarray(delta, dtype=float)
    if not free:
        return q + delta
    quat = q[3:7] / np.linalg.norm(q[3:7])
    out = q.copy()
    out[:3] = q[:3] + quaternion_to_matrix(quat) @ delta[3:6]
    new = quat_mul(quat, quat_exp(delta[:3]))
    out[3:7] = new / np.linalg.norm(new)
    out[7:] = q[7:] + delta[6:]
    return out
