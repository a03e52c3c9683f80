"""Free-floating toolkit: inertia blocks, reduced dynamics, momentum maps, reaction null space, RNSC/DMC.

Three independent routes are compared: the generic O(N) algorithms (numeric context and, when the
generator exports them, generated C), the dense Appendix-C/D/E forms of ``reference_free_floating`` and
identities that involve neither (mass-matrix inverse blocks, forward dynamics, finite differences).
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import EXAMPLES, TEST_ARM, rel_err

from soadyn import load_robot
from soadyn.reference import dense as ref
from soadyn.reference import free_floating as rff
from soadyn.runtime import control as C
from soadyn.runtime.numeric_module import NumericModule
from soadyn.symbolic.algorithms import free_floating as ff
from soadyn.symbolic.algorithms import generalized_jacobian, jacobian, mass_matrix, momentum
from soadyn.symbolic.scalar import NUMERIC

ROBOTS = {"test_arm": TEST_ARM, "tian_wu": EXAMPLES / "tian_wu_3dof.yaml",
          "dimitrov": EXAMPLES / "dimitrov_7dof_rw.yaml"}
WHEELS = ["j8", "j9", "j10"]
TOL = 1e-10


def _robot(name: str, gravity=(0.4, -0.3, -9.81)):
    return load_robot(ROBOTS[name]).replace(gravity=gravity)


def _state(r, rng, vscale=1.0):
    q = r.random_configuration(rng)
    q[3:7] *= 1.3                                   # the quaternion's norm is divided out
    v = vscale * rng.normal(size=r.nv)
    fe = 0.5 * rng.normal(size=(r.n_bodies, 6))
    return q, v, fe


@pytest.mark.parametrize("name", list(ROBOTS))
def test_generic_matches_dense_reference(name, rng):
    r = _robot(name)
    for _ in range(3):
        q, v, fe = _state(r, rng)
        qd = v[6:]
        h = momentum(r, NUMERIC, q, v)
        pairs = [
            (ff.base_inertia(r, NUMERIC, q), rff.base_inertia(r, q)),
            (ff.coupling_inertia(r, NUMERIC, q), rff.coupling_inertia(r, q)),
            (ff.generalized_inertia(r, NUMERIC, q), rff.generalized_inertia(r, q)),
            (ff.generalized_bias(r, NUMERIC, q, v), rff.generalized_bias(r, q, v)),
            (ff.generalized_bias(r, NUMERIC, q, v, fe), rff.generalized_bias(r, q, v, fe)),
            (ff.coupling_inertia_rate(r, NUMERIC, q, qd), rff.coupling_inertia_rate(r, q, qd)),
            (ff.base_velocity(r, NUMERIC, q, qd, h), rff.base_velocity(r, q, qd, h)),
        ]
        pairs += list(zip(ff.angular_reduced_dynamics(r, NUMERIC, q, v, fe),
                          rff.angular_reduced_dynamics(r, q, v, fe)))
        for frame in [*r.frame_names, r.body_names[-1]]:
            pairs.append((ff.momentum_frame_twist(r, NUMERIC, q, h, frame),
                          rff.momentum_frame_twist(r, q, h, frame)))
            pairs.append((generalized_jacobian(r, NUMERIC, q, frame), rff.generalized_jacobian(r, q, frame)))
        for got, want in pairs:
            assert rel_err(got, want) < TOL


@pytest.mark.parametrize("name", list(ROBOTS))
def test_blocks_against_mass_matrix_and_its_inverse(name, rng):
    """H_b, H_bm are blocks of M; H* is the inverse of the joint block of M^-1 (block inversion), SPD."""
    r = _robot(name)
    q, v, _ = _state(r, rng)
    M = ref.mass_matrix(r, q)
    assert rel_err(ff.base_inertia(r, NUMERIC, q), M[:6, :6]) < TOL
    assert rel_err(ff.coupling_inertia(r, NUMERIC, q), M[:6, 6:]) < TOL
    Hg = ff.generalized_inertia(r, NUMERIC, q)
    assert np.array_equal(Hg, Hg.T)
    assert np.min(np.linalg.eigvalsh(Hg)) > 0
    assert rel_err(Hg, np.linalg.inv(np.linalg.inv(M)[6:, 6:])) < 1e-9
    # H* is smaller than the fixed-base joint inertia H_m (the base gives way): H_m - H* is PSD
    assert np.min(np.linalg.eigvalsh(M[6:, 6:] - Hg)) > -1e-12


@pytest.mark.parametrize("name", list(ROBOTS))
def test_reduced_equations_reproduce_forward_dynamics(name, rng):
    """H* qdd + c* = tau_m (eq. E.3) and the angular reduced rows (eq. E.2) hold for the O(N) forward
    dynamics with a random base moment, zero base force and random joint torques."""
    r = _robot(name)
    q, v, fe = _state(r, rng)
    tau = rng.normal(size=r.nv)
    tau[3:6] = 0.0
    a = ref.forward_dynamics(r, q, v, tau, fe)
    qdd = a[6:]
    Hg, cg = ff.generalized_inertia(r, NUMERIC, q), ff.generalized_bias(r, NUMERIC, q, v, fe)
    Hbm, Hb = ff.coupling_inertia(r, NUMERIC, q), ff.base_inertia(r, NUMERIC, q)
    assert rel_err(Hg @ qdd + cg, tau[6:] - Hbm.T @ np.linalg.solve(Hb, tau[:6])) < 1e-9
    Hbt, Hct, Hpt, cbt, cpt = ff.angular_reduced_dynamics(r, NUMERIC, q, v, fe)
    assert rel_err(Hbt @ a[:3] + Hct @ qdd + cbt, tau[:3]) < 1e-9
    assert rel_err(Hct.T @ a[:3] + Hpt @ qdd + cpt, tau[6:]) < 1e-9


@pytest.mark.parametrize("name", list(ROBOTS))
def test_coupling_inertia_rate_is_the_time_derivative(name, rng):
    r = _robot(name)
    q, v, _ = _state(r, rng)
    qd = v[6:]
    eps = 1e-6

    def Hbm(x):
        return mass_matrix(r, NUMERIC, x)[:6, 6:]

    qp, qm = q.copy(), q.copy()
    qp[7:] += eps * qd
    qm[7:] -= eps * qd
    fd = (Hbm(qp) - Hbm(qm)) @ qd / (2 * eps)
    assert rel_err(ff.coupling_inertia_rate(r, NUMERIC, q, qd), fd) < 1e-7


@pytest.mark.parametrize("name", list(ROBOTS))
def test_momentum_maps(name, rng):
    """Momentum conservation algebra: base twist from (qd, h), frame twist = J* qd + J_b H_b^-1 h_o (eq. E.6),
    angular momentum about the CoM = H~_b w + H~_c qd (eq. C.18)."""
    r = _robot(name)
    q, v, _ = _state(r, rng)
    qd = v[6:]
    h = ref.momentum(r, q, v)
    assert rel_err(ff.base_velocity(r, NUMERIC, q, qd, h), v[:6]) < TOL
    frame = (r.frame_names or r.body_names)[-1]
    twist = jacobian(r, NUMERIC, q, frame, world_aligned=True) @ v
    pred = generalized_jacobian(r, NUMERIC, q, frame) @ qd + ff.momentum_frame_twist(r, NUMERIC, q, h, frame)
    assert rel_err(pred, twist) < TOL
    # the zero-momentum Jacobian alone is wrong when the momentum is not zero (the term matters)
    assert rel_err(generalized_jacobian(r, NUMERIC, q, frame) @ qd, twist) > 1e-3
    Hbt, Hct, *_ = ff.angular_reduced_dynamics(r, NUMERIC, q, v)
    R0 = ref.body_poses(r, q)[0][0]
    assert rel_err(Hbt @ v[:3] + Hct @ qd, R0.T @ h[:3]) < TOL


def test_fixed_base_is_refused():
    r = load_robot(TEST_ARM, base="fixed")
    with pytest.raises(ValueError, match="free-floating base"):
        ff.base_inertia(r, NUMERIC, r.neutral())
    with pytest.raises(ValueError, match="base='free'"):
        rff.generalized_inertia(r, r.neutral())


# ---- control toolkit (module API) --------------------------------------------------------------------------
@pytest.fixture(scope="module")
def dimitrov():
    return NumericModule(_robot("dimitrov", gravity=(0, 0, 0)))


def test_partial_momenta_sum_to_total(dimitrov, rng):
    r = dimitrov.robot
    q, v, _ = _state(r, rng, 0.2)
    pm = C.partial_momenta(dimitrov, q, v, WHEELS)
    h = ref.momentum(r, q, v)
    c = ref.center_of_mass(r, q)
    assert rel_err(pm["com"], h[:3]) < TOL
    assert rel_err(pm["total"], h[:3] + np.cross(c, h[3:])) < TOL
    # the wheel part is the wheels' spin momentum: 0.1 kg m^2 about each base axis (robot file)
    R0 = ref.body_poses(r, q)[0][0]
    assert rel_err(pm["wheels"], R0 @ (0.1 * v[13:16])) < 1e-12


def test_reaction_null_space_projector(dimitrov, rng):
    q = dimitrov.robot.random_configuration(rng)
    arm = [f"j{i}" for i in range(1, 8)]
    for angular, rows in ((True, 3), (False, 6)):
        H = C.coupling_matrix(dimitrov, q, arm, angular)
        assert H.shape == (rows, 7)
        N = C.reaction_null_space(dimitrov, q, arm, angular)
        assert np.max(np.abs(H @ N)) < 1e-12 * np.max(np.abs(H))
        assert np.max(np.abs(N @ N - N)) < 1e-12
        assert np.linalg.matrix_rank(N, tol=1e-9) == 7 - rows
        qd = C.reactionless_rates(dimitrov, q, rng.normal(size=7), arm, angular=angular)
        v = np.concatenate([np.zeros(6), qd])
        # from rest: momentum zero -> the base stays still (angular: rotation only)
        vb = dimitrov.base_velocity(q, qd, np.zeros(6))
        assert np.max(np.abs(vb[:3] if angular else vb)) < 1e-12
        assert np.max(np.abs(qd[7:])) == 0.0                      # wheels not selected -> still
        assert np.linalg.norm(v) > 0.1


def test_rnsc_general_form_equals_thesis_eq_5_3(dimitrov, rng):
    """With no arm-wheel inertial coupling the general solve is eq. 5.2-5.3; the closed loop gives
    wdot_b = u_b exactly (eq. 5.4 with F_h = 0)."""
    r = dimitrov.robot
    q, v, _ = _state(r, rng, 0.1)
    tau_r, u_b, u_m = rng.normal(size=3) * 0.1, rng.normal(size=3), rng.normal(size=7)
    a = C.rnsc_torques(dimitrov, q, v, WHEELS, tau_r, u_b, u_m)
    b = C.rnsc_torques_thesis(dimitrov, q, v, WHEELS, tau_r, u_b, u_m)
    assert rel_err(a, b) < 1e-9
    acc = ref.forward_dynamics(r, q, v, a)
    assert rel_err(acc[:3], u_b) < 1e-9
    # the null-space part of the arm acceleration is the projected u_m (eq. 5.1)
    s = C.state(dimitrov, q, v)
    N = np.eye(7) - np.linalg.pinv(s.Hc[:, :7]) @ s.Hc[:, :7]
    assert rel_err(N @ acc[6:13], N @ u_m) < 1e-8


def test_dmc_rates_absorb_base_momentum(dimitrov, rng):
    """Eq. 5.6: H~_bm qd_m^d = H~_bm qd_m + H~_b w_b, so with qd_m = qd_m^d the base angular momentum is 0."""
    q, v, _ = _state(dimitrov.robot, rng, 0.1)
    qd_d = C.distributed_momentum_rates(dimitrov, q, v, WHEELS)
    s = C.state(dimitrov, q, v)
    assert rel_err(s.Hc[:, :7] @ qd_d, s.Hc[:, :7] @ v[6:13] + s.Hb @ v[:3]) < 1e-10
    v2 = v.copy()
    v2[6:13] = qd_d
    v2[:6] = dimitrov.base_velocity(q, v2[6:], dimitrov.momentum(q, v))
    assert np.max(np.abs(v2[:3])) < 1e-10


def test_joint_torques_for_accelerations(dimitrov, rng):
    r = dimitrov.robot
    q, v, _ = _state(r, rng, 0.1)
    qdd = rng.normal(size=r.n_joints)
    tau = C.joint_torques_for_accelerations(dimitrov, q, v, qdd)
    assert np.all(tau[:6] == 0)
    assert rel_err(ref.forward_dynamics(r, q, v, tau)[6:], qdd) < 1e-9


def test_bad_joint_names_are_reported(dimitrov):
    with pytest.raises(ValueError, match="unknown joint 'wheel_x'"):
        C.partial_momenta(dimitrov, dimitrov.robot.neutral(), np.zeros(16), ["wheel_x"])
    with pytest.raises(ValueError, match="xi_dot must have 7 entries"):
        C.reactionless_rates(dimitrov, dimitrov.robot.neutral(), np.zeros(3), [f"j{i}" for i in range(1, 8)])


def test_generated_module_free_floating_functions(tmp_path_factory, cc):
    """Generated C for the free-floating functions agrees with the dense reference to 1e-10."""
    from soadyn.codegen import compile as compile_robot

    r = _robot("test_arm")
    m = compile_robot(r, out_dir=tmp_path_factory.mktemp("gen_ff"))
    rng = np.random.default_rng(7)
    for _ in range(3):
        q, v, _ = _state(r, rng)
        h = ref.momentum(r, q, v)
        assert rel_err(m.base_inertia(q), rff.base_inertia(r, q)) < TOL
        assert rel_err(m.coupling_inertia(q), rff.coupling_inertia(r, q)) < TOL
        assert rel_err(m.generalized_inertia(q), rff.generalized_inertia(r, q)) < TOL
        assert rel_err(m.generalized_bias(q, v), rff.generalized_bias(r, q, v)) < TOL
        assert rel_err(m.coupling_inertia_rate(q, v[6:]), rff.coupling_inertia_rate(r, q, v[6:])) < TOL
        assert rel_err(m.base_velocity(q, v[6:], h), v[:6]) < TOL
        for got, want in zip(m.angular_reduced_dynamics(q, v), rff.angular_reduced_dynamics(r, q, v)):
            assert rel_err(got, want) < TOL
