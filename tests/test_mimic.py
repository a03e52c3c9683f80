"""Mimic couplings as true couplings (issue 25): ``q_m = a q_s + b``, reduced coordinates everywhere.

tests/data/mimic_tree.urdf has a revolute joint coupled to another (multiplier -0.7, offset 0.2) and a
two-finger gripper whose second prismatic finger mimics the first.  Checked: the generated C of every
function that has a reduced form against the reference path (which expands and projects with a dense G of
its own) and the forward dynamics against ``ID`` (its inverse) and ``M`` solved densely; kinematics
(frame placements, Jacobians), RNEA and CRBA against Pinocchio 4.1's mimic model
(``buildModelFromUrdf(..., mimic=True)``), to 1e-9; chains of mimics, the YAML ``mimic:`` key and the errors
(cycles, unknown joints, mimics on fixed joints) with one line each.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import module_cache_dir, rel_err

from soadyn import load_robot
from soadyn.codegen.functions import api_names, function_table
from soadyn.codegen.pipeline import compile_robot
from soadyn.model import RobotFileError, to_yaml
from soadyn.reference import dense
from soadyn.reference import derivatives as fdiff

DATA = Path(__file__).parent / "data"
URDF = DATA / "mimic_tree.urdf"
GRAVITY = np.array([0.3, -0.2, -9.81])
TOL = 1e-9
FUNCTIONS = ["center_of_mass", "mass_matrix", "bias_forces", "inverse_dynamics", "forward_dynamics",
             "mass_matrix_inverse", "momentum", "kinetic_energy", "jacobian", "inverse_dynamics_derivatives",
             "forward_dynamics_derivatives",
             # forward-mode derivatives in reduced coordinates (tangent_derivatives)
             "mass_matrix_derivatives", "bias_forces_derivatives", "jacobian_derivatives"]


def test_urdf_mimic_is_a_coupling():
    r = load_robot(URDF, base="fixed")
    assert r.is_coupled and r.joint_names == ["j1", "j3", "g1"] and r.nq == r.nv == 3
    assert [(j.name, j.mimic.joint, j.mimic.multiplier, j.mimic.offset) for j in r.joints[1:] if j.mimic] == [
        ("j2", "j1", -0.7, 0.2), ("g2", "g1", 1.0, 0.0)]
    G, b = r.expansion()
    assert np.array_equal(G, [[1, 0, 0], [-0.7, 0, 0], [0, 1, 0], [0, 0, 1], [0, 0, 1]])
    assert np.array_equal(b, [0, 0.2, 0, 0, 0])
    assert load_robot(URDF, mimic="independent").nv == 6 + 5
    assert load_robot(URDF, mimic="fixed").nv == 6 + 3
    with pytest.raises(RobotFileError, match=r'<joint name="j2"> \(line \d+\): mimic joint'):
        load_robot(URDF, mimic="error")


@pytest.fixture(scope="module", params=["fixed", "free"])
def coupled(request, tmp_path_factory):
    robot = load_robot(URDF, base=request.param).replace(gravity=GRAVITY)
    out = module_cache_dir(request, tmp_path_factory, "soadyn_mimic_modules")
    return robot, compile_robot(robot, out, functions=FUNCTIONS, progress=False)


def test_registry_offers_only_reduced_forms(coupled):
    robot, _ = coupled
    apis = api_names(function_table(robot, derivatives=True))
    assert "innovations_factors" not in apis and "forward_dynamics_schur" not in apis
    assert "forward_dynamics" in apis and "inverse_dynamics_derivatives" in apis


def test_generated_c_in_reduced_coordinates(coupled):
    robot, m = coupled
    assert m.nq == robot.nq and m.nv == robot.nv
    rng = np.random.default_rng(2)
    G, _ = robot.expansion()
    full = robot.uncoupled()
    for i in range(6):
        q = robot.random_configuration(rng)
        v, a, tau = rng.normal(size=robot.nv), rng.normal(size=robot.nv), rng.normal(size=robot.nv)
        M = dense.mass_matrix(robot, q)
        # the reference's reduced M is G^T M_full G of the full tree at the expanded configuration
        qf = np.concatenate([q[:robot.base_nq], G[robot.base_nv:, robot.base_nv:] @ q[robot.base_nq:]
                             + robot.expansion()[1]])
        assert rel_err(M, G.T @ dense.mass_matrix(full, qf) @ G) < 1e-14
        assert rel_err(m.mass_matrix(q), M) < TOL
        assert rel_err(m.inverse_dynamics(q, v, a), dense.inverse_dynamics(robot, q, v, a)) < TOL
        assert rel_err(m.bias_forces(q, v), dense.bias_forces(robot, q, v)) < TOL
        fd = m.forward_dynamics(q, v, tau)
        assert rel_err(fd, np.linalg.solve(M, tau - dense.bias_forces(robot, q, v))) < TOL  # ID + M, dense
        assert rel_err(m.inverse_dynamics(q, v, fd), tau) < TOL
        assert rel_err(m.mass_matrix_inverse(q), np.linalg.inv(M)) < TOL
        assert rel_err(m.center_of_mass(q), dense.center_of_mass(robot, q)) < TOL
        assert rel_err(m.momentum(q, v), dense.momentum(robot, q, v)) < TOL
        assert abs(m.kinetic_energy(q, v) - 0.5 * v @ M @ v) < TOL * (0.5 * v @ M @ v)
        for frame in ("l2", "f2", "f1"):
            assert rel_err(m.jacobian(q, frame, world_aligned=True),
                           dense.jacobian(robot, q, frame, world_aligned=True)) < TOL
        if i < 2:   # derivatives against central differences of the reference
            for ours, ref in zip(m.inverse_dynamics_derivatives(q, v, a),
                                 fdiff.inverse_dynamics_derivatives(robot, q, v, a)):
                assert rel_err(ours, ref) < 1e-6
            for ours, ref in zip(m.forward_dynamics_derivatives(q, v, tau),
                                 fdiff.forward_dynamics_derivatives(robot, q, v, tau)):
                assert rel_err(ours, ref) < 1e-6


def test_forward_mode_derivatives_in_reduced_coordinates(coupled):
    """``<api>_derivatives`` of a coupled robot: the tangents of the reduced program, seeded along the
    reduced coordinates (the chain rule through q_full = G q + b is the program's own), against central
    differences of the reference path (which expands with a dense G of its own); the generated C for three
    functions, the float run of the same program for the others."""
    from soadyn.symbolic import algorithms
    from soadyn.symbolic.scalar import Numeric

    robot, m = coupled
    rng = np.random.default_rng(5)
    cases = [("mass_matrix", ("q",), {}), ("bias_forces", ("q", "v"), {}),
             ("jacobian", ("q",), {"frame": "f2", "world_aligned": True}), ("center_of_mass", ("q",), {}),
             ("mass_matrix_inverse", ("q",), {}), ("momentum", ("q", "v"), {})]
    if robot.is_free:
        cases += [("generalized_bias", ("q", "v"), {}), ("base_velocity", ("q", "qd", "h"), {})]
    for _ in range(2):
        q = robot.random_configuration(rng)
        if robot.is_free:
            q[3:7] *= 1.4
        vals = {"q": q, "v": rng.normal(size=robot.nv), "qd": rng.normal(size=robot.n_joints),
                "h": rng.normal(size=6)}
        for api, names, kw in cases:
            args = [vals[n] for n in names]
            if hasattr(m, api + "_derivatives"):
                got = getattr(m, api + "_derivatives")(*args, **kw)
            else:
                got = algorithms.tangent_derivatives(robot, Numeric(), *args, of=api, inputs=names, **kw)
            ref = fdiff.tangent_derivatives(robot, *args, of=api, inputs=names, **kw)
            got, ref = (x if isinstance(x, tuple) else (x,) for x in (got, ref))
            assert len(got) == len(ref) == len(names)
            for g, r in zip(got, ref):
                assert np.shape(g) == np.shape(r)
                assert rel_err(g, r) < 1e-6, (api, rel_err(g, r))
    assert {"mass_matrix_derivatives", "jacobian_derivatives"} <= set(dir(m))


def test_matches_pinocchio_mimic_model(coupled):
    pin = pytest.importorskip("pinocchio")
    robot, m = coupled
    model = (pin.buildModelFromUrdf(str(URDF), pin.JointModelFreeFlyer(), mimic=True) if robot.is_free
             else pin.buildModelFromUrdf(str(URDF), mimic=True))
    assert model.nv == robot.nv and model.nq == robot.nq
    model.gravity.linear = GRAVITY.copy()
    # soadyn v = [w; v_o] (base axes), Pinocchio's free flyer [v_o; w]; joints in the same order here
    P = np.eye(robot.nv)
    if robot.is_free:
        P[:6, :6] = np.block([[np.zeros((3, 3)), np.eye(3)], [np.eye(3), np.zeros((3, 3))]])
    assert [model.names[i] for i in range(1, model.njoints) if model.joints[i].nv] == \
        (["root_joint"] if robot.is_free else []) + robot.joint_names
    rng = np.random.default_rng(8)
    for _ in range(10):
        q = robot.random_configuration(rng)
        v, a = rng.normal(size=robot.nv), rng.normal(size=robot.nv)
        # a fresh Data per algorithm: Pinocchio 4.1's crba on a mimic model gives another M when its
        # Data was used by computeJointJacobians before (seen on this model; fresh Data agrees with soadyn)
        data = model.createData()
        M = np.asarray(pin.crba(model, data, q)).copy()
        M = np.triu(M) + np.triu(M, 1).T
        assert rel_err(m.mass_matrix(q), P.T @ M @ P) < TOL
        tau = np.asarray(pin.rnea(model, model.createData(), q, P @ v, P @ a))
        assert rel_err(m.inverse_dynamics(q, v, a), P.T @ tau) < TOL
        data = model.createData()
        pin.framesForwardKinematics(model, data, q)
        pin.computeJointJacobians(model, data, q)
        for link in ("l1", "l2", "l3", "f1", "f2"):
            R, p = dense.frame_pose(robot, q, link)
            oMf = data.oMf[model.getFrameId(link)]
            assert np.allclose(R, oMf.rotation, atol=1e-12) and np.allclose(p, oMf.translation, atol=1e-12)
            Jp = pin.getFrameJacobian(model, data, model.getFrameId(link), pin.LOCAL_WORLD_ALIGNED)
            Jp = np.vstack([Jp[3:], Jp[:3]]) @ P          # Pinocchio rows [v; w]
            assert rel_err(m.jacobian(q, link, world_aligned=True), Jp) < TOL


_CHAIN = """name: chain
base: fixed
bodies:
  - {name: b0, mass: 0}
  - {name: b1, parent: b0, mass: 1, com: [0.1, 0, 0], inertia: {ixx: 0.01, iyy: 0.02, izz: 0.02},
     joint: {name: j1, type: revolute, axis: [0, 0, 1]}}
  - {name: b2, parent: b1, mass: 1, com: [0.1, 0, 0], inertia: {ixx: 0.01, iyy: 0.02, izz: 0.02},
     joint: {name: j2, type: revolute, axis: [0, 1, 0], xyz: [0.3, 0, 0], MIMIC2}}
  - {name: b3, parent: b2, mass: 1, com: [0.1, 0, 0], inertia: {ixx: 0.01, iyy: 0.02, izz: 0.02},
     joint: {name: j3, type: revolute, axis: [1, 0, 0], xyz: [0.3, 0, 0], MIMIC3}}
"""


def _chain(tmp_path, m2, m3):
    path = tmp_path / "chain.yaml"
    path.write_text(_CHAIN.replace("MIMIC2", m2).replace("MIMIC3", m3))
    return path


def test_yaml_mimic_chain_resolves(tmp_path):
    r = load_robot(_chain(tmp_path, "mimic: {joint: j1, multiplier: 2, offset: 0.1}",
                          "mimic: {joint: j2, multiplier: -3, offset: 0.5}"))
    assert r.joint_names == ["j1"] and r.nv == 1
    assert r.coordinate_map() == [(0, 1.0, 0.0), (0, 2.0, 0.1), (0, -6.0, pytest.approx(0.2, abs=1e-15))]
    # the same couplings written directly to j1 give the same robot dynamics
    direct = load_robot(_chain(tmp_path, "mimic: {joint: j1, multiplier: 2, offset: 0.1}",
                               "mimic: {joint: j1, multiplier: -6, offset: 0.2}"))
    q, v, a = np.array([0.4]), np.array([-0.8]), np.array([1.3])
    assert rel_err(dense.inverse_dynamics(r, q, v, a), dense.inverse_dynamics(direct, q, v, a)) < 1e-14
    back = tmp_path / "back.yaml"
    to_yaml(r, back)
    assert load_robot(back).fingerprint() == r.fingerprint()


_BAD = [
    ("mimic: {joint: j3}", "mimic: {joint: j2}", "bodies[2].joint.mimic", "form a cycle (j2 -> j3 -> j2)"),
    ("mimic: {joint: j9}", "rpy: [0, 0, 0]", "bodies[2].joint.mimic.joint", "unknown joint 'j9'"),
    ("mimic: {joint: j2}", "rpy: [0, 0, 0]", "bodies[2].joint.mimic", "form a cycle (j2 -> j2)"),
    ("mimic: {joint: j1, factor: 2}", "rpy: [0, 0, 0]", "bodies[2].joint.mimic.factor", "unknown key"),
    ("mimic: {multiplier: 2}", "rpy: [0, 0, 0]", "bodies[2].joint.mimic.joint", "missing required key"),
]


@pytest.mark.parametrize("m2, m3, field, why", _BAD)
def test_bad_mimic_gives_one_line(tmp_path, m2, m3, field, why):
    path = _chain(tmp_path, m2, m3)
    with pytest.raises(RobotFileError) as e:
        load_robot(path)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(f"{path}: {field}: ") and why in msg, msg


def test_mimic_on_fixed_joint_and_of_fixed_joint(tmp_path):
    text = _CHAIN.replace("type: revolute, axis: [1, 0, 0], xyz: [0.3, 0, 0], MIMIC3",
                          "type: fixed, xyz: [0.3, 0, 0]")
    path = tmp_path / "c.yaml"
    path.write_text(text.replace("MIMIC2", "mimic: {joint: j3}"))
    with pytest.raises(RobotFileError, match=r"bodies\[2\]\.joint\.mimic: mimics joint 'j3', which is not"):
        load_robot(path)
    path.write_text(text.replace("MIMIC2", "rpy: [0, 0, 0]")
                    .replace("type: fixed,", "type: fixed, mimic: {joint: j1},"))
    with pytest.raises(RobotFileError, match=r"bodies\[3\]\.joint\.mimic: a fixed joint cannot mimic"):
        load_robot(path)


def test_urdf_mimic_cycle_is_one_line(tmp_path):
    text = URDF.read_text().replace('<axis xyz="0 0 1"/><limit',
                                    '<axis xyz="0 0 1"/><mimic joint="j2"/><limit', 1)
    path = tmp_path / "cycle.urdf"
    path.write_text(text)
    with pytest.raises(RobotFileError) as e:
        load_robot(path)
    msg = str(e.value)
    assert "\n" not in msg and "/mimic: mimic couplings form a cycle" in msg, msg


def test_dense_solve_names_its_rows():
    """The LDL^T solve behind a coupled robot's forward dynamics and M^-1 names the forward-substitution
    rows past the 6th: y_i reads the names of earlier rows, not their expressions.  Read unnamed, every
    later row carried all earlier ones and the optimiser's tree walks doubled per row (PR2's 26 reduced
    coordinates: its forward dynamics did not generate in 15 minutes; 9 s after)."""
    import symengine as se

    from soadyn.symbolic.algorithms.linalg import ldl
    from soadyn.symbolic.scalar import Symbolic

    n = 12
    ctx = Symbolic()
    A = ctx.input("A", (n, n))
    b = ctx.input("b", n)
    x = ldl(ctx, A, "f").solve(b, "s")
    ys = [a for a in ctx.program if a.target.name.startswith("sy")]
    assert len(ys) >= n - 6
    # a row reads its b, its L entries and names of earlier rows, plus the first 6 rows, which may stay
    # unnamed (a base's 6 x 6 solves: 6 b's and 15 L entries): O(n) symbols, 38 for the last row here;
    # with every row unnamed the last read every entry of b and L: 78
    worst = max(len(a.expr.free_symbols) for a in ys)
    assert worst <= 3 * n + 21, worst
    assert all(isinstance(v, se.Symbol) for v in x)
