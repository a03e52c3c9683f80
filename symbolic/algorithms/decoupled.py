"""Base-invariant decoupled forward dynamics of seed 000 (Lemma 3.2, Algorithm 6), for trees.

Two articulated-body recursions run in opposite directions and are combined link by link:

1. kinematics and velocity terms V, a, b (Algorithm 1, first half);
2. (a) the conventional block, tip to base: P, P+, D, G (Algorithm 2) and z, z+, nu (eq. 2.13a);
   (b) the dual block, base to tip: S+, S, D_s, Gs (Algorithm 4) and z_s, nu_s (Algorithm 5),
   see :mod:`.dual`;
3. per link k, independently of every other link (eq. 3.12 and 3.13)::

       Lambda(k) = P(k) + S(k)
       alpha(k)  = -Lambda(k)^-1 [z(k) + z_s(k) - P(k) a(k)]
       betadot(k) = nu_s(k) + Gs*(k) alpha(k)                       (k >= 1)
       betadot(0) = alpha(0) - a(0) - phi*(n+1, 0) alpha(n+1)       (free base; the last term is gravity)

Eq. 3.12 follows from the two expressions of the force across hinge k, ``f = P (alpha - a) + z`` (3.7)
and ``-f = S alpha + z_s`` (3.11, derived again in :mod:`.dual`).  alpha(k) here is the link's
acceleration relative to the free-falling frame (our conventional alpha, which carries ``-g``): uniform
gravity does not load a free-floating system, so neither recursion sees it and it only appears in the
base's generalised acceleration.

Independence of the blocks (what makes the algorithm parallel): on a serial chain block 2(a) and block
2(b) read only the output of step 1 and constants.  On a tree the dual sweep additionally reads, at a
branch body, the P+ and z+ of the *siblings* of the body it moves to (section 3.4: along each edge there
are exactly two recursions, one each way; the one leaving a branch point gathers those arriving from
the other branches).  The conventional block never reads the dual one.  In a symbolic run the blocks are
visible by name (``P``, ``U``, ``D``, ``G``, ``Pp``, ``Zp`` versus ``S``, ``Zs``) and by position in the
program (:func:`decoupled_program_blocks`); ``tests/test_base_invariant.py`` checks the data
independence on the staged program.

A fixed base is not supported: the complement of every subtree contains the ground, S is unbounded and
Lemma 3.2 degenerates (use :func:`.forward_dynamics.forward_dynamics`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from soadyn.model.robot import require_free
from soadyn.symbolic.algorithms.articulated_body import articulated_body
from soadyn.symbolic.algorithms.dual import (
    FIXED_BASE_NOTE,
    conventional_residuals,
    dual_articulated_body,
    dual_residual_forces,
)
from soadyn.symbolic.algorithms.forward_dynamics import net_torques
from soadyn.symbolic.algorithms.kinematics import gravity_acceleration, joint_transforms, velocities
from soadyn.symbolic.algorithms.linalg import ldl
from soadyn.symbolic.scalar import ScalarContext


def _decoupled(robot: Any, ctx: ScalarContext, q: np.ndarray, v: np.ndarray, tau: np.ndarray,
               f_ext: np.ndarray | None, marks: dict[str, int] | None) -> tuple[np.ndarray, list[Any]]:
    require_free(robot, "forward_dynamics_decoupled", FIXED_BASE_NOTE)

    def mark(name: str) -> None:
        if marks is not None:
            marks[name] = len(getattr(ctx, "program", ()))

    mark("kinematics")
    tau = net_torques(robot, ctx, v, tau)
    kin = joint_transforms(robot, ctx, q)
    vt = velocities(kin, v, f_ext)
    mark("P")
    ab = articulated_body(robot, ctx, q, kin)
    z, zplus, _ = conventional_residuals(ab, tau, vt.a, vt.b)
    mark("S")
    dab = dual_articulated_body(robot, ctx, q, ab, kin)
    zs, nus = dual_residual_forces(dab, tau, vt.a, vt.b, zplus)
    mark("combine")
    n = robot.n_bodies
    qdd = ctx.zeros(robot.nv)
    alpha: list[Any] = [None] * n
    for k in range(n):
        Lam = ab.P[k] if k == 0 else ctx.stage_symmetric(f"Lam{k}", ab.P[k] + dab.S[k])
        rhs = ctx.stage(f"Lrhs{k}", ab.P[k] @ vt.a[k] - z[k] - zs[k])
        alpha[k] = ldl(ctx, Lam, f"Lam{k}f").solve(rhs, f"alph{k}")
        if k == 0:
            qdd[0:6] = ctx.stage("qddb", alpha[0] - vt.a[0] - gravity_acceleration(kin))
        else:
            qdd[robot.v_index(k)] = ctx.stage(f"qdd{k}", nus[k] + dab.Gs[k] @ alpha[k])
    mark("end")
    return qdd, alpha


def forward_dynamics_decoupled(robot: Any, ctx: ScalarContext, q: np.ndarray, v: np.ndarray, tau: np.ndarray,
                               f_ext: np.ndarray | None = None) -> np.ndarray:
    """betadot by seed 000 Algorithm 6 (Lemma 3.2 + eq. 3.13); same result as ``forward_dynamics``.

    Free base only (a fixed base raises ``ValueError``).
    """
    qdd, _ = _decoupled(robot, ctx, q, v, tau, f_ext, None)
    return qdd


def link_accelerations_decoupled(robot: Any, ctx: ScalarContext, q: np.ndarray, v: np.ndarray,
                                 tau: np.ndarray, f_ext: np.ndarray | None = None) -> np.ndarray:
    """(n_bodies, 6) spatial accelerations alpha(k) of Lemma 3.2 (eq. 3.12), body coordinates, gravity
    included as in the conventional algorithm (acceleration relative to free fall)."""
    _, alpha = _decoupled(robot, ctx, q, v, tau, f_ext, None)
    return np.stack(alpha)


def decoupled_program_blocks(robot: Any, ctx: ScalarContext, q: np.ndarray, v: np.ndarray, tau: np.ndarray,
                             f_ext: np.ndarray | None = None) -> tuple[np.ndarray, dict[str, int]]:
    """Run the decoupled algorithm and return (betadot, marks): ``marks[name]`` is the index in
    ``ctx.program`` at which block ``name`` ('kinematics', 'P', 'S', 'combine', 'end') starts."""
    marks: dict[str, int] = {}
    qdd, _ = _decoupled(robot, ctx, q, v, tau, f_ext, marks)
    return qdd, marks
