"""URDF import, checked against Pinocchio's independent URDF parser (urdfdom) on Panda and UR5."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from soadyn import load_robot  # the checked loader (singular mass matrices are errors)
from soadyn.model import RobotFileError
from soadyn.model.robot import Placement, Robot

pin = pytest.importorskip("pinocchio")

BAD = Path(__file__).resolve().parent / "data" / "bad"


def _erd_robots() -> Path:
    import pinocchio

    site = Path(pinocchio.__file__).resolve()
    for parent in site.parents:
        cand = parent / "cmeel.prefix" / "share" / "example-robot-data" / "robots"
        if cand.is_dir():
            return cand
    pytest.skip("example-robot-data not installed")


PANDA = "panda_description/urdf/panda.urdf"
UR5 = "ur_description/urdf/ur5_robot.urdf"


def _fk(robot: Robot, q: np.ndarray) -> list[Placement]:
    """World placement of every body frame (fixed base), from the model data only."""
    out: list[Placement] = [Placement.identity()]
    for k in range(1, robot.n_bodies):
        j = robot.joints[k]
        qk = q[robot.q_index(k)]
        if j.type == "revolute":
            a = j.axis
            ax = np.array([[0, -a[2], a[1]], [a[2], 0, -a[0]], [-a[1], a[0], 0]])
            M = Placement(np.eye(3) + math.sin(qk) * ax + (1 - math.cos(qk)) * ax @ ax, np.zeros(3))
        else:
            M = Placement(np.eye(3), qk * j.axis)
        out.append(out[robot.parent[k]] * j.placement * M)
    return out


@pytest.mark.parametrize("rel", [PANDA, UR5])
def test_matches_pinocchio(rel: str) -> None:
    path = _erd_robots() / rel
    robot = load_robot(path, base="fixed", mimic="independent")
    model = pin.buildModelFromUrdf(str(path))
    data = model.createData()
    # joints: same names in the same (depth-first) order, same count
    assert robot.joint_names == list(model.names)[1:]
    assert robot.nq == model.nq and robot.nv == model.nv
    # total mass (pinocchio: joint 0 'universe' holds the root link's inertia)
    assert robot.total_mass == pytest.approx(sum(i.mass for i in model.inertias), rel=1e-14)
    # rotations: the UR5 writes pi/2 to 12 digits; soadyn takes such a rotation as the exact signed
    # permutation (``snap_rotation``), Pinocchio keeps the 4.9e-12 cosines
    tol_R = 1e-11
    for k in range(1, robot.n_bodies):
        jid = model.getJointId(robot.joints[k].name)
        Xp = model.jointPlacements[jid]
        np.testing.assert_allclose(robot.joints[k].placement.R, Xp.rotation, atol=tol_R)
        np.testing.assert_allclose(robot.joints[k].placement.p, Xp.translation, atol=1e-12)
        I = model.inertias[jid]
        assert robot.inertias[k].mass == pytest.approx(I.mass, rel=1e-12)
        np.testing.assert_allclose(robot.inertias[k].com, I.lever, atol=1e-12)
        np.testing.assert_allclose(robot.inertias[k].inertia, I.inertia, atol=1e-12)
    # forward kinematics of every body and every frame at random configurations (tests axes too)
    rng = np.random.default_rng(3)
    for _ in range(3):
        q = rng.uniform(-1.5, 1.5, robot.nq)
        qp = np.empty(model.nq)
        for k in range(1, robot.n_bodies):
            jid = model.getJointId(robot.joints[k].name)
            qp[model.joints[jid].idx_q] = q[robot.q_index(k)]
        pin.framesForwardKinematics(model, data, qp)
        world = _fk(robot, q)
        for k in range(1, robot.n_bodies):
            oMi = data.oMi[model.getJointId(robot.joints[k].name)]
            np.testing.assert_allclose(world[k].R, oMi.rotation, atol=4 * tol_R)
            np.testing.assert_allclose(world[k].p, oMi.translation, atol=4 * tol_R)
        assert robot.frames, "fixed-joint links should become frames"
        for f in robot.frames:
            X = world[f.body] * f.placement
            oMf = data.oMf[model.getFrameId(f.name)]
            np.testing.assert_allclose(X.R, oMf.rotation, atol=4 * tol_R)
            np.testing.assert_allclose(X.p, oMf.translation, atol=4 * tol_R)


def test_rotations_of_multiples_of_half_pi_are_exact(tmp_path: Path) -> None:
    """pi and pi/2 written to 12 digits give an exact signed permutation; 1.5708 is a different angle."""
    def joint_R(rpy: str) -> np.ndarray:
        f = tmp_path / "r.urdf"
        f.write_text(f"""<robot name="r"><link name="a"/><link name="b"><inertial><mass value="1"/>
<inertia ixx="1" iyy="1" izz="1" ixy="0" ixz="0" iyz="0"/></inertial></link>
<joint name="j" type="revolute"><parent link="a"/><child link="b"/><origin xyz="0 0 0" rpy="{rpy}"/>
<axis xyz="0 0 1"/><limit lower="-1" upper="1" effort="1" velocity="1"/></joint></robot>""")
        return load_robot(f, base="fixed").joints[1].placement.R
    R = joint_R("-1.57079632679 0 3.14159265359")
    np.testing.assert_array_equal(R, [[-1.0, 0.0, 0.0], [0.0, 0.0, -1.0], [0.0, -1.0, 0.0]])
    assert np.array_equal(R @ R.T, np.eye(3))
    R = joint_R("1.5708 0 0")          # 3.7e-6 from pi/2: kept as written
    assert R[1, 1] == pytest.approx(math.cos(1.5708), rel=1e-12) and R[1, 1] != 0.0
    R = joint_R("1.57079632679 0.3 0")  # not a permutation: only the 1e-14 snap
    assert R[2, 0] == pytest.approx(-math.sin(0.3), rel=1e-12) and R[2, 2] != 0.0


def test_panda_defaults_and_mimic_modes() -> None:
    path = _erd_robots() / PANDA
    with pytest.raises(RobotFileError, match=r'<joint name="panda_finger_joint2"> \(line \d+\): mimic joint'):
        load_robot(path, mimic="error")
    coupled = load_robot(path)             # default: a true coupling, finger 2 has no coordinate
    assert coupled.is_coupled and coupled.nv == 6 + 8 and "panda_finger_joint2" not in coupled.joint_names
    free = load_robot(path, mimic="independent")
    assert free.base == "free" and free.nq == 7 + 9 and free.nv == 6 + 9
    locked = load_robot(path, mimic="fixed")
    assert locked.joint_names == [f"panda_joint{i}" for i in range(1, 8)] + ["panda_finger_joint1"]
    assert "panda_rightfinger" in locked.frame_names
    assert locked.total_mass == pytest.approx(free.total_mass, rel=1e-14)


def _inertial(m: float, xyz: str = "0 0 0", rpy: str = "0 0 0", i: str = 'ixx="1" iyy="2" izz="3"') -> str:
    return (f'<inertial><origin xyz="{xyz}" rpy="{rpy}"/><mass value="{m}"/>'
            f'<inertia {i} ixy="0" ixz="0" iyz="0"/></inertial>')


def _joint(name: str, parent: str, child: str, type: str = "revolute", axis: str | None = "0 0 1",
           xyz: str = "0.2 0 0") -> str:
    ax = f'<axis xyz="{axis}"/>' if axis is not None else ""
    return (f'<joint name="{name}" type="{type}"><parent link="{parent}"/><child link="{child}"/>'
            f'<origin xyz="{xyz}" rpy="0 0 0"/>{ax}<limit lower="-1" upper="1" effort="1" '
            f'velocity="1"/></joint>')


def _urdf(tmp_path: Path, body: str) -> Path:
    p = tmp_path / "t.urdf"
    p.write_text(f'<?xml version="1.0"?>\n<robot name="t">\n{body}\n</robot>\n')
    return p


def test_tree_order_vs_pinocchio(tmp_path: Path) -> None:
    """Both orders are depth-first; we keep file order for siblings, Pinocchio sorts them by joint name."""
    unit = 'ixx="1" iyy="1" izz="1"'
    links = "".join(f'<link name="{n}">{_inertial(1.0, i=unit)}</link>'
                    for n in ("b", "c1", "c2", "c3", "d1"))
    joints = (_joint("zz", "b", "c1") + _joint("aa", "b", "c2") + _joint("mm", "b", "c3")
              + _joint("bb", "c1", "d1"))
    p = _urdf(tmp_path, links + joints)
    robot = load_robot(p)
    assert robot.joint_names == ["zz", "bb", "aa", "mm"]
    assert robot.parent == (-1, 0, 1, 0, 0)
    model = pin.buildModelFromUrdf(str(p))
    assert list(model.names)[1:] == ["aa", "mm", "zz", "bb"]


def test_inertial_rotation_default_axis_continuous(tmp_path: Path) -> None:
    # inertial rotated by yaw pi/2: principal moments (1, 2, 3) about x', y', z' -> diag(2, 1, 3) in the link
    body = (f'<link name="b">{_inertial(5.0)}</link>'
            f'<link name="l1">{_inertial(2.0, xyz="0.1 0.2 0.3", rpy=f"0 0 {math.pi / 2}")}</link>'
            f'<link name="l2">{_inertial(1.0)}</link>'
            + _joint("j1", "b", "l1", type="continuous") + _joint("j2", "l1", "l2", axis=None))
    p = _urdf(tmp_path, body)
    robot = load_robot(p)
    assert [j.type for j in robot.joints[1:]] == ["revolute", "revolute"]
    np.testing.assert_array_equal(robot.joints[2].axis, [1, 0, 0])  # URDF default axis
    np.testing.assert_allclose(robot.inertias[1].inertia, np.diag([2.0, 1.0, 3.0]), atol=1e-15)
    np.testing.assert_array_equal(robot.inertias[1].com, [0.1, 0.2, 0.3])
    model = pin.buildModelFromUrdf(str(p))
    np.testing.assert_allclose(model.inertias[model.getJointId("j1")].inertia, np.diag([2.0, 1.0, 3.0]),
                               atol=1e-12)


@pytest.mark.parametrize("base", ["free", "fixed"])
def test_continuous_joints_map_onto_pinocchio(tmp_path: Path, base: str) -> None:
    """Pinocchio's parser makes a ``continuous`` joint an unbounded revolute joint (``q = [cos, sin]``, nq 2):
    ``PinocchioMap`` converts q both ways and the dynamics agree (the sizes used to be refused)."""
    from soadyn.model.conventions import PinocchioMap
    from soadyn.reference import dense as ref

    body = (f'<link name="b">{_inertial(5.0)}</link>'
            f'<link name="l1">{_inertial(2.0, xyz="0.1 0.2 0.3")}</link>'
            f'<link name="l2">{_inertial(1.0, xyz="0 0.1 0")}</link>'
            f'<link name="l3">{_inertial(1.5, xyz="0.1 0 0")}</link>'
            + _joint("j1", "b", "l1", type="continuous", axis="0 1 0")
            + _joint("j2", "l1", "l2") + _joint("j3", "l2", "l3", type="continuous", axis="1 0 0"))
    p = _urdf(tmp_path, body)
    robot = load_robot(p, base=base)
    model = (pin.buildModelFromUrdf(str(p), pin.JointModelFreeFlyer()) if base == "free"
             else pin.buildModelFromUrdf(str(p)))
    assert model.nq == robot.nq + 2
    model.gravity.linear = np.asarray(robot.gravity, dtype=float)
    data = model.createData()
    pm = PinocchioMap(robot, model)
    rng = np.random.default_rng(5)
    for _ in range(3):
        q = robot.random_configuration(rng)
        v, tau = rng.normal(size=robot.nv), rng.normal(size=robot.nv)
        qp = pm.q_to_pin(q)
        np.testing.assert_allclose(pm.q_from_pin(qp), q, rtol=0, atol=1e-15)
        for k in (1, 3):
            c, s = qp[model.joints[model.getJointId(f"j{k}")].idx_q:][:2]
            assert (c, s) == pytest.approx((math.cos(q[robot.q_index(k)]), math.sin(q[robot.q_index(k)])))
        M = pin.crba(model, data, qp)
        M = np.triu(M) + np.triu(M, 1).T
        np.testing.assert_allclose(ref.mass_matrix(robot, q), pm.matrix_from_pin(M), rtol=0, atol=1e-12)
        a_pin = pin.aba(model, data, qp, pm.v_to_pin(v), pm.tau_to_pin(tau))
        np.testing.assert_allclose(ref.forward_dynamics(robot, q, v, tau), pm.a_from_pin(a_pin),
                                   rtol=0, atol=1e-10)


def test_one_joint_jacobian_from_pinocchio(tmp_path: Path) -> None:
    """Pinocchio returns the 6 x 1 Jacobian of a one-joint fixed-base robot as a vector of 6;
    ``PinocchioMap.jacobian_from_pin`` gives the 6 x 1 matrix (it used to fail on the shape)."""
    from soadyn.model.conventions import PinocchioMap
    from soadyn.reference import dense as ref

    p = _urdf(tmp_path, f'<link name="b">{_inertial(5.0)}</link><link name="l1">{_inertial(2.0)}</link>'
              + _joint("j1", "b", "l1", type="prismatic", axis="0 1 0"))
    robot = load_robot(p, base="fixed")
    model = pin.buildModelFromUrdf(str(p))
    q = np.array([0.3])
    fid = model.getFrameId("l1")
    Jp = pin.computeFrameJacobian(model, model.createData(), q, fid, pin.ReferenceFrame.LOCAL)
    J = PinocchioMap(robot, model).jacobian_from_pin(Jp)
    assert J.shape == (6, 1)
    np.testing.assert_array_equal(J, ref.jacobian(robot, q, "l1"))
    np.testing.assert_array_equal(J[:, 0], [0, 0, 0, 0, 1, 0])


def test_origin_rounding_residue_is_zero(tmp_path: Path) -> None:
    """iCub writes ``xyz="-7.46298e-34 ..."`` and Romeo ``rpy="7.88861e-31 ..."`` in joint origins: an
    exporter's rounding of 0, read as 0 like every |x| < 1e-14 of a placement (it used to refuse the
    file); a mass that small is still an error."""
    def robot(xyz: str, rpy: str, ixyz: str = "0.1 0 0", mass: str = "1") -> Path:
        return _urdf(tmp_path, f'<link name="b">{_inertial(5.0)}</link>'
                     f'<link name="l1">{_inertial(2.0, xyz=ixyz)}</link>'
                     f'<joint name="j1" type="revolute"><parent link="b"/><child link="l1"/>'
                     f'<origin xyz="{xyz}" rpy="{rpy}"/><axis xyz="0 0 1"/></joint>'.replace(
                         '<mass value="2.0"/>', f'<mass value="{mass}"/>'))
    zero = load_robot(robot("0.2 0 0", "0 0 0"))
    tiny = load_robot(robot("0.2 -7.46298e-34 0", "7.88861e-31 0 -1e-300", ixyz="0.1 3e-40 0"))
    assert tiny.fingerprint() == zero.fingerprint()
    p = robot("0.2 0 0", "0 0 0")
    p.write_text(p.read_text().replace('ixy="0" ixz="0"', 'ixy="0" ixz="2.40741e-35"'))
    assert load_robot(p).fingerprint() == zero.fingerprint()
    assert np.array_equal(tiny.joints[1].placement.R, np.eye(3)) and tiny.joints[1].placement.p[1] == 0.0
    with pytest.raises(RobotFileError, match="below 1e-30"):
        load_robot(robot("0.2 0 0", "0 0 0", mass="1e-40"))
    # iCub's l_ankle_2: a zero tensor with ixz = 1.36e-20 (eigenvalues -+1.36e-20), far below m |c|^2
    def ankle(ixz: str) -> Path:
        tensor = _inertial(0.27, xyz="0.008 0 0.0553", i=f'ixx="0" iyy="0" izz="0" ixz="{ixz}"')
        return _urdf(tmp_path, f'<link name="b">{_inertial(5.0)}</link><link name="l1">'
                     + tensor.replace(' ixz="0"', '', 1) + '</link>' + _joint("j1", "b", "l1"))
    assert load_robot(ankle("1.35525e-20")).inertias[1].inertia[0, 2] == 1.35525e-20
    with pytest.raises(RobotFileError, match="inertia not positive semi-definite"):
        load_robot(ankle("1e-6"))


@pytest.mark.parametrize("base", ["free", "fixed"])
def test_massless_link_keeps_its_rotational_inertia(tmp_path: Path, base: str) -> None:
    """``<mass value="0"/>`` with a non-zero ``<inertia>`` (Bolt's feet): a rotational inertia, as Pinocchio
    reads it, both on a link welded by a fixed joint and on a moving link (it used to be dropped: M off by
    1.8e-3 relative on Bolt)."""
    from soadyn.model.conventions import PinocchioMap
    from soadyn.reference import dense as ref

    rot = 'ixx="0.02" iyy="0.05" izz="0.03"'
    body = (f'<link name="b">{_inertial(5.0)}</link><link name="l1">{_inertial(2.0, xyz="0.1 0.2 0")}</link>'
            f'<link name="foot">{_inertial(0.0, xyz="0 0 0.3", rpy="0.2 0 0", i=rot)}</link>'
            f'<link name="l2">{_inertial(0.0, i=rot)}</link><link name="l3">{_inertial(0.0, i=rot)}</link>'
            + _joint("j1", "b", "l1", axis="0 1 0") + _joint("ankle", "l1", "foot", type="fixed", axis=None)
            + _joint("j2", "l1", "l2", axis="1 0 0") + _joint("weld", "l2", "l3", type="fixed", axis=None))
    p = _urdf(tmp_path, body)
    robot = load_robot(p, base=base)
    model = (pin.buildModelFromUrdf(str(p), pin.JointModelFreeFlyer()) if base == "free"
             else pin.buildModelFromUrdf(str(p)))
    data = model.createData()
    pm = PinocchioMap(robot, model)
    q = robot.random_configuration(np.random.default_rng(4))
    M = pin.crba(model, data, pm.q_to_pin(q))
    ours = ref.mass_matrix(robot, q)
    np.testing.assert_allclose(ours, pm.matrix_from_pin(np.triu(M) + np.triu(M, 1).T), rtol=0,
                               atol=1e-12 * np.max(np.abs(ours)))


def test_floating_root_joint_is_the_free_base(tmp_path: Path) -> None:
    """``world`` (massless) -floating-> base: the usual way to write a floating base (MuJoCo exports, G1).
    The child is the free base, as in Pinocchio (a free flyer); ``base='fixed'`` welds it; a floating joint
    elsewhere, or with an origin, is one clear error."""
    from soadyn.model.conventions import PinocchioMap
    from soadyn.reference import dense as ref

    arm = (f'<link name="b">{_inertial(5.0)}</link><link name="l1">{_inertial(2.0, xyz="0.1 0.2 0.3")}</link>'
           f'<link name="l2">{_inertial(1.0, xyz="0 0.1 0")}</link>'
           + _joint("j1", "b", "l1", axis="0 1 0") + _joint("j2", "l1", "l2", type="prismatic"))
    floating = '<joint name="root" type="floating"><parent link="world"/><child link="b"/></joint>'
    plain = load_robot(_urdf(tmp_path, arm))
    p = tmp_path / "w.urdf"
    p.write_text(f'<robot name="t"><link name="world"/>{floating}{arm}</robot>')
    robot = load_robot(p)
    assert robot.base == "free" and list(robot.body_names) == ["b", "l1", "l2"] and robot.nv == 8
    assert robot.fingerprint() == plain.fingerprint()
    model = pin.buildModelFromUrdf(str(p))                       # Pinocchio: the floating joint -> free flyer
    data = model.createData()
    pm = PinocchioMap(robot, model)
    q = robot.random_configuration(np.random.default_rng(2))
    M = pin.crba(model, data, pm.q_to_pin(q))
    np.testing.assert_allclose(ref.mass_matrix(robot, q), pm.matrix_from_pin(np.triu(M) + np.triu(M, 1).T),
                               rtol=0, atol=1e-12)
    fixed = load_robot(p, base="fixed")
    assert fixed.base == "fixed" and fixed.nv == 2 and fixed.body_names[0] == "world"
    assert fixed.total_mass == plain.total_mass
    moved = floating.replace("</joint>", '<origin xyz="1 0 0"/></joint>')
    p.write_text(f'<robot name="t"><link name="world"/>{moved}{arm}</robot>')
    with pytest.raises(RobotFileError, match=r'<joint name="root"> \(line \d+\): a floating root joint '
                       r'with an <origin>'):
        load_robot(p)
    p.write_text(f'<robot name="t">{arm}<link name="l3">{_inertial(1.0)}</link>'
                 '<joint name="f" type="floating"><parent link="l2"/><child link="l3"/></joint></robot>')
    with pytest.raises(RobotFileError, match=r'<joint name="f"> \(line \d+\): a floating joint is '
                       r'supported only'):
        load_robot(p)


def test_massless_links_fixed_or_inner_are_fine(tmp_path: Path) -> None:
    """A massless moving link is fine if it carries inertia outboard; a massless fixed leaf is a frame."""
    body = (f'<link name="b">{_inertial(5.0)}</link><link name="gimbal"/>'
            f'<link name="l2">{_inertial(1.0)}</link><link name="tip"/>'
            + _joint("j1", "b", "gimbal") + _joint("j2", "gimbal", "l2", axis="0 1 0")
            + _joint("tip_fix", "l2", "tip", type="fixed", axis=None))
    robot = load_robot(_urdf(tmp_path, body))
    assert robot.joint_names == ["j1", "j2"] and robot.frame_names == ["tip"]
    assert robot.total_mass == 6.0


def test_triangle_violation_is_a_warning(tmp_path: Path) -> None:
    flat = 'ixx="1" iyy="1" izz="5"'
    body = (f'<link name="b">{_inertial(5.0)}</link>'
            f'<link name="l1">{_inertial(1.0, i=flat)}</link>'
            + _joint("j1", "b", "l1"))
    with pytest.warns(UserWarning, match="triangle inequality"):
        load_robot(_urdf(tmp_path, body))


def test_massless_free_base_on_one_hinge_is_singular(tmp_path: Path) -> None:
    """A massless free base carried by one revolute link: the base's articulated inertia P(0) = P+(1) has
    rank 5, so the mass matrix is singular and the reader must say so; with a fixed base it is fine."""
    body = '<link name="b"/>' f'<link name="l1">{_inertial(1.0)}</link>' + _joint("j1", "b", "l1")
    with pytest.raises(RobotFileError, match="base's articulated inertia is singular"):
        load_robot(_urdf(tmp_path, body))
    assert load_robot(_urdf(tmp_path, body), base="fixed").nv == 1
    # the model layer's reader checks the file only; the dynamics check is load_robot's job
    from soadyn.model import read_robot_file

    assert read_robot_file(_urdf(tmp_path, body)).nv == 7


URDF_CASES = [
    ("planar", '<joint name="j2"> (line 8)', "joint type 'planar' is not supported"),
    ("floating", '<joint name="j2"> (line 8)', "a floating joint is supported only as the one joint"),
    ("mimic", '<joint name="j2"> (line 8)/mimic', "mimics joint 'j9', which is not a revolute or prismatic"),
    # a published file with such a coupling (example-robot-data's alex_psyonic_hands) still loads this way
    ("mimic", '<joint name="j2"> (line 8)/mimic', "or load the file with mimic='independent'"),
    ("massless_leaf", '<joint name="j2"> (line 8)', "carries zero moment of inertia about its axis"),
    ("syntax", "line 6", "XML syntax error"),
    ("bad_number", '<joint name="j2">/origin (line 8)', "xyz='0.3 0 abc' is not 3 number(s)"),
    ("unknown_link", '<joint name="j2"> (line 8)', "child link 'l3' is not defined"),
    ("two_parents", '<joint name="j3"> (line 9)', "link 'l2' is already the child of joint 'j2'"),
    ("negative_mass", '<link name="l2"> (line 6)/inertial', "negative mass -1.0"),
    ("not_psd", '<link name="l2"> (line 6)/inertial', "inertia not positive semi-definite"),
    ("zero_axis", '<joint name="j2"> (line 8)', "axis is zero"),
    ("two_roots", '<link name="l2"> (line 6)', "several root links ['base', 'l2']"),
]


@pytest.mark.parametrize(("fixture", "field", "phrase"), URDF_CASES)
def test_bad_urdf(fixture: str, field: str, phrase: str) -> None:
    path = BAD / f"urdf_{fixture}.urdf"
    with pytest.raises(RobotFileError) as info:
        load_robot(path)
    assert info.value.file == str(path) and info.value.field == field
    assert phrase in info.value.problem, info.value.problem


def test_every_bad_urdf_is_covered() -> None:
    assert {p.stem for p in BAD.glob("*.urdf")} == {f"urdf_{c[0]}" for c in URDF_CASES}


def test_missing_urdf() -> None:
    with pytest.raises(RobotFileError, match=r"nothing\.urdf: file not found"):
        load_robot(BAD / "nothing.urdf")
