"""Reference (plain forward kinematics, :func:`soadyn.reference.kinematics.frame_motion`) of the frame
functions of a compiled module: a frame's twist and its acceleration, inertial axes."""

from __future__ import annotations

from typing import Any

import numpy as np

from soadyn.model import Robot
from soadyn.reference.kinematics import frame_motion


def frame_twist(robot: Robot, q: Any, v: Any, frame: str) -> np.ndarray:
    """``[w; v_o]`` of the frame, inertial axes."""
    m = frame_motion(robot, q, v, None, frame)
    return np.concatenate([m.w, m.v])


def frame_acceleration(robot: Robot, q: Any, v: Any, a: Any, frame: str) -> tuple[np.ndarray, np.ndarray]:
    """(V, A): ``[w; v_o]`` and ``[dw/dt; dv_o/dt]`` (classical, without gravity), inertial axes."""
    m = frame_motion(robot, q, v, a, frame)
    return np.concatenate([m.w, m.v]), np.concatenate([m.wdot, m.vdot])
