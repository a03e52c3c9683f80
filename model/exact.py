"""Machine-independent float arithmetic for the constants that reach generated code.

The generated C must be byte-identical on every machine, thread count and ``PYTHONHASHSEED``.  numpy's
reductions and products are not: ``A @ B``, ``np.dot``, ``np.linalg.*`` go to BLAS/LAPACK kernels whose
summation order and use of fused multiply-adds depend on the CPU (and ``OPENBLAS_CORETYPE``), and
``np.sin``/``np.cos``/``np.sum`` use SIMD code chosen at run time (``NPY_DISABLE_CPU_FEATURES``).  The
last digits of folded constants then differ between machines.  Elementwise ``+ - * / sqrt`` are exactly
rounded by IEEE 754 and safe.  This module computes the rest once, correctly rounded:

* :func:`dot` -- the exactly rounded value of ``sum(a_i b_i)``: each product is split exactly into two
  doubles (Veltkamp/Dekker), and ``math.fsum`` rounds the exact sum once;
* :func:`matmul`, :func:`norm` built on it (``sqrt`` is correctly rounded by IEEE 754);
* :func:`sin_cos` -- correctly rounded sine and cosine (mpmath, exact integer arithmetic), instead of the
  platform's libm or numpy's SIMD kernels;
* :func:`inverse` -- the inverse of a small matrix in exact rational arithmetic, rounded once.

Results are order-independent, so they are the same on any machine.  Only the model's constants (robot
placements, inertias, axes) go through here; the float algorithms used at run time keep numpy.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction
from functools import lru_cache
from typing import Any

import numpy as np

_SPLIT = 134217729.0  # 2^27 + 1 (Veltkamp)


def _two_product(a: float, b: float) -> tuple[float, float]:
    """``(p, e)`` with ``p = fl(a b)`` and ``p + e = a b`` exactly (no overflow for |a|, |b| < 1e150)."""
    p = a * b
    c = _SPLIT * a
    ah = c - (c - a)
    al = a - ah
    c = _SPLIT * b
    bh = c - (c - b)
    bl = b - bh
    e = ((ah * bh - p) + ah * bl + al * bh) + al * bl
    return p, e


def dot(a: Sequence[float], b: Sequence[float]) -> float:
    """Correctly rounded ``sum(a_i * b_i)`` (independent of order and machine)."""
    terms: list[float] = []
    for x, y in zip(a, b):
        x, y = float(x), float(y)
        if x == 0.0 or y == 0.0:
            continue
        if abs(x) < 1e150 and abs(y) < 1e150 and abs(x * y) > 1e-290:
            terms.extend(_two_product(x, y))
        else:  # outside the range of the exact split: exact rational product
            terms.append(float(Fraction(x) * Fraction(y)) if math.isfinite(x * y) else x * y)
    return math.fsum(terms)


def matmul(A: Any, B: Any) -> np.ndarray:
    """``A @ B`` for small float matrices (or matrix @ vector), each entry correctly rounded."""
    A = np.asarray(A, dtype=float)
    B = np.asarray(B, dtype=float)
    if B.ndim == 1:
        return np.array([dot(row, B) for row in A.tolist()])
    cols = B.T.tolist()
    return np.array([[dot(row, c) for c in cols] for row in A.tolist()])


def congruence(R: Any, S: Any) -> np.ndarray:
    """``R S R^T`` with every entry the correctly rounded exact value (exact rational sums), so a
    symmetric ``S`` gives an exactly symmetric result."""
    R = [[Fraction(float(x)) for x in row] for row in np.asarray(R, dtype=float).tolist()]
    S = [[Fraction(float(x)) for x in row] for row in np.asarray(S, dtype=float).tolist()]
    n, m = len(R), len(S)
    RS = [[sum(R[i][k] * S[k][j] for k in range(m)) for j in range(m)] for i in range(n)]
    return np.array([[float(sum(RS[i][k] * R[j][k] for k in range(m))) for j in range(n)] for i in range(n)])


def norm(a: Sequence[float]) -> float:
    """Euclidean norm, correctly rounded sum of squares then IEEE ``sqrt`` (scaled, no under/overflow)."""
    v = [float(x) for x in a]
    s = max((abs(x) for x in v), default=0.0)
    if s == 0.0 or not math.isfinite(s):
        return s
    e = math.frexp(s)[1]
    w = [math.ldexp(x, -e) for x in v]  # exact scaling by a power of two
    return math.ldexp(math.sqrt(dot(w, w)), e)


@lru_cache(maxsize=4096)
def sin_cos(x: float) -> tuple[float, float]:
    """Correctly rounded ``(sin x, cos x)`` of a float (exact for 0)."""
    x = float(x)
    if x == 0.0:
        return x, 1.0
    import mpmath

    with mpmath.workprec(160):
        v = mpmath.mpf(x)
        return float(mpmath.sin(v)), float(mpmath.cos(v))


def inverse(A: Any) -> np.ndarray:
    """Inverse of a small non-singular float matrix: Gauss-Jordan in exact rational arithmetic, each
    entry rounded once.  Raises ``ZeroDivisionError`` for a singular matrix."""
    A = np.asarray(A, dtype=float)
    n = A.shape[0]
    M = [[Fraction(x) for x in row] + [Fraction(int(i == j)) for j in range(n)]
         for i, row in enumerate(A.tolist())]
    for c in range(n):
        p = next((r for r in range(c, n) if M[r][c] != 0), None)
        if p is None:
            raise ZeroDivisionError("singular matrix")
        M[c], M[p] = M[p], M[c]
        piv = M[c][c]
        M[c] = [x / piv for x in M[c]]
        for r in range(n):
            if r != c and M[r][c] != 0:
                f = M[r][c]
                M[r] = [x - f * y for x, y in zip(M[r], M[c])]
    return np.array([[float(x) for x in row[n:]] for row in M])
