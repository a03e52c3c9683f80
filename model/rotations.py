"""SO(3) helpers, their one home: skew matrices, cross products, quaternions, roll-pitch-yaw, joint motions.

Quaternions are stored ``[x, y, z, w]`` (vector part first, as in Pinocchio and the robot state ``q[3:7]``)
and describe the rotation body -> inertial.  Roll-pitch-yaw angles follow URDF: ``R = Rz(yaw) Ry(pitch)
Rx(roll)``.

:func:`skew`, :func:`cross` and :func:`quaternion_to_matrix` are generic over the scalar: they work on float
arrays and on numpy object arrays of SymEngine expressions (the symbolic runs of
:mod:`soadyn.symbolic.algorithms` use them).  Every other function here is float only.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = [
    "cross", "joint_motion", "matrix_to_quaternion", "matrix_to_rpy", "quat_exp", "quat_mul",
    "quaternion_to_matrix", "rodrigues", "rpy_to_matrix", "skew",
]


def _array(a: Any) -> np.ndarray:
    return a if isinstance(a, np.ndarray) else np.asarray(a)


def _out_dtype(*arrays: np.ndarray) -> type:
    return object if any(a.dtype == object for a in arrays) else float


def cross(a: Any, b: Any) -> np.ndarray:
    """3-vector cross product ``a x b``, generic in the scalar (``np.cross`` is slow for single vectors)."""
    a, b = _array(a), _array(b)
    return np.array(
        [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]],
        dtype=_out_dtype(a, b),
    )


def skew(a: Any) -> np.ndarray:
    """Cross-product matrix ``a~`` with ``a~ b = a x b``, generic in the scalar."""
    a = _array(a)
    z = a[0] * 0
    return np.array([[z, -a[2], a[1]], [a[2], z, -a[0]], [-a[1], a[0], z]], dtype=_out_dtype(a))


def quaternion_to_matrix(quat: Any) -> np.ndarray:
    """Rotation matrix (body to inertial) of a quaternion ``[x, y, z, w]``, generic in the scalar.

    Written in the homogeneous form ``((w^2 - e.e) I + 2 e e^T + 2 w e~) / (w^2 + e.e)`` so that it is
    an exact rotation for any non-zero quaternion: the norm is divided out, the input need not be unit.
    """
    x, y, z, w = quat
    xx, yy, zz, ww = x * x, y * y, z * z, w * w
    xy, xz, yz, wx, wy, wz = x * y, x * z, y * z, w * x, w * y, w * z
    inv = 1 / (xx + yy + zz + ww)
    return np.array(
        [
            [(ww + xx - yy - zz) * inv, 2 * (xy - wz) * inv, 2 * (xz + wy) * inv],
            [2 * (xy + wz) * inv, (ww - xx + yy - zz) * inv, 2 * (yz - wx) * inv],
            [2 * (xz - wy) * inv, 2 * (yz + wx) * inv, (ww - xx - yy + zz) * inv],
        ],
        dtype=object if isinstance(quat, np.ndarray) and quat.dtype == object else float,
    )


# ---- float only ---------------------------------------------------------------------------------------


def rpy_to_matrix(rpy: Sequence[float]) -> np.ndarray:
    """Rotation matrix of URDF roll-pitch-yaw angles: ``R = Rz(yaw) Ry(pitch) Rx(roll)``."""
    r, p, y = (float(a) for a in rpy)
    cr, sr, cp, sp, cy, sy = np.cos(r), np.sin(r), np.cos(p), np.sin(p), np.cos(y), np.sin(y)
    rx = np.array([[1, 0, 0], [0, cr, -sr], [0, sr, cr]])
    ry = np.array([[cp, 0, sp], [0, 1, 0], [-sp, 0, cp]])
    rz = np.array([[cy, -sy, 0], [sy, cy, 0], [0, 0, 1]])
    return rz @ ry @ rx


def matrix_to_rpy(R: Any) -> np.ndarray:
    """URDF roll-pitch-yaw of a rotation, ``R = Rz(yaw) Ry(pitch) Rx(roll)``; robust at pitch = +-pi/2."""
    R = np.asarray(R, dtype=float)
    cp = math.hypot(R[0, 0], R[1, 0])
    pitch = math.atan2(-R[2, 0], cp)
    if cp > 1e-9:
        roll = math.atan2(R[2, 1], R[2, 2])
        yaw = math.atan2(R[1, 0], R[0, 0])
    else:  # gimbal lock: only yaw -/+ roll is defined; put it all in yaw
        roll = 0.0
        yaw = math.atan2(-R[0, 1], R[1, 1])
    return np.array([roll, pitch, yaw])


def matrix_to_quaternion(R: Any) -> np.ndarray:
    """Unit quaternion ``[x, y, z, w]`` (w >= 0) of a rotation matrix (Shepperd's method).

    Raises ``ValueError`` unless ``R`` is a 3x3 rotation (orthonormal to 1e-9, determinant +1).
    """
    R = np.asarray(R, dtype=float)
    if R.shape != (3, 3) or not np.allclose(R @ R.T, np.eye(3), atol=1e-9) or np.linalg.det(R) < 0:
        raise ValueError("matrix_to_quaternion: expected a 3x3 rotation matrix (orthonormal, det +1)")
    tr = float(np.trace(R))
    i = int(np.argmax([tr, R[0, 0], R[1, 1], R[2, 2]]))
    if i == 0:
        w = 0.5 * math.sqrt(1.0 + tr)
        x, y, z = (R[2, 1] - R[1, 2]) / (4 * w), (R[0, 2] - R[2, 0]) / (4 * w), (R[1, 0] - R[0, 1]) / (4 * w)
    elif i == 1:
        x = 0.5 * math.sqrt(1.0 + 2 * R[0, 0] - tr)
        w, y, z = (R[2, 1] - R[1, 2]) / (4 * x), (R[0, 1] + R[1, 0]) / (4 * x), (R[0, 2] + R[2, 0]) / (4 * x)
    elif i == 2:
        y = 0.5 * math.sqrt(1.0 + 2 * R[1, 1] - tr)
        w, x, z = (R[0, 2] - R[2, 0]) / (4 * y), (R[0, 1] + R[1, 0]) / (4 * y), (R[1, 2] + R[2, 1]) / (4 * y)
    else:
        z = 0.5 * math.sqrt(1.0 + 2 * R[2, 2] - tr)
        w, x, y = (R[1, 0] - R[0, 1]) / (4 * z), (R[0, 2] + R[2, 0]) / (4 * z), (R[1, 2] + R[2, 1]) / (4 * z)
    out = np.array([x, y, z, w])
    out /= np.linalg.norm(out)
    return -out if out[3] < 0 else out


def quat_mul(a: Any, b: Any) -> np.ndarray:
    """Hamilton product of quaternions stored ``[x, y, z, w]``; ``R(a * b) = R(a) R(b)``."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    ea, wa, eb, wb = a[:3], a[3], b[:3], b[3]
    return np.concatenate([wa * eb + wb * ea + cross(ea, eb), [wa * wb - ea @ eb]])


def quat_exp(theta: Any) -> np.ndarray:
    """Unit quaternion of the rotation vector ``theta`` (axis * angle): ``[sin(a/2) axis, cos(a/2)]``."""
    theta = np.asarray(theta, dtype=float)
    a = float(np.linalg.norm(theta))
    s = 0.5 - a * a / 48.0 if a < 1e-8 else math.sin(0.5 * a) / a
    return np.concatenate([s * theta, [math.cos(0.5 * a)]])


def rodrigues(axis: Any, angle: float) -> np.ndarray:
    """Rotation by ``angle`` about the unit ``axis``: ``I + sin(angle) a~ + (1 - cos(angle)) a~ a~``."""
    K = skew(np.asarray(axis, dtype=float))
    return np.eye(3) + math.sin(angle) * K + (1.0 - math.cos(angle)) * K @ K


def joint_motion(joint_type: str, axis: Any, q: float) -> tuple[np.ndarray, np.ndarray]:
    """``(R, p)`` of the joint motion ``M(axis, q)`` in the joint frame: a rotation by ``q`` about the axis
    (revolute), a translation by ``q`` along it (prismatic) or the identity (fixed).

    :meth:`soadyn.model.robot.Joint.motion` wraps it as a :class:`~soadyn.model.robot.Placement`.
    """
    if joint_type == "revolute":
        return rodrigues(axis, float(q)), np.zeros(3)
    if joint_type == "prismatic":
        return np.eye(3), float(q) * np.asarray(axis, dtype=float)
    if joint_type == "fixed":
        return np.eye(3), np.zeros(3)
    raise ValueError(f"joint_motion: unknown joint type {joint_type!r}; use revolute, prismatic or fixed")
