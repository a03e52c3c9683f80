"""The motion of a frame as data: one type for the core's float front end (:mod:`soadyn.symbolic.frames`)
and the reference path (:mod:`soadyn.reference.kinematics`), which compute it by different routes."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from soadyn.model.rotations import cross

__all__ = ["FrameMotion"]


@dataclass(frozen=True)
class FrameMotion:
    """Pose, velocity and acceleration of a frame, all in inertial coordinates (origin quantities):
    rotation ``R`` (frame to inertial), origin ``p``, angular velocity ``w``, origin velocity ``v`` and
    their inertial time derivatives ``wdot``, ``vdot`` (without gravity)."""

    R: np.ndarray
    p: np.ndarray
    w: np.ndarray
    v: np.ndarray
    wdot: np.ndarray
    vdot: np.ndarray

    def body_twist(self) -> np.ndarray:
        """``[w; v]`` in the frame's own axes (the convention of the free base's ``v[:6]``)."""
        return np.concatenate([self.R.T @ self.w, self.R.T @ self.v])

    def body_acceleration(self) -> np.ndarray:
        """Time derivative of :meth:`body_twist` (the convention of the free base's ``a[:6]``)."""
        wb, vb = self.R.T @ self.w, self.R.T @ self.v
        return np.concatenate([self.R.T @ self.wdot, self.R.T @ self.vdot - cross(wb, vb)])
