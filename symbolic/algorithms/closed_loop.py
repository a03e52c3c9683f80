"""Closed-loop forward dynamics in independent coordinates, generic over the scalar (for code generation).

The same equations as the reference path :mod:`soadyn.runtime.closed_loop` (see its docstring: cut-joint
constraints, seed 003 eq. 2.44-2.58, seed 004 eq. 5), written so that a symbolic run gives a straight-line
program:

* the partition (dependent coordinates ``D``) is fixed when the code is generated (keyword ``dependent``,
  chosen by Gauss-Jordan elimination with partial pivoting, :func:`generation_partition`);
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

from collections.abc import Sequence
from typing import Any

import numpy as np

from soadyn.runtime.closed_loop import constraint_rows, perpendicular_basis
from soadyn.model.robot import Robot
from soadyn.symbolic.spatial import cross, skew
from soadyn.symbolic.algorithms.kinematics import joint_transforms, link_poses, velocities
from soadyn.symbolic.algorithms.linalg import ldl
from soadyn.symbolic.algorithms.newton_euler import _newton_euler, mass_matrix_from


def _frame_world(robot: Robot, ctx: Any, Rw: list, pw: list, name: str) -> tuple[int, Any, Any, Any]:
    """(body, R_f, p_f, d) of a named frame: pose in the inertial frame and offset d = R_k X.p."""
    k, X = robot.frame_of(name)
    R = Rw[k] if np.array_equal(X.R, np.eye(3)) else Rw[k] @ ctx.const(X.R)
    d = Rw[k] @ ctx.const(X.p) if np.any(X.p) else None
    p = pw[k] if d is None else pw[k] + d
    return k, R, p, d


def _frame_jacobian(robot: Robot, ctx: Any, Rw: list, pw: list, k: int, pf: Any) -> np.ndarray:
    """World-aligned 6 x nv Jacobian of a point pf rigidly attached to body k (columns along the path)."""
    J = ctx.zeros((6, robot.nv))
    i = k
    while i > 0:
        j = robot.joints[i]
        s = Rw[i] @ ctx.const(j.axis)
        col = (
            np.concatenate([s, cross(s, pf - pw[i])])
            if j.type == "revolute"
            else np.concatenate([ctx.zeros(3), s])
        )
        J[:, robot.v_index(i)] = col.reshape(6, 1)
        i = robot.parent[i]
    if robot.is_free:
        R0 = Rw[0]
        J[:3, 0:3] = R0
        J[3:, 3:6] = R0
        J[3:, 0:3] = -skew(pf - pw[0]) @ R0
    return J


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


def _loop_end(robot: Robot, ctx: Any, Rw: list, pw: list, vt: Any, alpha: list[np.ndarray],
              frame: str) -> tuple[Any, ...]:
    """One end of a loop closure in world axes: ``(R, p, J, w, v, wdot, a)`` -- orientation, position,
    frame Jacobian (6 x nv), angular velocity, velocity of the frame point, and their rates at dv/dt = 0
    (rigid-body transfer from the body origin by the offset ``d``)."""
    k, R, p, d = _frame_world(robot, ctx, Rw, pw, frame)
    J = _frame_jacobian(robot, ctx, Rw, pw, k, p)
    w = Rw[k] @ vt.V[k][:3]
    v = Rw[k] @ vt.V[k][3:]
    wd = Rw[k] @ alpha[k][:3]
    a = Rw[k] @ alpha[k][3:]
    if d is not None:
        v = v + cross(w, d)
        a = a + cross(wd, d) + cross(w, cross(w, d))
    return R, p, J, w, v, wd, a


def constraint_terms(
    robot: Robot,
    ctx: Any,
    q: np.ndarray,
    v: np.ndarray,
    kin: Any = None,
    vt: Any = None,
    Rw: list | None = None,
    pw: list | None = None,
    need_residual: bool = False,
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """``(J_c, gamma0, g)``: constraint Jacobian (m x nv), ``dJ_c/dt v`` (m) and residual g (m or None)."""
    kin = kin or joint_transforms(robot, ctx, q)
    if Rw is None:
        Rw, pw = link_poses(kin)
    vt = vt or velocities(kin, v, need_b=False)
    alpha = _zero_accelerations(kin, vt)
    Jrows, grows, rrows = [], [], []
    for li, lc in enumerate(robot.loops):
        S = constraint_rows(lc)
        Ra, pa, Ja, wa, va, wda, aa = _loop_end(robot, ctx, Rw, pw, vt, alpha, lc.frame_a)
        if lc.frame_b == "world":
            X = lc.world_placement
            Rb = ctx.const(np.eye(3) if X is None else X.R)
            pb = ctx.const(np.zeros(3) if X is None else X.p)
            Jb = ctx.zeros((6, robot.nv))
            wb = vb = wdb = ab = ctx.zeros(3)
        else:
            Rb, pb, Jb, wb, vb, wdb, ab = _loop_end(robot, ctx, Rw, pw, vt, alpha, lc.frame_b)
        d = ctx.stage(f"cld{li}", pb - pa)
        RaT = Ra.T
        Jrel = np.concatenate([RaT @ (Jb[:3] - Ja[:3]), RaT @ (Jb[3:] - Ja[3:] + skew(d) @ Ja[:3])])
        Sc = ctx.const(S)
        Jrows.append(ctx.stage(f"clJ{li}", Sc @ Jrel))
        # gamma0 = S d/dt V_rel at dv/dt = 0 (see soadyn.runtime.closed_loop)
        wloc = RaT @ wa
        dw = wb - wa
        u = vb - va - cross(wa, d)
        udot = ab - aa - cross(wda, d) - cross(wa, vb - va)
        rate = np.concatenate([RaT @ (wdb - wda) - cross(wloc, RaT @ dw), RaT @ udot - cross(wloc, RaT @ u)])
        grows.append(ctx.stage(f"clg{li}", Sc @ rate))
        if need_residual:
            Rrel = RaT @ Rb
            parts = []
            if lc.type in ("weld", "prismatic"):
                parts.append(
                    0.5
                    * np.array([Rrel[2, 1] - Rrel[1, 2], Rrel[0, 2] - Rrel[2, 0], Rrel[1, 0] - Rrel[0, 1]])
                )
            elif lc.type == "revolute":
                e1, e2 = perpendicular_basis(lc.axis)
                c = Rrel @ ctx.const(lc.axis)
                parts.append(np.array([-(ctx.const(e2) @ c), ctx.const(e1) @ c]))
            nang = S.shape[0] - (3 if lc.type in ("weld", "revolute", "spherical") else 2)
            parts.append(ctx.const(S[nang:, 3:]) @ (RaT @ d))
            rrows.append(ctx.stage(f"clr{li}", np.concatenate(parts)))
    J = np.concatenate(Jrows, axis=0)
    g0 = np.concatenate(grows)
    return J, g0, (np.concatenate(rrows) if need_residual else None)


def generation_partition(
    robot: Robot, q: Any = None, seed: int = 2024
) -> tuple[tuple[int, ...], tuple[int, ...] | None]:
    """``(dependent, rows)`` chosen by Gauss-Jordan with partial pivoting (seed 003 Appendix B) on J_c at
    ``q`` (default: a fixed pseudo-random configuration, i.e. a generic one): redundant constraint rows
    are dropped (``rows``: the kept ones, None if all), then the dependent columns are the pivots, joints
    from the last backwards first, then the base (seed 004 eq. 5 keeps the base independent when it can)."""
    from soadyn.runtime.closed_loop import partition

    if not robot.loops:
        raise ValueError(f"robot {robot.name!r} has no loop closures")
    if q is None:
        q = robot.random_configuration(np.random.default_rng(seed))
    part = partition(robot, np.asarray(q, dtype=float))
    return part.dependent, part.rows


def _solve_dependent(
    ctx: Any, J: np.ndarray, dependent: Sequence[int], rhs_cols: np.ndarray, name: str
) -> tuple[np.ndarray, np.ndarray]:
    """(J_D^T J_D)^-1 J_D^T rhs (seed 003 eq. 2.57) and the status d_j / N_jj."""
    JD = J[:, list(dependent)]
    N = ctx.stage_symmetric(f"{name}N", JD.T @ JD)
    fac = ldl(ctx, N, f"{name}f")
    m = N.shape[0]
    d = [1 / fac.dinv[j] for j in range(m)]
    status = np.array([d[j] / N[j, j] for j in range(m)], dtype=object if ctx.symbolic else float)
    return fac.solve(JD.T @ rhs_cols, f"{name}s"), status


def closed_loop_forward_dynamics(
    robot: Robot,
    ctx: Any,
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
        Pi[i, c] = ctx.const(1.0)[()] if ctx.symbolic else 1.0
    rho = ctx.zeros(robot.nv)
    for rr, i in enumerate(dependent):
        Pi[i, :] = -W[rr, :]
        rho[i] = r[rr]
    H = mass_matrix_from(kin)
    c = _newton_euler(kin, vt, ctx.zeros(robot.nv))
    HPi = ctx.stage("clHPi", H @ Pi)
    M = ctx.stage_symmetric("clM", Pi.T @ HPi)
    rhs_red = ctx.stage("clrhs", Pi.T @ (tau - c - H @ rho))
    aI = ldl(ctx, M, "clMf").solve(rhs_red, "claI")
    a = Pi @ aI + rho
    return ctx.stage("cla", a), status


def closed_loop_constraints(
    robot: Robot, ctx: Any, q: np.ndarray, v: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``(g, Jv)``: position residual and velocity error of the cut joints (drift monitoring)."""
    J, _, g = constraint_terms(robot, ctx, q, v, need_residual=True)
    return g, J @ v


def closed_loop_dependent_velocities(
    robot: Robot,
    ctx: Any,
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
    out = np.array(v, dtype=object if ctx.symbolic else float, copy=True)
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
    mt = sum(constraint_rows(lc).shape[0] for lc in robot.loops)
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
