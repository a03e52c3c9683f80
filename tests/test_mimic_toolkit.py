"""The free-floating toolkit (seed 003 App. C-E) for coupled robots (mimic, issue 25) with a drive train.

In the reduced coordinates ``v = [V_b; qd]`` the full velocities are ``G v`` with ``G = diag(I_6, G_j)``, so
the base inertia is unchanged, ``H_bm -> H_bm G_j``, ``H* -> G_j^T H* G_j``, ``c* -> G_j^T c*``,
``J* -> J* G_j``.
The generated C is checked against the reference path (soadyn.reference.free_floating, which evaluates the
thesis's sums on the uncoupled tree and projects with its own dense G) and against identities of the reduced
dense M and C (blocks, Schur complements) and momentum conservation, which involve no projection code.
Functions without a reduced form (innovations factors, decoupled / Schur FD, operational-space inertias,
closed loops) are not generated and give one line when their algorithm is called.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from conftest import module_cache_dir, rel_err

from soadyn import load_robot
from soadyn.codegen.functions import api_names, function_table
from soadyn.codegen.pipeline import compile_robot
from soadyn.reference import dense
from soadyn.reference import free_floating as ff
from soadyn.symbolic import algorithms as alg
from soadyn.symbolic.scalar import NUMERIC

URDF = Path(__file__).parent / "data" / "mimic_tree.urdf"
TOL = 1e-9
TOOLKIT = ["base_inertia", "coupling_inertia", "generalized_inertia", "generalized_bias",
           "angular_reduced_dynamics", "coupling_inertia_rate", "base_velocity", "generalized_jacobian",
           "momentum_frame_twist"]
UNAVAILABLE = ["innovations_factors", "forward_dynamics_decoupled", "forward_dynamics_schur",
               "operational_space_inertias"]


def _robot():
    r = load_robot(URDF, base="free").replace(gravity=[0.3, -0.2, -9.81])
    return r.replace(joints=[None if j is None else dataclasses.replace(
        j, armature=0.1 + 0.05 * k, damping=0.3, friction=0.2) for k, j in enumerate(r.joints)])


@pytest.fixture(scope="module")
def coupled(request, tmp_path_factory):
    robot = _robot()
    out = module_cache_dir(request, tmp_path_factory, "soadyn_mimic_toolkit")
    return robot, compile_robot(robot, out, functions=TOOLKIT, progress=False)


def test_registry_for_coupled_robots():
    r = _robot()
    apis = api_names(function_table(r, derivatives=True))
    assert set(TOOLKIT) <= set(apis)
    assert not set(UNAVAILABLE) & set(apis)
    fixed = api_names(function_table(r.with_base("fixed")))
    assert not set(TOOLKIT) & set(fixed)  # free base only, as for uncoupled robots
    with pytest.raises(ValueError, match=r"^innovations_factors: robot 'mimic_tree' has mimic couplings, "
                       r"for which innovations_factors is not available; available: .*generalized_jacobian"):
        alg.innovations_factors(r, NUMERIC, r.neutral())


def test_toolkit_in_reduced_coordinates(coupled):
    robot, m = coupled
    rng = np.random.default_rng(4)
    nj = robot.n_joints
    for _ in range(4):
        q = robot.random_configuration(rng)
        v = rng.normal(size=robot.nv)
        qd, h = v[6:], rng.normal(size=6)
        M, C = dense.mass_matrix(robot, q), dense.bias_forces(robot, q, v)
        Hb, Hbm = m.base_inertia(q), m.coupling_inertia(q)
        assert Hbm.shape == (6, nj)
        # blocks of the reduced mass matrix (armature of coupled joints included through G)
        assert rel_err(Hb, M[:6, :6]) < TOL and rel_err(Hbm, M[:6, 6:]) < TOL
        schur = M[6:, 6:] - M[6:, :6] @ np.linalg.solve(M[:6, :6], M[:6, 6:])
        assert rel_err(m.generalized_inertia(q), schur) < TOL
        assert rel_err(m.generalized_bias(q, v), C[6:] - M[6:, :6] @ np.linalg.solve(M[:6, :6], C[:6])) < TOL
        for ours, ref in zip(m.angular_reduced_dynamics(q, v), ff.angular_reduced_dynamics(robot, q, v)):
            assert rel_err(ours, ref) < TOL
        assert rel_err(m.coupling_inertia_rate(q, qd), ff.coupling_inertia_rate(robot, q, qd)) < TOL
        # momentum conservation: the base twist from zero momentum cancels the reduced momentum, and the
        # frame twist with that base motion is the generalised Jacobian times the independent joint rates
        vb = m.base_velocity(q, qd, np.zeros(6))
        assert np.max(np.abs(dense.momentum(robot, q, np.r_[vb, qd]))) < 1e-10
        assert rel_err(m.base_velocity(q, qd, h), ff.base_velocity(robot, q, qd, h)) < TOL
        for frame in ("l2", "f2"):
            Jg = m.generalized_jacobian(q, frame)
            assert Jg.shape == (6, nj)
            J = dense.jacobian(robot, q, frame, world_aligned=True)
            assert rel_err(Jg @ qd, J @ np.r_[vb, qd]) < TOL
            assert rel_err(Jg, dense.generalized_jacobian(robot, q, frame)) < TOL
            tw = m.momentum_frame_twist(q, h, frame)
            assert rel_err(tw, ff.momentum_frame_twist(robot, q, h, frame)) < TOL
            # E.6: J* qd + tw is the frame twist of the motion with momentum h
            vbh = m.base_velocity(q, qd, h)
            assert rel_err(Jg @ qd + tw, J @ np.r_[vbh, qd]) < TOL
