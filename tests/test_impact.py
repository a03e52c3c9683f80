"""Impact at the grasp (soadyn.runtime.impact): momentum of the pair conserved to round-off, kinetic energy
never grows, Newton's restitution law on the constrained directions, agreement with a dense momentum
balance written here from scratch, and the captured state equal to the model with the target attached."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import EXAMPLES, module_cache_dir

from soadyn import load_robot
from soadyn.model.rotations import quaternion_to_matrix as rotation_matrix
from soadyn.reference.dense import frame_pose
from soadyn.runtime.campaign import CHASER_FUNCTIONS, TRUTH_FUNCTIONS
from soadyn.runtime.impact import RigidBody, attach_target, capture, impact, pair_momentum

ROBOT = EXAMPLES / "dimitrov_7dof_rw.yaml"
HAND = "ee"


@pytest.fixture(scope="module")
def chaser(request, tmp_path_factory):
    """The thesis robot with the functions the impact needs (cached across sessions)."""
    from soadyn.codegen import compile as compile_robot

    return compile_robot(ROBOT, out_dir=module_cache_dir(request, tmp_path_factory, "soadyn_campaign"),
                         functions=CHASER_FUNCTIONS, progress=False)


@pytest.fixture(scope="module")
def robot():
    return load_robot(ROBOT)


def _skew(a):
    return np.array([[0, -a[2], a[1]], [a[2], 0, -a[0]], [-a[1], a[0], 0]])


def _random_case(robot, rng):
    """Random chaser state, random target (pose, inertia, twist) touching the hand, random directions."""
    q = robot.random_configuration(rng)
    v = 0.3 * rng.normal(size=robot.nv)
    R_h, p_h = frame_pose(robot, q, HAND)
    A = rng.normal(size=(3, 3))
    inertia = A @ A.T + 5.0 * np.eye(3)
    quat = rng.normal(size=4)
    quat /= np.linalg.norm(quat)
    target = RigidBody(float(rng.uniform(20, 400)), inertia, p_h + rng.normal(size=3), quat,
                       0.1 * rng.normal(size=3), 0.1 * rng.normal(size=3))
    k = int(rng.integers(1, 7))
    D = None if k == 6 else rng.normal(size=(6, k))
    return q, v, p_h, target, D


def test_momentum_conserved_and_energy_never_grows(chaser, robot, rng):
    worst_h, worst_e = 0.0, 0.0
    for _ in range(60):
        q, v, p, target, D = _random_case(robot, rng)
        e = float(rng.uniform(0, 1))
        res = impact(chaser, q, v, HAND, target, p, e, D)
        h0 = pair_momentum(chaser, q, v, target)
        h1 = pair_momentum(chaser, q, res.v, res.target)
        worst_h = max(worst_h, np.max(np.abs(h1 - h0)) / np.max(np.abs(h0)))
        assert res.energy_after <= res.energy_before * (1 + 1e-13)
        # kinetic energy loss of Newton's law: (1 - e^2)/2 u^T (D^T G D)^-1 u
        Dm = np.eye(6) if D is None else D
        u = Dm.T @ res.relative_before
        loss = 0.5 * (1 - e * e) * u @ np.linalg.solve(Dm.T @ (res.G_c + res.G_t) @ Dm, u)
        worst_e = max(worst_e, abs(res.energy_before - res.energy_after - loss) / res.energy_before)
        # restitution on the constrained directions
        np.testing.assert_allclose(Dm.T @ res.relative_after, -e * u, atol=1e-10 * (1 + np.abs(u).max()))
    assert worst_h < 1e-13, worst_h
    assert worst_e < 1e-11, worst_e


def test_elastic_impact_conserves_energy_plastic_grasp_stops_relative_motion(chaser, robot, rng):
    q, v, p, target, _ = _random_case(robot, rng)
    el = impact(chaser, q, v, HAND, target, p, 1.0)
    assert abs(el.energy_after - el.energy_before) < 1e-12 * el.energy_before
    pl = impact(chaser, q, v, HAND, target, p, 0.0)
    assert np.max(np.abs(pl.relative_after)) < 1e-12 * np.max(np.abs(pl.relative_before))
    assert pl.energy_after < el.energy_after


def test_impact_matches_a_dense_momentum_balance(chaser, robot, rng):
    """The impulse equations solved as one (nv + 6 + k) linear system with the mass matrix itself (not
    its inverse, not the inverse inertias G): M dv = J^T D lam, M_t dnu = -J_t^T D lam,
    D^T (J dv - J_t dnu) = -(1 + e) D^T (J v - J_t nu); target quantities written from scratch."""
    for _ in range(10):
        q, v, p, target, D = _random_case(robot, rng)
        e = float(rng.uniform(0, 1))
        Dm = np.eye(6) if D is None else D
        k = Dm.shape[1]
        nv = robot.nv
        M = chaser.mass_matrix(q)
        J = chaser.jacobian(q, HAND, world_aligned=True)
        R = rotation_matrix(target.quaternion)
        Mt = np.zeros((6, 6))
        Mt[:3, :3] = R @ target.inertia @ R.T
        Mt[3:, 3:] = target.mass * np.eye(3)
        Jt = np.eye(6)
        Jt[3:, :3] = -_skew(p - target.position)           # v_p = v_c + w x (p - c)
        nu = np.concatenate([target.angular_velocity, target.linear_velocity])
        K = np.zeros((nv + 6 + k, nv + 6 + k))
        K[:nv, :nv] = M
        K[:nv, nv + 6:] = -J.T @ Dm
        K[nv:nv + 6, nv:nv + 6] = Mt
        K[nv:nv + 6, nv + 6:] = Jt.T @ Dm
        K[nv + 6:, :nv] = Dm.T @ J
        K[nv + 6:, nv:nv + 6] = -Dm.T @ Jt
        rhs = np.zeros(nv + 6 + k)
        rhs[nv + 6:] = -(1 + e) * Dm.T @ (J @ v - Jt @ nu)
        x = np.linalg.solve(K, rhs)
        res = impact(chaser, q, v, HAND, target, p, e, D)
        np.testing.assert_allclose(res.v - v, x[:nv], rtol=0, atol=1e-9 * np.abs(x[:nv]).max())
        np.testing.assert_allclose(res.target.nu() - nu, x[nv:nv + 6], rtol=0,
                                   atol=1e-9 * np.abs(x[nv:nv + 6]).max())
        np.testing.assert_allclose(res.lam, x[nv + 6:], rtol=1e-9, atol=1e-12)


def test_captured_state_is_the_attached_model_and_independent_of_the_contact(chaser, robot, rng, request,
                                                                              tmp_path_factory):
    """After contact + latch the target moves with the hand: the model with the target attached (a new
    compiled module) has the pair's momentum and kinetic energy at the chaser's post-capture velocity;
    the post-capture state does not depend on the contact's restitution or directions."""
    from soadyn.codegen import compile as compile_robot

    grasp_xyz, grasp_rpy = np.array([0.1, -0.2, 0.7]), np.array([0.3, -0.2, 0.5])
    inertia = np.array([[150.0, 3.0, -2.0], [3.0, 130.0, 1.0], [-2.0, 1.0, 170.0]])
    model = attach_target(robot, HAND, 180.0, inertia, grasp_xyz, grasp_rpy, name="dimitrov_test_capture")
    truth = compile_robot(model, out_dir=module_cache_dir(request, tmp_path_factory, "soadyn_campaign"),
                          functions=TRUTH_FUNCTIONS, progress=False)
    from soadyn.model.robot import rpy_to_matrix
    from soadyn.model.rotations import matrix_to_quaternion

    finals = []
    for e, D in ((0.0, None), (0.6, np.r_[0, 0, 0, 0, 0, 1.0]), (1.0, rng.normal(size=(6, 3)))):
        q = robot.random_configuration(np.random.default_rng(7))
        v = 0.2 * np.random.default_rng(8).normal(size=robot.nv)
        R_h, p_h = frame_pose(robot, q, HAND)
        R_t = R_h @ rpy_to_matrix(grasp_rpy)
        target = RigidBody(180.0, inertia, p_h + R_h @ grasp_xyz, matrix_to_quaternion(R_t),
                           np.array([0.05, -0.02, 0.04]), np.array([0.01, 0.0, -0.02]))
        first, latch = capture(chaser, q, v, HAND, target, p_h, e, D)
        h_pair = pair_momentum(chaser, q, latch.v, latch.target)
        assert np.max(np.abs(h_pair - pair_momentum(chaser, q, v, target))) < 1e-12 * np.abs(h_pair).max()
        ht = truth.momentum(q, latch.v)
        c = truth.center_of_mass(q)
        ht_o = np.concatenate([ht[:3] + np.cross(c, ht[3:]), ht[3:]])
        assert np.max(np.abs(ht_o - h_pair)) < 1e-11 * np.abs(h_pair).max()
        assert abs(truth.kinetic_energy(q, latch.v) - latch.energy_after) < 1e-11 * latch.energy_after
        assert latch.energy_after <= first.energy_after * (1 + 1e-13)
        assert first.energy_after <= first.energy_before * (1 + 1e-13)
        finals.append(latch.v)
    for f in finals[1:]:
        np.testing.assert_allclose(f, finals[0], rtol=0, atol=1e-11)


def test_bad_impact_input(chaser, robot, rng):
    q, v, p, target, _ = _random_case(robot, rng)
    with pytest.raises(ValueError, match="restitution must be in"):
        impact(chaser, q, v, HAND, target, p, 1.5)
    with pytest.raises(ValueError, match="6 x k"):
        impact(chaser, q, v, HAND, target, p, 0.0, np.ones((5, 2)))
