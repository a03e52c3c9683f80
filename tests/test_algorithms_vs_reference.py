"""The two routes to the same numbers: the O(N) recursions (float run of the generic algorithms)
against the dense operator products of the reference path, on a tree with a prismatic joint and on the
Panda and UR5 URDFs, free and fixed base, with gravity and external wrenches."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TEST_ARM, URDFS, load_urdf, with_gravity

from soadyn import load_robot
from soadyn.reference import dense as reference
from soadyn.symbolic import algorithms as alg
from soadyn.symbolic.scalar import Numeric

CTX = Numeric()
TOL = 1e-10


def _robots():
    for base in ("free", "fixed"):
        yield f"test_arm-{base}", lambda b=base: load_robot(TEST_ARM, base=b)
        for name, path in URDFS.items():
            if path is not None and path.is_file():
                yield f"{name}-{base}", lambda p=path, b=base: load_urdf(p, b)


ROBOTS = dict(_robots())


def _rel(a, b) -> float:
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-300))


@pytest.fixture(scope="module", params=sorted(ROBOTS))
def robot(request):
    return with_gravity(ROBOTS[request.param](), [0.7, -1.3, -9.81])


def test_all_functions_agree(robot):
    rng = np.random.default_rng(11)
    frames = [robot.body_names[-1], *robot.frame_names[-2:]]
    for _ in range(10):
        q = robot.random_configuration(rng)
        v, a, tau = (rng.normal(size=robot.nv) for _ in range(3))
        f_ext = rng.normal(size=(robot.n_bodies, 6))
        pairs = [
            (alg.mass_matrix(robot, CTX, q), reference.mass_matrix(robot, q)),
            (alg.bias_forces(robot, CTX, q, v), reference.bias_forces(robot, q, v)),
            (alg.inverse_dynamics(robot, CTX, q, v, a, f_ext),
             reference.inverse_dynamics(robot, q, v, a, f_ext)),
            (alg.forward_dynamics(robot, CTX, q, v, tau, f_ext),
             reference.forward_dynamics(robot, q, v, tau, f_ext)),
            (alg.mass_matrix_inverse(robot, CTX, q), reference.mass_matrix_inverse(robot, q)),
            (alg.center_of_mass(robot, CTX, q), reference.center_of_mass(robot, q)),
            (alg.momentum(robot, CTX, q, v), reference.momentum(robot, q, v)),
            (alg.kinetic_energy(robot, CTX, q, v), reference.kinetic_energy(robot, q, v)),
        ]
        L, D = alg.innovations_factors(robot, CTX, q)
        Lr, Dr = reference.innovations_factors(robot, q)
        pairs += [(L, Lr), (D, Dr)]
        for frame in frames:
            for wa in (False, True):
                pairs.append((alg.jacobian(robot, CTX, q, frame, wa),
                              reference.jacobian(robot, q, frame, wa)))
            if robot.is_free:
                pairs.append((alg.generalized_jacobian(robot, CTX, q, frame),
                              reference.generalized_jacobian(robot, q, frame)))
        for i, (x, y) in enumerate(pairs):
            assert _rel(x, y) < TOL, f"pair {i}: relative error {_rel(x, y):.2e}"


def test_articulated_body_quantities_agree(robot):
    rng = np.random.default_rng(5)
    q = robot.random_configuration(rng)
    ab = alg.articulated_body(robot, CTX, q)
    ref = reference.articulated_body(robot, q)
    for k in range(robot.n_bodies):
        if k == 0 and not robot.is_free:
            continue
        assert _rel(ab.P[k], ref.P_k[k]) < TOL
        if k == 0:  # free base, eq. 3.1: taubar(n) = 0, so P+(n) = 0
            assert np.abs(ref.P_plus_k[0]).max() < TOL * np.abs(ref.P_k[0]).max()
        else:
            assert _rel(ab.Pplus[k], ref.P_plus_k[k]) < TOL
            assert _rel(ab.D[k], ref.D_k[k]) < TOL
            assert _rel(ab.G[k], np.ravel(ref.G_k[k])) < TOL
            assert _rel(ab.taubar(k), ref.tau_bar_k[k]) < TOL
