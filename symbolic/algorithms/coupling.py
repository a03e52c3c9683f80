"""Mimic couplings (issue 25): every algorithm in the reduced coordinates of a coupled robot.

A coupled joint m follows an independent joint s, ``q_m = a q_s + b`` (URDF ``<mimic>``, YAML ``mimic:``,
chains resolved by :func:`soadyn.model.robot.resolve_mimics`), so it has no coordinate, velocity or
generalised force of its own.  With ``G`` (nv_full x nv) the expansion of the reduced velocities into one per
joint (identity on the free base, ``a`` in row m and column s) and ``b`` the offsets:

    q_full = G q + b (joints),   v_full = G v,   a_full = G a          (G is constant: no G-dot term)

and by the principle of virtual work the reduced generalised forces are ``G^T`` of the full ones:

    tau = G^T ID_full(q_full, G v, G a),     M = G^T M_full G,     C = G^T C_full,     J = J_full G,
    dtau/dq = G^T (dtau_full/dq_full) G,     dtau/dv = G^T (dtau_full/dv_full) G,    Y = G^T Y_full.

Here ``_full`` is the algorithm of the same name run on :meth:`Robot.uncoupled` (every joint its own
coordinate), unchanged.  The forward dynamics has no O(N) articulated-body form here: the coupling is a
constraint between bodies far apart in the tree, which the Riccati recursion (seed 000 Algorithm 2)
cannot absorb hinge by hinge.  It is instead derived exactly from the same equations,

    a = (G^T M_full G)^-1 (tau - G^T C_full(q_full, G v)),

the composite-body mass matrix (seed 000 eq. 2.4a) and Newton-Euler bias forces (Algorithm 1) of the full
tree, projected, and a dense LDL^T solve (:mod:`~soadyn.symbolic.algorithms.linalg`): O(N^2) for M,
O(N) for C, ``n^3/6`` multiply-adds for the factorisation and ``n^2`` for the solve (n = reduced nv),
against O(N) for Algorithm 3 on an uncoupled robot; ``M^-1`` is the inverse from the same factors, and the
derivatives of the forward dynamics are ``-M^-1 dtau/dx`` with the reduced ``dtau/dx`` (as for uncoupled
robots, docs/conventions.md).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from soadyn.symbolic.algorithms.linalg import ldl


def _scale(a: float, x: Any) -> Any:
    return x if a == 1.0 else a * x


def expand_q(robot: Any, q: np.ndarray) -> np.ndarray:
    """q_full: the base part as is, joint k at ``a q[r] + b`` (exactly ``q[r]`` for an independent joint)."""
    nb = robot.base_nq
    out = list(q[:nb])
    for r, a, b in robot.coordinate_map():
        x = _scale(a, q[nb + r])
        out.append(x + b if b else x)
    return np.array(out, dtype=q.dtype)


def expand_v(robot: Any, v: np.ndarray) -> np.ndarray:
    """v_full = G v (also accelerations)."""
    nb = robot.base_nv
    out = list(v[:nb]) + [_scale(a, v[nb + r]) for r, a, _ in robot.coordinate_map()]
    return np.array(out, dtype=v.dtype)


def _project_axis0(robot: Any, X: np.ndarray) -> np.ndarray:
    """G^T X for X with nv_full rows (any trailing shape)."""
    nb = robot.base_nv
    X = np.asarray(X)
    rows: list[list[Any]] = [[X[i]] for i in range(nb)] + [[] for _ in range(robot.nv - nb)]
    for k, (r, a, _) in enumerate(robot.coordinate_map()):
        rows[nb + r].append(_scale(a, X[nb + k]))
    out = [t[0] if len(t) == 1 else functools.reduce(lambda s, x: s + x, t[1:], t[0]) for t in rows]
    return np.array(out, dtype=X.dtype).reshape((robot.nv, *X.shape[1:]))


def project_rows(robot: Any, X: np.ndarray) -> np.ndarray:
    """G^T X (vectors and matrices with nv_full rows)."""
    return _project_axis0(robot, X)


def project_cols(robot: Any, X: np.ndarray) -> np.ndarray:
    """X G (matrices with nv_full columns)."""
    return np.moveaxis(_project_axis0(robot, np.moveaxis(np.asarray(X), -1, 0)), 0, -1)


def project_both(robot: Any, X: np.ndarray) -> np.ndarray:
    """G^T X G."""
    return project_cols(robot, project_rows(robot, X))


# ---- the algorithms in reduced coordinates -----------------------------------------------------------
def _reduced_dynamics(robot: Any, ctx: Any, q: np.ndarray, v: np.ndarray, f_ext: np.ndarray | None,
                      algs: Any) -> tuple[np.ndarray, np.ndarray]:
    """(M, C) reduced: ``G^T M_full G``, ``G^T C_full``."""
    full = robot.uncoupled()
    qf, vf = expand_q(robot, q), expand_v(robot, v)
    M = project_both(robot, algs.mass_matrix(full, ctx, qf))
    C = project_rows(robot, algs.bias_forces(full, ctx, qf, vf, f_ext))
    return M, C


def _forward_dynamics(algs: Any) -> Callable:
    def forward_dynamics(robot: Any, ctx: Any, q: np.ndarray, v: np.ndarray, tau: np.ndarray,
                         f_ext: np.ndarray | None = None) -> np.ndarray:
        M, C = _reduced_dynamics(robot, ctx, q, v, f_ext, algs)
        rhs = np.array([ctx.stage(f"mimF{i}", tau[i] - C[i]) for i in range(robot.nv)])
        return ldl(ctx, M, "mimM").solve(rhs, "mimA")
    return forward_dynamics


def _mass_matrix_inverse(algs: Any) -> Callable:
    def mass_matrix_inverse(robot: Any, ctx: Any, q: np.ndarray) -> np.ndarray:
        full = robot.uncoupled()
        M = project_both(robot, algs.mass_matrix(full, ctx, expand_q(robot, q)))
        return ldl(ctx, M, "mimM").inverse("mimMinv")
    return mass_matrix_inverse


def _inverse_dynamics_derivatives(algs: Any) -> Callable:
    def inverse_dynamics_derivatives(robot: Any, ctx: Any, q: np.ndarray, v: np.ndarray, a: np.ndarray,
                                     f_ext: np.ndarray | None = None, **kw: Any) -> tuple[np.ndarray, ...]:
        dq, dv = algs.inverse_dynamics_derivatives(robot.uncoupled(), ctx, expand_q(robot, q),
                                                   expand_v(robot, v), expand_v(robot, a), f_ext, **kw)
        return project_both(robot, dq), project_both(robot, dv)
    return inverse_dynamics_derivatives


def _forward_dynamics_derivatives(algs: Any) -> Callable:
    def forward_dynamics_derivatives(robot: Any, ctx: Any, q: np.ndarray, v: np.ndarray, tau: np.ndarray,
                                     f_ext: np.ndarray | None = None) -> tuple[np.ndarray, ...]:
        M, C = _reduced_dynamics(robot, ctx, q, v, f_ext, algs)
        fac = ldl(ctx, M, "mimM")
        rhs = np.array([ctx.stage(f"mimF{i}", tau[i] - C[i]) for i in range(robot.nv)])
        acc = fac.solve(rhs, "mimA")
        dq, dv = algs.inverse_dynamics_derivatives(robot.uncoupled(), ctx, expand_q(robot, q),
                                                   expand_v(robot, v), expand_v(robot, acc), f_ext)
        Minv = fac.inverse("mimMinv")
        J = np.concatenate([project_both(robot, dq), project_both(robot, dv)], axis=1)
        da = -ctx.matmul("mimdadx", Minv, J)
        return da[:, :robot.nv], da[:, robot.nv:], Minv
    return forward_dynamics_derivatives


def _expanding(fn: Callable, kinds: str, out: str) -> Callable:
    """``fn`` on the uncoupled robot with inputs expanded (``kinds``: 'q' or 'v' per positional input) and
    outputs projected (``out``: one letter per output: '-' as is, 'r' rows, 'c' columns, 'b' both)."""
    @functools.wraps(fn)
    def wrapped(robot: Any, ctx: Any, *args: Any, **kw: Any) -> Any:
        ex = [expand_q(robot, x) if k == "q" else expand_v(robot, x) for k, x in zip(kinds, args)]
        res = fn(robot.uncoupled(), ctx, *ex, **kw)
        many = isinstance(res, tuple)
        res = res if many else (res,)
        proj = {"-": lambda x: x, "r": lambda x: project_rows(robot, x),
                "c": lambda x: project_cols(robot, x), "b": lambda x: project_both(robot, x)}
        res = tuple(proj[o](x) for o, x in zip(out, res))
        return res if many else res[0]
    return wrapped


#: the algorithms available for coupled robots: name -> (positional input kinds, output projections)
EXPANDED = {
    "center_of_mass": ("q", "-"),
    "mass_matrix": ("q", "b"),
    "bias_forces": ("qv", "r"),
    "inverse_dynamics": ("qvv", "r"),
    "momentum": ("qv", "-"),
    "kinetic_energy": ("qv", "-"),
    "jacobian": ("q", "c"),
    "frame_acceleration_derivatives": ("qvv", "--ccc"),
    "inverse_dynamics_regressor": ("qvv", "r"),
    "momentum_regressor": ("qv", "-"),
}
#: algorithms whose reduced form is derived here rather than by projection
DERIVED = {"forward_dynamics": _forward_dynamics, "mass_matrix_inverse": _mass_matrix_inverse,
           "inverse_dynamics_derivatives": _inverse_dynamics_derivatives,
           "forward_dynamics_derivatives": _forward_dynamics_derivatives}
#: every algorithm (public API) that works for coupled robots
COUPLED_ALGORITHMS = frozenset(EXPANDED) | frozenset(DERIVED)


def coupled(name: str, fn: Callable, algs: Any) -> Callable:
    """``fn`` (algorithm ``name``), dispatching to its reduced-coordinate form for a coupled robot
    (:attr:`Robot.is_coupled`); a robot without couplings runs ``fn`` itself, unchanged.  ``algs``: the
    namespace of the full-coordinate algorithms."""
    if name in EXPANDED:
        red = _expanding(fn, *EXPANDED[name])
    elif name in DERIVED:
        red = DERIVED[name](algs)
    else:
        def red(robot: Any, *a: Any, **k: Any) -> Any:
            raise ValueError(f"{name}: robot {robot.name!r} has mimic couplings, for which {name} is not "
                             f"available; available: {', '.join(sorted(COUPLED_ALGORITHMS))}")

    @functools.wraps(fn)
    def dispatch(robot: Any, *args: Any, **kw: Any) -> Any:
        if getattr(robot, "is_coupled", False):
            return red(robot, *args, **kw)
        return fn(robot, *args, **kw)
    return dispatch
