"""Generated regressors: tau = Y pi and h_O = Y_h pi on example robots and held-out URDFs (1e-12 relative),
agreement with Pinocchio's computeJointTorqueRegressor after the documented column mapping, exact structural
zeros, and base parameters (numerical QR with column pivoting) against the textbook count for a planar arm."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import (
    EXAMPLES,
    URDFS,
    load_urdf,
    module_cache_dir,
    pinocchio_pair,
    record,
    rel_err,
    with_gravity,
)

from soadyn import load_robot
from soadyn.codegen.pipeline import compile_robot
from soadyn.model.parameters import (
    PINOCCHIO_ORDER,
    default_params,
    parameter_labels,
    random_params,
    with_param_bodies,
    with_param_values,
)
from soadyn.reference import dense
from soadyn.runtime.identification import base_parameters
from soadyn.symbolic.algorithms import inverse_dynamics_regressor
from soadyn.symbolic.scalar import Numeric

FUNCS = ["inverse_dynamics_regressor", "momentum_regressor", "inverse_dynamics", "momentum", "center_of_mass"]
TOL = 1e-12
N = 25
GRAVITY = np.array([0.7, -1.3, -9.81])


@pytest.fixture(scope="session")
def module_dir(request, tmp_path_factory) -> Path:
    return module_cache_dir(request, tmp_path_factory, "soadyn_regressor_modules")


def _robot(which: str, base: str | None):
    if which in URDFS:
        path = URDFS[which]
        if path is None or not path.is_file():
            pytest.skip("example-robot-data not installed")
        return with_gravity(load_urdf(path, base), GRAVITY)
    return load_robot(EXAMPLES / f"{which}.yaml", base)


def _states(robot, rng, n=N):
    q = np.array([robot.random_configuration(rng) for _ in range(n)])
    return q, rng.normal(size=(n, robot.nv)), rng.normal(size=(n, robot.nv))


def _worst(got, want):
    return max(rel_err(g, w) for g, w in zip(got, want))


CASES = [("test_arm", None, "all"), ("tian_wu_3dof", "fixed", "all"), ("dimitrov_7dof_rw", None, ["link7"]),
         ("ur5", "fixed", "all"), ("panda", "free", "all")]


@pytest.mark.parametrize("which, base, bodies", CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_regressor_identities(which, base, bodies, module_dir, rng):
    robot = with_param_bodies(_robot(which, base), bodies)
    mod = compile_robot(robot, module_dir, functions=FUNCS, progress=False)
    q, v, a = _states(robot, rng)
    P = random_params(robot, rng)
    pi = P.ravel()
    Y = mod.inverse_dynamics_regressor(q, v, a)
    Yh = mod.momentum_regressor(q, v)
    assert Y.shape == (N, robot.nv, pi.size) and Yh.shape == (N, 6, pi.size)
    # the batches (SIMD lanes, four states at a time, and the tail one by one) give the single calls' bits
    assert np.array_equal(Y, np.stack([mod.inverse_dynamics_regressor(*s) for s in zip(q, v, a)]))
    assert np.array_equal(Yh, np.stack([mod.momentum_regressor(*s) for s in zip(q, v)]))
    # constant bodies' share, from a second parameter set (params = 0 is not a body on a moving joint: the
    # module refuses it, as a robot file refuses mass 0 there); it vanishes when every body is parameterised
    P2 = random_params(robot, rng)
    tau0 = mod.inverse_dynamics(q, v, a, params=P2) - Y @ P2.ravel()
    h0 = _h_origin_params(mod, q, v, P2) - Yh @ P2.ravel()
    if bodies == "all":
        assert _worst(Y @ pi, mod.inverse_dynamics(q, v, a, params=P)) <= TOL
        assert _worst(Yh @ pi, _h_origin_params(mod, q, v, P)) <= TOL
    e_tau = _worst(Y @ pi + tau0, mod.inverse_dynamics(q, v, a, params=P))
    e_h = _worst(Yh @ pi + h0, _h_origin_params(mod, q, v, P))
    record(f"regressor {which}/{robot.base}", "Y pi = ID (generated)", e_tau)
    record(f"regressor {which}/{robot.base}", "Y_h pi = h_O (generated)", e_h)
    assert e_tau <= TOL and e_h <= TOL, (e_tau, e_h)
    # and the dense reference path with the same parameters (independent of the generated code)
    rp = with_param_values(robot, P)
    ref = [dense.inverse_dynamics(rp, *s) for s in zip(q[:5], v[:5], a[:5])]
    assert _worst(Y[:5] @ pi + tau0[:5], ref) <= TOL


def _h_origin_params(mod, q, v, P):
    h, c = mod.momentum(q, v, params=P), mod.center_of_mass(q, params=P)
    return np.concatenate([h[..., :3] + np.cross(c, h[..., 3:]), h[..., 3:]], axis=-1)


def test_structural_zeros_are_exact(module_dir, rng):
    """Fixed base: the base body's columns are exactly zero; a revolute joint's own mass column is exactly
    zero in its row (the torque about the axis of a body's own joint does not depend on its mass)."""
    robot = with_param_bodies(_robot("tian_wu_3dof", "fixed"), "all")
    mod = compile_robot(robot, module_dir, functions=FUNCS, progress=False)
    q, v, a = _states(robot, rng, 5)
    Y = mod.inverse_dynamics_regressor(q, v, a)
    assert np.all(Y[:, :, :10] == 0.0)
    for k in range(1, robot.n_bodies):
        row = robot.v_index(k).start
        assert robot.joints[k].type == "revolute"
        assert np.all(Y[:, row, 10 * k] == 0.0)
    assert np.count_nonzero(Y[0]) < Y[0].size


@pytest.mark.parametrize("which, base", [("ur5", "fixed"), ("panda", "free"), ("panda", "fixed")])
def test_torque_regressor_matches_pinocchio(which, base, module_dir, rng):
    pin = pytest.importorskip("pinocchio")
    from soadyn.model.conventions import PinocchioMap

    robot = with_param_bodies(_robot(which, base), "all")
    _, model = pinocchio_pair(which, base, GRAVITY)
    data = model.createData()
    pm = PinocchioMap(robot, model)
    mod = compile_robot(robot, module_dir, functions=FUNCS, progress=False)   # the module of the identities
    # our columns of body k, reordered by PINOCCHIO_ORDER, are Pinocchio's columns of joint joint_ids[k]
    # (both about the body = joint frame origin); a fixed base (universe) has no Pinocchio columns
    worst = 0.0
    order = list(PINOCCHIO_ORDER)
    for q, v, a in zip(*_states(robot, rng, 20)):
        Yp = pin.computeJointTorqueRegressor(model, data, pm.q_to_pin(q), pm.v_to_pin(v), pm.v_to_pin(a))
        Y = mod.inverse_dynamics_regressor(q, v, a)
        theirs = np.zeros_like(Y)
        for k, jid in enumerate(pm.joint_ids):
            if jid:
                theirs[:, [10 * k + i for i in order]] = pm.perm.T @ Yp[:, 10 * (jid - 1):10 * jid]
        worst = max(worst, rel_err(Y, theirs))
        if pm.joint_ids[0] == 0:
            assert np.all(Y[:, :10] == 0.0)
    record(f"pinocchio {which}/{base}", "torque regressor", worst)
    assert worst <= TOL
    # the mapped parameters: Pinocchio's dynamic parameters are ours in its order
    for k, jid in enumerate(pm.joint_ids):
        if jid:
            np.testing.assert_allclose(default_params(robot)[k][list(PINOCCHIO_ORDER)],
                                       model.inertias[jid].toDynamicParameters(), rtol=0, atol=1e-12)


PLANAR_2R = """
name: planar_2r
base: fixed
gravity: {g}
bodies:
  - {{name: ground, mass: 0.0}}
  - name: l1
    parent: ground
    joint: {{name: q1, type: revolute, axis: [0, 0, 1]}}
    mass: 1.3
    com: [0.4, 0.05, 0.0]
    inertia: {{ixx: 0.01, iyy: 0.08, izz: 0.09}}
  - name: l2
    parent: l1
    joint: {{name: q2, type: revolute, axis: [0, 0, 1], xyz: [0.9, 0, 0]}}
    mass: 0.8
    com: [0.3, -0.02, 0.0]
    inertia: {{ixx: 0.005, iyy: 0.04, izz: 0.045}}
"""


@pytest.mark.parametrize("gravity, count", [([0, 0, 0], 4), ([0, -9.81, 0], 6)])
def test_planar_arm_base_parameter_count(tmp_path, gravity, count):
    """Textbook count for a planar 2R arm (Khalil & Dombre): ZZ1R, ZZ2, MX2, MY2, plus MX1R, MY1 when
    gravity acts in the plane; reduced regressor reproduces Y pi on fresh states."""
    p = tmp_path / "planar_2r.yaml"
    p.write_text(PLANAR_2R.format(g=gravity))
    robot = with_param_bodies(load_robot(p), ["l1", "l2"])
    ctx = Numeric()

    def Y(g):
        return inverse_dynamics_regressor(robot, ctx, robot.random_configuration(g), g.normal(size=2),
                                          g.normal(size=2))

    bp = base_parameters(Y, 20, parameter_labels(robot))
    assert bp.rank == count
    assert "l2.J_zz" in [bp.labels[c] for c in bp.columns]
    rng = np.random.default_rng(5)
    for _ in range(10):
        Yk = Y(rng)
        pi = rng.normal(size=20)
        assert rel_err(bp.reduce(Yk) @ (bp.B @ pi), Yk @ pi) <= 1e-12
