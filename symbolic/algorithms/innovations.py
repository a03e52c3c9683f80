"""Innovations factorisation of seed 000, Lemma 2.1:

    M    = [I + H phi K] D [I + H phi K]*          (2.10a)
    [I + H phi K]^-1 = [I - H psi K]                (2.10b)
    M^-1 = [I - H psi K]* D^-1 [I - H psi K]        (2.10c)

``mass_matrix_inverse`` applies (2.10c) to the unit vectors: ``[I - H psi K] T`` is the residual-force
recursion (2.13a) with a = b = 0, ``D^-1`` the pivots, and ``[I - H psi K]*`` the acceleration sweep
(2.13b) without Coriolis or gravity terms.

In our base-first numbering the factor ``L = I + H phi K`` has ``L(i, j) = H(i) phi(i, j) G(j)`` for i a
strict ancestor of j (K(parent(j), j) = phi(parent(j), j) G(j)), so it is unit *upper* triangular here.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .articulated_body import articulated_body
from .forward_dynamics import accelerations, residual_forces


def mass_matrix_inverse(robot: Any, ctx: Any, q: np.ndarray) -> np.ndarray:
    """M^-1 by eq. 2.10c, column by column."""
    ab = articulated_body(robot, ctx, q)
    nv = robot.nv
    Minv = ctx.zeros((nv, nv))
    for j in range(nv):
        e = ctx.zeros(nv)
        e[j] = 1
        _, nu = residual_forces(ab, e, None, None, tag=f"_{j}_")
        col, _ = accelerations(ab, nu, None, with_gravity=False, tag=f"_{j}_")
        for i in range(nv):
            if i >= j:
                Minv[i, j] = col[i]
                Minv[j, i] = col[i]
    return Minv


def innovations_factors(robot: Any, ctx: Any, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(L, D) with L = I + H phi K (eq. 2.10a) and D = diag(D(k)), so that M = L D L*."""
    ab = articulated_body(robot, ctx, q)
    kin = ab.kin
    nv = robot.nv
    L = ctx.eye(nv)
    Dm = ctx.zeros((nv, nv))
    for j in range(robot.n_bodies):
        if j == 0:
            if robot.is_free:
                Dm[0:6, 0:6] = ab.D[0]
            continue
        sj = robot.v_index(j)
        Dm[sj, sj] = ab.D[j]
        g = ab.G[j]                       # phi(j, j) G(j)
        i = j
        while robot.parent[i] > 0 or (robot.parent[i] == 0 and robot.is_free):
            g = ctx.stage(f"Kc{j}_{robot.parent[i]}", kin.X[i].force_to_parent(g))
            i = robot.parent[i]
            si = robot.v_index(i)
            L[si, sj] = g.reshape(6, 1) if i == 0 else (kin.hinge(i) @ g)
    return L, Dm
