"""Base-invariant symmetric dynamics (seed 000 sections 3-4, Appendix A): dual recursion, decoupled forward
dynamics, operational-space inertias, change of base body.

Every check compares two independent routes: the O(N) recursions of ``soadyn.symbolic.algorithms``
against the conventional O(N) forward dynamics, against the dense operator reference
(``soadyn.reference.dense`` / ``reference_invariant``) or against the same system re-rooted at another
body.  Tolerances are relative (``_close``), 1e-10.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import symengine as se

from soadyn import load_robot
from soadyn.model.robot import BodySpec, Inertia, Joint, Placement, Robot
from soadyn.reference import dense as reference
from soadyn.reference import frame_motion
from soadyn.reference import invariant as ri
from soadyn.structure import map_state, rebase, rebase_transform
from soadyn.symbolic.algorithms import forward_dynamics, jacobian, mass_matrix, momentum
from soadyn.symbolic.algorithms.articulated_body import articulated_body
from soadyn.symbolic.algorithms.decoupled import (
    decoupled_program_blocks,
    forward_dynamics_decoupled,
    link_accelerations_decoupled,
)
from soadyn.symbolic.algorithms.dual import (
    conventional_residuals,
    dual_articulated_body,
    dual_residual_forces,
)
from soadyn.symbolic.algorithms.kinematics import joint_transforms, velocities
from soadyn.symbolic.algorithms.operational_space import (
    inverse_operational_space_inertias,
    inverse_operational_space_inertias_dual,
    operational_space_inertias,
)
from soadyn.symbolic.scalar import NUMERIC, Symbolic

EX = Path(__file__).resolve().parents[1] / "examples"
TOL = 1e-10


def _close(x, y, tol: float = TOL) -> None:
    x, y = np.asarray(x, float), np.asarray(y, float)
    scale = max(1.0, float(np.abs(y).max()))
    err = float(np.abs(x - y).max())
    assert err <= tol * scale, f"max error {err:.3e} (scale {scale:.3e})"


def random_robot(rng: np.random.Generator, parents: list[int], base: str = "free",
                 gravity=(0.0, 0.0, -9.81)) -> Robot:
    """Random bodies on the given tree (parents[k] for k >= 1), random axes/placements, some prismatic."""
    specs = []
    for k, p in enumerate(parents):
        A = rng.normal(size=(3, 3))
        Ic = A @ A.T + 0.05 * np.eye(3)
        inert = Inertia(float(rng.uniform(0.5, 5.0)), rng.normal(scale=0.2, size=3), Ic)
        if k == 0:
            specs.append(BodySpec("b0", None, None, inert))
            continue
        axis = rng.normal(size=3)
        axis /= np.linalg.norm(axis)
        jtype = "prismatic" if k % 4 == 3 else "revolute"
        X = Placement.from_xyz_rpy(rng.normal(scale=0.4, size=3), rng.uniform(-np.pi, np.pi, 3))
        specs.append(BodySpec(f"b{k}", f"b{p}", Joint(f"j{k}", jtype, axis, X), inert))
    return Robot.from_specs("random", base, gravity, specs)


SERIAL = [-1, 0, 1, 2, 3, 4, 5]
TREE = [-1, 0, 1, 1, 0, 4, 4, 4, 2]


def _robots(rng):
    out = [load_robot(EX / f) for f in ("test_arm.yaml", "tian_wu_3dof.yaml", "dimitrov_7dof_rw.yaml")]
    out[0] = out[0].replace(gravity=[0.2, -0.3, -9.81])     # the example files have no gravity
    out += [random_robot(rng, SERIAL), random_robot(rng, TREE)]
    return out


def _state(robot, rng):
    q = robot.random_configuration(rng)
    v = rng.normal(size=robot.nv)
    tau = rng.normal(scale=5.0, size=robot.nv)
    f_ext = rng.normal(size=(robot.n_bodies, 6))
    return q, v, tau, f_ext


# ---- decoupled forward dynamics (Lemma 3.2, Algorithm 6) -----------------------------------------------
def test_decoupled_equals_articulated_body_forward_dynamics(rng):
    for robot in _robots(rng):
        for _ in range(3):
            q, v, tau, f_ext = _state(robot, rng)
            for fe in (None, f_ext):
                ref = forward_dynamics(robot, NUMERIC, q, v, tau, fe)
                _close(forward_dynamics_decoupled(robot, NUMERIC, q, v, tau, fe), ref)
                _close(ref, reference.forward_dynamics(robot, q, v, tau, fe), 1e-8)


def test_decoupled_link_accelerations_and_both_forms_of_eq_3_13(rng):
    """alpha(k) of eq. 3.12 equals the dense alpha = phi* (H* betadot + a) (eq. 2.3b), and the conventional
    form of eq. 3.13, betadot = nu_p - G* phi*(p, k) alpha(p), gives the same hinge accelerations."""
    for robot in _robots(rng):
        q, v, tau, f_ext = _state(robot, rng)
        alpha = link_accelerations_decoupled(robot, NUMERIC, q, v, tau, f_ext)
        lm = ri.link_motion(robot, q, v, tau, f_ext)
        _close(alpha, lm.alpha)
        kin = joint_transforms(robot, NUMERIC, q)
        vt = velocities(kin, v, f_ext)
        ab = articulated_body(robot, NUMERIC, q, kin)
        _, _, nu = conventional_residuals(ab, tau, vt.a, vt.b)
        for k in range(1, robot.n_bodies):
            ap = kin.X[k].motion_to_child(alpha[robot.parent[k]])
            _close(nu[k] - ab.G[k] @ ap, lm.qdd[robot.v_index(k)][0])


def test_hinge_force_identities_3_7_and_3_11(rng):
    """The true hinge forces f (dense eq. 2.3c) satisfy f = P (alpha - a) + z and -f = S alpha + z_s."""
    for robot in _robots(rng):
        q, v, tau, f_ext = _state(robot, rng)
        lm = ri.link_motion(robot, q, v, tau, f_ext)
        kin = joint_transforms(robot, NUMERIC, q)
        vt = velocities(kin, v, f_ext)
        _close(np.stack(vt.a), lm.a)
        ab = articulated_body(robot, NUMERIC, q, kin)
        dab = dual_articulated_body(robot, NUMERIC, q, ab)
        z, zplus, _ = conventional_residuals(ab, tau, vt.a, vt.b)
        zs, _ = dual_residual_forces(dab, tau, vt.a, vt.b, zplus)
        for k in range(robot.n_bodies):
            _close(ab.P[k] @ (lm.alpha[k] - vt.a[k]) + z[k], lm.f[k], 1e-9)
            _close(-(dab.S_or_zero(k) @ lm.alpha[k] + zs[k]), lm.f[k], 1e-9)


def test_dual_inertia_is_the_articulated_inertia_of_the_complement(rng):
    """S(k) from the recursion equals P+ of the old parent in the model re-rooted at k (no Lemma 4.1)."""
    for robot in _robots(rng):
        q = robot.random_configuration(rng)
        ab = articulated_body(robot, NUMERIC, q)
        dab = dual_articulated_body(robot, NUMERIC, q, ab)
        S_ref = ri.dual_articulated_inertias(robot, q)
        for k in range(1, robot.n_bodies):
            _close(dab.S[k], S_ref[k], 1e-9)
            assert np.allclose(dab.S[k] @ robot_hinge(robot, k), 0, atol=1e-9)   # S H* = 0


def robot_hinge(robot, k):
    from soadyn.symbolic.algorithms.kinematics import hinge_map

    return hinge_map(robot, k)


def test_fixed_base_is_rejected_with_a_clear_error(rng):
    robot = load_robot(EX / "tian_wu_3dof.yaml", base="fixed")
    q, v, tau, _ = _state(robot, rng)
    for fn, args in ((forward_dynamics_decoupled, (q, v, tau)), (operational_space_inertias, (q,))):
        with pytest.raises(ValueError, match="fixed base"):
            fn(robot, NUMERIC, *args)


# ---- block independence in the generated program -------------------------------------------------------
def _blocks(robot):
    ctx = Symbolic()
    q, v, tau = ctx.input("q", robot.nq), ctx.input("v", robot.nv), ctx.input("tau", robot.nv)
    _, marks = decoupled_program_blocks(robot, ctx, q, v, tau)
    prog = ctx.program
    P = prog[marks["P"]:marks["S"]]
    S = prog[marks["S"]:marks["combine"]]
    return P, S


def _deps(block):
    return set().union(*(a.expr.free_symbols for a in block))


def test_program_blocks_are_independent_on_a_serial_chain():
    robot = load_robot(EX / "tian_wu_3dof.yaml")
    P, S = _blocks(robot)
    assert P and S
    p_targets, s_targets = {a.target for a in P}, {a.target for a in S}
    assert not (_deps(S) & p_targets), "the dual (S/Zs) block reads a symbol of the conventional block"
    assert not (_deps(P) & s_targets)
    assert all(t.name.startswith(("S", "Zs")) for t in s_targets)
    assert all(t.name.startswith(("P", "U", "D", "G", "Zp")) for t in p_targets)


def test_program_blocks_on_a_tree_share_only_sibling_plus_quantities():
    robot = load_robot(EX / "test_arm.yaml")           # base has children l1 and l4; l1 -> l2 -> l3
    P, S = _blocks(robot)
    p_targets = {a.target for a in P}
    shared = {s.name.split("_")[0] for s in _deps(S) & p_targets}
    # S+ of l1 gathers P+ and z+ of its sibling l4 and vice versa; nothing else crosses.  (l4 is a leaf: its
    # P+ is constant and entries of z+ where G has a structural zero are z itself, staged as Zp4.)
    assert {"Pp1", "Zpp1", "Zpp4"} <= shared <= {"Pp1", "Pp4", "Zpp1", "Zpp4", "Zp4"}, shared
    assert not (_deps(P) & {a.target for a in S})


def test_symbolic_decoupled_evaluates_to_the_numeric_result(rng):
    robot = load_robot(EX / "tian_wu_3dof.yaml")
    ctx = Symbolic()
    qs, vs, ts = ctx.input("q", robot.nq), ctx.input("v", robot.nv), ctx.input("tau", robot.nv)
    out = forward_dynamics_decoupled(robot, ctx, qs, vs, ts)
    q, v, tau, _ = _state(robot, rng)
    env = {s: float(x) for s, x in zip(ctx.inputs["q"], q)}
    env.update({s: float(x) for s, x in zip(ctx.inputs["v"], v)})
    env.update({s: float(x) for s, x in zip(ctx.inputs["tau"], tau)})
    for a in ctx.program:
        env[a.target] = float(se.sympify(a.expr).xreplace(env).evalf())
    got = np.array([float(se.sympify(e).xreplace(env).evalf()) for e in out])
    _close(got, forward_dynamics(robot, NUMERIC, q, v, tau))


# ---- operational-space inertias (section 4) ------------------------------------------------------------
def test_operational_space_inertia_inverse_is_J_Minv_Jt(rng):
    for robot in _robots(rng):
        q = robot.random_configuration(rng)
        Lam = operational_space_inertias(robot, NUMERIC, q)
        Ups = inverse_operational_space_inertias(robot, NUMERIC, q)
        Ups_dual = inverse_operational_space_inertias_dual(robot, NUMERIC, q)
        Minv = np.linalg.inv(mass_matrix(robot, NUMERIC, q))
        assert Lam.shape == (robot.n_bodies, 6, 6)
        for k, name in enumerate(robot.body_names):
            J = jacobian(robot, NUMERIC, q, name)
            JMJ = J @ Minv @ J.T
            _close(Lam[k] @ JMJ, np.eye(6), 1e-9)              # Lemma 4.1: (P + S)^-1 = J M^-1 J*
            _close(Ups[k], JMJ, 1e-9)                           # eq. 4.7
            _close(Ups_dual[k], JMJ, 1e-9)                      # eq. 4.9
            assert np.linalg.eigvalsh(Lam[k]).min() > 0         # invertible for a free base
        _close(Lam, ri.operational_space_inertias(robot, q), 1e-8)


def test_fixed_base_upsilon_matches_and_is_singular_near_the_ground(rng):
    robot = load_robot(EX / "tian_wu_3dof.yaml", base="fixed")
    q = robot.random_configuration(rng)
    Ups = inverse_operational_space_inertias(robot, NUMERIC, q)
    _close(Ups, ri.inverse_operational_space_inertias(robot, q))
    # link 1 has one degree of freedom: Upsilon has rank 1 (Lambda does not exist)
    assert np.linalg.matrix_rank(Ups[1], tol=1e-9) == 1
    assert np.allclose(Ups[0], 0)


# ---- change of base body (Appendix A) ------------------------------------------------------------------
@pytest.mark.parametrize("new_base", ["l3", "l1", "l4", "tcp"])
def test_rebase_coordinates_and_invariant_physics(rng, new_base):
    robot = load_robot(EX / "test_arm.yaml").replace(gravity=[0.0, 1.0, -9.81])
    new = rebase(robot, new_base)
    assert new.body_names[0] == new_base and new.is_free and new.nv == robot.nv
    q, v, tau, _ = _state(robot, rng)
    m = rebase_transform(robot, new, q)
    # eq. A.6: M_k = T_{n,k}* M_n T_{n,k}; A.3/A.5 are inverses
    _close(m.T_old_from_new.T @ mass_matrix(robot, NUMERIC, q) @ m.T_old_from_new,
           mass_matrix(new, NUMERIC, m.q_new))
    _close(m.T_new_from_old @ m.T_old_from_new, np.eye(robot.nv))
    # the same motion in both models: velocities, accelerations, momentum, link accelerations
    a = forward_dynamics(robot, NUMERIC, q, v, tau)
    qn, vn, an = map_state(robot, new, q, v, a)
    _close(vn, m.velocity(v))
    _close(forward_dynamics(new, NUMERIC, qn, vn, m.force(tau)), an)
    _close(momentum(new, NUMERIC, qn, vn), momentum(robot, NUMERIC, q, v))
    old_frames = frame_motion(robot, q, v, a)
    new_frames = frame_motion(new, qn, vn, an)
    for name in robot.body_names:                           # old bodies survive as bodies or named frames
        for attr in ("p", "R", "w", "v", "wdot", "vdot"):
            _close(getattr(new_frames[name], attr), getattr(old_frames[name], attr))
    # operational-space inertia is base-invariant: the new base's Lambda = P(0) of the new model
    if new_base in robot.body_names:
        Lam = operational_space_inertias(robot, NUMERIC, q)
        Lam_new = operational_space_inertias(new, NUMERIC, qn)
        _close(Lam_new[0], Lam[robot.body_names.index(new_base)])
        for k, name in enumerate(new.body_names):
            if name in robot.body_names:                     # bodies whose frames did not move
                _close(Lam_new[k], Lam[robot.body_names.index(name)])


def test_rebase_of_a_fixed_base_is_refused():
    robot = load_robot(EX / "tian_wu_3dof.yaml", base="fixed")
    with pytest.raises(ValueError, match="fixed base"):
        rebase(robot, "link2")
