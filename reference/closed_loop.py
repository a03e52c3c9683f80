r"""Closed-loop dynamics in independent coordinates: the reference path (floats, dense tree terms).

A robot with loop closures (``robot.loops``, added by :func:`soadyn.structure.operations.close_loop`) is
treated as its spanning tree plus cut-joint constraints (seed 003 section 2.4.2; seed 004 section II-B).

Cut-joint constraints
---------------------
For a cut between frames ``a`` and ``b`` (``b`` may be the inertial frame) the relative twist of frame b with
respect to frame a, at b's origin, in frame-a axes, is::

    V_rel = [ R_a^T (w_b - w_a) ;  R_a^T (v_b - v_a - w_a x (p_b - p_a)) ]            (angular first)

(``w``, ``v``, ``p``: inertial-frame angular velocity, origin velocity and origin position).  This is the
relative-velocity form of seed 004 eq. (2)-(3): ``T`` moves frame a's twist to b's origin.  The cut joint
allows motion along some directions only; the constraint rows ``S`` (m x 6, constant in frame a) select
the forbidden ones:

=========  =======================================  ==============================
type       angular rows                             linear rows
=========  =======================================  ==============================
weld       e_x, e_y, e_z                            e_x, e_y, e_z
revolute   e1, e2 (perpendicular to the axis u)     e_x, e_y, e_z
prismatic  e_x, e_y, e_z                            e1, e2 (perpendicular to u)
spherical  --                                       e_x, e_y, e_z
=========  =======================================  ==============================

with ``(e1, e2, u)`` right-handed.  Velocity level: ``J_c v = S V_rel = 0`` with ``J_c = S A (J_b - T J_a)``
(world-aligned frame Jacobians, ``A = diag(R_a^T, R_a^T)``).  Position level: the residual ``g(q)`` whose
time derivative is ``S V_rel`` on the constraint manifold (exactly for the linear rows):

* linear rows: ``S_lin R_a^T (p_b - p_a)``;
* angular rows of weld/prismatic: ``vee(R - R^T) / 2`` with ``R = R_a^T R_b`` (= sin(angle) * axis);
* angular rows of revolute: ``[-e2 . c, e1 . c]`` with ``c = R_a^T R_b u`` (the axes stay aligned; the
  seed's ``u_i - u_k = 0``, eq. 2.46, written with two independent components).

Acceleration level: ``J_c a = -gamma0`` with ``gamma0 = (dJ_c/dt) v = S dV_rel/dt`` at ``a = 0`` (seed 003
eq. 2.58-2.60, here from link accelerations instead of differentiated Jacobian columns).

Coordinate partitioning and projected equations
-----------------------------------------------
Gauss-Jordan elimination with partial pivoting of ``J_c`` (seed 003 section 2.4.2.1, Appendix B) puts the
pivot columns in the *dependent* set ``D`` and the rest in the *independent* set ``I``.  Then (seed 003
eq. 2.53-2.56; seed 004 eq. 5, with Pi = R^c)::

    v_D = -J_D^-1 J_I v_I,    v = Pi v_I,    Pi[I] = E,  Pi[D] = -J_D^-1 J_I
    a   = Pi a_I + rho,       rho[I] = 0,    rho[D] = J_D^-1 gamma,   gamma = -gamma0 (+ stabilisation)
    M a_I + C = Pi^T tau,     M = Pi^T H Pi,  C = Pi^T (c + H rho)

where ``H a + c = tau`` are the tree's equations (``c``: Coriolis, centrifugal, gravity and external
forces).  ``H rho`` is seed 004's ``H dPi/dt v_I`` (``rho = dPi/dt v_I`` for ``gamma = -gamma0``).  The
constraint forces drop out because ``Pi^T J_c^T = 0``.

Constraint stabilisation (documented bound in docs/structure-changes.md): Baumgarte,
``gamma = -gamma0 - 2 alpha J_c v - beta^2 g``, and/or projection after each integration step (Newton on
``g(q) = 0`` with minimum-norm corrections, then the dependent velocities recomputed from the independent
ones, seed 003 eq. 2.54).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from soadyn.model.configuration import retract
from soadyn.model.loops import ClosedLoopError, Partition, coordinate_names
from soadyn.model.robot import LoopClosure, Robot
from soadyn.model.rotations import cross, skew
from soadyn.reference import dense
from soadyn.reference.kinematics import FrameMotion, frame_motion

__all__ = [
    "COND_LIMIT",
    "ClosedLoopError",
    "Partition",
    "ReducedDynamics",
    "check_partition",
    "constraint_bias",
    "constraint_forces",
    "constraint_jacobian",
    "constraint_residual",
    "constraint_rows",
    "coordinate_names",
    "dependent_accelerations",
    "dependent_velocities",
    "forward_dynamics",
    "gauss_jordan",
    "independent_rows",
    "n_constraints",
    "partition",
    "perpendicular_basis",
    "project_configuration",
    "project_velocity",
    "projection_matrix",
    "reduced_dynamics",
]

#: default limit on the condition number of the dependent block J_D
COND_LIMIT = 1e8


# ---- constraint rows ---------------------------------------------------------------------------


def perpendicular_basis(u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Unit ``e1, e2`` with ``(e1, e2, u)`` right-handed (deterministic choice)."""
    u = np.asarray(u, dtype=float)
    ref = np.eye(3)[int(np.argmin(np.abs(u)))]
    e1 = cross(u, ref)
    e1 /= np.linalg.norm(e1)
    return e1, cross(u, e1)


def constraint_rows(lc: LoopClosure) -> np.ndarray:
    """The selection ``S`` (m x 6, frame-a axes, angular columns first) of a cut joint."""
    E = np.eye(3)
    Z = np.zeros((0, 3))
    if lc.type == "weld":
        ang, lin = E, E
    elif lc.type == "spherical":
        ang, lin = Z, E
    else:
        e1, e2 = perpendicular_basis(lc.axis)
        perp = np.vstack([e1, e2])
        ang, lin = (perp, E) if lc.type == "revolute" else (E, perp)
    S = np.zeros((len(ang) + len(lin), 6))
    S[: len(ang), :3] = ang
    S[len(ang) :, 3:] = lin
    return S


def _loops(robot: Robot) -> list[LoopClosure]:
    if not robot.loops:
        raise ClosedLoopError(f"robot {robot.name!r} has no loop closures; add one with close_loop(...)")
    return robot.loops


def n_constraints(robot: Robot) -> int:
    return sum(constraint_rows(lc).shape[0] for lc in _loops(robot))


def _ends(robot: Robot, lc: LoopClosure, q: np.ndarray, v: np.ndarray | None, a: np.ndarray | None):
    ma = frame_motion(robot, q, v, a, lc.frame_a)
    if lc.frame_b == "world":
        X = lc.world_placement
        R, p = (np.eye(3), np.zeros(3)) if X is None else (X.R, X.p)
        z = np.zeros(3)
        mb = FrameMotion(R, p, z, z, z, z)
    else:
        mb = frame_motion(robot, q, v, a, lc.frame_b)
    return ma, mb


def _vee_asym(R: np.ndarray) -> np.ndarray:
    return 0.5 * np.array([R[2, 1] - R[1, 2], R[0, 2] - R[2, 0], R[1, 0] - R[0, 1]])


def constraint_residual(robot: Robot, q: Any) -> np.ndarray:
    """Position-level residual ``g(q)`` of all cut joints (zero when every loop is closed)."""
    q = np.asarray(q, dtype=float)
    out = []
    for lc in _loops(robot):
        ma, mb = _ends(robot, lc, q, None, None)
        Rrel = ma.R.T @ mb.R
        d = ma.R.T @ (mb.p - ma.p)
        S = constraint_rows(lc)
        if lc.type in ("weld", "prismatic"):
            out.append(_vee_asym(Rrel))
        elif lc.type == "revolute":
            e1, e2 = perpendicular_basis(lc.axis)
            c = Rrel @ lc.axis
            out.append(np.array([-(e2 @ c), e1 @ c]))
        nang = 3 if lc.type in ("weld", "prismatic") else (2 if lc.type == "revolute" else 0)
        out.append(S[nang:, 3:] @ d)
    return np.concatenate(out)


def constraint_jacobian(robot: Robot, q: Any) -> np.ndarray:
    """``J_c`` (m x nv): ``J_c v = S V_rel`` for every cut joint (rows stacked in loop order);
    ``J_c = S A (J_b - T J_a)`` with world-aligned frame Jacobians (seed 004 eq. 2-3)."""
    q = np.asarray(q, dtype=float)
    rows = []
    for lc in _loops(robot):
        Ra, pa = dense.frame_pose(robot, q, lc.frame_a)
        Ja = dense.jacobian(robot, q, lc.frame_a, world_aligned=True)
        if lc.frame_b == "world":
            X = lc.world_placement
            pb = np.zeros(3) if X is None else X.p
            Jb = np.zeros_like(Ja)
        else:
            pb = dense.frame_pose(robot, q, lc.frame_b)[1]
            Jb = dense.jacobian(robot, q, lc.frame_b, world_aligned=True)
        d = pb - pa
        Jrel = np.vstack([Ra.T @ (Jb[:3] - Ja[:3]), Ra.T @ (Jb[3:] - Ja[3:] + skew(d) @ Ja[:3])])
        rows.append(constraint_rows(lc) @ Jrel)
    return np.vstack(rows)


def closed_loop_constraints(robot: Robot, q: Any, v: Any) -> tuple[np.ndarray, np.ndarray]:
    """``(g, J_c v)``: position residual and velocity error of the cut joints (the drift monitor of a
    compiled closed-loop module), from the dense frame poses and Jacobians."""
    return constraint_residual(robot, q), constraint_jacobian(robot, q) @ np.asarray(v, dtype=float)


def _relative_twist_rate(
    robot: Robot, lc: LoopClosure, q: np.ndarray, v: np.ndarray, a: np.ndarray
) -> np.ndarray:
    """d/dt V_rel for the motion (q, v, a)."""
    ma, mb = _ends(robot, lc, q, v, a)
    Rt = ma.R.T
    wa = Rt @ ma.w
    d = mb.p - ma.p
    dw = mb.w - ma.w
    u = mb.v - ma.v - cross(ma.w, d)
    udot = mb.vdot - ma.vdot - cross(ma.wdot, d) - cross(ma.w, mb.v - ma.v)
    return np.concatenate([Rt @ (mb.wdot - ma.wdot) - cross(wa, Rt @ dw), Rt @ udot - cross(wa, Rt @ u)])


def constraint_bias(robot: Robot, q: Any, v: Any) -> np.ndarray:
    """``gamma0 = (dJ_c/dt) v``: the constraint acceleration produced by v with zero accelerations."""
    q, v = np.asarray(q, dtype=float), np.asarray(v, dtype=float)
    a0 = np.zeros(robot.nv)
    return np.concatenate(
        [constraint_rows(lc) @ _relative_twist_rate(robot, lc, q, v, a0) for lc in _loops(robot)]
    )


# ---- Gauss-Jordan partitioning (seed 003 Appendix B) -------------------------------------------


def gauss_jordan(A: Any, tol: float = 1e-9) -> tuple[np.ndarray, list[int]]:
    """Reduced row echelon form of ``A`` by Gauss-Jordan elimination with partial (row) pivoting.

    Returns ``(rref, pivot_columns)``.  A column whose largest remaining entry is below
    ``tol * max|A|`` is skipped (it depends on the earlier pivot columns).  Seed 003 Appendix B: the pivot
    columns form a unit matrix in ``rref``; they are the dependent variables.
    """
    R = np.array(A, dtype=float, copy=True)
    m, n = R.shape
    scale = float(np.max(np.abs(R))) if R.size else 0.0
    pivots: list[int] = []
    row = 0
    for col in range(n):
        if row >= m:
            break
        i = row + int(np.argmax(np.abs(R[row:, col])))
        if abs(R[i, col]) <= tol * scale:
            continue
        R[[row, i]] = R[[i, row]]
        R[row] /= R[row, col]
        for r in range(m):
            if r != row and R[r, col] != 0.0:
                R[r] -= R[r, col] * R[row]
        pivots.append(col)
        row += 1
    return R, pivots


def independent_rows(J: np.ndarray, tol: float = 1e-9) -> tuple[int, ...]:
    """Rows of ``J`` kept by Gauss-Jordan elimination of ``J^T`` (its pivot columns)."""
    return tuple(gauss_jordan(J.T, tol)[1])


def partition(
    robot: Robot,
    q: Any,
    independent: Sequence[str] | None = None,
    order: Sequence[str] | None = None,
    tol: float = 1e-9,
) -> Partition:
    """Choose dependent coordinates by Gauss-Jordan elimination of ``J_c(q)`` (seed 003 eq. 2.44).

    Columns are eliminated in ``order`` (names from :func:`coordinate_names`; default: the joints from
    the tip of the body list backwards, then the base), so that with partial pivoting the first usable
    columns in that order become dependent.  ``independent`` fixes the independent set by name instead
    (seed 003 section 5.4 chooses joints 1, 3, 5); it is checked to leave a non-singular ``J_D``.
    Redundant constraint rows (rank of ``J_c`` below its row count at this q) are dropped
    (``Partition.rows``).
    """
    names = coordinate_names(robot)
    J = constraint_jacobian(robot, np.asarray(q, dtype=float))
    rows = independent_rows(J, tol)
    if len(rows) == J.shape[0]:
        rows_opt: tuple[int, ...] | None = None
    else:
        rows_opt = rows
        J = J[list(rows)]
    m = J.shape[0]
    if independent is not None:
        bad = [n for n in independent if n not in names]
        if bad:
            raise ClosedLoopError(f"partition: unknown coordinates {bad}; coordinates: {names}")
        ind = sorted(names.index(n) for n in independent)
        dep = [i for i in range(len(names)) if i not in ind]
        if len(dep) != m:
            raise ClosedLoopError(
                f"partition: {len(ind)} independent coordinates leave {len(dep)} dependent ones, "
                f"but the loops impose {m} independent constraints; give {len(names) - m} "
                "independent names"
            )
        part = Partition(tuple(dep), tuple(ind), tuple(names), rows_opt)
        check_partition(J, Partition(tuple(dep), tuple(ind), tuple(names)))
        return part
    if order is None:
        njb = robot.base_nv
        order_idx = list(range(len(names) - 1, njb - 1, -1)) + list(range(njb))
    else:
        if sorted(order) != sorted(names):
            raise ClosedLoopError(f"partition: 'order' must list every coordinate once: {names}")
        order_idx = [names.index(n) for n in order]
    _, piv = gauss_jordan(J[:, order_idx], tol)
    if len(piv) < m:  # pragma: no cover - rows were reduced to full rank above
        raise ClosedLoopError(f"robot {robot.name!r}: singular loop constraints at this configuration")
    dep = sorted(order_idx[p] for p in piv)
    ind = [i for i in range(len(names)) if i not in dep]
    return Partition(tuple(dep), tuple(ind), tuple(names), rows_opt)


def check_partition(J: np.ndarray, part: Partition, cond_limit: float = COND_LIMIT) -> float:
    """Condition number of ``J_D`` (used rows of the full ``J``); raises :class:`ClosedLoopError` above
    ``cond_limit``."""
    JD = J[:, list(part.dependent)]
    if part.rows is not None and J.shape[0] != len(part.rows):
        JD = JD[list(part.rows)]
    cond = float(np.linalg.cond(JD)) if JD.size else 1.0
    if not np.isfinite(cond) or cond > cond_limit:
        raise ClosedLoopError(
            f"the dependent coordinates ({part.describe()}) are ill-conditioned here: "
            f"cond(J_D) = {cond:.3g} > "
            f"{cond_limit:.3g}; choose another partition (partition(robot, q) re-runs Gauss-Jordan at this q)"
        )
    return cond


def projection_matrix(J: np.ndarray, part: Partition) -> np.ndarray:
    """``Pi`` (nv x f) of seed 004 eq. 5 / ``R^c`` of seed 003 eq. 2.56 (rows in v order)."""
    J = part.select(J) if part.rows is not None and J.shape[0] != len(part.rows) else J
    n = J.shape[1]
    Pi = np.zeros((n, part.n_independent))
    ind, dep = list(part.independent), list(part.dependent)
    Pi[ind, range(len(ind))] = 1.0
    if dep:
        Pi[dep] = -np.linalg.solve(J[:, dep], J[:, ind])
    return Pi


def dependent_velocities(robot: Robot, q: Any, v_independent: Any, part: Partition) -> np.ndarray:
    """Full v from the independent velocities (seed 003 eq. 2.54)."""
    J = constraint_jacobian(robot, q)
    check_partition(J, part)
    return projection_matrix(J, part) @ np.asarray(v_independent, dtype=float)


def dependent_accelerations(
    robot: Robot, q: Any, v: Any, a_independent: Any, part: Partition, gamma: np.ndarray | None = None
) -> np.ndarray:
    """Full a from the independent accelerations: ``a = Pi a_I + rho`` (seed 003 eq. 2.58 for a_I = 0)."""
    J = constraint_jacobian(robot, q)
    check_partition(J, part)
    g = -constraint_bias(robot, q, v) if gamma is None else gamma
    return projection_matrix(J, part) @ np.asarray(a_independent, dtype=float) + _rho(J, part, g)


def _rho(J: np.ndarray, part: Partition, gamma: np.ndarray) -> np.ndarray:
    if part.rows is not None and J.shape[0] != len(part.rows):
        J, gamma = part.select(J), part.select(gamma)
    rho = np.zeros(J.shape[1])
    dep = list(part.dependent)
    if dep:
        rho[dep] = np.linalg.solve(J[:, dep], gamma)
    return rho


@dataclass
class ReducedDynamics:
    """Seed 004 eq. 5: ``M a_I + C = Pi^T tau``; ``a = Pi a_I + rho``."""

    M: np.ndarray
    C: np.ndarray
    Pi: np.ndarray
    rho: np.ndarray
    H: np.ndarray
    c: np.ndarray
    J: np.ndarray
    cond: float
    partition: Partition


def _gamma(
    robot: Robot, q: np.ndarray, v: np.ndarray, J: np.ndarray, baumgarte: tuple[float, float] | None
) -> np.ndarray:
    g = -constraint_bias(robot, q, v)
    if baumgarte is not None:
        alpha, beta = baumgarte
        g = g - 2.0 * alpha * (J @ v) - beta * beta * constraint_residual(robot, q)
    return g


def reduced_dynamics(robot: Robot, q: Any, v: Any, part: Partition | None = None, f_ext: Any = None,
                     baumgarte: tuple[float, float] | None = None, cond_limit: float = COND_LIMIT
                     ) -> ReducedDynamics:
    """The projected equations of seed 004 eq. 5 at ``(q, v)`` (tree terms from the dense reference path)."""
    q = np.asarray(q, dtype=float)
    v = np.asarray(v, dtype=float)
    if part is None:
        part = partition(robot, q)
    J = constraint_jacobian(robot, q)
    cond = check_partition(J, part, cond_limit)
    H = dense.mass_matrix(robot, q)
    c = dense.bias_forces(robot, q, v, f_ext)
    Pi = projection_matrix(J, part)
    rho = _rho(J, part, _gamma(robot, q, v, J, baumgarte))
    M = Pi.T @ H @ Pi
    return ReducedDynamics(0.5 * (M + M.T), Pi.T @ (c + H @ rho), Pi, rho, H, c, J, cond, part)


def forward_dynamics(robot: Robot, q: Any, v: Any, tau: Any, part: Partition | None = None, f_ext: Any = None,
                     baumgarte: tuple[float, float] | None = None, cond_limit: float = COND_LIMIT
                     ) -> np.ndarray:
    """Accelerations (all nv entries) of the closed-loop system for generalised forces ``tau`` (tree
    coordinates: torques of dependent joints act through ``Pi^T``, seed 003 eq. 2.41)."""
    rd = reduced_dynamics(robot, q, v, part, f_ext, baumgarte, cond_limit)
    tau = np.asarray(tau, dtype=float)
    aI = np.linalg.solve(rd.M, rd.Pi.T @ tau - rd.C)
    return rd.Pi @ aI + rd.rho


def constraint_forces(robot: Robot, q: Any, v: Any, a: Any, tau: Any, f_ext: Any = None) -> np.ndarray:
    """Cut-joint forces ``lambda`` with ``H a + c = tau + J_c^T lambda`` (least squares)."""
    q, v, a, tau = (np.asarray(x, dtype=float) for x in (q, v, a, tau))
    J = constraint_jacobian(robot, q)
    r = dense.mass_matrix(robot, q) @ a + dense.bias_forces(robot, q, v, f_ext) - tau
    return np.linalg.lstsq(J.T, r, rcond=None)[0]


# ---- configuration updates and projection ------------------------------------------------------


def project_configuration(robot: Robot, q: Any, tol: float = 1e-12, max_iter: int = 20) -> np.ndarray:
    """Newton iterations on ``g(q) = 0`` with minimum-norm corrections ``dv = -J_c^+ g``."""
    q = np.array(q, dtype=float, copy=True)
    for _ in range(max_iter):
        g = constraint_residual(robot, q)
        if np.max(np.abs(g)) < tol:
            return q
        J = constraint_jacobian(robot, q)
        q = retract(q, -np.linalg.lstsq(J, g, rcond=None)[0], robot.is_free)
    if np.max(np.abs(constraint_residual(robot, q))) > 1e3 * tol:
        raise ClosedLoopError(
            f"project_configuration: no convergence (|g| = "
            f"{np.max(np.abs(constraint_residual(robot, q))):.3g}); the loop cannot be closed "
            "near this configuration"
        )
    return q


def project_velocity(robot: Robot, q: Any, v: Any, part: Partition | None = None) -> np.ndarray:
    """Constraint-consistent v: the dependent velocities recomputed from the independent ones (or, without
    a partition, the minimum-norm correction ``v - J^+ J v``)."""
    v = np.asarray(v, dtype=float)
    J = constraint_jacobian(robot, q)
    if part is None:
        return v - np.linalg.lstsq(J, J @ v, rcond=None)[0]
    return projection_matrix(J, part) @ v[list(part.independent)]
