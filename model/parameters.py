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

Physical consistency (:func:`parameter_problem`): the robot file's rules, by the loader's own check of an
inertia (:func:`soadyn.model.inertia.inertia_problem`): ``m >= 0``, and ``m > 0`` on a moving body (a
joint, or a free base); for ``m > 0`` the inertia about the CoM, ``I_c = J + h~ h~ / m`` (``h = m c``), must
be positive definite with principal moments obeying the triangle inequality ``A + B >= C`` (the second
moment of a positive mass density); a massless body (allowed only as a fixed base) has all ten numbers
zero.  ``I_c`` is computed from J about the body origin, so it carries the rounding error of J and
``h~h~/m``: a body whose smallest moment about the CoM is below that error is refused as undetermined.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from soadyn.model.inertia import inertia_problem
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


def parameter_problem(pi: Sequence[float], moving: bool = True) -> str | None:
    """Why ``pi`` is not the inertia of a rigid body that a robot file would accept (see the module
    docstring), or None.  ``moving``: the body moves (a joint, or the base of a free-floating robot), so it
    needs mass > 0, as in the robot file; a massless (all-zero) row is allowed only on a fixed base.

    The inertia about the centre of mass is checked by the robot-file loader's own
    :func:`soadyn.model.inertia.inertia_problem` (symmetric, positive definite, triangle inequality).
    """
    pi = np.asarray(pi, dtype=float)
    if pi.shape != (10,):
        return f"needs 10 numbers {PARAMETER_NAMES}, got shape {pi.shape}"
    if not np.all(np.isfinite(pi)):
        return f"holds a non-finite value: {pi.tolist()}"
    m, h, J = vector_to_parts(pi)
    if m < 0.0:
        return f"negative mass {m:g}; a mass must be >= 0"
    if m == 0.0:
        if moving:
            return ("mass 0 on a body on a moving joint (or the base of a free-floating robot), which needs "
                    "mass > 0 (as in a robot file); give its mass, first moment and inertia")
        if np.any(pi[1:] != 0.0):
            return (f"mass 0 with a non-zero first moment or inertia {pi[1:].tolist()}; a massless body "
                    "has all ten parameters zero")
        return None
    H = skew3(h)
    with np.errstate(over="ignore", invalid="ignore"):
        Ic = J + H @ H / m
    if not np.all(np.isfinite(Ic)):
        return (f"first moment m c = {h.tolist()} too large for mass {m:g} (the inertia about the centre of "
                "mass overflows)")
    Ic = 0.5 * (Ic + Ic.T)
    problem = inertia_problem(Ic)
    if problem is None:
        return None
    # J + h~h~/m cancels: I_c carries the rounding error of the larger terms J and h~h~/m (a few ulps of
    # them). When that error reaches I_c's own smallest moment, the parameters do not determine I_c.
    noise = 8.0 * np.finfo(float).eps * (float(np.max(np.abs(J))) + float(h @ h) / m)
    ev = np.linalg.eigvalsh(Ic)
    if abs(ev[0]) <= noise and noise > 1e-12 * abs(ev[-1]):   # rounding could decide the loader's verdict
        return (f"inertia about the centre of mass (principal moments {', '.join(f'{e:.6g}' for e in ev)}) "
                f"is within the rounding error {noise:.3g} of J + h~h~/m (J about the body origin reaches "
                f"{float(np.max(np.abs(J))):.6g}): these numbers do not determine it")
    return f"inertia about the centre of mass {problem}"


#: relative margin of :func:`clearly_consistent` (far above the rounding of I_c, far inside the loader's
#: bounds 1e-12 (positive definite) and ``TRIANGLE_TOL`` (triangle inequality))
SCREEN_MARGIN = 1e-6
#: the rounding bound of :func:`screen_conditions`: ``mu tr(S) > SCREEN_NOISE |h|^2`` (512 eps), with the
#: screen's other conditions enough for the rounding of ``J + h~h~/m`` in :func:`parameter_problem` (its
#: ``8 eps (max|J_ij| + |h|^2/m)``) to stay below ``mu t / 60`` and for that of the screen's own ``S`` to stay
#: below ``mu tr(S) / 30`` per entry (the argument: :func:`screen_conditions`)
SCREEN_NOISE = 512.0 * float(np.finfo(float).eps)


def clearly_consistent(rows: np.ndarray) -> np.ndarray:
    """Vectorised screen of :func:`parameter_problem` over rows (shape (k, 10)): True where the row is
    accepted with a wide margin, so that :func:`parameter_problem` (whose rule this restates) accepts it
    too; False where it refuses the row *or* where the row is near one of its boundaries (then
    :func:`parameter_problem` decides), and on any row with a NaN or an infinity.  The rule:
    :func:`screen_conditions`.
    """
    cols = np.asarray(rows, dtype=float).reshape(-1, 10).T.copy()
    with np.errstate(all="ignore"):
        ok = np.ones(cols.shape[1], dtype=bool)
        for x, y in screen_conditions(cols):
            ok &= x > y
    return ok


def screen_conditions(row: Sequence[Any]) -> list[tuple[Any, Any]]:
    """The rule of :func:`clearly_consistent` over the ten entries ``row`` of a row (or of many rows: NumPy
    arrays) as pairs ``(x, y)``: the row passes when ``x > y`` for every pair.  Written once over any
    arithmetic type with ``+ - *``: NumPy arrays (:func:`clearly_consistent`), and the tracer of
    :mod:`soadyn.codegen.screen` that prints the same IEEE operations in the same order as the C screen of a
    compiled module's entries (so both give the same verdict on every row).

    The rule, with ``mu = SCREEN_MARGIN``: ``m > 0`` and ``S - mu tr(S) 1`` positive definite (Sylvester's
    criterion: its three leading minors > 0), where ``S = m Sigma_O - h h^T`` and ``Sigma_O = tr(J)/2 1 - J``
    (the second moment of the mass about the body origin: the pseudo-inertia ``[[Sigma_O, h], [h^T, m]]`` is
    positive definite iff ``m > 0`` and its Schur complement ``S / m = Sigma_c``, the second moment about
    the CoM, is; no division).  ``Sigma_c = t/2 1 - I_c`` (``t = tr I_c = 2 tr Sigma_c``), so the test is
    ``(1 - mu) t/2 1 - I_c`` positive definite: the largest principal moment of ``I_c`` below
    ``(1 - mu) t / 2``, i.e. ``A + B - C > mu t`` for every ordering (the loader allows ``-TRIANGLE_TOL
    t``), and then every moment ``A = t - (B + C) ... > mu t`` too (above ``mu`` times the largest: the
    loader's bound is ``1e-12``).  ``det3`` is the determinant as ``d3 det2 - d1 o23^2 - d2 o13^2 - 2 o12
    o13 o23`` (11 operations instead of 14).

    Last, the rounding bound ``mu tr(S) > SCREEN_NOISE |h|^2`` (``C = SCREEN_NOISE = 512 eps``; 3
    operations, where a bound on ``sum|J_ij|`` took 13).  Why it is enough (``S^`` the computed ``S``, ``T =
    tr S^`` as computed, ``E = m max|J_ij| + |h|^2``, ``D`` the largest error of an entry of ``S^``: a few
    roundings of terms of at most ``2.5 m max|J_ij| + |h|^2``, so ``D <= 8 eps E``).  Exactly, ``m J_ii =
    s_jj + s_kk + h_j^2 + h_k^2`` (``{i, j, k} = {1, 2, 3}``) and ``m J_ij = o_ij - h_i h_j``; on a row that
    passes, ``S^ - mu T 1`` is positive definite (up to the rounding of the minors, below), so ``0 < s^_ii
    < T`` and ``|o^_ij| < T / 2``; hence ``m max|J_ij| <= T + |h|^2 + 2 D`` and ``E <= T + 2 |h|^2 + 16 eps
    E``, i.e. ``E < 1.0001 (T + 2 |h|^2)``.  With ``|h|^2 < mu T / C`` (the bound; ``mu / C = 8.8e6``) this
    is ``E < 1.8e7 T``, so (1) ``D < 8 eps E < 3.2e-8 T = 0.032 mu T``: the exact ``S`` is within ``3 D <
    0.1 mu tr S`` (eigenvalues) of ``S^``, so ``S - 0.9 mu tr(S) 1`` is positive definite; (2) the noise
    bound of :func:`parameter_problem`, ``8 eps E / m < 3.2e-8 T / m``, is below ``mu t / 60`` (``m t = 2
    tr S``), far below the smallest principal moment of ``I_c`` (``> 0.9 mu t`` by (1)), so it never calls
    these numbers undetermined, and its own ``I_c`` is as close.  Rounding in the minors can only misjudge
    a matrix within a few ulps of the shifted boundary, which is still ``~mu`` inside the loader's, so no
    row this accepts is refused by :func:`parameter_problem`.  (Below the normal range, where a rounding is
    absolute, none of this holds; such a row's ``tr S`` is subnormal and ``mu tr S`` is then 0 or subnormal,
    which fails the bound unless ``|h|^2`` is as small.)

    A NaN or an infinity anywhere fails the row (``m > 0`` given): in ``m``, ``h`` or a diagonal entry of
    ``J`` it makes ``tr S`` (and ``sh``, ``d1``) NaN or infinite (``d1 = s11 - sh`` NaN or ``-inf``, or
    ``sh`` NaN, ``-inf``, or against an infinite ``C |h|^2``), in ``J_12`` ``det2`` NaN or ``-inf``, in
    ``J_13`` or ``J_23`` ``det3`` (``d1, d2 > 0``); the rule needs no separate finiteness test.
    """
    m, hx, hy, hz, j11, j12, j13, j22, j23, j33 = row
    half = 0.5 * (j11 + j22 + j33)                 # tr Sigma_O
    xx, yy, zz = hx * hx, hy * hy, hz * hz
    s11 = m * (half - j11) - xx                     # S = m Sigma_O - h h^T; its off-diagonals are -o
    s22 = m * (half - j22) - yy
    s33 = m * (half - j33) - zz
    o12 = m * j12 + hx * hy
    o13 = m * j13 + hx * hz
    o23 = m * j23 + hy * hz
    sh = SCREEN_MARGIN * (s11 + s22 + s33)
    d1, d2, d3 = s11 - sh, s22 - sh, s33 - sh
    det2 = d1 * d2 - o12 * o12
    det3 = d3 * det2 - (d1 * (o23 * o23) + d2 * (o13 * o13)) - (o12 * o13) * (o23 + o23)
    return [(m, 0.0), (sh, SCREEN_NOISE * (xx + yy + zz)), (d1, 0.0), (det2, 0.0), (det3, 0.0)]


def first_parameter_problem(rows: np.ndarray, moving: Sequence[bool]) -> tuple[int, str] | None:
    """(index, why) of the first row of ``rows`` (shape (k, 10); row i belongs to the body
    ``moving[i % len(moving)]`` says moves or not) that :func:`parameter_problem` refuses, or None.
    Rows :func:`clearly_consistent` accepts (vectorised) are not looked at again; the others go through
    :func:`parameter_problem`, identical rows once."""
    rows = np.asarray(rows, dtype=float).reshape(-1, 10)
    nb = len(moving)
    seen: dict[tuple[bytes, bool], str | None] = {}
    for i in np.flatnonzero(~clearly_consistent(rows)).tolist():
        row = rows[i]
        key = (row.tobytes(), bool(moving[i % nb]))
        if key not in seen:
            seen[key] = parameter_problem(row, key[1])
        if seen[key] is not None:
            return i, str(seen[key])
    return None


def moving_param_bodies(robot: Robot) -> list[bool]:
    """For each row of ``params``: does its body move (not the root of a fixed base)?"""
    return [robot.is_free or k != 0 for k in param_indices(robot)]


def check_params(robot: Robot, params: np.ndarray) -> np.ndarray:
    """``params`` as a float array of shape ``(n_param_bodies, 10)`` or ``(N, n_param_bodies, 10)``;
    raises ``ValueError`` naming the first physically invalid row."""
    p = np.asarray(params, dtype=float)
    shape = (len(robot.param_bodies), 10)
    if p.shape[-2:] != shape or p.ndim not in (2, 3):
        raise ValueError(f"params must have shape {shape} or (N, {shape[0]}, 10) (rows: "
                         f"{list(robot.param_bodies)}), got {p.shape}")
    bad = first_parameter_problem(p.reshape(-1, 10), moving_param_bodies(robot))
    if bad is not None:
        i, problem = bad
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


def with_param_values(robot: Robot, params: np.ndarray, check: bool = True) -> Robot:
    """A copy of ``robot`` with the parameterised bodies' inertias replaced by ``params`` (checked; with
    ``check=False`` only the shape is, for the small perturbations of finite differences, which may leave
    the consistent set); the copy keeps ``param_bodies``.  This is the model a module recompiled with
    these values would see."""
    p = check_params(robot, params) if check else np.asarray(params, dtype=float)
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
