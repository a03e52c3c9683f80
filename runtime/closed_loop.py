"""Closed-loop runtime: simulation of a robot with loop closures and checked access to its generated code.

The equations (cut-joint constraints, coordinate partitioning, seed 004 eq. 5; seed 003 eq. 2.44-2.58) are
those of :mod:`soadyn.symbolic.algorithms.closed_loop`, the one definition that the code generator also
turns into C.  By default :func:`simulate` runs that algorithm on floats (:func:`forward_dynamics`);
:class:`CompiledClosedLoop` wraps the closed-loop functions of a compiled module and can replace it
(``fd=``).  The float helpers here (:func:`constraint_residual`, :func:`constraint_jacobian`,
:func:`partition`, :func:`project_configuration`, :func:`project_velocity`) come from the same core; the dense
path :mod:`soadyn.reference.closed_loop` is an independent oracle used by tests and ``soadyn verify`` only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from soadyn.model.configuration import retract
from soadyn.model.loops import ClosedLoopError, Partition, coordinate_names
from soadyn.model.robot import Robot
from soadyn.runtime.integrate import rk4_step
from soadyn.runtime.trajectory import Trajectory
from soadyn.symbolic.algorithms.closed_loop import (
    closed_loop_dependent_velocities,
    closed_loop_forward_dynamics,
    constraint_terms,
    generation_partition,
)
from soadyn.symbolic.scalar import NUMERIC

__all__ = ["COND_LIMIT", "STATUS_THRESHOLD", "ClosedLoopError", "CompiledClosedLoop", "Partition",
           "constraint_jacobian", "constraint_residual", "forward_dynamics", "partition",
           "project_configuration", "project_velocity", "simulate"]

#: default threshold on min(status) of the generated functions (status_j = sin^2 of the angle between
#: dependent column j of J_D and the span of the earlier ones; cond(J_D)^2 is roughly 1 / min(status))
STATUS_THRESHOLD = 1e-10

#: condition number of J_D above which the float forward dynamics refuses the partition (status below
#: 1 / COND_LIMIT^2)
COND_LIMIT = 1e8


def _loops(robot: Robot) -> None:
    if not robot.loops:
        raise ClosedLoopError(f"robot {robot.name!r} has no loop closures; add one with close_loop(...)")


def constraint_jacobian(robot: Robot, q: Any) -> np.ndarray:
    """``J_c(q)`` (all constraint rows x nv): ``J_c v`` is the forbidden part of the cut joints' relative
    twists (seed 004 eq. 2-3), by the core's constraint terms on floats."""
    _loops(robot)
    return constraint_terms(robot, NUMERIC, np.asarray(q, dtype=float), np.zeros(robot.nv))[0]


def constraint_residual(robot: Robot, q: Any) -> np.ndarray:
    """Position-level residual ``g(q)`` of all cut joints (zero when every loop is closed)."""
    _loops(robot)
    return constraint_terms(robot, NUMERIC, np.asarray(q, dtype=float), np.zeros(robot.nv),
                            need_residual=True)[2]


def partition(robot: Robot, q: Any, tol: float = 1e-9) -> Partition:
    """The dependent coordinates at ``q``: redundant constraint rows dropped, then the columns of ``J_c``
    visited from the last joint backwards, then the base (:func:`~soadyn.symbolic.algorithms.closed_loop.
    generation_partition`, the pivot columns of seed 003 Appendix B's Gauss-Jordan elimination)."""
    _loops(robot)
    dep, rows = generation_partition(robot, np.asarray(q, dtype=float), tol=tol)
    ind = tuple(i for i in range(robot.nv) if i not in dep)
    return Partition(tuple(dep), ind, tuple(coordinate_names(robot)), rows)


def check_status(fn: str, status: Any, result: Any, part: Partition, threshold: float,
                 fix: str = "choose another partition (partition(robot, q) at this configuration; the "
                            "simulator re-partitions by itself)") -> None:
    """Raise :class:`ClosedLoopError` when ``result`` is not finite or ``min(status) < threshold`` (the
    partition's dependent columns have become ill-conditioned); ``fix`` ends the message."""
    st = np.atleast_1d(np.asarray(status, dtype=float))
    worst = float(np.min(st)) if st.size else 1.0
    if not (np.all(np.isfinite(result)) and worst >= threshold):
        raise ClosedLoopError(
            f"{fn}: the dependent coordinates ({part.describe()}) are "
            f"ill-conditioned at this configuration (min status {worst:.3g} < {threshold:.3g}, i.e. "
            f"cond(J_D) ~ {1 / np.sqrt(max(worst, 1e-300)):.3g}); the loop is near a singular "
            f"configuration for this partition: {fix}"
        )


def forward_dynamics(robot: Robot, q: Any, v: Any, tau: Any, part: Partition | None = None,
                     baumgarte: tuple[float, float] | None = None,
                     threshold: float = 1.0 / COND_LIMIT**2) -> np.ndarray:
    """Accelerations (all nv tree coordinates) of the closed-loop system for tree generalised forces
    ``tau`` (seed 004 eq. 5): :func:`~soadyn.symbolic.algorithms.closed_loop.closed_loop_forward_dynamics`
    on floats, with the partition ``part`` (default: :func:`partition` at ``q``) and Baumgarte gains
    ``(alpha, beta)``."""
    q, v, tau = (np.asarray(x, dtype=float) for x in (q, v, tau))
    part = partition(robot, q) if part is None else part
    with np.errstate(divide="ignore", invalid="ignore"):  # a singular J_D shows in the status
        a, status = closed_loop_forward_dynamics(robot, NUMERIC, q, v, tau, dependent=part.dependent,
                                                 rows=part.rows, baumgarte=baumgarte)
    check_status("forward_dynamics", status, a, part, threshold)
    return np.asarray(a, dtype=float)


def project_configuration(robot: Robot, q: Any, tol: float = 1e-12, max_iter: int = 20) -> np.ndarray:
    """Newton iterations on ``g(q) = 0`` with minimum-norm corrections ``q <- q (+) (-J_c^+ g)``."""
    q = np.array(q, dtype=float, copy=True)
    for _ in range(max_iter):
        g = constraint_residual(robot, q)
        if np.max(np.abs(g)) < tol:
            return q
        q = retract(q, -np.linalg.lstsq(constraint_jacobian(robot, q), g, rcond=None)[0], robot.is_free)
    worst = float(np.max(np.abs(constraint_residual(robot, q))))
    if worst > 1e3 * tol:
        raise ClosedLoopError(f"project_configuration: no convergence (|g| = {worst:.3g}); the loop cannot "
                              "be closed near this configuration")
    return q


def project_velocity(robot: Robot, q: Any, v: Any, part: Partition | None = None) -> np.ndarray:
    """Constraint-consistent v: the dependent velocities recomputed from the independent ones (seed 003
    eq. 2.54; default partition: :func:`partition` at ``q``)."""
    q, v = np.asarray(q, dtype=float), np.asarray(v, dtype=float)
    part = partition(robot, q) if part is None else part
    with np.errstate(divide="ignore", invalid="ignore"):
        out, status = closed_loop_dependent_velocities(robot, NUMERIC, q, v, dependent=part.dependent,
                                                       rows=part.rows)
    check_status("project_velocity", status, out, part, 1.0 / COND_LIMIT**2)
    return np.asarray(out, dtype=float)


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
    v after every step) or ``"both"``.  ``fd(q, v, tau, part, baumgarte)`` replaces the default forward
    dynamics (:func:`forward_dynamics`, the core on floats), e.g. with a generated function.  The partition
    is re-chosen (:func:`partition`) when cond(J_D) exceeds ``repartition_cond``.
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
        check_status(fn, status, result, self.partition, self.threshold,
                     "simulate with the float forward dynamics (soadyn.runtime.closed_loop.simulate without "
                     "fd=, which re-partitions), or regenerate with another partition")

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
