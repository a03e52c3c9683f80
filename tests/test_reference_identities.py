"""Identities of the seeds checked on the dense reference path (scratch tree robot with a prismatic
joint, free and fixed base, gravity on).  1e-10 unless stated; finite-difference checks state theirs.

Independent pieces used here: a world-frame forward-kinematics recursion written in this file
(no spatial operators), finite differences along exact trajectories, and the seed identities.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TEST_ARM, rel_err, with_gravity

from soadyn import load_robot
from soadyn.reference import dense as ref
from soadyn.symbolic.spatial import quaternion_to_matrix

TOL = 1e-10
N = 8
GRAVITY = np.array([0.4, -0.9, -9.81])


@pytest.fixture(params=["free", "fixed"])
def robot(request):
    return with_gravity(load_robot(TEST_ARM, base=request.param), GRAVITY)


def _states(robot, rng, n=N):
    for _ in range(n):
        yield robot.random_configuration(rng), rng.normal(size=robot.nv), rng.normal(size=robot.nv)


# ---- independent world-frame kinematics ---------------------------------------------------------------
def _rot(axis, t):
    K = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]])
    return np.eye(3) + np.sin(t) * K + (1 - np.cos(t)) * K @ K


def world_kinematics(robot, q, v):
    """Per body: R (body->world), origin p, world angular velocity w, world origin velocity vo."""
    n = robot.n_bodies
    R, p, w, vo = [None] * n, [None] * n, [None] * n, [None] * n
    if robot.is_free:
        R[0], p[0] = quaternion_to_matrix(q[3:7]), q[:3]
        w[0], vo[0] = R[0] @ v[:3], R[0] @ v[3:6]
    else:
        R[0], p[0], w[0], vo[0] = np.eye(3), np.zeros(3), np.zeros(3), np.zeros(3)
    for k in range(1, n):
        j, par = robot.joints[k], robot.parent[k]
        x, xd = q[robot.q_index(k)], v[robot.v_index(k)][0]
        Rj, pj = j.placement.R, j.placement.p
        if j.type == "revolute":
            R[k], p[k] = R[par] @ Rj @ _rot(j.axis, x), p[par] + R[par] @ pj
            w[k] = w[par] + R[k] @ j.axis * xd
            vo[k] = vo[par] + np.cross(w[par], p[k] - p[par])
        else:
            R[k], p[k] = R[par] @ Rj, p[par] + R[par] @ (pj + Rj @ j.axis * x)
            w[k] = w[par]
            vo[k] = vo[par] + np.cross(w[par], p[k] - p[par]) + R[k] @ j.axis * xd
    return R, p, w, vo


def _qdot(robot, q, v):
    """dq/dt for the state (q, v): base position rate R v_o, quaternion rate 1/2 quat (x) [w_body; 0]."""
    qd = np.zeros(robot.nq)
    if robot.is_free:
        R = quaternion_to_matrix(q[3:7])
        qd[:3] = R @ v[3:6]
        e, s, om = q[3:6], q[6], v[:3]
        qd[3:6] = 0.5 * (s * om + np.cross(e, om))
        qd[6] = -0.5 * e @ om
    qd[robot.base_nq:] = v[robot.base_nv:]
    return qd


def _ddt(f, robot, q, v, a, h=1e-5):
    """Time derivative of f(q, v) along the motion with acceleration a (central difference)."""
    qd = _qdot(robot, q, v)
    return (np.asarray(f(q + h * qd, v + h * a)) - np.asarray(f(q - h * qd, v - h * a))) / (2 * h)


# ---- Lemma 2.1, identities 1-3 of seed 001, Riccati equation ----------------------------------------------
def test_innovations_factorisation_lemma_2_1(robot, rng):
    for q, _, _ in _states(robot, rng):
        M = ref.mass_matrix(robot, q)
        ab = ref.articulated_body(robot, q)
        H, phi = ab.ops.H, ab.ops.phi
        L, D = ref.innovations_factors(robot, q)
        assert rel_err(L @ D @ L.T, M) < TOL                                       # 2.10a
        Linv = np.eye(robot.nv) - H @ ab.psi @ ab.K
        assert rel_err(Linv @ L, np.eye(robot.nv)) < TOL                            # 2.10b
        assert rel_err(ref.mass_matrix_inverse(robot, q) @ M, np.eye(robot.nv)) < TOL   # 2.10c
        assert rel_err(np.linalg.inv(L), Linv) < TOL
        # base-to-tip numbering: H phi K couples a joint only to its descendants -> strictly upper
        # triangular, so L is unit upper triangular and L D L* is a "UDU*" factorisation of M
        HphiK = H @ phi @ ab.K
        assert np.abs(np.tril(HphiK)).max() <= 1e-14 * np.abs(HphiK).max()
        assert np.abs(HphiK).max() > 1e-3


def test_seed001_identities(robot, rng):
    for q, _, _ in _states(robot, rng):
        ab = ref.articulated_body(robot, q)
        o = ab.ops
        H, phi, K, P, D, M, psi = o.H, o.phi, ab.K, ab.P, ab.D, o.M, ab.psi
        I = np.eye(phi.shape[0])
        assert rel_err(phi @ np.linalg.inv(psi), I + phi @ K @ H) < TOL            # identity 1
        assert rel_err(np.linalg.inv(np.eye(robot.nv) + H @ phi @ K),
                       np.eye(robot.nv) - H @ psi @ K) < TOL                        # identity 2
        phit = phi - I
        assert rel_err(phi @ M @ phi.T,
                       P + phit @ P + P @ phit.T + phi @ K @ D @ K.T @ phi.T) < TOL  # identity 3


def test_riccati_equation_2_8(robot, rng):
    for q, _, _ in _states(robot, rng):
        ab = ref.articulated_body(robot, q)
        o = ab.ops
        P, Pp, tau, E_phi, E_psi = ab.P, ab.P_plus, ab.tau_bar, o.E_phi, ab.E_psi
        assert rel_err(P - E_psi @ P @ E_psi.T, o.M) < TOL                          # 2.8, first form
        assert rel_err(E_phi @ Pp @ E_phi.T + o.M, P) < TOL                          # P = E P+ E* + M
        assert rel_err(tau @ P @ tau.T, Pp) < TOL                                    # P+ = tau P tau* = tau P
        assert rel_err(P - E_phi @ P @ E_phi.T + ab.K @ ab.D @ ab.K.T, o.M) < TOL
        for k in range(robot.n_bodies):  # per-body Algorithm 2 step
            acc = o.M[6 * k:6 * k + 6, 6 * k:6 * k + 6].copy()
            for c in robot.children[k]:
                Phi = E_phi[6 * k:6 * k + 6, 6 * c:6 * c + 6]
                acc += Phi @ ab.P_plus_k[c] @ Phi.T
            assert rel_err(acc, ab.P_k[k]) < TOL


def test_mass_matrix_spd_and_inverse(robot, rng):
    for q, _, _ in _states(robot, rng):
        M = ref.mass_matrix(robot, q)
        assert rel_err(M, M.T) < 1e-14
        assert np.linalg.eigvalsh(M).min() > 1e-6 * np.abs(M).max()
        assert rel_err(M @ ref.mass_matrix_inverse(robot, q), np.eye(robot.nv)) < TOL


def test_forward_inverts_inverse(robot, rng):
    for q, v, a in _states(robot, rng):
        f_ext = rng.normal(size=(robot.n_bodies, 6))
        tau = ref.inverse_dynamics(robot, q, v, a, f_ext)
        assert rel_err(ref.forward_dynamics(robot, q, v, tau, f_ext), a) < TOL
        # and the split into M a + C holds
        assert rel_err(ref.mass_matrix(robot, q) @ a + ref.bias_forces(robot, q, v, f_ext), tau) < TOL


def test_kinetic_energy_equals_sum_of_bodies(robot, rng):
    for q, v, _ in _states(robot, rng):
        R, p, w, vo = world_kinematics(robot, q, v)
        T = 0.0
        for k, inr in enumerate(robot.inertias):
            vc = vo[k] + np.cross(w[k], R[k] @ inr.com)
            T += 0.5 * inr.mass * vc @ vc + 0.5 * w[k] @ (R[k] @ inr.inertia @ R[k].T) @ w[k]
        M = ref.mass_matrix(robot, q)
        assert abs(0.5 * v @ M @ v - T) < TOL * T
        assert abs(ref.kinetic_energy(robot, q, v) - T) < TOL * T


def test_momentum_matches_sum_of_bodies(robot, rng):
    for q, v, _ in _states(robot, rng):
        R, p, w, vo = world_kinematics(robot, q, v)
        c = sum(i.mass * (p[k] + R[k] @ i.com) for k, i in enumerate(robot.inertias)) / robot.total_mass
        h = np.zeros(6)
        for k, inr in enumerate(robot.inertias):
            ck = p[k] + R[k] @ inr.com
            vc = vo[k] + np.cross(w[k], ck - p[k])
            h[:3] += R[k] @ inr.inertia @ R[k].T @ w[k] + inr.mass * np.cross(ck - c, vc)
            h[3:] += inr.mass * vc
        assert rel_err(ref.center_of_mass(robot, q), c) < TOL
        assert rel_err(ref.momentum(robot, q, v), h) < TOL


def test_conventional_accelerations_by_finite_differences(robot, rng):
    """alpha(k) = phi*(H* a + a_coriolis) against d/dt of the world-frame w(k), v(k): checks the derived
    Coriolis terms (prismatic 2 w x v_r, free-base w x v) and gravity as root acceleration.  rtol 1e-7."""
    g_free = with_gravity(robot, [0, 0, 0])
    for q, v, a in _states(g_free, rng, 4):
        o = ref.operators(g_free, q, v)
        alpha = o.phi.T @ (o.H.T @ a + o.a)
        dw = _ddt(lambda qq, vv: np.array(world_kinematics(g_free, qq, vv)[2]), g_free, q, v, a)
        dv = _ddt(lambda qq, vv: np.array(world_kinematics(g_free, qq, vv)[3]), g_free, q, v, a)
        for k in range(g_free.n_bodies):
            Rk = o.R[k]
            got = np.concatenate([Rk @ alpha[6 * k:6 * k + 3], Rk @ alpha[6 * k + 3:6 * k + 6]])
            assert rel_err(got, np.concatenate([dw[k], dv[k]])) < 1e-7, f"body {k}"


def test_gravity_is_root_acceleration(robot, rng):
    """With gravity g, alpha(k) of every body gains exactly -g (inertial), i.e. R_k^T (-g) in body axes."""
    g0 = with_gravity(robot, [0, 0, 0])
    for q, v, a in _states(robot, rng, 3):
        o1, o0 = ref.operators(robot, q, v), ref.operators(g0, q, v)
        d = o1.phi.T @ (o1.H.T @ a + o1.a) - o0.phi.T @ (o0.H.T @ a + o0.a)
        for k in range(robot.n_bodies):
            assert rel_err(o1.R[k] @ d[6 * k + 3:6 * k + 6], -GRAVITY) < TOL
            assert np.abs(d[6 * k:6 * k + 3]).max() < 1e-12


@pytest.mark.parametrize("perturb", [0.0, 1e-3])
def test_momentum_conserved_without_external_forces(perturb, rng):
    """Free base, tau = 0, f_ext = 0, g = 0: d/dt of the momentum along the forward-dynamics
    acceleration vanishes (rtol 1e-7 of |h| |v|).  The perturbed run must fail the same check."""
    robot = with_gravity(load_robot(TEST_ARM, base="free"), [0, 0, 0])
    for q, v, _ in _states(robot, rng, 4):
        a = ref.forward_dynamics(robot, q, v, np.zeros(robot.nv))
        a[2] += perturb
        dh = _ddt(lambda qq, vv: ref.momentum(robot, qq, vv), robot, q, v, a)
        scale = np.linalg.norm(ref.momentum(robot, q, v)) * np.linalg.norm(v)
        ok = np.linalg.norm(dh) < 1e-7 * scale
        assert ok if perturb == 0.0 else not ok


def test_generalized_jacobian(rng):
    """Joint rates with the base speeds that zero the momentum give the frame twist J_g qdot."""
    robot = load_robot(TEST_ARM, base="free")
    for q, _, _ in _states(robot, rng, 4):
        qd = rng.normal(size=robot.n_joints)
        # base speeds that zero the momentum, from the momentum function (linear in v)
        A = np.column_stack([ref.momentum(robot, q, e) for e in np.eye(robot.nv)])
        vb = -np.linalg.solve(A[:, :6], A[:, 6:] @ qd)
        v = np.concatenate([vb, qd])
        assert np.abs(ref.momentum(robot, q, v)).max() < 1e-12 * np.abs(A).max() * np.abs(v).max()
        for frame in ("tcp", "l4", "l2"):
            Jg = ref.generalized_jacobian(robot, q, frame)
            twist = ref.jacobian(robot, q, frame, world_aligned=True) @ v
            assert rel_err(Jg @ qd, twist) < TOL
            # and the frame twist agrees with the independent world kinematics
            k, X = robot.frame_of(frame)
            R, p, w, vo = world_kinematics(robot, q, v)
            assert rel_err(twist, np.concatenate([w[k], vo[k] + np.cross(w[k], R[k] @ X.p)])) < TOL


def test_bad_input_errors():
    robot = load_robot(TEST_ARM, base="free")
    q = robot.neutral()
    with pytest.raises(ValueError, match="shape"):
        ref.mass_matrix(robot, q[:-1])
    with pytest.raises(ValueError, match="NaN"):
        ref.mass_matrix(robot, np.full(robot.nq, np.nan))
    with pytest.raises(ValueError, match="quaternion"):
        ref.mass_matrix(robot, np.zeros(robot.nq))
    with pytest.raises(ValueError, match="f_ext"):
        ref.inverse_dynamics(robot, q, np.zeros(robot.nv), np.zeros(robot.nv), np.zeros((2, 6)))
    with pytest.raises(ValueError, match="free base"):
        ref.generalized_jacobian(robot.with_base("fixed"), robot.with_base("fixed").neutral(), "tcp")
    with pytest.raises(KeyError, match="no body or frame"):
        ref.jacobian(robot, q, "nope")
