"""Data of a closed-loop system shared by every path that treats one: the coordinate partition, the error
type and the names of the entries of v.

The partition itself is chosen by an algorithm (the generic core's
:func:`soadyn.symbolic.algorithms.closed_loop.generation_partition`, or the reference path's Gauss-Jordan
elimination :func:`soadyn.reference.closed_loop.partition`, seed 003 Appendix B); this module only holds
the result, so that the reference path, the generic core and the runtime exchange one type.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from soadyn.model.robot import Robot

__all__ = ["ClosedLoopError", "Partition", "coordinate_names"]


class ClosedLoopError(ValueError):
    """Loop closure problem: no loops, redundant constraints, ill-conditioned partition, bad input."""


def coordinate_names(robot: Robot) -> list[str]:
    """Names of the entries of v: ``base_wx .. base_vz`` (free base) then the joint names."""
    base = ["base_wx", "base_wy", "base_wz", "base_vx", "base_vy", "base_vz"] if robot.is_free else []
    return base + list(robot.joint_names)


@dataclass(frozen=True)
class Partition:
    """Dependent and independent entries of v (indices into v, increasing) and the constraint rows used.

    ``rows``: the independent rows of ``J_c`` (all rows, ``None``, unless some constraints are redundant,
    e.g. the out-of-plane rows of a weld between two planar arms, which vanish identically).
    """

    dependent: tuple[int, ...]
    independent: tuple[int, ...]
    names: tuple[str, ...] = ()
    rows: tuple[int, ...] | None = None

    @property
    def n_independent(self) -> int:
        return len(self.independent)

    def select(self, x: np.ndarray) -> np.ndarray:
        """The used rows of a constraint quantity (J_c, gamma, g)."""
        return x if self.rows is None else x[list(self.rows)]

    def describe(self) -> str:
        nm = self.names or tuple(str(i) for i in range(len(self.dependent) + len(self.independent)))
        return (
            f"dependent: {[nm[i] for i in self.dependent]}; independent: {[nm[i] for i in self.independent]}"
        )
