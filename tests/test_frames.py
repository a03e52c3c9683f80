"""Kinematics of frames in the generated module (issue 23 item C): frame_pose, body_poses (built by
default), frame_twist and frame_acceleration (on request), against the independent reference path
(dense operator products and plain forward kinematics of soadyn.reference)."""

from __future__ import annotations

import numpy as np
import pytest
from binding_modules import arm_module, arm_robot, state

from soadyn.codegen.functions import api_names, function_table
from soadyn.reference import dense
from soadyn.reference import frames as ref


@pytest.fixture(scope="module", params=["free", "fixed"])
def arm(request, tmp_path_factory):
    return arm_robot(request.param), arm_module(request, tmp_path_factory, request.param)


def test_against_the_reference(arm, rng):
    robot, m = arm
    for _ in range(5):
        q, v, a = state(m, rng)
        R, p = m.body_poses(q)
        Rr, pr = dense.body_poses(robot, q)
        np.testing.assert_allclose(R, np.array(Rr), rtol=0, atol=1e-13)
        np.testing.assert_allclose(p, np.array(pr), rtol=0, atol=1e-13)
        for f in m.frame_ids:
            Rf, pf = m.frame_pose(q, f)
            Rfr, pfr = dense.frame_pose(robot, q, f)
            np.testing.assert_allclose(Rf, Rfr, rtol=0, atol=1e-13)
            np.testing.assert_allclose(pf, pfr, rtol=0, atol=1e-13)
            np.testing.assert_allclose(m.frame_twist(q, v, f), ref.frame_twist(robot, q, v, f), rtol=0,
                                       atol=1e-12)
            V, A = m.frame_acceleration(q, v, a, f)
            Vr, Ar = ref.frame_acceleration(robot, q, v, a, f)
            np.testing.assert_allclose(V, Vr, rtol=0, atol=1e-12)
            np.testing.assert_allclose(A, Ar, rtol=0, atol=1e-12)
    # a batch through the batched C entry point
    Q, V_, _ = state(m, rng, 7)
    R7, p7 = m.frame_pose(Q, "tcp")
    assert R7.shape == (7, 3, 3) and np.allclose(p7[3], dense.frame_pose(robot, Q[3], "tcp")[1], atol=1e-13)


def test_twist_is_the_jacobian_times_v(arm, rng):
    robot, m = arm
    q, v, _ = state(m, rng)
    np.testing.assert_allclose(m.frame_twist(q, v, "tcp"), m.jacobian(q, "tcp", world_aligned=True) @ v,
                               rtol=1e-12, atol=1e-12)


def test_defaults_and_opt_in():
    robot = arm_robot("free")
    default = api_names(function_table(robot))
    assert "frame_pose" in default and "body_poses" in default
    assert "frame_twist" not in default and "frame_acceleration" not in default
    everything = api_names(function_table(robot, derivatives=True))
    assert "frame_twist" in everything and "frame_acceleration" in everything
