"""Identification helpers on the generated regressors: base (identifiable) parameters and least squares.

**Base parameters.**  A regressor ``Y(q, v, a)`` (``tau = Y pi``, or the momentum regressor) has columns that
are zero for every motion (a parameter that never acts) or linear combinations of other columns for every
motion (parameters that only act in fixed combinations, e.g. the mass of a link and the first moment of its
parent along the joint offset).  Only ``r = rank`` combinations ``pi_b = B pi`` can be identified, with
``Y pi = Y[:, columns] pi_b`` for every motion.  :func:`base_parameters` finds them numerically
(Gautier's approach): stack ``Y`` over random samples into ``W`` (rows) and run a QR factorisation with
column pivoting (Businger & Golub: at each step the column with the largest remaining norm, made
orthogonal to the chosen ones by modified Gram-Schmidt, twice); it stops when the largest remaining norm
is below ``tol`` times the largest column norm (default ``1e-9``: structural dependencies leave residuals
of order 1e-15).  The chosen columns form the base set, and ``B = [1 | K]`` (in the original column
order) with ``K = W_b^+ W_d`` expresses each dependent column through the base set; entries of K below
``1e-10`` in magnitude are set to zero.  Random samples make this a property of the robot, not of a
trajectory; with enough samples (default 40 x the row count) a wrong rank has probability zero.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class BaseParameters:
    """``pi_b = B pi`` (``B``: rank x n_params) with ``Y pi = Y[:, columns] pi_b`` for every sample."""

    columns: tuple[int, ...]
    B: np.ndarray
    labels: tuple[str, ...]

    @property
    def rank(self) -> int:
        return len(self.columns)

    def reduce(self, Y: np.ndarray) -> np.ndarray:
        """The base regressor ``Y[..., columns]``."""
        return np.asarray(Y)[..., list(self.columns)]

    def describe(self, digits: int = 4) -> list[str]:
        """One line per base parameter: ``label = label + k * other + ...``."""
        lines = []
        names = self.labels
        for i, c in enumerate(self.columns):
            terms = [names[c]]
            for j in np.flatnonzero(self.B[i]):
                if j != c:
                    terms.append(f"{self.B[i, j]:+.{digits}g} {names[j]}")
            lines.append(f"{names[c]}_base = " + " ".join(terms))
        return lines


def pivoted_columns(W: np.ndarray, tol: float = 1e-9) -> list[int]:
    """Column indices chosen by QR with column pivoting (see the module docstring), in pivot order."""
    A = np.array(W, dtype=float, copy=True)
    norms = np.linalg.norm(A, axis=0)
    top = float(norms.max()) if norms.size else 0.0
    chosen: list[int] = []
    free = np.ones(A.shape[1], dtype=bool)
    while free.any():
        rest = np.where(free, np.linalg.norm(A, axis=0), -1.0)
        j = int(np.argmax(rest))
        if rest[j] <= tol * top:
            break
        qj = A[:, j] / rest[j]
        chosen.append(j)
        free[j] = False
        for _ in range(2):
            A[:, free] -= np.outer(qj, qj @ A[:, free])
    return chosen


def base_parameters(regressor: Callable[[np.random.Generator], np.ndarray], n_params: int,
                    labels: Sequence[str] | None = None, samples: int | None = None,
                    rng: np.random.Generator | None = None, tol: float = 1e-9) -> BaseParameters:
    """Base parameters of a regressor; ``regressor(rng)`` returns ``Y`` (rows x n_params) at one random
    state (e.g. ``lambda g: mod.inverse_dynamics_regressor(*random_state(g))``).  See the module doc."""
    rng = np.random.default_rng(0) if rng is None else rng
    first = np.asarray(regressor(rng), dtype=float)
    if first.ndim != 2 or first.shape[1] != n_params:
        raise ValueError(f"base_parameters: the regressor returned shape {first.shape}, "
                         f"expected (rows, {n_params})")
    count = samples if samples is not None else max(40, 4 * n_params // max(first.shape[0], 1))
    W = np.vstack([first] + [np.asarray(regressor(rng), dtype=float) for _ in range(count - 1)])
    cols = sorted(pivoted_columns(W, tol))
    dep = [j for j in range(n_params) if j not in cols]
    B = np.zeros((len(cols), n_params))
    B[:, cols] = np.eye(len(cols))
    if dep and cols:
        K = np.linalg.lstsq(W[:, cols], W[:, dep], rcond=None)[0]
        K[np.abs(K) < 1e-10] = 0.0
        B[:, dep] = K
    names = tuple(labels) if labels is not None else tuple(f"p{j}" for j in range(n_params))
    return BaseParameters(tuple(cols), B, names)


def least_squares(Y: np.ndarray, y: np.ndarray, weights: np.ndarray | None = None
                  ) -> tuple[np.ndarray, np.ndarray, float]:
    """``(x, residual, condition number)`` of the stacked system ``Y x = y`` (rows weighted by ``weights``,
    e.g. 1 / noise standard deviation); ``Y`` may be (N, rows, cols) and ``y`` (N, rows)."""
    A = np.asarray(Y, dtype=float).reshape(-1, np.shape(Y)[-1])
    b = np.asarray(y, dtype=float).ravel()
    if weights is not None:
        w = np.broadcast_to(np.asarray(weights, dtype=float), np.shape(y)).ravel()
        A, b = A * w[:, None], b * w
    x = np.linalg.lstsq(A, b, rcond=None)[0]
    s = np.linalg.svd(A, compute_uv=False)
    return x, b - A @ x, float(s[0] / s[-1]) if s[-1] > 0 else float("inf")
