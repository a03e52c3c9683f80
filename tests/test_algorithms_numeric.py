"""Float runs of the generic O(N) algorithms: self-consistency and first-principles checks.

These do not use the dense reference path (tests/test_reference_*.py and tests/test_codegen*.py compare
against it); they check the recursions against finite differences of the kinematics and against
conservation laws, so a sign or frame error in a(k), b(k), phi or H shows up here on its own.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from soadyn import load_robot
from soadyn.symbolic import algorithms as alg
from soadyn.symbolic.scalar import Numeric
from soadyn.symbolic.spatial import quaternion_to_matrix

ROOT = Path(__file__).resolve().parents[1]
CTX = Numeric()


def _quat_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    av, aw, bv, bw = a[:3], a[3], b[:3], b[3]
    return np.r_[aw * bv + bw * av + np.cross(av, bv), aw * bw - av @ bv]


def _integrate(robot, q: np.ndarray, v: np.ndarray, dt: float) -> np.ndarray:
    """Exact step for constant v over dt of the base (body-frame twist) and the joints, to first order."""
    q = q.copy()
    if robot.is_free:
        R = quaternion_to_matrix(q[3:7])
        q[:3] += dt * R @ v[3:6]
        w = v[:3] * dt
        th = np.linalg.norm(w)
        q[3:7] = _quat_mul(q[3:7], np.r_[np.sin(th / 2) * w / th, np.cos(th / 2)])
    q[robot.base_nq:] += dt * v[robot.base_nv:]
    return q


def _pose(robot, q, frame):
    Rw, pw = alg.link_poses(alg.joint_transforms(robot, CTX, q))
    k, X = robot.frame_of(frame)
    return Rw[k] @ X.R, pw[k] + Rw[k] @ X.p


@pytest.fixture(params=["free", "fixed"])
def robot(request):
    r = load_robot(ROOT / "examples" / "test_arm.yaml", base=request.param)
    return r.replace(gravity=[0.3, -9.81, 0.5])


def _state(robot, seed):
    rng = np.random.default_rng(seed)
    return robot.random_configuration(rng), rng.normal(size=robot.nv), rng.normal(size=robot.nv)


@pytest.mark.parametrize("seed", range(5))
def test_dynamics_consistency(robot, seed):
    q, v, a = _state(robot, seed)
    M = alg.mass_matrix(robot, CTX, q)
    assert np.allclose(M, M.T, rtol=0, atol=1e-12)
    assert np.linalg.eigvalsh(M).min() > 0
    C = alg.bias_forces(robot, CTX, q, v)
    tau = alg.inverse_dynamics(robot, CTX, q, v, a)
    np.testing.assert_allclose(tau, M @ a + C, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(alg.forward_dynamics(robot, CTX, q, v, tau), a, rtol=1e-10, atol=1e-10)
    Minv = alg.mass_matrix_inverse(robot, CTX, q)
    np.testing.assert_allclose(M @ Minv, np.eye(robot.nv), atol=1e-10)
    L, D = alg.innovations_factors(robot, CTX, q)
    np.testing.assert_allclose(L @ D @ L.T, M, atol=1e-10 * np.abs(M).max())
    assert np.allclose(np.tril(L, -1), 0) and np.allclose(np.diag(L), 1)
    np.testing.assert_allclose(alg.kinetic_energy(robot, CTX, q, v), 0.5 * v @ M @ v, rtol=1e-12)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("frame", ["base", "l2", "l4", "tool", "tcp"])
def test_jacobian_matches_finite_difference(robot, seed, frame):
    q, v, _ = _state(robot, seed)
    h = 1e-6
    (R1, p1), (R2, p2), (R, _) = (_pose(robot, _integrate(robot, q, v, -h), frame),
                                  _pose(robot, _integrate(robot, q, v, h), frame), _pose(robot, q, frame))
    W = (R2 - R1) / (2 * h) @ R.T
    twist_world = np.r_[W[2, 1], W[0, 2], W[1, 0], (p2 - p1) / (2 * h)]
    Jw = alg.jacobian(robot, CTX, q, frame, world_aligned=True)
    Jl = alg.jacobian(robot, CTX, q, frame)
    np.testing.assert_allclose(Jw @ v, twist_world, atol=1e-7)
    np.testing.assert_allclose(Jl @ v, np.r_[R.T @ twist_world[:3], R.T @ twist_world[3:]], atol=1e-7)


def test_bias_force_is_velocity_derivative_of_momentum_free_base():
    """With zero torque, zero gravity and zero f_ext the total momentum must be constant along the
    forward-dynamics flow: d/dt h(q, v) = 0, by central differences."""
    robot = load_robot(ROOT / "examples" / "test_arm.yaml", base="free")
    for seed in range(3):
        q, v, _ = _state(robot, seed)
        qdd = alg.forward_dynamics(robot, CTX, q, v, np.zeros(robot.nv))
        h = 1e-5
        hp = alg.momentum(robot, CTX, _integrate(robot, q, v, h), v + h * qdd)
        hm = alg.momentum(robot, CTX, _integrate(robot, q, v, -h), v - h * qdd)
        scale = np.abs(alg.momentum(robot, CTX, q, v)).max()
        assert np.abs(hp - hm).max() / (2 * h) < 1e-6 * scale
        # and the test can fail: a wrong acceleration changes the momentum
        hp_bad = alg.momentum(robot, CTX, _integrate(robot, q, v, h), v + h * (qdd + 0.1))
        assert np.abs(hp_bad - hm).max() / (2 * h) > 1e-3 * scale


def test_generalized_jacobian_zero_momentum():
    robot = load_robot(ROOT / "examples" / "test_arm.yaml", base="free")
    rng = np.random.default_rng(7)
    q = robot.random_configuration(rng)
    qd = rng.normal(size=robot.n_joints)
    M = alg.mass_matrix(robot, CTX, q)
    v = np.r_[-np.linalg.solve(M[:6, :6], M[:6, 6:] @ qd), qd]
    assert np.abs(alg.momentum(robot, CTX, q, v)).max() < 1e-12
    GJ = alg.generalized_jacobian(robot, CTX, q, "tcp")
    Jw = alg.jacobian(robot, CTX, q, "tcp", world_aligned=True)
    np.testing.assert_allclose(GJ @ qd, Jw @ v, atol=1e-12)


def test_center_of_mass_moves_with_linear_momentum():
    robot = load_robot(ROOT / "examples" / "test_arm.yaml", base="free")
    q, v, _ = _state(robot, 3)
    h = 1e-6
    dc = (alg.center_of_mass(robot, CTX, _integrate(robot, q, v, h))
          - alg.center_of_mass(robot, CTX, _integrate(robot, q, v, -h))) / (2 * h)
    np.testing.assert_allclose(robot.total_mass * dc, alg.momentum(robot, CTX, q, v)[3:], atol=1e-6)
