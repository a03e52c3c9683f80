"""Closed-loop forward dynamics in independent coordinates, generic over the scalar (for code generation).

The equations of the reference path :mod:`soadyn.reference.closed_loop` (see its docstring: cut-joint
constraints, seed 003 eq. 2.44-2.58, seed 004 eq. 5), derived here on their own -- the constrained
directions of each cut joint (:func:`constrained_directions`), the constraint Jacobian from the generic
frame Jacobian of :mod:`soadyn.symbolic.algorithms.jacobians`, the partition from this module's own
float run -- and written so that a symbolic run gives a straight-line program:

* the partition (dependent coordinates ``D``) is fixed when the code is generated (keyword ``dependent``,
  default :func:`generation_partition`: greedy pivoting on the orthogonal residuals of the columns of
  ``J_c``, the column-space form of seed 003 Appendix B); another choice of coordinates, e.g. the one
  the reference path made, can be passed in;
* ``J_D^-1`` is applied through the normal equations ``(J_D^T J_D)^-1 J_D^T`` (seed 003 eq. 2.57, the
  least-squares form) with an LDL^T factorisation without pivoting;
* the *status* output gives, for every dependent column j, ``d_j / N_jj`` where ``d_j`` is the j-th LDL pivot
  of ``N = J_D^T J_D``: the squared sine of the angle between column j of ``J_D`` and the span of the
  earlier ones (1 = orthogonal, 0 = dependent).  ``min(status)`` is a cheap reciprocal-condition estimate;
  the Python side raises when it drops below a threshold (the chosen dependent set is no longer good).

Tree terms come from the O(N) tree algorithms of this package: ``H`` by composite bodies (seed 000
eq. 2.4a), ``c`` by Newton-Euler with zero accelerations (seed 000 Alg. 1); the constraint Jacobian and
``gamma0 = dJ/dt v`` from link poses, velocities and Jain's accelerations at zero ``dv/dt`` (seed 000
eq. 2.1-2.2).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from soadyn.model.robot import LoopClosure, Robot
from soadyn.model.rotations import cross, skew
from soadyn.symbolic.algorithms.jacobians import _frame_pose, _jacobian
from soadyn.symbolic.algorithms.kinematics import joint_transforms, link_poses, velocities
from soadyn.symbolic.algorithms.linalg import ldl
from soadyn.symbolic.algorithms.newton_euler import _newton_euler, mass_matrix_from
from soadyn.symbolic.scalar import NUMERIC, ScalarContext


def axis_normals(axis: Any) -> tuple[np.ndarray, np.ndarray]:
    """The unit normals ``(n1, n2)`` of a unit joint axis ``u`` with ``(n1, n2, u)`` right-handed, by the
    convention of docs/structure-changes.md: ``n1`` points along ``u x e_m`` for the coordinate axis
    ``e_m`` least aligned with ``u`` (smallest ``|u_m|``, the first on ties), ``n2 = u x n1``."""
    u = np.asarray(axis, dtype=float)
    m = min(range(3), key=lambda i: abs(u[i]))
    n1 = cross(u, np.eye(3)[m])
    n1 = n1 / math.sqrt(float(n1 @ n1))
    return n1, cross(u, n1)


def constrained_directions(lc: LoopClosure) -> tuple[np.ndarray, np.ndarray]:
    """``(angular, linear)``: the directions (rows, frame-a axes) along which the cut joint forbids
    relative rotation and relative translation (seed 004 eq. 2-3; seed 003 eq. 2.46 for the revolute
    axis).  A weld forbids all six, a revolute joint the two rotations normal to its axis, a prismatic
    joint every rotation and the two translations normal to its axis, a spherical joint the translations.
    """
    normals = np.array(axis_normals(lc.axis)) if lc.type in ("revolute", "prismatic") else None
    angular = {"weld": np.eye(3), "prismatic": np.eye(3), "revolute": normals, "spherical": np.zeros((0, 3))}
    linear = normals if lc.type == "prismatic" else np.eye(3)
    return angular[lc.type], linear


def n_constraint_rows(robot: Robot) -> int:
    """Number of cut-joint constraint rows of all loops (before redundant rows are dropped)."""
    return sum(sum(len(d) for d in constrained_directions(lc)) for lc in robot.loops)


def _zero_accelerations(kin: Any, vt: Any) -> list[np.ndarray]:
    """Jain's alpha(k) (inertial derivatives of [w; v_origin], body-k axes) for dv/dt = 0, no gravity."""
    robot, ctx = kin.robot, kin.ctx
    alpha: list[np.ndarray] = [None] * robot.n_bodies  # type: ignore[list-item]
    for k in range(robot.n_bodies):
        if k == 0:
            alpha[0] = vt.a[0]
        else:
            alpha[k] = ctx.stage(f"cla{k}", kin.X[k].motion_to_child(alpha[robot.parent[k]]) + vt.a[k])
    return alpha


def _loop_end(kin: Any, Rw: list, pw: list, vt: Any, alpha: list[np.ndarray], frame: str) -> tuple[Any, ...]:
    """One end of a loop closure in world axes: ``(R, p, J, w, v, wdot, a)`` -- orientation, position,
    world-aligned frame Jacobian (6 x nv, the generic one), angular velocity, velocity of the frame point,
    and their rates at dv/dt = 0 (rigid-body transfer from the body origin by the offset ``d``)."""
    robot, ctx = kin.robot, kin.ctx
    k, R, p = _frame_pose(robot, ctx, Rw, pw, frame)
    offset = robot.frame_of(frame)[1].p
    J = _jacobian(robot, ctx, kin, frame, world_aligned=True)
    w = Rw[k] @ vt.V[k][:3]
    v = Rw[k] @ vt.V[k][3:]
    wd = Rw[k] @ alpha[k][:3]
    a = Rw[k] @ alpha[k][3:]
    if np.any(offset):
        d = Rw[k] @ ctx.const(offset)
        v = v + cross(w, d)
        a = a + cross(wd, d) + cross(w, cross(w, d))
    return R, p, J, w, v, wd, a


def _residual(ctx: ScalarContext, lc: LoopClosure, Rrel: np.ndarray, d_a: np.ndarray) -> np.ndarray:
    """Position-level residual of one cut joint from ``Rrel = R_a^T R_b`` and ``d_a = R_a^T (p_b - p_a)``:
    ``vee(Rrel - Rrel^T) / 2`` (all rotations forbidden), ``[-n2 . c, n1 . c]`` with ``c = Rrel u``
    (revolute: the axes stay aligned, seed 003 eq. 2.46), then the forbidden components of ``d_a``."""
    angular, linear = constrained_directions(lc)
    if len(angular) == 3:
        ang = 0.5 * np.array([Rrel[2, 1] - Rrel[1, 2], Rrel[0, 2] - Rrel[2, 0], Rrel[1, 0] - Rrel[0, 1]])
    elif len(angular) == 2:
        c = Rrel @ ctx.const(lc.axis)
        ang = np.array([-(ctx.const(angular[1]) @ c), ctx.const(angular[0]) @ c])
    else:
        ang = ctx.zeros(0)
    return np.concatenate([ang, ctx.const(linear) @ d_a])


def constraint_terms(
    robot: Robot,
    ctx: ScalarContext,
    q: np.ndarray,
    v: np.ndarray,
    kin: Any = None,
    vt: Any = None,
    Rw: list | None = None,
    pw: list | None = None,
    need_residual: bool = False,
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """``(J_c, gamma0, g)``: constraint Jacobian (m x nv), ``dJ_c/dt v`` (m) and residual g (m or None).

    Per cut joint, in frame-a axes: the relative twist ``V_rel = A (J_b - T J_a) v`` (seed 004 eq. 2-3) and
    its rate at dv/dt = 0, ``gamma0``, projected on the constrained directions."""
    kin = kin or joint_transforms(robot, ctx, q)
    if Rw is None:
        Rw, pw = link_poses(kin)
    vt = vt or velocities(kin, v, need_b=False)
    alpha = _zero_accelerations(kin, vt)
    Jrows, grows, rrows = [], [], []
    for li, lc in enumerate(robot.loops):
        Ra, pa, Ja, wa, va, wda, aa = _loop_end(kin, Rw, pw, vt, alpha, lc.frame_a)
        if lc.frame_b == "world":
            X = lc.world_placement
            Rb = ctx.const(np.eye(3) if X is None else X.R)
            pb = ctx.const(np.zeros(3) if X is None else X.p)
            Jb = ctx.zeros((6, robot.nv))
            wb = vb = wdb = ab = ctx.zeros(3)
        else:
            Rb, pb, Jb, wb, vb, wdb, ab = _loop_end(kin, Rw, pw, vt, alpha, lc.frame_b)
        d = ctx.stage(f"cld{li}", pb - pa)
        RaT = Ra.T
        angular, linear = (ctx.const(x) for x in constrained_directions(lc))
        # relative angular velocity and velocity of b's origin relative to a's frame, frame-a axes
        Jw, Jv = RaT @ (Jb[:3] - Ja[:3]), RaT @ (Jb[3:] - Ja[3:] + skew(d) @ Ja[:3])
        Jrows.append(ctx.stage(f"clJ{li}", np.concatenate([angular @ Jw, linear @ Jv])))
        # their time derivatives at dv/dt = 0 (frame a rotates with w_a)
        wloc = RaT @ wa
        u = vb - va - cross(wa, d)
        udot = ab - aa - cross(wda, d) - cross(wa, vb - va)
        dw_rel = RaT @ (wdb - wda) - cross(wloc, RaT @ (wb - wa))
        dv_rel = RaT @ udot - cross(wloc, RaT @ u)
        grows.append(ctx.stage(f"clg{li}", np.concatenate([angular @ dw_rel, linear @ dv_rel])))
        if need_residual:
            rrows.append(ctx.stage(f"clr{li}", _residual(ctx, lc, RaT @ Rb, RaT @ d)))
    J = np.concatenate(Jrows, axis=0)
    g0 = np.concatenate(grows)
    return J, g0, (np.concatenate(rrows) if need_residual else None)


def _greedy_independent(vectors: np.ndarray, order: Iterable[int], tol: float) -> list[int]:
    """Indices, in ``order``, of the rows of ``vectors`` that are not in the span of the rows kept before
    them: a row is kept when its residual after projecting out the kept ones (modified Gram-Schmidt) is
    longer than ``tol`` times the longest row."""
    scale = max(float(np.max(np.linalg.norm(vectors, axis=1))), np.finfo(float).tiny)
    basis: list[np.ndarray] = []
    kept = []
    for i in order:
        r = np.array(vectors[i], dtype=float)
        for e in basis:
            r -= (e @ r) * e
        norm = float(np.linalg.norm(r))
        if norm > tol * scale:
            basis.append(r / norm)
            kept.append(i)
    return kept


def generation_partition(
    robot: Robot, q: Any = None, seed: int = 2024, tol: float = 1e-9
) -> tuple[tuple[int, ...], tuple[int, ...] | None]:
    """``(dependent, rows)`` for the generated code, from a float run of :func:`constraint_terms` at ``q``
    (default: a fixed pseudo-random, i.e. generic, configuration).

    Redundant constraint rows are dropped first (``rows``: the kept ones, None if all are kept); then the
    columns of ``J_c`` are visited joints from the last backwards, then the base (seed 004 eq. 5 keeps the
    base independent when it can), and a column becomes dependent when it is independent of the dependent
    columns chosen before it (its residual after projecting them out longer than ``tol`` times the longest
    column).  This selects the pivot columns of seed 003 Appendix B's Gauss-Jordan elimination, computed by
    orthogonal residuals instead of row reduction."""
    if not robot.loops:
        raise ValueError(f"robot {robot.name!r} has no loop closures; add one with close_loop(...)")
    if q is None:
        q = robot.random_configuration(np.random.default_rng(seed))
    J = constraint_terms(robot, NUMERIC, np.asarray(q, dtype=float), np.zeros(robot.nv))[0]
    rows = _greedy_independent(J, range(J.shape[0]), tol)
    order = [*range(robot.nv - 1, robot.base_nv - 1, -1), *range(robot.base_nv)]
    dependent = sorted(_greedy_independent(J[rows].T, order, tol))
    if len(dependent) < len(rows):  # pragma: no cover - the kept rows are independent
        raise ValueError(f"robot {robot.name!r}: singular loop constraints at this configuration")
    return tuple(dependent), (None if len(rows) == J.shape[0] else tuple(rows))


def _solve_dependent(
    ctx: ScalarContext, J: np.ndarray, dependent: Sequence[int], rhs_cols: np.ndarray, name: str
) -> tuple[np.ndarray, np.ndarray]:
    """(J_D^T J_D)^-1 J_D^T rhs (seed 003 eq. 2.57) and the status d_j / N_jj."""
    JD = J[:, list(dependent)]
    N = ctx.stage_symmetric(f"{name}N", JD.T @ JD)
    fac = ldl(ctx, N, f"{name}f")
    m = N.shape[0]
    d = [1 / fac.dinv[j] for j in range(m)]
    status = ctx.array([d[j] / N[j, j] for j in range(m)])
    return fac.solve(JD.T @ rhs_cols, f"{name}s"), status


def closed_loop_forward_dynamics(
    robot: Robot,
    ctx: ScalarContext,
    q: np.ndarray,
    v: np.ndarray,
    tau: np.ndarray,
    f_ext: np.ndarray | None = None,
    dependent: Sequence[int] | None = None,
    rows: Sequence[int] | None = None,
    baumgarte: tuple[float, float] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """``(a, status)``: accelerations of all nv tree coordinates of the closed-loop system (seed 004 eq. 5)
    and the partition status (see the module docstring).  ``tau`` are tree generalised forces."""
    if dependent is None:
        dependent, rows = generation_partition(robot)
    dependent = list(dependent)
    indep = [i for i in range(robot.nv) if i not in dependent]
    kin = joint_transforms(robot, ctx, q)
    vt = velocities(kin, v, f_ext)
    Rw, pw = link_poses(kin)
    J, g0, g = constraint_terms(robot, ctx, q, v, kin, vt, Rw, pw, need_residual=baumgarte is not None)
    if rows is not None:
        J, g0 = J[list(rows)], g0[list(rows)]
        g = None if g is None else g[list(rows)]
    gamma = -g0
    if baumgarte is not None:
        al, be = baumgarte
        gamma = gamma - (2.0 * al) * (J @ v) - (be * be) * g
    gamma = ctx.stage("clgam", gamma)
    JI = J[:, indep]
    rhs = np.concatenate([JI, gamma.reshape(-1, 1)], axis=1)
    sol, status = _solve_dependent(ctx, J, dependent, rhs, "clD")
    W = sol[:, :-1]  # J_D^-1 J_I
    r = sol[:, -1]  # J_D^-1 gamma
    f = len(indep)
    Pi = ctx.zeros((robot.nv, f))
    for c, i in enumerate(indep):
        Pi[i, c] = ctx.one()
    rho = ctx.zeros(robot.nv)
    for rr, i in enumerate(dependent):
        Pi[i, :] = -W[rr, :]
        rho[i] = r[rr]
    H = mass_matrix_from(kin)
    c = _newton_euler(kin, vt, ctx.zeros(robot.nv), v)
    HPi = ctx.stage("clHPi", H @ Pi)
    M = ctx.stage_symmetric("clM", Pi.T @ HPi)
    rhs_red = ctx.stage("clrhs", Pi.T @ (tau - c - H @ rho))
    aI = ldl(ctx, M, "clMf").solve(rhs_red, "claI")
    a = Pi @ aI + rho
    return ctx.stage("cla", a), status


def closed_loop_constraints(
    robot: Robot, ctx: ScalarContext, q: np.ndarray, v: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``(g, Jv)``: position residual and velocity error of the cut joints (drift monitoring)."""
    J, _, g = constraint_terms(robot, ctx, q, v, need_residual=True)
    return g, J @ v


def closed_loop_dependent_velocities(
    robot: Robot,
    ctx: ScalarContext,
    q: np.ndarray,
    v: np.ndarray,
    dependent: Sequence[int] | None = None,
    rows: Sequence[int] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """``(v_full, status)``: v with its dependent entries recomputed from the independent ones
    (seed 003 eq. 2.54); the dependent entries of the input are ignored."""
    if dependent is None:
        dependent, rows = generation_partition(robot)
    dependent = list(dependent)
    indep = [i for i in range(robot.nv) if i not in dependent]
    J, _, _ = constraint_terms(robot, ctx, q, v)
    if rows is not None:
        J = J[list(rows)]
    sol, status = _solve_dependent(ctx, J, dependent, (J[:, indep] @ v[indep]).reshape(-1, 1), "clV")
    out = ctx.array(v)
    for rr, i in enumerate(dependent):
        out[i] = -sol[rr, 0]
    return out, status


def closed_loop_spec_table(
    robot: Robot, dependent: Sequence[int] | None = None, rows: Sequence[int] | None = None
) -> list[
    tuple[str, tuple[str, ...], tuple[tuple[str, tuple[int, ...]], ...], tuple[tuple[str, Any], ...], str]
]:
    """Generated closed-loop functions for ``codegen.functions.function_table`` (empty without loops):
    ``(name, input names, outputs (name, shape), kwargs, doc)``; the algorithm has the same name.
    The partition is fixed here, at generation time."""
    if not robot.loops:
        return []
    if dependent is None:
        dependent, rows = generation_partition(robot)
    dep = tuple(int(i) for i in dependent)
    rws = None if rows is None else tuple(int(i) for i in rows)
    m = len(dep)
    mt = n_constraint_rows(robot)
    nv = robot.nv
    kw = (("dependent", dep), ("rows", rws))
    return [
        (
            "closed_loop_forward_dynamics",
            ("q", "v", "tau"),
            (("a", (nv,)), ("status", (m,))),
            kw,
            "closed-loop accelerations (all tree coordinates, seed 004 eq. 5) and partition status "
            f"(dependent coordinates {list(dep)}: status = d_j/N_jj of J_D^T J_D, raise when small)",
        ),
        (
            "closed_loop_dependent_velocities",
            ("q", "v"),
            (("v_full", (nv,)), ("status", (m,))),
            kw,
            "v with the dependent entries recomputed from the independent ones (seed 003 eq. 2.54)",
        ),
        (
            "closed_loop_constraints",
            ("q", "v"),
            (("g", (mt,)), ("Jv", (mt,))),
            (),
            "cut-joint position residual g(q) and velocity error J_c v",
        ),
    ]
