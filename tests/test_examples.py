"""The seed example robots load, and match the source tables and hand computations.

Expected numbers are typed from the papers' tables (seed 001 Table; seed 003 Tables F.1-F.3,
section 4.5.3.1, Table 4.2) or worked out by hand from the link lengths chosen in the files;
none is read back from the loader.  Forward kinematics here is a small independent
implementation (Rodrigues rotation about the joint axis, then the joint placements), so a wrong
placement, axis or Euler-angle order in a file shows up as a wrong position.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from soadyn import load_robot

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _rot(axis: np.ndarray, theta: float) -> np.ndarray:
    a = np.asarray(axis, dtype=float) / np.linalg.norm(axis)
    K = np.array([[0, -a[2], a[1]], [a[2], 0, -a[0]], [-a[1], a[0], 0]])
    return np.eye(3) + np.sin(theta) * K + (1 - np.cos(theta)) * K @ K


def _poses(robot, joint_angles) -> list[tuple[np.ndarray, np.ndarray]]:
    """World (R, p) of every body with the base at the origin, unrotated."""
    out = [(np.eye(3), np.zeros(3))]
    for k in range(1, robot.n_bodies):
        Rp, pp = out[robot.parent[k]]
        j = robot.joints[k]
        assert j.type == "revolute"
        R = Rp @ j.placement.R @ _rot(j.axis, joint_angles[k - 1])
        out.append((R, Rp @ j.placement.p + pp))
    return out


def _frame_position(robot, name: str, joint_angles) -> np.ndarray:
    k, X = robot.frame_of(name)
    R, p = _poses(robot, joint_angles)[k]
    return R @ X.p + p


def _com(robot, joint_angles) -> np.ndarray:
    poses = _poses(robot, joint_angles)
    c = sum(I.mass * (R @ I.com + p) for (R, p), I in zip(poses, robot.inertias))
    return c / sum(I.mass for I in robot.inertias)


# ---- Tian & Wu, seed 001 ----------------------------------------------------------------------

@pytest.fixture(scope="module")
def tian_wu():
    return load_robot(EXAMPLES / "tian_wu_3dof.yaml")


def test_tian_wu_sizes_and_masses(tian_wu):
    # Table: masses 50.0, 10.0, 10.0, 5.0 kg; three revolute joints on a free base
    assert tian_wu.base == "free"
    assert tian_wu.nv == 6 + 3 and tian_wu.nq == 7 + 3
    assert tian_wu.joint_names == ["j1", "j2", "j3"]
    assert tian_wu.total_mass == pytest.approx(75.0, abs=1e-12)
    assert [I.mass for I in tian_wu.inertias] == pytest.approx([50.0, 10.0, 10.0, 5.0])


def test_tian_wu_inertias_match_table(tian_wu):
    table = [(8.33, 8.33, 8.33), (0.84, 0.84, 0.013), (0.84, 0.84, 0.013), (0.11, 0.11, 0.0063)]
    for I, diag in zip(tian_wu.inertias, table):
        assert np.allclose(I.inertia, np.diag(diag), atol=1e-12)


def test_tian_wu_joint_axes_parallel_to_base_z(tian_wu):
    # the arm is planar (Figs. 4-5 show x and y motion): every joint axis is the base z axis
    for (R, _), j in zip(_poses(tian_wu, [0.3, -0.7, 1.1])[1:], tian_wu.joints[1:]):
        assert np.allclose(R @ j.axis, [0, 0, 1], atol=1e-12)


def test_tian_wu_end_effector(tian_wu):
    # joint 1 at [0.5, 0, 0] on the 1 m cube, links 1.0 + 1.0 + 0.5 m along +x at q = 0
    assert np.allclose(_frame_position(tian_wu, "ee", [0, 0, 0]), [3.0, 0.0, 0.0], atol=1e-12)
    # section 6 initial angles (pi/2, 0, pi/2): links 1, 2 along +y, link 3 back along -x
    ee = _frame_position(tian_wu, "ee", [np.pi / 2, 0, np.pi / 2])
    assert np.allclose(ee, [0.0, 2.0, 0.0], atol=1e-12)
    # system CoM there: (50*0 + 10*[0.5,0.5] + 10*[0.5,1.5] + 5*[0.25,2]) / 75 = [0.15, 0.4]
    assert np.allclose(_com(tian_wu, [np.pi / 2, 0, np.pi / 2]), [0.15, 0.4, 0.0], atol=1e-12)


# ---- Dimitrov, seed 003 Appendix F.1 ------------------------------------------------------------

@pytest.fixture(scope="module")
def dimitrov():
    return load_robot(EXAMPLES / "dimitrov_7dof_rw.yaml")


def test_dimitrov_sizes_and_masses(dimitrov):
    # Table F.2: base 1000, links 35.01 30.00 22.69 21.38 16.75 26.17 18.07, wheels 3 x 1.00 kg
    assert dimitrov.base == "free"
    assert dimitrov.nv == 6 + 7 + 3 and dimitrov.nq == 7 + 7 + 3
    assert dimitrov.joint_names == [f"j{i}" for i in range(1, 11)]
    assert dimitrov.total_mass == pytest.approx(1173.07, abs=1e-9)
    assert [I.mass for I in dimitrov.inertias] == pytest.approx(
        [1000.0, 35.01, 30.0, 22.69, 21.38, 16.75, 26.17, 18.07, 1.0, 1.0, 1.0])
    # the wheels hang on the base
    assert [dimitrov.parent[dimitrov.body_index(n)] for n in ("rw_x", "rw_y", "rw_z")] == [0, 0, 0]


def test_dimitrov_wheel_axes_and_places(dimitrov):
    poses = _poses(dimitrov, np.zeros(10))
    expect = {"rw_x": ([1, 0, 0], [1, 0, 0]), "rw_y": ([0, 1, 0], [0, -1, 0]),
              "rw_z": ([0, 0, 1], [0, 0, -0.75])}
    for name, (axis, pos) in expect.items():
        k = dimitrov.body_index(name)
        R, p = poses[k]
        assert np.allclose(R @ dimitrov.joints[k].axis, axis, atol=1e-12), name
        assert np.allclose(p, pos, atol=1e-12), name


def test_dimitrov_end_effector_at_zero(dimitrov):
    # Hand computation from Tables F.1/F.3 (base frame, q = 0; frame i axes in base coordinates):
    #   J1 = [0.65, 0, 0.75];            J2 = J1 + 0.35 z1 = [0.65, 0, 1.10]
    #   frame 2 = Ry(90): z2 = x, y2 = y  -> J3 = J2 + 0.275 y2 + 0.4 z2 = [1.05, 0.275, 1.10]
    #   frame 3 = frame2 Rx(-90) Rz(-90): y3 = -z, z3 = +y
    #   J4 = J3 - 0.87 y3 = [1.05, 0.275, 1.97];  J5 = J4 - 0.63 y3 - 0.275 z3 = [1.05, 0, 2.60]
    #   J6 = J5 - 0.36 z3 = [1.05, -0.36, 2.60]; frame 6 = frame3 Rx(-90): y6 = -y, z6 = -z
    #   J7 = J6 + 0.55 y6 + 0.16 z6 = [1.05, -0.91, 2.44]; frame 7 = frame6 Ry(90): y7 = -y, z7 = x
    #   EE = J7 + 0.532 y7 + 0.2 z7 = [1.25, -1.442, 2.44]
    assert np.allclose(_frame_position(dimitrov, "ee", np.zeros(10)), [1.25, -1.442, 2.44], atol=1e-12)


def test_dimitrov_initial_configuration_reaches_near_grasp_point(dimitrov):
    # Section 4.5.3.1: phi(t0) = [-10, 20, 25, -35, -160, 30, 20, 0, 0, 0] deg, grasp point at t_f
    # r_g = [1.8, -1.8, 1.7] m, and the optimal EE path lengths Y_ob (Table 4.2) are 0.7029-0.7058 m.
    # A path is never shorter than the straight line, and these near-minimal paths are near-straight,
    # so the initial EE must lie just under 0.703 m from r_g (base still at the origin at t0).  This
    # pins down the Euler-angle order of Table F.3: the other order puts the EE 1.21 m away.
    phi0 = np.deg2rad([-10, 20, 25, -35, -160, 30, 20, 0, 0, 0])
    ee = _frame_position(dimitrov, "ee", phi0)
    dist = np.linalg.norm(ee - np.array([1.8, -1.8, 1.7]))
    assert 0.69 < dist <= 0.7029 + 1e-3
