"""Closed-loop runtime: simulation of a robot with loop closures and checked access to its generated code.

The equations (cut-joint constraints, coordinate partitioning, seed 004 eq. 5) are those of the reference
path :mod:`soadyn.reference.closed_loop`, which this module runs by default; :class:`CompiledClosedLoop`
wraps the closed-loop functions generated from :mod:`soadyn.symbolic.algorithms.closed_loop` and can
replace the reference forward dynamics in :func:`simulate` (``fd=``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from soadyn.model.robot import Robot
from soadyn.reference.closed_loop import (
    ClosedLoopError,
    Partition,
    constraint_jacobian,
    constraint_residual,
    coordinate_names,
    forward_dynamics,
    partition,
    project_configuration,
    project_velocity,
)
from soadyn.runtime.integrate import rk4_step
from soadyn.runtime.trajectory import Trajectory
from soadyn.symbolic.algorithms.closed_loop import generation_partition

__all__ = ["STATUS_THRESHOLD", "ClosedLoopError", "CompiledClosedLoop", "simulate"]


def simulate(
    robot: Robot,
    q0: Any,
    v0: Any,
    tau: Callable[[float, np.ndarray, np.ndarray], np.ndarray] | Any,
    dt: float,
    steps: int,
    stabilisation: str = "baumgarte",
    baumgarte: tuple[float, float] = (10.0, 10.0),
    part: Partition | None = None,
    fd: Callable[..., np.ndarray] | None = None,
    repartition_cond: float = 1e6,
) -> Trajectory:
    """Simulation of the closed-loop system with the RKMK4 step of :mod:`soadyn.runtime.integrate` (full
    state q, v; accelerations from seed 004 eq. 5).  Returns a :class:`~soadyn.runtime.trajectory.Trajectory`
    with ``position_error`` (max |g(q)|), ``velocity_error`` (max |J_c v|) and ``partitions``.

    ``stabilisation``: ``"none"``, ``"baumgarte"`` (gains ``(alpha, beta)``), ``"projection"`` (project q and
    v after every step) or ``"both"``.  ``fd(q, v, tau, part, baumgarte)`` replaces the reference forward
    dynamics (e.g. a generated function).  The partition is re-chosen by Gauss-Jordan when cond(J_D)
    exceeds ``repartition_cond``.
    """
    if stabilisation not in ("none", "baumgarte", "projection", "both"):
        raise ClosedLoopError(
            f"simulate: stabilisation {stabilisation!r} is not one of none, baumgarte, projection, both"
        )
    q = np.asarray(q0, dtype=float).copy()
    v = np.asarray(v0, dtype=float).copy()
    if part is None:
        part = partition(robot, q)
    bg = baumgarte if stabilisation in ("baumgarte", "both") else None
    fd = fd or (lambda q_, v_, t_, p_, b_: forward_dynamics(robot, q_, v_, t_, p_, baumgarte=b_))
    torque = tau if callable(tau) else (lambda t, q_, v_: np.asarray(tau, dtype=float))
    ts, qs, vs, pe, ve, parts = [], [], [], [], [], [part]

    def record(t: float) -> np.ndarray:
        J = constraint_jacobian(robot, q)
        ts.append(t)
        qs.append(q.copy())
        vs.append(v.copy())
        pe.append(float(np.max(np.abs(constraint_residual(robot, q)))))
        ve.append(float(np.max(np.abs(J @ v))))
        return J

    def f(t: float, qq: np.ndarray, vv: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return vv, fd(qq, vv, torque(t, qq, vv), part, bg)

    t = 0.0
    J = record(t)
    for _ in range(steps):
        if np.linalg.cond(J[:, list(part.dependent)]) > repartition_cond:
            part = partition(robot, q)
            parts.append(part)
        q, v = rk4_step(f, t, q, v, dt, robot.is_free)
        if stabilisation in ("projection", "both"):
            q = project_configuration(robot, q)
            v = project_velocity(robot, q, v, part)
        t += dt
        J = record(t)
    return Trajectory(np.array(ts), np.array(qs), np.array(vs), position_error=np.array(pe),
                      velocity_error=np.array(ve), partitions=parts, joint_names=list(robot.joint_names),
                      base=robot.base, name=robot.name, dt=dt)


# ---- generated code ---------------------------------------------------------------------------

#: default threshold on min(status) of the generated functions (status_j = sin^2 of the angle between
#: dependent column j of J_D and the span of the earlier ones; cond(J_D)^2 is roughly 1 / min(status))
STATUS_THRESHOLD = 1e-10


class CompiledClosedLoop:
    """Checked access to the closed-loop functions of a module compiled by ``soadyn.codegen``.

    The partition was fixed when the code was generated; every call checks the returned status and raises
    :class:`ClosedLoopError` when the dependent set has become ill-conditioned (or the result is not finite).
    """

    def __init__(self, module: Any, robot: Robot, threshold: float = STATUS_THRESHOLD) -> None:
        for fn in (
            "closed_loop_forward_dynamics",
            "closed_loop_dependent_velocities",
            "closed_loop_constraints",
        ):
            if not hasattr(module, fn):
                raise ClosedLoopError(
                    f"module {getattr(module, '__name__', module)!r} has no {fn}: compile a robot "
                    "with loop closures (close_loop(...)) to get the closed-loop functions"
                )
        self.module = module
        self.robot = robot
        self.threshold = threshold
        dep, rows = generation_partition(robot)
        names = coordinate_names(robot)
        self.partition = Partition(dep, tuple(i for i in range(robot.nv) if i not in dep), tuple(names), rows)

    def _check(self, fn: str, status: np.ndarray, result: np.ndarray) -> None:
        st = np.atleast_1d(status)
        worst = float(np.min(st)) if st.size else 1.0
        if not (np.all(np.isfinite(result)) and worst >= self.threshold):
            raise ClosedLoopError(
                f"{fn}: the dependent coordinates chosen at generation time "
                f"({self.partition.describe()}) are "
                f"ill-conditioned at this configuration (min status {worst:.3g} < {self.threshold:.3g}, i.e. "
                f"cond(J_D) ~ {1 / np.sqrt(max(worst, 1e-300)):.3g}); the loop is near a singular "
                "configuration for this partition: use the reference path soadyn.reference.closed_loop "
                "(which re-partitions), or "
                "regenerate with another partition"
            )

    def forward_dynamics(self, q: Any, v: Any, tau: Any) -> np.ndarray:
        a, status = self.module.closed_loop_forward_dynamics(q, v, tau)
        self._check("closed_loop_forward_dynamics", status, a)
        return a

    def dependent_velocities(self, q: Any, v: Any) -> np.ndarray:
        out, status = self.module.closed_loop_dependent_velocities(q, v)
        self._check("closed_loop_dependent_velocities", status, out)
        return out

    def constraints(self, q: Any, v: Any) -> tuple[np.ndarray, np.ndarray]:
        return self.module.closed_loop_constraints(q, v)
