r"""The one time integrator of soadyn: classical RK4, on the configuration Lie group (RKMK4) and on vectors.

The configuration space of a free base is ``R^3 x SO(3) x R^n`` (``q = [p; quat; qj]``, quaternion
``[x, y, z, w]``), of a fixed base ``R^n``.  Over one step the configuration is written in the chart of the
one retraction centred at the step's start ``q0 = (p0, R0, qj0)``: ``q = q0 (+) y``, i.e.
``R = R0 Exp(theta)``, ``p = p0 + R0 dp``, ``qj = qj0 + dqj`` with ``y = [theta; dp; dqj]`` ordered like v
(:func:`soadyn.model.configuration.retract`, docs/conventions.md).  In the chart the kinematics are ordinary
ODEs in ``y``:

* ``dtheta/dt = J_r(theta)^-1 w`` with the base angular velocity ``w`` in base axes (``dR/dt = R w~``) and
  the inverse right Jacobian of the exponential map (dexp^-1, :func:`dexpinv_right`)
  ``J_r^-1(theta) = I + theta~/2 + (1/|theta|^2 - (1 + cos|theta|) / (2 |theta| sin|theta|)) theta~^2``;
* ``d(dp)/dt = R0^T R v_lin = Exp(theta) v_lin`` (``v_lin`` in base axes), ``dqj/dt = qdj``.

Classical RK4 runs in the chart together with the rest of the state ``x`` (velocities, a work integral,
wheel rates, ...); the configuration is then ``q0 (+) y`` (the quaternion ``quat0 * exp(theta/2)``, of unit
norm).  The attitude is an exact rotation at every step and the method is 4th order (Munthe-Kaas, BIT
1998).  :func:`rk4_step` is used by :func:`soadyn.runtime.simulate.simulate`, the closed-loop simulator
:func:`soadyn.runtime.closed_loop.simulate` and the kinematic-level momentum-management simulation of
:mod:`soadyn.runtime.control`.  For a plain vector ODE ``dx/dt = f(t, x)`` (e.g. Euler's equations of a
torque-free rigid body) :func:`rk4_vector_step` and :func:`rk4_vector` are the same classical RK4 with an
empty configuration.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from soadyn.model.configuration import retract
from soadyn.model.rotations import cross, quat_exp, quaternion_to_matrix

__all__ = ["dexpinv_right", "rk4_step", "rk4_vector", "rk4_vector_step"]

#: ``f(t, q, x) -> (v, dx/dt)``: the velocity ``v`` (nv: base twist in base axes, then joint rates) that
#: moves the configuration ``q``, and the rate of the rest of the state ``x``
Rates = Callable[[float, np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]


def dexpinv_right(theta: np.ndarray, w: np.ndarray) -> np.ndarray:
    """``J_r(theta)^-1 w``: chart velocity of ``R = R0 Exp(theta)`` for the body angular velocity ``w``."""
    a2 = float(theta @ theta)
    tw = cross(theta, w)
    if a2 < 1e-8:
        c = 1.0 / 12.0 + a2 / 720.0
    else:
        a = math.sqrt(a2)
        c = 1.0 / a2 - (1.0 + math.cos(a)) / (2.0 * a * math.sin(a))
    return w + 0.5 * tw + c * cross(theta, tw)


def _chart_rate(y: np.ndarray, v: np.ndarray, free: bool) -> np.ndarray:
    if not free:
        return v
    # d(dp)/dt = R0^T R v_lin with R = R0 Exp(theta)
    return np.concatenate([dexpinv_right(y[:3], v[:3]), quaternion_to_matrix(quat_exp(y[:3])) @ v[3:6],
                           v[6:]])


def rk4_step(f: Rates, t: float, q: np.ndarray, x: np.ndarray, h: float, free: bool,
             k1: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """One RKMK4 step of length ``h`` from ``(t, q, x)``; returns the new ``(q, x)``.

    ``k1``: ``f(t, q, x)`` when the caller has evaluated it already (e.g. to record the torques).
    """
    y0 = np.zeros(len(q) - 1 if free else len(q))

    def stage(tt: float, y: np.ndarray, xx: np.ndarray, rates: tuple[np.ndarray, np.ndarray] | None = None):
        qq = retract(q, y, free)
        v, dx = f(tt, qq, xx) if rates is None else rates
        return _chart_rate(y, v, free), dx

    y1, x1 = stage(t, y0, x, k1)
    y2, x2 = stage(t + 0.5 * h, 0.5 * h * y1, x + 0.5 * h * x1)
    y3, x3 = stage(t + 0.5 * h, 0.5 * h * y2, x + 0.5 * h * x2)
    y4, x4 = stage(t + h, h * y3, x + h * x3)
    qn = retract(q, (h / 6.0) * (y1 + 2 * y2 + 2 * y3 + y4), free)
    return qn, x + (h / 6.0) * (x1 + 2 * x2 + 2 * x3 + x4)


_EMPTY = np.zeros(0)


def rk4_vector_step(f: Callable[[float, np.ndarray], np.ndarray], t: float, x: np.ndarray,
                    h: float) -> np.ndarray:
    """One classical RK4 step of ``dx/dt = f(t, x)`` (:func:`rk4_step` with no configuration)."""
    return rk4_step(lambda tt, q, xx: (q, f(tt, xx)), t, _EMPTY, np.asarray(x, dtype=float), h, False)[1]


def rk4_vector(f: Callable[[float, np.ndarray], np.ndarray], x0: np.ndarray, duration: float,
               max_step: float, t0: float = 0.0) -> np.ndarray:
    """``x(t0 + duration)`` of ``dx/dt = f(t, x)`` by ``ceil(duration / max_step)`` equal RK4 steps
    (``x0`` itself for ``duration <= 0``).

    For example Euler's equations of a torque-free rigid body (body axes, inertia ``I``)::

        Iinv = np.linalg.inv(I)
        w = rk4_vector(lambda t, w: -Iinv @ np.cross(w, I @ w), w0, duration, 0.01)
    """
    x = np.asarray(x0, dtype=float)
    if not duration > 0:
        return x
    n = max(1, math.ceil(duration / max_step))
    h = duration / n
    for i in range(n):
        x = rk4_vector_step(f, t0 + i * h, x, h)
    return x
