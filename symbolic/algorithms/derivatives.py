"""Derivatives of the dynamics: analytic recursions, and forward-mode differentiation of staged recursions.

Derivatives with respect to q are taken along the tangent ``q (+) delta`` of docs/conventions.md
(size nv, ordered like v; base attitude ``R exp(delta_w~)``, base position ``p + R delta_v``, joints
``q_j + delta_j``), with v held fixed in base coordinates.

* ``inverse_dynamics_derivatives``: ``dtau/dq``, ``dtau/dv`` of Algorithm 1 of seed 000 (``dtau/da = M``) by
  the analytic recursions of Carpentier & Mansard 2018 in base-aligned coordinates
  (:mod:`soadyn.symbolic.algorithms.rnea_derivatives`).  ``method="forward"`` differentiates the staged
  body-frame recursions (seed 000 eq. 2.1) assignment by assignment instead
  (:mod:`soadyn.symbolic.tangent`); both keep exact zeros, so the tree's sparsity survives.
* ``forward_dynamics_derivatives``: from ``M(q) a + C(q, v) = tau``, at ``a = FD(q, v, tau)``::

      da/dx = -M^-1 dtau/dx |_(a held)      (x = q, v),        da/dtau = M^-1,

  with ``M^-1`` from the innovations factorisation (eq. 2.10c) of Algorithm 2 run in the base-aligned
  coordinates of the analytic ``dtau/dx`` (:class:`BaseAligned`: no transform between bodies; xArm7 on a
  free base 17,486 -> 15,542 operations with the next change), ``a = M^-1 (tau - h)`` from M^-1's factors
  (``mass_matrix_inverse_from(rhs=)``: M^-1's base terms stay a loop that the products read after it) and
  the sweep at that ``a`` from its bias sweep (:func:`sweep_at_forward_dynamics`, instead of Algorithm 3), and
  ``dtau/dx`` the analytic derivatives above at that ``a`` (Carpentier & Mansard 2018 use the same
  identity).  The product ``M^-1 (-dtau/dx)`` (the sign folded into dtau's expressions) is ``ctx.matmul``:
  one scalar expression per entry on a plain
  symbolic context, loops over the stored factors in the generated C (:mod:`soadyn.codegen.derive`,
  ``Product``), one per block of columns of ``dtau/dx`` with the rows the tree lets be non-zero
  (:func:`product_blocks`); a block's rows and columns of M^-1 are read in place from ``da_dtau``
  (``left_of``), not copied (B1 + Z1 forward-dynamics derivatives: 4,837-5,038 -> 4,617-4,722 ns); the
  columns over all of M^-1 are one product wherever they are (a chain: one pass for both halves).
  For a free base the attitude columns are in closed form: the attitude only
  turns gravity, which enters as a base acceleration, so ``da/d delta_w = -[0; e_m x g_b; 0]`` and the
  position columns vanish; so are the linear base velocity columns: a uniform velocity added to every
  body changes no force, and in base axes ``d/dt (R^T u) = -w x R^T u``, so ``da/dv_lin = -[0; w~; 0]``.
  ``method="inverse-forward"`` uses forward-mode ``dtau/dx``;
  ``method="direct"`` differentiates Algorithms 2-3 in forward mode (both kept for the operation-count
  comparison in ``docs/conventions.md``).
* ``frame_acceleration_derivatives``: a frame's twist ``V = [w; v_o]`` and its time derivative
  ``A = dV/dt`` (inertial derivatives of the angular velocity and of the frame origin's velocity:
  classical accelerations, gravity not included), both in inertial axes, and ``dV/dq``, ``dA/dq``,
  ``dA/dv``.  ``dV/dv = dA/da`` is the world-aligned Jacobian (``jacobian(q, frame, world_aligned=True)``).

On a float context (:class:`~soadyn.symbolic.scalar.Numeric`) each function runs its symbolic program
once per robot (cached) and evaluates it in double precision: the float run that ``soadyn verify``
compares the C with.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from soadyn.symbolic.algorithms.articulated_body import articulated_body
from soadyn.symbolic.algorithms.drive import add_damping_derivative
from soadyn.symbolic.algorithms.forward_dynamics import accelerations, net_torques, residual_forces
from soadyn.symbolic.algorithms.innovations import mass_matrix_inverse_from
from soadyn.symbolic.algorithms.kinematics import (
    Kinematics,
    gravity_acceleration,
    joint_transforms,
    link_poses,
    velocities,
)
from soadyn.symbolic.algorithms.newton_euler import _newton_euler
from soadyn.symbolic.algorithms.rnea_derivatives import (
    Sweep,
    base_aligned_sweep,
    inertia_apply,
    rnea_derivatives,
    rnea_entries,
)
from soadyn.symbolic.scalar import Symbolic
from soadyn.symbolic.spatial import Xform, cross, skew
from soadyn.symbolic.tangent import configuration_directions, jacobians, python_function, vector_directions


def _qv_seeds(robot: Any, ctx: Any, q: np.ndarray, v: np.ndarray):
    """Directions 0..nv-1: the configuration tangent delta; nv..2nv-1: v."""
    nv = robot.nv
    dirs = configuration_directions(robot, ctx, q, 0, 2 * nv)
    seeds = dict(dirs.seeds)
    seeds.update(vector_directions(v, nv))
    return seeds, dirs.overrides, 2 * nv


def inverse_dynamics_derivatives(robot: Any, ctx: Any, q: np.ndarray, v: np.ndarray, a: np.ndarray,
                                 f_ext: np.ndarray | None = None, method: str = "analytic"
                                 ) -> tuple[np.ndarray, np.ndarray]:
    """(dtau/dq, dtau/dv), each (nv, nv), of Algorithm 1 (seed 000 eq. 2.1), q along ``q (+) delta``.

    ``method="analytic"`` (default): the recursions of Carpentier & Mansard 2018 in base-aligned
    coordinates (:mod:`soadyn.symbolic.algorithms.rnea_derivatives`); ``method="forward"``: forward mode
    over the staged body-frame recursions (kept for the operation-count comparison).
    """
    if method == "analytic":      # a plain recursion: runs on any context; plus the drive's d tau_p / dv
        dq, dv = rnea_derivatives(joint_transforms(robot, ctx, q), v, a, f_ext)
        return dq, add_damping_derivative(robot, ctx, v, dv)
    if not _stages(ctx):          # forward mode differentiates a staged program
        return _float_run("inverse_dynamics_derivatives", robot, (q, v, a), f_ext, ctx.parameters,
                          method=method)
    kin = joint_transforms(robot, ctx, q)
    if method != "forward":
        raise ValueError(f"method must be 'analytic' or 'forward', got {method!r}")
    tau = _newton_euler(kin, velocities(kin, v, f_ext), a, v)
    seeds, over, n = _qv_seeds(robot, ctx, q, v)
    (J,) = jacobians(ctx, [tau], seeds, n, over, name="dtau")
    nv = robot.nv
    return J[:, :nv], J[:, nv:]


def forward_dynamics_derivatives(robot: Any, ctx: Any, q: np.ndarray, v: np.ndarray, tau: np.ndarray,
                                 f_ext: np.ndarray | None = None, method: str = "inverse"
                                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(da/dq, da/dv, da/dtau = M^-1), each (nv, nv), at ``a = FD(q, v, tau)`` (Algorithms 1-3).

    ``method="inverse"`` (default): ``-M^-1 dtau/dx`` of Algorithm 1 at the forward-dynamics ``a`` (module
    docstring), with the analytic ``dtau/dx``; ``method="inverse-forward"``: the same with forward-mode
    ``dtau/dx``; ``method="direct"``: forward mode straight through Algorithms 2-3 (both kept for the
    operation count comparison).
    """
    if method != "inverse" and not _stages(ctx):   # forward mode differentiates a staged program
        return _float_run("forward_dynamics_derivatives", robot, (q, v, tau), f_ext, ctx.parameters,
                          method=method)
    nv = robot.nv
    kin = joint_transforms(robot, ctx, q)
    if method == "inverse":
        bias = base_aligned_sweep(kin, v, None, f_ext)
        # Algorithm 2 and M^-1 in the sweep's base-aligned coordinates (no transforms between bodies)
        ab = articulated_body(robot, ctx, q, BaseAligned.of(kin, bias))
        # M^-1 (the products' left factor, read in place after its base terms' loop) and qdd from its factors
        rhs = net_torques(robot, ctx, v, tau) - bias_torques(kin, bias)
        Minv, qdd = mass_matrix_inverse_from(ab, rhs=rhs)
        sweep = sweep_at_forward_dynamics(kin, bias, ctx.stage("afd", qdd))
        dq, dv = rnea_entries(kin, sweep, base_q=not robot.is_free, split=True)
        J = np.concatenate([dq, add_damping_derivative(robot, ctx, v, dv)], axis=1)
    else:
        ab = articulated_body(robot, ctx, q, kin)
        vt = velocities(kin, v, f_ext)
        _, _, nu = residual_forces(ab, net_torques(robot, ctx, v, tau), vt.a, vt.b)
        qdd, _ = accelerations(ab, nu, vt.a, with_gravity=True)
        if method == "direct":
            seeds, over, _ = _qv_seeds(robot, ctx, q, v)
            seeds.update(vector_directions(tau, 2 * nv))
            (J,) = jacobians(ctx, [qdd], seeds, 3 * nv, over, name="dqdd")
            return J[:, :nv], J[:, nv:2 * nv], J[:, 2 * nv:]
        if method != "inverse-forward":
            raise ValueError(f"method must be 'inverse', 'inverse-forward' or 'direct', got {method!r}")
        acc = ctx.stage("afd", qdd)
        held = {s for s in acc if not s.is_Number}
        tau_id = _newton_euler(kin, vt, acc, v)
        seeds, over, n = _qv_seeds(robot, ctx, q, v)
        (J,) = jacobians(ctx, [tau_id], seeds, n, over, held=held, name="dtau")
        Minv = mass_matrix_inverse_from(ab, loop=False)
    da = ctx.zeros((nv, 2 * nv))
    # one product per block of columns of dtau/dx with the same rows (loops over the stored factors in
    # the generated C): only the rows the tree lets be non-zero, only the rows of M^-1 they reach
    closed = method == "inverse"                 # the free base's closed-form columns (below)
    for g, (cols, rows, out) in enumerate(product_blocks(robot, skip_base=closed)):
        name = "dadx" if g == 0 else f"dadx{g}"
        B = -J[np.ix_(rows, cols)]          # -dtau/dx: the sign folds into its expressions
        if len(rows) == nv and len(out) == nv:
            P = ctx.matmul(name, Minv, B)
        else:             # a block of M^-1: the generated loops read it from da_dtau in place
            P = ctx.matmul(name, Minv[np.ix_(out, rows)], B, left_of=(Minv, out, rows))
        da[np.ix_(out, cols)] = P
    if robot.is_free and method == "inverse":
        # The base attitude only turns gravity, which enters exactly as a base acceleration -g_b:
        # dtau/d delta_w = M[:, base] da_w, so da/d delta_w = -[da_w; 0] with da_w = [0; e_m x g_b],
        # and the position columns are zero.
        grav = gravity_acceleration(kin)[3:]
        da[3:6, 0:3] = -skew(grav)              # column m: e_m x grav
        # A uniform velocity added to every body (a Galilean boost) changes no force: in base axes only
        # the base's turning shows, d/dt (R^T u) = -w x R^T u, so da/dv_lin = -[0; w~; 0]
        da[3:6, nv + 3:nv + 6] = -skew(v[0:3])
    return da[:, :nv], da[:, nv:], Minv


@dataclass
class BaseAligned(Kinematics):
    """The bodies in the base-aligned coordinates of the derivative sweep
    (:mod:`~soadyn.symbolic.algorithms.rnea_derivatives`): every transform between bodies the identity,
    hinge k the column S_k, inertia k about the base origin.  Algorithm 2 and the innovations
    factorisation run unchanged on it; no hinge is a unit vector there, so P+ keeps every entry.  For the
    xArm7 on a free base, forward-dynamics derivatives: 244 -> ~150 operations per hinge of Algorithm 2
    (no congruence of P+ per joint)."""

    S: list = field(default_factory=list)
    inert: list = field(default_factory=list)

    @classmethod
    def of(cls, kin: Kinematics, sw: Sweep) -> BaseAligned:
        ident = [Xform()] * kin.robot.n_bodies
        return cls(kin.robot, kin.ctx, ident, ident, ident, kin.R0, kin.r0, sw.S, sw.inert)

    def hinge(self, k: int) -> np.ndarray:
        return self.S[k][0]

    def spatial_inertia(self, k: int) -> np.ndarray:
        return self.inert[k].spatial()

    def unit_hinge(self, k: int) -> int | None:
        return None


def bias_torques(kin: Any, sw: Sweep) -> np.ndarray:
    """``h``, the generalised forces of the bias sweep ``sw`` (every acceleration zero): ``h_i = S_i^T
    F_i(bias)``, so that ``qdd = M^-1 (tau - h)``."""
    robot = kin.robot
    h = kin.ctx.zeros(robot.nv)
    for k in range(robot.n_bodies):
        if sw.S[k]:
            h[robot.v_index(k)] = [s @ sw.F[k] for s in sw.S[k]]
    return h


def sweep_at_forward_dynamics(kin: Any, sw: Sweep, qdd: np.ndarray) -> Sweep:
    """The base-aligned sweep of :func:`~soadyn.symbolic.algorithms.rnea_derivatives.base_aligned_sweep` at
    ``qdd = FD(q, v, tau)`` from its bias sweep ``sw`` (every acceleration zero), with qdd from the M^-1
    factors the caller computes anyway (``M^-1 (tau - h)``, :func:`bias_torques`) instead of a second
    articulated-body pass (Algorithm 3 and its body-frame velocities)::

        A_k = A_k(bias) + Aq_k,   Aq_k = Aq_parent + S_k qdd_k   (Aq_base = qdd_base, S_0 = I6)
        F_i = F_i(bias) + sum of I_k Aq_k over the subtree of i

    (the body forces are affine in the accelerations)."""
    robot, ctx = kin.robot, kin.ctx
    n = robot.n_bodies
    Aq: list[Any] = [None] * n
    A = list(sw.A)
    for k in range(n):
        p = robot.parent[k]
        terms = [s * qdd[c] for s, c in zip(sw.S[k], range(robot.nv)[robot.v_index(k)])]
        if p >= 0 and Aq[p] is not None:
            terms.append(Aq[p])
        if terms:
            Aq[k] = ctx.stage(f"aqd{k}", sum(terms[1:], terms[0]))
            A[k] = ctx.stage(f"abq{k}", sw.A[k] + Aq[k])
    Fq: list[Any] = [None] * n
    F = list(sw.F)
    for k in reversed(range(n)):
        if sw.F[k] is None:
            continue
        fk = inertia_apply(sw.inert[k], Aq[k]) if Aq[k] is not None else ctx.zeros(6)
        for c in robot.children[k]:
            if Fq[c] is not None:
                fk = fk + Fq[c]
        Fq[k] = ctx.stage(f"Fqc{k}", fk)
        F[k] = ctx.stage(f"Fcq{k}", sw.F[k] + Fq[k])
    return replace(sw, A=A, F=F)


def _hinge_bodies(robot: Any) -> list[list[int]]:
    """The bodies moved by each velocity coordinate (more than one where couplings share one)."""
    by: list[list[int]] = [[] for _ in range(robot.nv)]
    for k in range(robot.n_bodies):
        for c in range(robot.nv)[robot.v_index(k)]:
            by[c].append(k)
    return by


def product_blocks(robot: Any, skip_base: bool = False) -> list[tuple[list[int], list[int], list[int]]]:
    """The blocks of ``-M^-1 [dtau/dq, dtau/dv]`` worth a product each: ``(cols, rows, out)`` for the
    columns ``cols`` (of the nv x 2nv matrix) whose non-zero rows of dtau/dx are ``rows`` and whose
    product with M^-1 is non-zero in the rows ``out``; the other entries of ``da/dx`` are exact zeros.

    The tree's zeros (Carpentier & Mansard 2018; :mod:`~soadyn.symbolic.algorithms.rnea_derivatives`):
    ``dtau_i/dx_j`` vanishes unless bodies i and j are on one path to the base; ``M^-1(a, b)`` (seed 000
    eq. 2.10c) unless a and b have a moving body inboard of (or at) both.  ``skip_base``: the free
    base's configuration columns and linear velocity columns are left out (given in closed form by the
    caller).  Contiguous columns
    with the same rows and result rows form one block; the columns with every row and every result row
    (M^-1 itself, read in place) form one block wherever they are, so a chain is one product (one pass
    over M^-1 for both halves: xArm7 free, 13 x 13 by 13 x 17)."""
    nv = robot.nv
    bodies = _hinge_bodies(robot)

    def inboard(k: int) -> set[int]:
        out = set()
        while k >= 0:
            out.add(k)
            k = robot.parent[k]
        return out

    path = [inboard(k) for k in range(robot.n_bodies)]
    moving = {k for ks in bodies for k in ks}

    def related(i: int, j: int) -> bool:          # one on the path of the other
        return i in path[j] or j in path[i]

    def reach(i: int, j: int) -> bool:            # a moving body inboard of both
        return bool(path[i] & path[j] & moving)

    rows_of = [[r for r in range(nv) if any(related(i, j) for i in bodies[r] for j in bodies[c])]
               for c in range(nv)]
    out_of = [[a for a in range(nv) if any(reach(i, j) for i in bodies[a] for r in rows_of[c]
                                           for j in bodies[r])] for c in range(nv)]
    blocks: list[tuple[int, int, list[int], list[int]]] = []     # (c0, c1, rows, out)
    for half in (0, 1):
        for c in range(nv):
            if skip_base and c < robot.base_nv and (half == 0 or c >= 3) or not rows_of[c] or not out_of[c]:
                continue
            key = (rows_of[c], out_of[c])
            col = half * nv + c
            full = len(key[0]) == nv and len(key[1]) == nv     # M^-1 itself: one product in place
            if (blocks and blocks[-1][1] == col and (blocks[-1][2], blocks[-1][3]) == key
                    and (full or c > 0)):             # a block of rows stays in one half
                blocks[-1] = (blocks[-1][0], col + 1, *key)
            else:
                blocks.append((col, col + 1, *key))
    full_cols = [c for c0, c1, r, o in blocks if len(r) == nv and len(o) == nv for c in range(c0, c1)]
    merged = [(full_cols, list(range(nv)), list(range(nv)))] if full_cols else []
    return merged + [(list(range(c0, c1)), r, o) for c0, c1, r, o in blocks if len(r) < nv or len(o) < nv]


def frame_acceleration(robot: Any, ctx: Any, q: np.ndarray, v: np.ndarray, a: np.ndarray,
                       frame: str) -> tuple[np.ndarray, np.ndarray]:
    """(V, A): the frame's twist ``[w; v_o]`` and its inertial time derivative ``[dw/dt; dv_o/dt]``
    (classical acceleration of the frame origin, no gravity), both in inertial axes.

    Base-to-tip: ``alpha(k) = phi*(p, k) alpha(p) + H*(k) betadot(k) + a(k)`` (seed 000 eq. 2.1, Jain's
    conventional accelerations, without the gravity term), then the rigid offset of the frame:
    ``v_f = v_k + w x l``, ``dv_f = dv_k + dw x l + w x (w x l)``, rotated to inertial axes.
    """
    kin = joint_transforms(robot, ctx, q)
    vt = velocities(kin, v, None, need_b=False)
    k, X = robot.frame_of(frame)
    path = []
    i = k
    while i >= 0:
        path.append(i)
        i = robot.parent[i]
    alpha: dict[int, np.ndarray] = {}
    for i in reversed(path):
        if i == 0:
            alpha[0] = (a[0:6] + vt.a[0]) if robot.is_free else ctx.zeros(6)
        else:
            acc = (kin.X[i].motion_to_child(alpha[robot.parent[i]]) + kin.hinge(i) * a[robot.v_index(i)][0]
                   + vt.a[i])
            alpha[i] = ctx.stage(f"alphaf{i}", acc)
    Rw, _ = link_poses(kin)
    w, vo = vt.V[k][:3], vt.V[k][3:]
    dw, dvo = alpha[k][:3], alpha[k][3:]
    if np.any(X.p):
        lever = ctx.const(X.p)
        vo = vo + cross(w, lever)
        dvo = dvo + cross(dw, lever) + cross(w, cross(w, lever))
    R = Rw[k]
    V = np.concatenate([R @ w, R @ vo])
    A = np.concatenate([R @ dw, R @ dvo])
    return V, A


def frame_acceleration_derivatives(robot: Any, ctx: Any, q: np.ndarray, v: np.ndarray, a: np.ndarray,
                                   frame: str) -> tuple[np.ndarray, ...]:
    """(V, A, dV/dq, dA/dq, dA/dv) of :func:`frame_acceleration`, q along ``q (+) delta``; V, A (6,),
    the derivatives (6, nv).  ``dV/dv = dA/da`` is the world-aligned Jacobian."""
    if not _stages(ctx):          # forward mode differentiates a staged program
        return _float_run("frame_acceleration_derivatives", robot, (q, v, a), None, frame=frame)
    V, A = frame_acceleration(robot, ctx, q, v, a, frame)
    V = ctx.stage("Vf", V)
    A = ctx.stage("Af", A)
    seeds, over, n = _qv_seeds(robot, ctx, q, v)
    JV, JA = jacobians(ctx, [V, A], seeds, n, over, name="dframe")
    nv = robot.nv
    return V, A, JV[:, :nv], JA[:, :nv], JA[:, nv:]


def tangent_derivatives(robot: Any, ctx: Any, fn: Any, *args: np.ndarray, of: str,
                        inputs: tuple[str, ...], f_ext: np.ndarray | None = None,
                        **kw: Any) -> tuple[np.ndarray, ...]:
    """Forward-mode derivatives of the algorithm ``fn`` (named ``of``) with respect to each of its array
    inputs ``inputs`` (the spec's input names, in order: the positional ``args``, then ``f_ext`` and
    ``params`` when listed), q along the tangent ``q (+) delta`` (size nv, docs/conventions.md).

    Returns, for every output ``y`` of ``fn`` and every input ``x`` (outputs major): ``dy/dx`` of shape
    ``y.shape + x.shape`` (``y.shape + (nv,)`` for q; one array alone, not a tuple), exact zeros where the
    derivative vanishes
    identically (the tangents are sparse, :mod:`soadyn.symbolic.tangent`).  ``kw`` (``frame``,
    ``world_aligned``) goes to ``fn``.  Called as ``soadyn.symbolic.algorithms.tangent_derivatives(robot,
    ctx, *args, of=name, inputs=...)`` (the package resolves ``of``)."""
    if not _stages(ctx):          # forward mode differentiates a staged program
        def run(r: Any, c: Any, *a: Any, **k: Any) -> Any:
            return tangent_derivatives(r, c, fn, *a, **k)
        return _float_run("tangent_derivatives", robot, args, f_ext, ctx.parameters, algorithm=run, of=of,
                          inputs=inputs, **kw)
    extra = dict(kw)
    if f_ext is not None:
        extra["f_ext"] = f_ext
    with plain_products(ctx):     # a deferred product has no staged entries to differentiate
        result = fn(robot, ctx, *args, **extra)
    outs = [np.asarray(r, dtype=object) for r in (result if isinstance(result, tuple) else (result,))]
    positional = [n for n in inputs if n not in ("f_ext", "params")]
    arrays = dict(zip(positional, args))
    if "f_ext" in inputs:
        arrays["f_ext"] = f_ext
    if "params" in inputs:
        arrays["params"] = np.array(list(ctx.parameters.values()), dtype=object)
    seeds: dict = {}
    over: dict = {}
    blocks: list[tuple[int, tuple[int, ...]]] = []
    n = 0
    for name in inputs:
        x = arrays[name]
        if name == "q":
            dirs = configuration_directions(robot, ctx, x, n)
            seeds.update(dirs.seeds)
            over.update(dirs.overrides)
            shape: tuple[int, ...] = (robot.nv,)
        else:
            seeds.update(vector_directions(x, n))
            shape = np.shape(x)
        blocks.append((n, shape))
        n += int(np.prod(shape))
    Js = jacobians(ctx, outs, seeds, n, over, name="dy")
    res = tuple(J[..., c0:c0 + int(np.prod(shape))].reshape(y.shape + shape)
                for y, J in zip(outs, Js) for c0, shape in blocks)
    return res if len(res) > 1 else res[0]


@contextlib.contextmanager
def plain_products(ctx: Any) -> Iterator[None]:
    """Within it ``ctx.matmul`` expands its products into expressions (a context that defers products to
    loops of the generated C honours its ``expand_products`` attribute)."""
    before = getattr(ctx, "expand_products", None)
    if before is None:
        yield
        return
    ctx.expand_products = True
    try:
        yield
    finally:
        ctx.expand_products = before


# --------------------------------------------------------------------------------------------------
# float run
# --------------------------------------------------------------------------------------------------
_FLOAT_RUNS: dict[tuple, Any] = {}


def _stages(ctx: Any) -> bool:
    """Whether ``ctx`` records a staged program (what forward-mode tangents differentiate); on a context
    that does not, the forward-mode derivatives are the staged program evaluated in floats."""
    return getattr(ctx, "program", None) is not None


def _float_run(name: str, robot: Any, args: tuple, f_ext: np.ndarray | None,
               params: dict[int, np.ndarray] | None = None, algorithm: Any = None, **kw: Any) -> Any:
    """The symbolic program of ``name`` as a Python function (cached), evaluated at ``args``; ``params``:
    the numeric context's run-time inertial parameters, inputs of the program too."""
    bodies = tuple(sorted(params)) if params else ()
    key = (name, robot.fingerprint(), f_ext is not None, bodies, tuple(sorted(kw.items())))
    fn = _FLOAT_RUNS.get(key)
    if fn is None:
        ctx = Symbolic()
        names = {"inverse_dynamics_derivatives": ("q", "v", "a"),
                 "forward_dynamics_derivatives": ("q", "v", "tau"),
                 "frame_acceleration_derivatives": ("q", "v", "a")}.get(name)
        if names is None:         # tangent_derivatives: the positional inputs it names
            names = tuple(n for n in kw["inputs"] if n not in ("f_ext", "params"))
        sizes = {"q": robot.nq, "v": robot.nv, "a": robot.nv, "tau": robot.nv, "qd": robot.n_joints, "h": 6}
        sym = [ctx.input(n, sizes[n]) for n in names]
        extra: dict[str, Any] = dict(kw)
        if f_ext is not None:
            extra["f_ext"] = ctx.input("f_ext", (robot.n_bodies, 6))
        if bodies:
            ctx.parameters = dict(zip(bodies, ctx.input("params", (len(bodies), 10))))
        outs = (algorithm or globals()[name])(robot, ctx, *sym, **extra)
        outs = outs if isinstance(outs, tuple) else (outs,)
        fn = python_function(list(ctx.inputs.items()), ctx.program, list(outs))
        _FLOAT_RUNS[key] = fn
    vals = [np.ravel(np.asarray(x, dtype=float)) for x in args]
    if f_ext is not None:
        vals.append(np.ravel(np.asarray(f_ext, dtype=float)))
    if bodies:
        vals.append(np.ravel(np.array([params[k] for k in bodies], dtype=float)))
    out = tuple(fn(*vals))
    return out[0] if name == "tangent_derivatives" and len(out) == 1 else out
