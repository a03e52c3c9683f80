"""Dense reference for the regressors: built from the reference inverse dynamics and momentum alone.

Independent of :mod:`soadyn.symbolic.algorithms.regressors` on purpose: no body regressor, no column
propagation.  Both quantities are affine in the parameters of the parameterised bodies,
``x(pi) = Y pi + x0``, so ``Y`` follows from ``10 P + 1`` evaluations of the dense path
(:mod:`soadyn.reference.dense`) at physically valid parameter sets: the robot's own (``pi_0``) and, per
body, ten random rigid-body inertias ``pi_0 + d_i`` (:func:`soadyn.model.parameters.random_params`);
``Y[:, body] = [x(pi_0 + d_i) - x(pi_0)]_i [d_i]_i^-1``.  Rounding grows with the condition number of the
10x10 difference matrix (about 10-100 for random differences), so this reference is good to about 1e-13
relative, not to the last bit.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike

from soadyn.model.parameters import default_params, random_params, with_param_values
from soadyn.model.robot import Robot
from soadyn.reference import dense


def momentum_about_origin(robot: Robot, q: ArrayLike, v: ArrayLike) -> np.ndarray:
    """``h_O = [angular momentum about the inertial origin; linear momentum]``, inertial axes."""
    h = dense.momentum(robot, q, v)
    c = dense.center_of_mass(robot, q)
    return np.concatenate([h[:3] + np.cross(c, h[3:]), h[3:]])


def _affine_columns(robot: Robot, fn: Callable[[Robot], np.ndarray], seed: int = 7) -> np.ndarray:
    rng = np.random.default_rng(seed)
    p0 = default_params(robot)
    x0 = fn(with_param_values(robot, p0))
    cols = []
    for b in range(len(robot.param_bodies)):
        D, X = [], []
        while len(D) < 10:
            p = p0.copy()
            p[b] = random_params(robot, rng)[b]
            D.append(p[b] - p0[b])
            X.append(fn(with_param_values(robot, p)) - x0)
        cols.append(np.linalg.solve(np.array(D), np.array(X)).T)      # (len x, 10): X = D Y^T
    return np.concatenate(cols, axis=1) if cols else np.zeros((x0.size, 0))


def inverse_dynamics_regressor(robot: Robot, q: ArrayLike, v: ArrayLike, a: ArrayLike) -> np.ndarray:
    """``Y`` with ``tau = Y pi + tau(params = 0)`` for the parameterised bodies (module docstring)."""
    return _affine_columns(robot, lambda r: dense.inverse_dynamics(r, q, v, a))


def momentum_regressor(robot: Robot, q: ArrayLike, v: ArrayLike) -> np.ndarray:
    """``Y_h`` with ``h_O = Y_h pi + h_O(params = 0)`` (see :func:`momentum_about_origin`)."""
    return _affine_columns(robot, lambda r: momentum_about_origin(r, q, v))
