"""The one accessor through which the algorithms read a body's inertia: a constant, or run-time parameters.

A body is *parameterised* when the scalar context carries its ten inertial parameters
(``ctx.parameters[k]``, see :mod:`soadyn.model.parameters` for the order
``[m, m c (3), J_xx, J_xy, J_xz, J_yy, J_yz, J_zz]``, J about the body origin O_k): SymEngine symbols of
the generated function's ``params`` argument in a symbolic run, floats in a numeric run.  Every other body
is read from ``robot.inertias`` exactly as the algorithms always did (``ctx.const`` of the same floats, the
mass a Python float), so a robot without parameterised bodies derives the same program, term for term, and
the same C.

Seed 000 section 2 writes the spatial inertia about O_k as ``M(k) = [[J, h~], [-h~, m I]]`` with ``h = m p``
the first mass moment; it is linear in pi, which is what the regressors of
:mod:`soadyn.symbolic.algorithms.regressors` use.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from soadyn.model.parameters import J_ENTRIES
from soadyn.symbolic.scalar import ScalarContext
from soadyn.symbolic.spatial import RigidInertia, skew


@dataclass
class BodyInertia:
    """``m`` (a float for a constant body), ``h = m p`` (3,) and ``J`` (3x3) about O_k, body axes."""

    m: Any
    h: np.ndarray
    J: np.ndarray
    parameterised: bool

    def rigid(self) -> RigidInertia:
        return RigidInertia(self.m, self.h, self.J)


def parameter_rows(pi: np.ndarray, ctx: ScalarContext) -> tuple[Any, np.ndarray, np.ndarray]:
    """(m, h, J) of a parameter vector of the context's scalar type (J symmetric, built from 6 entries)."""
    J = ctx.zeros((3, 3))
    for v, (i, j) in zip(pi[4:10], J_ENTRIES):
        J[i, j] = v
        J[j, i] = v
    return pi[0], ctx.array(list(pi[1:4])), J


def body_inertia(robot: Any, ctx: ScalarContext, k: int) -> BodyInertia:
    """The inertia of body ``k``: the context's parameters if it has them, else the robot's constants."""
    pi = ctx.parameters.get(k)
    if pi is None:
        inert = robot.inertias[k]
        return BodyInertia(inert.mass, ctx.const(inert.mass * inert.com), ctx.const(inert.spatial()[:3, :3]),
                           False)
    m, h, J = parameter_rows(pi, ctx)
    return BodyInertia(m, h, J, True)


def spatial_inertia(robot: Any, ctx: ScalarContext, k: int) -> np.ndarray:
    """``M(k)``, 6x6 about O_k (seed 000 section 2)."""
    if k not in ctx.parameters:
        return ctx.const(robot.inertias[k].spatial())
    return body_inertia(robot, ctx, k).rigid().spatial()


def total_mass(robot: Any, ctx: ScalarContext) -> Any:
    """Sum of the body masses (a float when no body is parameterised)."""
    if not ctx.parameters:
        return robot.total_mass
    fixed = float(sum(i.mass for k, i in enumerate(robot.inertias) if k not in ctx.parameters))
    out: Any = fixed
    for k in sorted(ctx.parameters):
        out = out + ctx.parameters[k][0]
    return out


def inverse_spatial_inertia(robot: Any, ctx: ScalarContext, k: int) -> np.ndarray:
    """``M(k)^-1`` of a parameterised body in closed form (for the Schur-complement algorithm, seed 002).

    ``M = phi(O, C) diag(I_c, m 1) phi*(O, C)`` with ``phi(O, C) = [[1, c~], [0, 1]]`` gives
    ``M^-1 = [[I_c^-1, -I_c^-1 c~], [c~ I_c^-1, 1/m - c~ I_c^-1 c~]]``, with ``c = h / m`` and
    ``I_c = J + h~ h~ / m``; ``I_c^-1`` is the adjugate over the determinant.  Staged as ``Mi<k>``.
    """
    bi = body_inertia(robot, ctx, k)
    inv_m = ctx.stage(f"Mim{k}", 1 / bi.m)
    c = ctx.stage(f"Mic{k}", bi.h * inv_m)
    C = skew(c)
    Ic = ctx.stage_symmetric(f"MiIc{k}", bi.J + (skew(bi.h) @ skew(bi.h)) * inv_m)
    adj = ctx.zeros((3, 3))
    for i in range(3):
        for j in range(3):
            r = [x for x in range(3) if x != j]
            s = [x for x in range(3) if x != i]
            adj[i, j] = (-1) ** (i + j) * (Ic[r[0], s[0]] * Ic[r[1], s[1]] - Ic[r[0], s[1]] * Ic[r[1], s[0]])
    det = Ic[0, 0] * adj[0, 0] + Ic[0, 1] * adj[1, 0] + Ic[0, 2] * adj[2, 0]
    Ici = ctx.stage_symmetric(f"MiIci{k}", adj * ctx.stage(f"Midet{k}", 1 / det))
    top_right = -(Ici @ C)
    out = ctx.zeros((6, 6))
    out[:3, :3] = Ici
    out[:3, 3:] = top_right
    out[3:, :3] = top_right.T
    out[3:, 3:] = ctx.eye(3) * inv_m - C @ Ici @ C
    return ctx.stage_symmetric(f"Mi{k}", out)
