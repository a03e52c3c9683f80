"""Reference derivatives: central finite differences on the configuration manifold of the dense path.

Independent of the generated derivatives: no forward mode, no staged program; only the dense reference
dynamics of :mod:`soadyn.reference.dense` evaluated at perturbed states.  Derivatives with respect to q
are taken along ``q (+) delta`` (the one retraction, :func:`soadyn.model.configuration.retract`, convention
in docs/conventions.md), v held fixed in base coordinates.  Sharing the retraction costs no independence:
the generated derivatives do not use it (their tangent is seeded symbolically, :mod:`soadyn.symbolic.
tangent`), so a wrong retraction makes the two disagree.  Every derivative uses the fourth-order central
stencil
``(-f(2h) + 8 f(h) - 8 f(-h) + f(-2h)) / 12h`` (truncation O(h^4)); with the default ``h = 1e-3`` the
relative error is about 1e-10, well inside the 1e-6 that ``soadyn verify`` allows for derivatives.  The
joints' passive forces (smoothed Coulomb friction, curved on the scale of its velocity scale v_s) are
differenced at steps scaled to v_s (:func:`velocity_steps`): apart from the rigid-body terms in the
forward and inverse dynamics derivatives (:func:`passive_jacobian`), along v in :func:`tangent_derivatives`.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike

from soadyn.model.configuration import retract
from soadyn.model.parameters import default_params, with_param_values
from soadyn.model.robot import Robot
from soadyn.reference import closed_loop, dense, free_floating, invariant

#: relative tolerance of ``soadyn verify`` for the derivative functions against these differences
FD_TOLERANCE = 1e-6
STEP = 1e-3


def _stencil(f: Callable[[float], np.ndarray], h: float) -> np.ndarray:
    return (-f(2 * h) + 8 * f(h) - 8 * f(-h) + f(-2 * h)) / (12 * h)


def tangent_jacobian(robot: Robot, fn: Callable[[np.ndarray], np.ndarray], q: ArrayLike,
                     h: float = STEP) -> np.ndarray:
    """``d fn(q (+) delta) / d delta`` at delta = 0: shape ``fn(q).shape + (nv,)``."""
    cols = []
    for i in range(robot.nv):
        e = np.zeros(robot.nv)
        e[i] = 1.0
        cols.append(_stencil(lambda t, e=e: np.asarray(fn(retract(q, t * e, robot.is_free)), dtype=float), h))
    return np.stack(cols, axis=-1)


def vector_jacobian(fn: Callable[[np.ndarray], np.ndarray], x: ArrayLike,
                    h: float | np.ndarray = STEP) -> np.ndarray:
    """``d fn(x) / dx`` for a vector argument, shape ``fn(x).shape + (len(x),)``; ``h``: one step, or one
    per entry of x."""
    x = np.asarray(x, dtype=float)
    steps = np.broadcast_to(np.asarray(h, dtype=float), x.shape)
    cols = []
    for i in range(len(x)):
        e = np.zeros(len(x))
        e[i] = 1.0
        cols.append(_stencil(lambda t, e=e: np.asarray(fn(x + t * e), dtype=float), float(steps[i])))
    return np.stack(cols, axis=-1)


def velocity_steps(robot: Robot, v: ArrayLike, h: float = STEP) -> np.ndarray:
    """The stencil's step per generalised velocity: ``h``, and ``h min(1, r)`` with ``r = sqrt(v^2 + v_s^2)``
    on a coordinate with Coulomb friction.

    The smoothed friction ``f v / sqrt(v^2 + v_s^2)`` has its poles at ``v = +-i v_s``: the stencil's
    truncation error goes as ``(h / r)^4``, 7.5e-5 of ``da/dv`` at ``v = -0.0045``, ``v_s = 0.01``,
    ``h = STEP``; at ``h r`` it is about 1e-12 of the friction's slope ``f / r``, and the roundoff (which
    grows as ``1 / (h r)``) stays in the same ratio to that slope."""
    v = np.asarray(v, dtype=float)
    if robot.is_coupled:
        # a step t of reduced coordinate i moves the uncoupled tree's coordinate j by G[j, i] t
        G, _ = robot.expansion()
        _, _, fric, vs = dense.drive_parameters(robot.uncoupled())
        vf = G @ v
        r = np.where(fric > 0, np.minimum(1.0, np.sqrt(vf * vf + vs * vs)), 1.0)
        return h * np.array([min([1.0] + [r[j] / abs(G[j, i]) for j in np.flatnonzero(G[:, i])
                                          if fric[j] > 0]) for i in range(robot.nv)])
    _, _, fric, vs = dense.drive_parameters(robot)
    return np.where(fric > 0, h * np.minimum(1.0, np.sqrt(v * v + vs * vs)), h)


def passive_jacobian(robot: Robot, v: ArrayLike) -> np.ndarray:
    """``d tau_p / dv`` of :func:`soadyn.reference.dense.passive_forces` (damping and smoothed Coulomb
    friction) by central differences at :func:`velocity_steps`: the passive forces are a function of v
    alone, of size ``f + d |v|``, so their small steps cost no roundoff of the rigid-body terms."""
    return vector_jacobian(lambda x: dense.passive_forces(robot, x), v, velocity_steps(robot, v))


def inverse_dynamics_derivatives(robot: Robot, q: ArrayLike, v: ArrayLike, a: ArrayLike,
                                 f_ext: ArrayLike | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(dtau/dq, dtau/dv) of :func:`soadyn.reference.dense.inverse_dynamics` by central differences."""
    dq = tangent_jacobian(robot, lambda x: dense.inverse_dynamics(robot, x, v, a, f_ext), q)
    # tau = (tau - tau_p(v)) + tau_p(v): the rigid part at STEP, the passive forces at their own steps
    def rigid(x: np.ndarray) -> np.ndarray:
        return dense.inverse_dynamics(robot, q, x, a, f_ext) - dense.passive_forces(robot, x)

    dv = vector_jacobian(rigid, v) + passive_jacobian(robot, v)
    return dq, dv


def forward_dynamics_derivatives(robot: Robot, q: ArrayLike, v: ArrayLike, tau: ArrayLike,
                                 f_ext: ArrayLike | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(da/dq, da/dv, da/dtau) of :func:`soadyn.reference.dense.forward_dynamics` by central differences."""
    def fd(x, y, z):
        return dense.forward_dynamics(robot, x, y, z, f_ext)

    # a(v) = g(v, tau - tau_p(v)) with g(x, t) = FD(q, x, t + tau_p(x)), which is free of the passive
    # forces: da/dv = dg/dx - da/dtau dtau_p/dv, the rigid part at STEP, the passive forces at their steps
    tau = np.asarray(tau, dtype=float)
    da_dtau = vector_jacobian(lambda x: fd(q, v, x), tau)
    da_dv = (vector_jacobian(lambda x: fd(q, x, tau + dense.passive_forces(robot, x)), v)
             - da_dtau @ passive_jacobian(robot, v))
    return tangent_jacobian(robot, lambda x: fd(x, v, tau), q), da_dv, da_dtau


def frame_velocity(robot: Robot, q: ArrayLike, v: ArrayLike, frame: str) -> np.ndarray:
    """Twist ``[w; v_o]`` of a frame in inertial axes: the dense world-aligned Jacobian times v."""
    return dense.jacobian(robot, q, frame, world_aligned=True) @ np.asarray(v, dtype=float)


def frame_acceleration(robot: Robot, q: ArrayLike, v: ArrayLike, a: ArrayLike, frame: str,
                       h: float = STEP) -> np.ndarray:
    """``d/dt`` of :func:`frame_velocity` along ``q(t) = q (+) t v``, ``v(t) = v + t a`` (central
    differences; q (+) t v has velocity v at t = 0 in the convention of docs/conventions.md)."""
    v, a = np.asarray(v, dtype=float), np.asarray(a, dtype=float)
    return _stencil(lambda t: frame_velocity(robot, retract(q, t * v, robot.is_free), v + t * a, frame), h)


def frame_acceleration_derivatives(robot: Robot, q: ArrayLike, v: ArrayLike, a: ArrayLike,
                                   frame: str) -> tuple[np.ndarray, ...]:
    """(V, A, dV/dq, dA/dq, dA/dv) of the frame twist and acceleration (inertial axes), by differences."""
    V = frame_velocity(robot, q, v, frame)
    A = frame_acceleration(robot, q, v, a, frame)
    dV = tangent_jacobian(robot, lambda x: frame_velocity(robot, x, v, frame), q)
    dAq = tangent_jacobian(robot, lambda x: frame_acceleration(robot, x, v, a, frame), q)
    dAv = vector_jacobian(lambda x: frame_acceleration(robot, q, x, a, frame), v)
    return V, A, dV, dAq, dAv


#: the reference of an algorithm whose name the reference path does not share
_SAME_QUANTITY = {"forward_dynamics_schur": dense.forward_dynamics,
                  "forward_dynamics_decoupled": dense.forward_dynamics}


def tangent_derivatives(robot: Robot, *args: ArrayLike, of: str, inputs: tuple[str, ...],
                        f_ext: ArrayLike | None = None, **kw: object) -> tuple[np.ndarray, ...]:
    """The derivatives of the reference of ``of`` (:mod:`dense`, :mod:`free_floating`, :mod:`invariant`)
    with respect to each input of ``inputs`` (q along ``q (+) delta``; ``params``: the run-time inertial
    parameters, those of ``robot``), outputs major: ``dy/dx`` of shape
    ``y.shape + x.shape`` (the layout of the generated ``<of>_derivatives``; one array alone), by central
    differences."""
    fn = _SAME_QUANTITY.get(of)
    for mod in (dense, free_floating, invariant, closed_loop):
        fn = fn or getattr(mod, of, None)
    if fn is None:
        raise ValueError(f"no reference function {of!r} in soadyn.reference (dense, free_floating, "
                         "invariant)")
    names = [n for n in inputs if n not in ("f_ext", "params")]
    values = dict(zip(names, (np.asarray(a, dtype=float) for a in args)))
    if "f_ext" in inputs:
        values["f_ext"] = np.asarray(f_ext, dtype=float)
    if "params" in inputs:     # run-time inertial parameters: the robot's own, perturbed into a copy
        values["params"] = default_params(robot)

    def call(**change: np.ndarray) -> list[np.ndarray]:
        x = {**values, **change}
        extra = dict(kw)
        if "f_ext" in x:
            extra["f_ext"] = x["f_ext"]
        model = with_param_values(robot, change["params"], check=False) if "params" in change else robot
        res = fn(model, *(x[n] for n in names), **extra)
        return [np.asarray(r, dtype=float) for r in (res if isinstance(res, tuple) else (res,))]

    n_out = len(call())
    blocks: list[list[np.ndarray]] = [[] for _ in range(n_out)]
    for name in inputs:
        x0 = values[name]
        for k in range(n_out):
            if name == "q":
                d = tangent_jacobian(robot, lambda q, k=k: call(q=q)[k], x0)
            else:
                # the parameters: a smaller step (the accelerations go as 1/m; the stencil's error at
                # STEP was 6e-7 of da/dparams on the test arm, the module's own differences converge)
                step = (STEP / 10 if name == "params" else
                        velocity_steps(robot, x0) if name == "v" and x0.shape == (robot.nv,) else STEP)
                d = vector_jacobian(lambda x, k=k, name=name, x0=x0: call(**{name: x.reshape(x0.shape)})[k],
                                    x0.ravel(), step)
                d = d.reshape(d.shape[:-1] + x0.shape)
            blocks[k].append(d)
    out = tuple(b for bs in blocks for b in bs)
    return out if len(out) > 1 else out[0]
