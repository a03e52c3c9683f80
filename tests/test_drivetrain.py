"""The drive train of the joints (issue 25): armature, viscous damping, smoothed Coulomb friction.

* robot files: YAML keys and URDF ``<dynamics>`` are read (rotor_inertia * gear_ratio^2 = armature), bad
  values give one line naming the file and field, and the model writes back to the same fingerprint;
* the generated C (tests/data/drive_tree.yaml, free and fixed base) against the reference path, which adds
  the same terms independently (``M + diag(armature)``, ``armature a + d v + f v / sqrt(v^2 + v_s^2)``);
* the held-out Unitree Z1 arm (example-robot-data, not used by other tests; its URDF has damping and
  friction, armature added through soadyn's ``<dynamics armature>`` extension) against Pinocchio 4.1
  (``model.armature`` is in its CRBA, RNEA and ABA; damping and friction added as joint torques) and
  against MuJoCo (``dof_armature``, ``dof_damping``; friction 0, because MuJoCo's ``frictionloss`` is a
  constraint force, not a smooth joint torque), to 1e-9.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from conftest import ERD, module_cache_dir, rel_err

from soadyn import load_robot
from soadyn.codegen.pipeline import compile_robot
from soadyn.model import RobotFileError, to_yaml
from soadyn.model.conventions import MujocoMap, PinocchioMap
from soadyn.reference import dense
from soadyn.symbolic import algorithms as alg
from soadyn.symbolic.scalar import Numeric

DATA = Path(__file__).parent / "data"
DRIVE_TREE = DATA / "drive_tree.yaml"
Z1 = ERD / "z1_description/urdf/z1.urdf" if ERD else None
TOL = 1e-9
GRAVITY = np.array([0.7, -1.3, -9.81])
CTX = Numeric()


def _smooth_friction(f, vs, v):
    """The documented convention, written here once more: f v / sqrt(v^2 + v_s^2)."""
    return f * v / np.sqrt(v * v + vs * vs)


# ---- robot files ----------------------------------------------------------------------------------
def test_yaml_drive_fields_are_read():
    r = load_robot(DRIVE_TREE)
    j1, j2, j3, j4 = r.joints[1:]
    assert (j1.armature, j1.damping, j1.friction, j1.friction_velocity) == (0.7, 0.3, 0.4, 0.01)
    assert j2.armature == pytest.approx(1.0e-4 * 50 ** 2, rel=1e-15)     # I_m n^2
    assert (j2.friction, j2.friction_velocity) == (0.2, 0.05)
    assert (j3.armature, j3.damping, j3.friction) == (0.5, 2.0, 0.0)
    assert not j4.has_drive and r.has_drive and not r.rigid().has_drive


def test_drive_round_trips_through_yaml(tmp_path):
    r = load_robot(DRIVE_TREE)
    to_yaml(r, tmp_path / "back.yaml")
    back = load_robot(tmp_path / "back.yaml")
    assert back.fingerprint() == r.fingerprint()
    assert r.fingerprint() != r.rigid().fingerprint()


_BAD = [
    ("armature: -0.1", "bodies[1].joint.armature", "negative"),
    ("damping: -1", "bodies[1].joint.damping", "negative"),
    ("friction: -1", "bodies[1].joint.friction", "negative"),
    ("friction: 1, friction_velocity: 0", "bodies[1].joint.friction_velocity", "> 0"),
    ("armature: 1, rotor_inertia: 1", "bodies[1].joint.rotor_inertia", "not both"),
    ("gear_ratio: 10", "bodies[1].joint.gear_ratio", "without rotor_inertia"),
    ("rotor_inertia: 1, gear_ratio: 0", "bodies[1].joint.gear_ratio", "is 0"),
    ("armature: one", "bodies[1].joint.armature", "expected a number"),
    ("armatur: 1", "bodies[1].joint.armatur", "unknown key"),
]


@pytest.mark.parametrize("extra, field, why", _BAD)
def test_bad_drive_values_give_one_line(tmp_path, extra, field, why):
    text = DRIVE_TREE.read_text().replace(
        "rpy: [0.1, 0.2, 0.3], armature: 0.7, damping: 0.3, friction: 0.4}",
        f"rpy: [0.1, 0.2, 0.3], {extra}}}")
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(RobotFileError) as e:
        load_robot(path)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(f"{path}: {field}: ") and why in msg, msg


def test_drive_on_fixed_joint_is_an_error(tmp_path):
    text = DRIVE_TREE.read_text().replace("type: fixed, xyz: [0.1, 0, 0]",
                                          "type: fixed, damping: 1, xyz: [0.1, 0, 0]")
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(RobotFileError, match=r"bodies\[5\]\.joint\.damping: a fixed joint has no drive"):
        load_robot(path)


_URDF = """<robot name="r">
  <link name="a"><inertial><mass value="2"/>
    <inertia ixx="1" iyy="1" izz="1" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <link name="b"><inertial><mass value="1"/>
    <inertia ixx="0.1" iyy="0.1" izz="0.1" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <joint name="j" type="revolute"><parent link="a"/><child link="b"/><axis xyz="0 0 1"/>
    <limit lower="-1" upper="1" effort="1" velocity="1"/>
    DYN
  </joint>
</robot>
"""


def test_urdf_dynamics_and_armature_extension(tmp_path):
    path = tmp_path / "r.urdf"
    path.write_text(_URDF.replace("DYN", '<dynamics damping="0.5" friction="1.5" armature="0.25" '
                                         'friction_velocity="0.1"/>'))
    j = load_robot(path).joints[1]
    assert (j.armature, j.damping, j.friction, j.friction_velocity) == (0.25, 0.5, 1.5, 0.1)
    path.write_text(_URDF.replace("DYN", '<dynamics damping="-0.5"/>'))
    with pytest.raises(RobotFileError) as e:
        load_robot(path)
    msg = str(e.value)
    assert "\n" not in msg and '<joint name="j"> (line 6)/dynamics.damping: is negative' in msg, msg


# ---- generated C against the reference path -----------------------------------------------------------
@pytest.fixture(scope="module", params=["free", "fixed"])
def drive_module(request, tmp_path_factory):
    robot = load_robot(DRIVE_TREE, base=request.param).replace(gravity=GRAVITY)
    out = module_cache_dir(request, tmp_path_factory, "soadyn_drivetrain_modules")
    return robot, compile_robot(robot, out, progress=False, functions=[
        "mass_matrix", "inverse_dynamics", "bias_forces", "forward_dynamics", "mass_matrix_inverse",
        "innovations_factors", "kinetic_energy", "inverse_dynamics_derivatives",
        "forward_dynamics_derivatives",
        *(["forward_dynamics_decoupled", "generalized_inertia"] if request.param == "free" else [])])


def test_generated_drive_train_matches_reference(drive_module):
    robot, m = drive_module
    rng = np.random.default_rng(7)
    arm = np.array([0.0 if j is None else j.armature for j in robot.joints[1:]])
    for _ in range(5):
        q = robot.random_configuration(rng)
        v, a, tau = rng.normal(size=robot.nv), rng.normal(size=robot.nv), rng.normal(size=robot.nv)
        M = dense.mass_matrix(robot, q)
        # the reference's armature is on the diagonal, independently of the recursions
        rigid = dense.mass_matrix(robot.rigid(), q)
        assert np.allclose(np.diag(M - rigid)[robot.base_nv:], arm, rtol=0, atol=1e-13)
        assert rel_err(m.mass_matrix(q), M) < TOL
        assert rel_err(m.inverse_dynamics(q, v, a), dense.inverse_dynamics(robot, q, v, a)) < TOL
        assert rel_err(m.bias_forces(q, v), dense.bias_forces(robot, q, v)) < TOL
        fd = m.forward_dynamics(q, v, tau)
        assert rel_err(fd, dense.forward_dynamics(robot, q, v, tau)) < TOL
        assert rel_err(fd, np.linalg.solve(M, tau - dense.bias_forces(robot, q, v))) < TOL
        assert rel_err(m.mass_matrix_inverse(q), np.linalg.inv(M)) < TOL
        L, D = m.innovations_factors(q)
        assert rel_err(L @ D @ L.T, M) < TOL
        assert abs(m.kinetic_energy(q, v) - 0.5 * v @ M @ v) < TOL * abs(0.5 * v @ M @ v)
        if robot.is_free:
            assert rel_err(m.forward_dynamics_decoupled(q, v, tau), fd) < TOL
            Hg = M[6:, 6:] - M[6:, :6] @ np.linalg.solve(M[:6, :6], M[:6, 6:])
            assert rel_err(m.generalized_inertia(q), Hg) < TOL
        # derivatives: damping and friction in dtau/dv, armature in M^-1
        dq, dv = m.inverse_dynamics_derivatives(q, v, a)
        dq0, dv0 = alg.inverse_dynamics_derivatives(robot.rigid(), CTX, q, v, a)
        _, damp, fric, vs = dense.drive_parameters(robot)
        dpass = damp + fric * vs ** 2 / (v * v + vs * vs) ** 1.5
        assert rel_err(dv - dv0, np.diag(dpass)) < TOL and rel_err(dq, dq0) < TOL
        da_dq, da_dv, da_dtau = m.forward_dynamics_derivatives(q, v, tau)
        a0 = fd
        dq_id, dv_id = m.inverse_dynamics_derivatives(q, v, a0)
        assert rel_err(da_dtau, np.linalg.inv(M)) < TOL
        assert rel_err(da_dv, -np.linalg.solve(M, dv_id)) < 1e-8
        if not robot.is_free:
            assert rel_err(da_dq, -np.linalg.solve(M, dq_id)) < 1e-8


def test_free_floating_toolkit_has_the_armature():
    """The reference's thesis sums (seed 003 eq. D.4) get the armature too; the recursions agree with them."""
    from soadyn.reference import free_floating as ff

    robot = load_robot(DRIVE_TREE).replace(gravity=GRAVITY)
    rng = np.random.default_rng(12)
    for _ in range(3):
        q = robot.random_configuration(rng)
        v = rng.normal(size=robot.nv)
        assert rel_err(alg.generalized_inertia(robot, CTX, q), ff.generalized_inertia(robot, q)) < TOL
        assert rel_err(alg.generalized_bias(robot, CTX, q, v), ff.generalized_bias(robot, q, v)) < TOL
        for ours, ref in zip(alg.angular_reduced_dynamics(robot, CTX, q, v),
                             ff.angular_reduced_dynamics(robot, q, v)):
            assert rel_err(ours, ref) < TOL


def test_passive_forces_are_the_stated_convention():
    robot = load_robot(DRIVE_TREE, base="fixed")
    v = np.array([0.3, -0.02, 0.7, 1.1])
    expected = np.array([0.3 * 0.3 + _smooth_friction(0.4, 0.01, 0.3), _smooth_friction(0.2, 0.05, -0.02),
                         2.0 * 0.7, 0.0])
    assert np.allclose(dense.passive_forces(robot, v), expected, rtol=1e-15, atol=0)
    q = robot.neutral()
    tau_rigid = dense.inverse_dynamics(robot.rigid(), q, v, np.zeros(4))
    assert np.allclose(alg.bias_forces(robot, CTX, q, v) - tau_rigid, expected, rtol=0, atol=1e-13)


def _program(robot, fn):
    from soadyn.symbolic.scalar import Symbolic

    ctx = Symbolic()
    q, v, t = ctx.input("q", robot.nq), ctx.input("v", robot.nv), ctx.input("tau", robot.nv)
    out = fn(robot, ctx, q, v, t)
    return [(str(x.target), str(x.expr), x.stage) for x in ctx.program] + [str(e) for e in np.ravel(out)]


@pytest.mark.parametrize("fn", [alg.forward_dynamics, alg.inverse_dynamics,
                                lambda r, c, q, v, t: alg.mass_matrix(r, c, q)])
def test_ideal_robots_derive_the_same_program(fn):
    """Without a drive train the symbolic programs are those of before (generated/ stays byte-identical):
    drive_tree.yaml with its drive train removed is examples/test_arm.yaml under another name."""
    drive = load_robot(DRIVE_TREE)
    plain = load_robot(Path(__file__).parents[1] / "examples/test_arm.yaml")
    assert drive.rigid().replace(name=plain.name).fingerprint() == plain.fingerprint()
    assert _program(drive.rigid(), fn) == _program(plain, fn)
    assert _program(drive, fn) != _program(plain, fn)


# ---- held-out robot: Unitree Z1 against Pinocchio and MuJoCo ---------------------------------------------
Z1_ARMATURE = (0.11, 0.23, 0.07, 0.05, 0.031, 0.013, 0.002)


def _z1_with_armature(tmp_path: Path) -> Path:
    if Z1 is None or not Z1.is_file():
        pytest.skip("example-robot-data (z1.urdf) not installed")
    text = Z1.read_text()
    it = iter(Z1_ARMATURE)
    text = re.sub(r'<dynamics damping="([0-9.]+)" friction="([0-9.]+)"/>',
                  lambda mt: f'<dynamics damping="{mt[1]}" friction="{mt[2]}" armature="{next(it)}"/>', text)
    path = tmp_path / "z1.urdf"
    path.write_text(text)
    return path


@pytest.fixture(scope="module", params=["fixed", "free"])
def z1(request, tmp_path_factory):
    path = _z1_with_armature(tmp_path_factory.mktemp("z1"))
    robot = load_robot(path, base=request.param).replace(gravity=GRAVITY)
    out = module_cache_dir(request, tmp_path_factory, "soadyn_drivetrain_modules")
    return path, robot, compile_robot(robot, out, progress=False, functions=[
        "mass_matrix", "inverse_dynamics", "forward_dynamics", "mass_matrix_inverse"])


def test_z1_matches_pinocchio(z1):
    pin = pytest.importorskip("pinocchio")
    path, robot, m = z1
    assert sorted(j.armature for j in robot.joints[1:]) == sorted(Z1_ARMATURE)
    model = (pin.buildModelFromUrdf(str(path), pin.JointModelFreeFlyer()) if robot.is_free
             else pin.buildModelFromUrdf(str(path)))
    model.gravity.linear = GRAVITY.copy()
    pm = PinocchioMap(robot, model)
    # Pinocchio reads damping and friction from the URDF (but does not use them); armature from us
    arm_pin = pm.v_to_pin(np.r_[np.zeros(robot.base_nv), [j.armature for j in robot.joints[1:]]])
    model.armature = arm_pin
    data = model.createData()
    vs = np.r_[np.ones(robot.base_nv), [j.friction_velocity for j in robot.joints[1:]]]
    vs_pin = pm.v_to_pin(vs)
    assert np.any(model.damping) and np.any(model.friction)
    rng = np.random.default_rng(3)
    for _ in range(20):
        q = robot.random_configuration(rng)
        v, a, tau = rng.normal(size=robot.nv), rng.normal(size=robot.nv), 5 * rng.normal(size=robot.nv)
        qp, vp, ap = pm.q_to_pin(q), pm.v_to_pin(v), pm.v_to_pin(a)
        passive = model.damping * vp + _smooth_friction(model.friction, vs_pin, vp)
        M = np.asarray(pin.crba(model, data, qp)).copy()
        M = np.triu(M) + np.triu(M, 1).T
        assert rel_err(m.mass_matrix(q), pm.matrix_from_pin(M)) < TOL
        tau_pin = np.asarray(pin.rnea(model, data, qp, vp, ap)) + passive
        assert rel_err(m.inverse_dynamics(q, v, a), pm.v_from_pin(tau_pin)) < TOL
        acc = np.asarray(pin.aba(model, data, qp, vp, pm.v_to_pin(tau) - passive))
        assert rel_err(m.forward_dynamics(q, v, tau), pm.v_from_pin(acc)) < TOL
        assert rel_err(m.mass_matrix_inverse(q), np.linalg.inv(pm.matrix_from_pin(M))) < TOL


def test_z1_matches_mujoco(tmp_path):
    """Fixed base only: the Z1's root link is named ``world``, which MuJoCo's URDF import merges into its
    own world body, so no free joint can be put on it."""
    mujoco = pytest.importorskip("mujoco")
    path = _z1_with_armature(tmp_path)
    robot = load_robot(path, base="fixed").replace(gravity=GRAVITY)
    # MuJoCo's frictionloss is a constraint force (not the smooth joint torque here): compare with friction 0
    import dataclasses

    robot = robot.replace(joints=[None] + [dataclasses.replace(j, friction=0.0) for j in robot.joints[1:]])
    text = re.sub(r"<visual>.*?</visual>|<collision>.*?</collision>", "", path.read_text(), flags=re.S)
    opts = '<mujoco><compiler fusestatic="false" discardvisual="true"/></mujoco>'
    text = re.sub(r"(<robot[^>]*>)", r"\1" + opts, text, count=1)
    mj = mujoco.MjSpec.from_string(text).compile()
    mj.opt.gravity[:] = GRAVITY
    dis = mujoco.mjtDisableBit
    mj.opt.disableflags |= int(dis.mjDSBL_CONSTRAINT) | int(dis.mjDSBL_CONTACT)
    mm = MujocoMap(robot, mj)
    mj.dof_frictionloss[:] = 0.0
    for k in range(1, robot.n_bodies):
        j = robot.joints[k]
        jid = mujoco.mj_name2id(mj, mujoco.mjtObj.mjOBJ_JOINT, j.name)
        mj.dof_armature[mj.jnt_dofadr[jid]] = j.armature
        mj.dof_damping[mj.jnt_dofadr[jid]] = j.damping
    d = mujoco.MjData(mj)
    rng = np.random.default_rng(5)
    Mfull = np.zeros((mj.nv, mj.nv))
    for _ in range(20):
        q = robot.random_configuration(rng)
        v, a, tau = rng.normal(size=robot.nv), rng.normal(size=robot.nv), 5 * rng.normal(size=robot.nv)
        d.qpos[:], d.qvel[:] = mm.q_to_mj(q), mm.v_to_mj(q, v)
        d.qfrc_applied[:] = mm.tau_to_mj(q, tau)
        mujoco.mj_forward(mj, d)
        mujoco.mj_fullM(mj, d, Mfull)
        for ours in (dense, None):
            M = dense.mass_matrix(robot, q) if ours else alg.mass_matrix(robot, CTX, q)
            assert rel_err(M, mm.mass_matrix_from_mj(q, Mfull)) < TOL
            fd = (dense.forward_dynamics(robot, q, v, tau) if ours
                  else alg.forward_dynamics(robot, CTX, q, v, tau))
            assert rel_err(fd, mm.a_from_mj(q, v, d.qacc)) < TOL
        d.qacc[:] = mm.a_to_mj(q, v, a)
        mujoco.mj_inverse(mj, d)
        theirs = mm.tau_from_mj(q, d.qfrc_inverse)
        assert rel_err(dense.inverse_dynamics(robot, q, v, a), theirs) < TOL
        assert rel_err(alg.inverse_dynamics(robot, CTX, q, v, a), theirs) < TOL
