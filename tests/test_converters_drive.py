"""The Pinocchio and MuJoCo converters (soadyn.model.conventions) for robots with mimic couplings and a drive
train (issue 25): PinocchioMap accepts Pinocchio's mimic model (reduced coordinates on both sides) and writes
the drive train into it (drive_to_pin / apply_drive); MujocoMap maps a coupled robot's reduced coordinates
onto a MuJoCo model that has every joint (G, b) and writes armature and damping (apply_drive).  Checked
against Pinocchio 4.1's crba/rnea/aba and MuJoCo's mj_fullM/mj_inverse (constraints off), to 1e-9, against the
dense reference path; bad pairings give one line.
"""

from __future__ import annotations

import dataclasses
import warnings
from pathlib import Path

import numpy as np
import pytest
from conftest import rel_err

from soadyn import load_robot
from soadyn.model.conventions import MujocoMap, PinocchioMap
from soadyn.reference import dense

DATA = Path(__file__).parent / "data"
URDF = DATA / "mimic_tree.urdf"
GRAVITY = np.array([0.3, -0.2, -9.81])
TOL = 1e-9


def _smooth(f, vs, v):
    return f * v / np.sqrt(v * v + vs * vs)


def _with_drive(robot, friction_on_coupled=False):
    """Drive terms on every joint; Coulomb friction on the independent ones (and, if asked, coupled)."""
    return robot.replace(joints=[None if j is None else dataclasses.replace(
        j, armature=0.05 + 0.03 * k, damping=0.2 + 0.1 * k,
        friction=(0.3 if (j.mimic is None or friction_on_coupled) else 0.0), friction_velocity=0.1)
        for k, j in enumerate(robot.joints)])


@pytest.mark.parametrize("base", ["free", "fixed"])
def test_pinocchio_mimic_model_with_drive(base):
    pin = pytest.importorskip("pinocchio")
    robot = _with_drive(load_robot(URDF, base=base)).replace(gravity=GRAVITY)
    model = (pin.buildModelFromUrdf(str(URDF), pin.JointModelFreeFlyer(), mimic=True) if base == "free"
             else pin.buildModelFromUrdf(str(URDF), mimic=True))
    model.gravity.linear = GRAVITY.copy()
    pm = PinocchioMap(robot, model)
    pm.apply_drive()
    # the coupled joint j2 (-0.7 j1) puts 0.49 * its armature on j1's diagonal
    arm = pm.v_from_pin(np.asarray(model.armature))
    j1, j2 = (next(j for j in robot.joints[1:] if j.name == n) for n in ("j1", "j2"))
    assert abs(arm[robot.base_nv + 0] - (j1.armature + 0.49 * j2.armature)) < 1e-15
    vs = np.full(model.nv, 0.1)
    rng = np.random.default_rng(1)
    for _ in range(8):
        q = robot.random_configuration(rng)
        v, a, tau = rng.normal(size=robot.nv), rng.normal(size=robot.nv), 3 * rng.normal(size=robot.nv)
        qp, vp = pm.q_to_pin(q), pm.v_to_pin(v)
        assert np.array_equal(pm.q_from_pin(qp), q) and np.allclose(pm.v_from_pin(vp), v, atol=0)
        passive = np.asarray(model.damping) * vp + _smooth(np.asarray(model.friction), vs, vp)
        M = np.asarray(pin.crba(model, model.createData(), qp)).copy()
        M = np.triu(M) + np.triu(M, 1).T
        assert rel_err(pm.matrix_from_pin(M), dense.mass_matrix(robot, q)) < TOL
        tau_pin = np.asarray(pin.rnea(model, model.createData(), qp, vp, pm.v_to_pin(a))) + passive
        assert rel_err(pm.v_from_pin(tau_pin), dense.inverse_dynamics(robot, q, v, a)) < TOL
        # Pinocchio 4.1's aba does not take mimic joints: FD from its crba and rnea, solved densely
        C = np.asarray(pin.rnea(model, model.createData(), qp, vp, np.zeros(model.nv))) + passive
        acc = np.linalg.solve(M, pm.v_to_pin(tau) - C)
        assert rel_err(pm.v_from_pin(acc), dense.forward_dynamics(robot, q, v, tau)) < TOL


def test_pinocchio_map_refuses_mismatched_couplings():
    pin = pytest.importorskip("pinocchio")
    coupled = load_robot(URDF, base="fixed")
    with pytest.raises(ValueError, match=r"^PinocchioMap\('mimic_tree'\): the robot has mimic couplings "
                       r"\(j2 mimics j1, g2 mimics g1\) but the Pinocchio model has no mimic joints; "
                       r"build it with .*mimic=True"):
        PinocchioMap(coupled, pin.buildModelFromUrdf(str(URDF)))
    with pytest.raises(ValueError, match=r"has 2 mimic joints but the robot has no couplings"):
        PinocchioMap(load_robot(URDF, base="fixed", mimic="independent"),
                     pin.buildModelFromUrdf(str(URDF), mimic=True))
    other = coupled.replace(joints=[j if j is None or j.name != "j2" else
                                    dataclasses.replace(j, mimic=dataclasses.replace(j.mimic, multiplier=0.7))
                                    for j in coupled.joints])
    with pytest.raises(ValueError, match=r"joint 'j2' mimics 'j1' with multiplier 0.7, offset 0.2 but in the "
                       r"Pinocchio model it mimics 'j1' with multiplier -0.7"):
        PinocchioMap(other, pin.buildModelFromUrdf(str(URDF), mimic=True))
    fr = _with_drive(coupled, friction_on_coupled=True)
    with pytest.raises(ValueError, match=r"joint 'j2' is coupled \(mimics 'j1'\) and has Coulomb friction"):
        PinocchioMap(fr, pin.buildModelFromUrdf(str(URDF), mimic=True)).drive_to_pin()


@pytest.mark.parametrize("xml,pair", [("mjcf_arm.xml", ("j2b", "j2a")), ("mjcf_free.xml", ("b1j", "a1j"))],
                         ids=["arm", "satellite"])
def test_mujoco_map_of_a_coupled_robot(tmp_path, xml, pair):
    """A coupled robot (MJCF joint equality -> mimic) against the MuJoCo model with every joint: M and the
    inverse dynamics (armature and damping included, written by apply_drive) projected by the map."""
    mujoco = pytest.importorskip("mujoco")
    text = (DATA / xml).read_text().replace(
        "</worldbody>", f'</worldbody><equality><joint joint1="{pair[0]}" joint2="{pair[1]}" '
        'polycoef="0.1 -0.6 0 0 0"/></equality>')
    path = tmp_path / xml
    path.write_text(text)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        robot = load_robot(path)
    assert robot.is_coupled
    robot = _with_drive(robot).rigid().replace(joints=[None if j is None else dataclasses.replace(
        j, armature=0.1 + 0.02 * k, damping=0.3 + 0.1 * k) for k, j in enumerate(robot.joints)])
    m = mujoco.MjModel.from_xml_path(str(path))
    dis = mujoco.mjtDisableBit
    m.opt.disableflags |= int(dis.mjDSBL_CONSTRAINT) | int(dis.mjDSBL_CONTACT)
    mm = MujocoMap(robot, m)
    mm.apply_drive()
    d = mujoco.MjData(m)
    Mfull = np.zeros((m.nv, m.nv))
    rng = np.random.default_rng(2)
    for _ in range(8):
        q = robot.random_configuration(rng)
        v, a, tau = rng.normal(size=robot.nv), rng.normal(size=robot.nv), rng.normal(size=robot.nv)
        qpos, qvel = mm.q_to_mj(q), mm.v_to_mj(q, v)
        # the coupled joint is at -0.6 q_source + 0.1 in MuJoCo's qpos; the way back reads the independent
        # ones
        jc, js = (m.jnt_qposadr[mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, n)] for n in pair)
        assert abs(qpos[jc] - (-0.6 * qpos[js] + 0.1)) < 1e-15
        assert np.allclose(mm.q_from_mj(qpos), q, atol=1e-15) and np.allclose(mm.v_from_mj(q, qvel), v)
        assert np.allclose(mm.a_from_mj(q, v, mm.a_to_mj(q, v, a)), a)
        assert np.allclose(mm.tau_from_mj(q, mm.tau_to_mj(q, tau)), tau)
        d.qpos[:], d.qvel[:] = qpos, qvel
        d.qacc[:] = mm.a_to_mj(q, v, a)
        mujoco.mj_inverse(m, d)
        mujoco.mj_fullM(m, d, Mfull)
        assert rel_err(mm.mass_matrix_from_mj(q, Mfull), dense.mass_matrix(robot, q)) < TOL
        assert rel_err(mm.tau_from_mj(q, d.qfrc_inverse), dense.inverse_dynamics(robot, q, v, a)) < TOL
