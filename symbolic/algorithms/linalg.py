"""Small dense linear algebra over a generic scalar: LDL^T of a symmetric positive definite matrix.

Used for the 6x6 articulated inertia of a free base, ``D(n) = P(n)`` (seed 000 eq. 3.1-3.2), and for the
base block of the mass matrix in the generalised Jacobian.  Each pivot reciprocal is staged once, so a
symbolic run never divides twice by the same quantity.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from soadyn.symbolic.scalar import ScalarContext


@dataclass
class LDL:
    L: np.ndarray       # unit lower triangular
    dinv: np.ndarray    # reciprocals of the pivots
    ctx: ScalarContext

    def solve(self, b: np.ndarray, name: str = "ldl") -> np.ndarray:
        """x = A^-1 b for a vector or a matrix of columns."""
        if b.ndim == 2:
            if b.shape[1] == 0:          # no columns (a free base without joints): nothing to solve
                return np.empty(b.shape, dtype=b.dtype)
            return np.stack([self.solve(b[:, j], f"{name}c{j}") for j in range(b.shape[1])], axis=1)
        ctx, L, n = self.ctx, self.L, len(b)
        y = list(b)
        for i in range(n):
            for k in range(i):
                y[i] = y[i] - L[i, k] * y[k]
            # rows past the first 6 named one by one, as x below: y[i] read unnamed in every later y made
            # a DAG whose tree walks (an optimiser pass) doubled with each row (a 26-row solve of PR2's
            # mimics did not generate in 15 minutes); the first 6 (a base's 6 x 6 solves) stay as they
            # were, which keeps their programs and C the same
            if i >= 6:
                y[i] = ctx.stage(f"{name}y", y[i])
        y = ctx.stage(f"{name}y", ctx.array(y))
        x = [y[i] * self.dinv[i] for i in range(n)]
        for i in reversed(range(n)):
            for k in range(i + 1, n):
                x[i] = x[i] - L[k, i] * x[k]
            x[i] = ctx.stage(f"{name}x", x[i])
        return ctx.array(x)

    def inverse(self, name: str = "inv") -> np.ndarray:
        """A^-1, exactly symmetric: the upper triangle of the solved columns, mirrored (the entries below
        the diagonal differ from it only by rounding; a symmetric result lets M^-1's blocks be read by
        rows or by columns alike, :func:`soadyn.codegen.products.row_vectors`)."""
        n = self.L.shape[0]
        X = self.solve(self.ctx.eye(n), name)
        for i in range(n):
            for j in range(i):
                X[i, j] = X[j, i]
        return X


def ldl(ctx: ScalarContext, A: np.ndarray, name: str = "ldl") -> LDL:
    """A = L diag(d) L^T (A symmetric positive definite), staged column by column."""
    n = A.shape[0]
    L = ctx.eye(n)
    d: list[Any] = [None] * n
    dinv: list[Any] = [None] * n
    for j in range(n):
        dj = A[j, j]
        for k in range(j):
            dj = dj - L[j, k] * L[j, k] * d[k]
        d[j] = ctx.stage(f"{name}d{j}", dj)
        dinv[j] = ctx.stage(f"{name}di{j}", 1 / d[j])
        for i in range(j + 1, n):
            lij = A[i, j]
            for k in range(j):
                lij = lij - L[i, k] * L[j, k] * d[k]
            L[i, j] = ctx.stage(f"{name}L{i}{j}", lij * dinv[j])
    return LDL(L, ctx.array(dinv), ctx)
