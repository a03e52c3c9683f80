"""Inertial parameters as run-time inputs: the 10-number convention, conversions and physical checks.

A body's inertial parameters are the ten numbers (the "standard parameters" of robot identification)::

    pi = [m, m c_x, m c_y, m c_z, J_xx, J_xy, J_xz, J_yy, J_yz, J_zz]

with ``m`` the mass, ``c`` the centre of mass in body coordinates, and ``J`` the 3x3 rotational inertia
about the **body-frame origin** O_k (body axes), ``J = I_c - m c~ c~`` (parallel axes; seed 000 section 2
writes the spatial inertia about O_k as ``[[J, m c~], [-m c~, m I]]``).  The six entries of J are the upper
triangle row by row, and the products of inertia are the *matrix entries* (``J_xy = -integral(x y dm)``),
the URDF / Pinocchio convention of the robot files.  The spatial inertia, the body wrench and the momentum
are linear in pi, which is what makes regressors and least-squares identification possible.

Pinocchio's ``Inertia.toDynamicParameters`` (and the columns of ``computeJointTorqueRegressor``) hold the
same ten numbers in the order ``[m, mc_x, mc_y, mc_z, I_xx, I_xy, I_yy, I_xz, I_yz, I_zz]``, also about
the joint (body) frame origin: :data:`PINOCCHIO_ORDER` maps ours to theirs (``pi_pin = pi[PINOCCHIO_ORDER]``).

A robot marks the bodies whose parameters are inputs in ``Robot.param_bodies`` (robot file:
``parameters: [payload, base]`` or ``parameters: all``); the rows of a ``params`` array (shape
``(n_param_bodies, 10)``) follow the body order of the robot (depth first from the base), not the order
in which they were named.

Physical consistency (:func:`parameter_problem`): ``m >= 0``; for ``m > 0`` the inertia about the CoM,
``I_c = J + h~ h~ / m`` (``h = m c``), must have non-negative principal moments obeying the triangle
inequality ``A + B >= C`` (equivalently ``tr(I_c)/2 * 1 - I_c`` is positive semi-definite: the second
moment of a non-negative mass density); a massless body must have ``h = 0`` and ``J = 0``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from soadyn.model.robot import Inertia, Robot
from soadyn.model.rotations import skew as skew3

#: names of the ten parameters of one body, in the order of a row of ``params``
PARAMETER_NAMES = ("m", "mc_x", "mc_y", "mc_z", "J_xx", "J_xy", "J_xz", "J_yy", "J_yz", "J_zz")
#: (row, column) of J for entries 4..9 of pi
J_ENTRIES = ((0, 0), (0, 1), (0, 2), (1, 1), (1, 2), (2, 2))
#: our order -> Pinocchio's ``toDynamicParameters`` order: ``pi_pinocchio = pi[PINOCCHIO_ORDER]``
PINOCCHIO_ORDER = (0, 1, 2, 3, 4, 5, 7, 6, 8, 9)
#: relative tolerance of the physical-consistency checks (scale: the trace of I_c, the mass)
CONSISTENCY_TOL = 1e-9


def parameter_labels(robot: Robot) -> list[str]:
    """``"<body>.<parameter>"`` for every column of a regressor (rows of ``params`` flattened)."""
    return [f"{b}.{p}" for b in robot.param_bodies for p in PARAMETER_NAMES]


def inertia_to_vector(inertia: Inertia) -> np.ndarray:
    """pi (10,) of a body inertia (mass, CoM, inertia about the CoM)."""
    m, c = float(inertia.mass), np.asarray(inertia.com, dtype=float)
    C = skew3(c)
    J = np.asarray(inertia.inertia, dtype=float) - m * C @ C
    return np.array([m, *(m * c), *(J[i, j] for i, j in J_ENTRIES)])


def vector_to_parts(pi: Sequence[float]) -> tuple[float, np.ndarray, np.ndarray]:
    """(m, h = m c, J about the origin, symmetric 3x3) of a parameter vector."""
    pi = np.asarray(pi, dtype=float)
    J = np.empty((3, 3))
    for v, (i, j) in zip(pi[4:10], J_ENTRIES):
        J[i, j] = J[j, i] = v
    return float(pi[0]), pi[1:4].copy(), J


def vector_to_inertia(pi: Sequence[float]) -> Inertia:
    """The body inertia (mass, CoM, inertia about the CoM) of a parameter vector; massless -> zeros."""
    m, h, J = vector_to_parts(pi)
    if m == 0.0:
        return Inertia(0.0, np.zeros(3), np.zeros((3, 3)))
    c = h / m
    C = skew3(c)
    return Inertia(m, c, J + m * C @ C)


def parameter_problem(pi: Sequence[float]) -> str | None:
    """Why ``pi`` is not the inertia of a rigid body (see the module docstring), or None."""
    pi = np.asarray(pi, dtype=float)
    if pi.shape != (10,):
        return f"needs 10 numbers {PARAMETER_NAMES}, got shape {pi.shape}"
    if not np.all(np.isfinite(pi)):
        return f"holds a non-finite value: {pi.tolist()}"
    m, h, J = vector_to_parts(pi)
    scale = max(abs(m), float(np.max(np.abs(pi[1:]))), 1e-300)
    if m < 0.0:
        return f"negative mass {m:g}; a mass must be >= 0"
    if m <= CONSISTENCY_TOL * scale:
        if np.max(np.abs(pi[1:])) > CONSISTENCY_TOL * max(abs(m), 1.0):
            return (f"mass {m:g} with a non-zero first moment or inertia {pi[1:].tolist()}; a massless body "
                    "has all ten parameters zero")
        return None
    H = skew3(h)
    Ic = J + H @ H / m
    ev = np.linalg.eigvalsh(0.5 * (Ic + Ic.T))
    tol = CONSISTENCY_TOL * max(float(np.sum(np.abs(ev))), 1e-300)
    if ev[0] < -tol:
        return (f"inertia about the centre of mass is not positive semi-definite (principal moments "
                f"{', '.join(f'{e:.6g}' for e in ev)}); check J (about the body origin, J = I_c - m c~ c~) "
                "and the signs of the products of inertia")
    a, b, c = ev
    if a + b < c - tol:
        return (f"principal moments about the centre of mass {a:.6g}, {b:.6g}, {c:.6g} violate the triangle "
                f"inequality ({a:.6g} + {b:.6g} < {c:.6g}); no rigid body has them")
    return None


def check_params(robot: Robot, params: np.ndarray) -> np.ndarray:
    """``params`` as a float array of shape ``(n_param_bodies, 10)`` or ``(N, n_param_bodies, 10)``;
    raises ``ValueError`` naming the first physically invalid row."""
    p = np.asarray(params, dtype=float)
    shape = (len(robot.param_bodies), 10)
    if p.shape[-2:] != shape or p.ndim not in (2, 3):
        raise ValueError(f"params must have shape {shape} or (N, {shape[0]}, 10) (rows: "
                         f"{list(robot.param_bodies)}), got {p.shape}")
    flat = p.reshape(-1, 10)
    for i, row in enumerate(flat):
        problem = parameter_problem(row)
        if problem is not None:
            body = robot.param_bodies[i % shape[0]]
            where = f"params[{i // shape[0]}, {i % shape[0]}]" if p.ndim == 3 else f"params[{i}]"
            raise ValueError(f"{where} (body {body!r}): {problem}")
    return p


def default_params(robot: Robot) -> np.ndarray:
    """The robot's own inertial parameters of its parameterised bodies, shape ``(n_param_bodies, 10)``."""
    return np.array([inertia_to_vector(robot.inertias[k]) for k in param_indices(robot)]).reshape(-1, 10)


def param_indices(robot: Robot) -> list[int]:
    """Body indices of the parameterised bodies, in ``params`` row order."""
    return [robot.body_index(b) for b in robot.param_bodies]


def with_param_bodies(robot: Robot, bodies: Sequence[str] | str) -> Robot:
    """A copy of ``robot`` whose inertial parameters of ``bodies`` (names, or ``"all"``) are run-time inputs.

    Rows are ordered like the bodies of the robot.  Unknown names raise ``ValueError`` (a body merged
    into its parent by a fixed joint is not a body of the model any more: name the body it was merged into).
    The structure operations (:mod:`soadyn.structure.operations`) keep the parameterised bodies that remain
    bodies; a body they merge into its parent (a locked joint) becomes part of a constant inertia.
    """
    if isinstance(bodies, str):
        if bodies != "all":
            raise ValueError(f"parameters: expected a list of body names or 'all', got {bodies!r}")
        names = list(robot.body_names)
    else:
        names = list(bodies)
    bad = [b for b in names if b not in robot.body_names]
    if bad:
        merged = {f.name: robot.body_names[f.body] for f in robot.frames}
        hints = [f"{b!r} is merged into {merged[b]!r} (fixed joint)" for b in bad if b in merged]
        raise ValueError(f"parameters: unknown body name(s) {bad}; bodies: {robot.body_names}"
                         + (f"; {', '.join(hints)}" if hints else ""))
    if len(set(names)) != len(names):
        raise ValueError(f"parameters: body names repeated in {names}")
    return robot.replace(param_bodies=tuple(b for b in robot.body_names if b in set(names)))


def with_param_values(robot: Robot, params: np.ndarray) -> Robot:
    """A copy of ``robot`` with the parameterised bodies' inertias replaced by ``params`` (checked); the
    copy keeps ``param_bodies``.  This is the model a module recompiled with these values would see."""
    p = check_params(robot, params)
    if p.ndim != 2:
        raise ValueError(f"with_param_values: one parameter set of shape {p.shape[-2:]} expected, "
                         f"got {p.shape}")
    inertias = list(robot.inertias)
    for row, k in zip(p, param_indices(robot)):
        inertias[k] = vector_to_inertia(row)
    return robot.replace(inertias=tuple(inertias))


def random_params(robot: Robot, rng: np.random.Generator, spread: float = 0.3) -> np.ndarray:
    """Physically valid parameters near the robot's own: every mass scaled by a factor in
    ``[1 - spread, 1 + spread]``, CoM moved by up to ``spread`` x 0.1 m, inertia about the CoM rotated
    randomly and its principal moments scaled (still obeying the triangle inequality)."""
    rows = []
    for k in param_indices(robot):
        ine = robot.inertias[k]
        m = max(ine.mass, 1.0) * rng.uniform(1 - spread, 1 + spread)
        c = np.asarray(ine.com, dtype=float) + rng.uniform(-1, 1, 3) * spread * 0.1
        ev = np.linalg.eigvalsh(ine.inertia) if ine.mass > 0 else np.ones(3) * 0.01
        ev = np.abs(ev) * rng.uniform(1 - spread, 1 + spread, 3) + 1e-3
        ev = np.sort(ev)
        ev[2] = min(ev[2], 0.999 * (ev[0] + ev[1]))
        Q, _ = np.linalg.qr(rng.normal(size=(3, 3)))
        rows.append(inertia_to_vector(Inertia(m, c, Q @ np.diag(ev) @ Q.T)))
    return np.array(rows).reshape(-1, 10)
