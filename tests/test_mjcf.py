"""MJCF import through MuJoCo's own parser (issue 25, soadyn.model.mjcf).

Two small models in tests/data (a fixed-base arm with offset joint anchors, a body with two hinges, a slide,
a welded tool and sites; a free-floating satellite with a two-branch tree), each loaded by soadyn and by
MuJoCo, agree to 1e-9 (relative): M against mj_fullM, ID against mj_inverse, FD against mj_forward (with
armature and damping; constraints and contacts off, the files' gravity), site and welded-body poses against
MuJoCo's kinematics.  The generated C is checked for the arm.  Unsupported elements give one line naming
the file, the element and the fix.
"""

from __future__ import annotations

import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from conftest import module_cache_dir, rel_err

from soadyn import load_robot
from soadyn.codegen.pipeline import compile_robot
from soadyn.model import RobotFileError
from soadyn.model.conventions import MujocoMap
from soadyn.reference import dense
from soadyn.symbolic import algorithms as alg
from soadyn.symbolic.scalar import Numeric

mujoco = pytest.importorskip("mujoco")

DATA = Path(__file__).parent / "data"
ARM, FREE = DATA / "mjcf_arm.xml", DATA / "mjcf_free.xml"
TOL = 1e-9
CTX = Numeric()


def _load(path: Path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # the arm's actuator warning (tested below)
        return load_robot(path)


def _mj(path: Path):
    m = mujoco.MjModel.from_xml_path(str(path))
    dis = mujoco.mjtDisableBit
    m.opt.disableflags |= int(dis.mjDSBL_CONSTRAINT) | int(dis.mjDSBL_CONTACT)
    return m


def _mat(q):
    R = np.zeros(9)
    mujoco.mju_quat2Mat(R, q)
    return R.reshape(3, 3)


@pytest.mark.parametrize("path", [ARM, FREE], ids=["arm", "satellite"])
def test_mjcf_matches_mujoco(path):
    robot = _load(path)
    m = _mj(path)
    d = mujoco.MjData(m)
    mm = MujocoMap(robot, m)
    assert np.array_equal(robot.gravity, m.opt.gravity)
    assert any(j.armature for j in robot.joints[1:]) and any(j.damping for j in robot.joints[1:])
    rng = np.random.default_rng(9)
    Mfull = np.zeros((m.nv, m.nv))
    for _ in range(20):
        q = robot.random_configuration(rng)
        v, a, tau = rng.normal(size=robot.nv), rng.normal(size=robot.nv), 3 * rng.normal(size=robot.nv)
        d.qpos[:], d.qvel[:] = mm.q_to_mj(q), mm.v_to_mj(q, v)
        d.qfrc_applied[:] = mm.tau_to_mj(q, tau)
        mujoco.mj_forward(m, d)
        mujoco.mj_fullM(m, d, Mfull)
        M_mj = mm.mass_matrix_from_mj(q, Mfull)
        assert rel_err(dense.mass_matrix(robot, q), M_mj) < TOL
        assert rel_err(alg.mass_matrix(robot, CTX, q), M_mj) < TOL
        a_mj = mm.a_from_mj(q, v, d.qacc)
        assert rel_err(dense.forward_dynamics(robot, q, v, tau), a_mj) < TOL
        assert rel_err(alg.forward_dynamics(robot, CTX, q, v, tau), a_mj) < TOL
        # frames: sites and welded bodies where MuJoCo puts them
        for s in range(m.nsite):
            name = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_SITE, s)
            R, p = dense.frame_pose(robot, q, name)
            assert np.allclose(p, d.site_xpos[s], rtol=0, atol=1e-12)
            assert np.allclose(R, d.site_xmat[s].reshape(3, 3), rtol=0, atol=1e-12)
        for name in robot.frame_names:
            b = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, name)
            if b >= 0:
                R, p = dense.frame_pose(robot, q, name)
                assert np.allclose(p, d.xpos[b], rtol=0, atol=1e-12)
                assert np.allclose(R, _mat(d.xquat[b]), rtol=0, atol=1e-12)
        d.qacc[:] = mm.a_to_mj(q, v, a)
        mujoco.mj_inverse(m, d)
        tau_mj = mm.tau_from_mj(q, d.qfrc_inverse)
        assert rel_err(dense.inverse_dynamics(robot, q, v, a), tau_mj) < TOL
        assert rel_err(alg.inverse_dynamics(robot, CTX, q, v, a), tau_mj) < TOL


def test_mjcf_generated_c_matches_mujoco(request, tmp_path_factory):
    robot = _load(ARM)
    mod = compile_robot(robot, module_cache_dir(request, tmp_path_factory, "soadyn_mjcf_modules"),
                        functions=["mass_matrix", "inverse_dynamics", "forward_dynamics"], progress=False)
    m = _mj(ARM)
    d = mujoco.MjData(m)
    mm = MujocoMap(robot, m)
    rng = np.random.default_rng(4)
    Mfull = np.zeros((m.nv, m.nv))
    for _ in range(10):
        q = robot.random_configuration(rng)
        v, a, tau = rng.normal(size=robot.nv), rng.normal(size=robot.nv), rng.normal(size=robot.nv)
        d.qpos[:], d.qvel[:], d.qfrc_applied[:] = mm.q_to_mj(q), mm.v_to_mj(q, v), mm.tau_to_mj(q, tau)
        mujoco.mj_forward(m, d)
        mujoco.mj_fullM(m, d, Mfull)
        assert rel_err(mod.mass_matrix(q), mm.mass_matrix_from_mj(q, Mfull)) < TOL
        assert rel_err(mod.forward_dynamics(q, v, tau), mm.a_from_mj(q, v, d.qacc)) < TOL
        d.qacc[:] = mm.a_to_mj(q, v, a)
        mujoco.mj_inverse(m, d)
        assert rel_err(mod.inverse_dynamics(q, v, a), mm.tau_from_mj(q, d.qfrc_inverse)) < TOL


def test_mjcf_maps_the_model():
    arm = _load(ARM)
    assert arm.base == "fixed" and arm.joint_names == ["j1", "j2a", "j2b", "j3"]
    assert arm.body_names == ("world", "link1", "link2__j2a", "link2", "slider")   # two hinges: a chain
    assert arm.inertias[2].mass == 0.0 and "tool" in arm.frame_names and "tcp" in arm.frame_names
    assert [j.type for j in arm.joints[1:]] == ["revolute", "revolute", "revolute", "prismatic"]
    sat = _load(FREE)
    assert sat.base == "free" and sat.body_names[0] == "bus" and sat.frame_names == ["hand"]
    assert sat.joints[1].armature == 0.3 and sat.joints[3].damping == 2.0


def test_mjcf_warns_about_actuators():
    with pytest.warns(UserWarning, match=r"mjcf_arm\.xml: <actuator>: 1 actuator\(s\) ignored"):
        load_robot(ARM)


_IN = '<inertial pos="0 0 0" mass="1" diaginertia="1 1 1"/>'
_BAD = {
    "ball": ('<joint name="sh" type="ball"/>', '<joint name="sh"> (body b): ball joints are not supported'),
    "tendon": ('<joint name="sh"/></body></worldbody><tendon><fixed name="t"><joint joint="sh" coef="1"/>'
               f'</fixed></tendon><worldbody><body name="c">{_IN}<joint name="cj"/>',
               '<tendon> "t": the model has 1 tendon(s)'),
    "nonlinear coupling": (f'<joint name="sh"/><body name="c"><joint name="cj"/>{_IN}</body></body>'
                           '</worldbody><equality><joint name="cp" joint1="cj" joint2="sh" '
                           f'polycoef="0 2 0.5 0 0"/></equality><worldbody><body name="z">{_IN}',
                           '<equality>/<joint name="cp">: only linear couplings of two joints'),
    "weld": (f'<joint name="sh"/></body></worldbody><equality><weld name="w" body1="b"/></equality>'
             f'<worldbody><body name="z">{_IN}',
             '<equality>/<weld name="w">: equality constraint not supported'),
    "negative armature": ('<joint name="sh" armature="-1"/>',
                          '<joint name="sh"> (body b).armature: is negative'),
    "stiffness": ('<joint name="sh" stiffness="3"/>', '<joint name="sh"> (body b): joint stiffness 3'),
    "ref": ('<joint name="sh" ref="0.5"/>', '<joint name="sh"> (body b): ref != 0'),
    "nested free": (f'<joint name="sh"/><body name="c"><freejoint name="fj"/>{_IN}</body>',
                    "MuJoCo could not read the MJCF (Error: free joint can only be used on top level"),
}


@pytest.mark.parametrize("case", sorted(_BAD))
def test_unsupported_mjcf_gives_one_line(tmp_path, monkeypatch, case):
    monkeypatch.chdir(tmp_path)                  # MuJoCo writes MUJOCO_LOG.TXT into the working directory
    joint, expected = _BAD[case]
    text = f'<mujoco model="bad"><worldbody><body name="b">{_IN}{joint}</body></worldbody></mujoco>'
    path = tmp_path / "bad.xml"
    path.write_text(text)
    with pytest.raises(RobotFileError) as e:
        load_robot(path)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(f"{path}: ") and expected in msg, msg


def test_mjcf_joint_coupling_is_a_mimic(tmp_path):
    """``<equality><joint polycoef="c0 c1 0 0 0">`` is the coupling q1 = c0 + c1 q2 in reduced coordinates:
    soadyn's M and FD equal MuJoCo's full-coordinate M and bias forces projected with G (MuJoCo itself
    enforces the equality as a soft constraint, so its qacc is not the exact reduced motion)."""
    text = ARM.read_text().replace("</worldbody>", '</worldbody><equality><joint joint1="j2b" joint2="j2a" '
                                   'polycoef="0.1 0.5 0 0 0"/></equality>')
    path = tmp_path / "coupled.xml"
    path.write_text(text)
    robot = _load(path)
    assert robot.joint_names == ["j1", "j2a", "j3"] and robot.joints[3].mimic.multiplier == 0.5
    full = robot.uncoupled()
    m = _mj(path)
    d = mujoco.MjData(m)
    mm = MujocoMap(full, m)
    G, b = robot.expansion()
    rng = np.random.default_rng(6)
    Mfull = np.zeros((m.nv, m.nv))
    for _ in range(10):
        q = robot.random_configuration(rng)
        v, tau = rng.normal(size=robot.nv), rng.normal(size=robot.nv)
        qf = G @ q + b
        d.qpos[:], d.qvel[:] = mm.q_to_mj(qf), mm.v_to_mj(qf, G @ v)
        mujoco.mj_forward(m, d)
        mujoco.mj_fullM(m, d, Mfull)
        M = G.T @ mm.mass_matrix_from_mj(qf, Mfull) @ G
        C = G.T @ (mm.bias_from_mj(qf, G @ v, d.qfrc_bias, Mfull) - mm.tau_from_mj(qf, d.qfrc_passive))
        assert rel_err(alg.mass_matrix(robot, CTX, q), M) < TOL
        assert rel_err(alg.forward_dynamics(robot, CTX, q, v, tau), np.linalg.solve(M, tau - C)) < TOL
        assert rel_err(dense.forward_dynamics(robot, q, v, tau), np.linalg.solve(M, tau - C)) < TOL


def test_mjcf_syntax_error_is_one_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)                  # MuJoCo writes MUJOCO_LOG.TXT into the working directory
    path = tmp_path / "broken.xml"
    path.write_text("<mujoco><worldbody><body></worldbody></mujoco>")
    with pytest.raises(RobotFileError) as e:
        load_robot(path)
    assert "\n" not in str(e.value) and "MuJoCo could not read the MJCF" in str(e.value)


def test_cli_compiles_mjcf(tmp_path):
    out = subprocess.run([sys.executable, "-m", "soadyn.cli", "compile", str(FREE), "-o", str(tmp_path), "-q",
                          "--functions", "forward_dynamics"], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "mjcf_satellite" / "mjcf_satellite.c").is_file()
    info = subprocess.run([sys.executable, "-m", "soadyn.cli", "info", str(FREE)], capture_output=True,
                          text=True, timeout=300)
    assert info.returncode == 0 and "a2j" in info.stdout and "hand" in info.stdout, info.stderr
