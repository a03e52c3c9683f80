"""The state conventions (docs/conventions.md) and the converters of soadyn.model.conventions."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TEST_ARM, load_urdf, rel_err

from soadyn import load_robot
from soadyn.model.conventions import (
    MujocoMap,
    PinocchioMap,
    from_pinocchio,
    from_spacedyn,
    spacedyn_acceleration,
    to_pinocchio,
    to_spacedyn,
)
from soadyn.model.robot import BodySpec, Inertia, Joint, Placement, Robot
from soadyn.model.rotations import matrix_to_quaternion, quaternion_to_matrix
from soadyn.reference import dense as ref

TOL = 1e-12


def _two_body(base: str = "free") -> Robot:
    box = Inertia(2.0, np.array([0.1, 0.0, 0.0]), np.diag([0.1, 0.2, 0.3]))
    bodies = [BodySpec("b0", None, None, box),
              BodySpec("b1", "b0", Joint("j1", "revolute", np.array([0.0, 0.0, 1.0]),
                                         Placement.from_xyz_rpy([0.5, 0, 0], [0, 0, 0])), box)]
    return Robot.from_specs("two", base, [0, 0, 0], bodies,
                            frames=[("pt", "b0", Placement.from_xyz_rpy([1, 0, 0], [0, 0, 0]))])


def _qdot(robot, q, v):
    qd = np.zeros(robot.nq)
    R = quaternion_to_matrix(q[3:7])
    qd[:3] = R @ v[3:6]
    e, s, om = q[3:6], q[6], v[:3]
    qd[3:6] = 0.5 * (s * om + np.cross(e, om))
    qd[6] = -0.5 * e @ om
    qd[7:] = v[6:]
    return qd


# ---- q and v conventions --------------------------------------------------------------------------
def test_quaternion_is_xyzw_base_to_inertial_and_scale_free():
    robot = _two_body()
    s = np.sqrt(0.5)
    q = np.array([0.5, 0.0, 0.0, 0.0, 0.0, s, s, 0.0])        # +90 deg about z, [x, y, z, w]
    R, p = ref.frame_pose(robot, q, "pt")
    assert np.allclose(p, [0.5, 1.0, 0.0], atol=TOL)           # base x axis -> inertial y axis
    assert np.allclose(R @ [1, 0, 0], [0, 1, 0], atol=TOL)
    q3 = q.copy()
    q3[3:7] *= 3.0                                             # the norm is divided out
    assert np.allclose(ref.frame_pose(robot, q3, "pt")[1], p, atol=TOL)


def test_base_velocity_is_angular_first_in_base_axes():
    robot = _two_body()
    s = np.sqrt(0.5)
    q = np.array([0.5, 0.0, 0.0, 0.0, 0.0, s, s, 0.0])
    J = ref.jacobian(robot, q, "pt", world_aligned=True)
    # spin about the base z axis (= inertial z): the point at base [1,0,0] (inertial [0.5,1,0]) moves along -x
    tw = J @ np.array([0, 0, 1.0, 0, 0, 0, 0])
    assert np.allclose(tw, [0, 0, 1, -1, 0, 0], atol=TOL)
    # spin about the base x axis = inertial y: the point lies on that axis, it does not move
    tw = J @ np.array([1.0, 0, 0, 0, 0, 0, 0])
    assert np.allclose(tw, [0, 1, 0, 0, 0, 0], atol=TOL)
    # linear base speed along base x = inertial y
    tw = J @ np.array([0, 0, 0, 1.0, 0, 0, 0])
    assert np.allclose(tw, [0, 0, 0, 0, 1, 0], atol=TOL)
    # the same in frame axes: the frame is aligned with the base
    Jl = ref.jacobian(robot, q, "pt")
    assert np.allclose(Jl @ np.array([0, 0, 1.0, 0, 0, 0, 0]), [0, 0, 1, 0, 1, 0], atol=TOL)


def test_retraction_convention():
    """q (+) delta (docs/conventions.md): attitude R Exp(delta_w) (body side), position p + R delta_v (base
    axes of the starting configuration, not inertial axes), joints added; unit quaternion out."""
    from soadyn.model.configuration import retract
    from soadyn.model.rotations import rodrigues

    s = np.sqrt(0.5)
    q = np.array([0.5, 0.0, 0.0, 0.0, 0.0, s, s, 0.3])          # base turned +90 deg about z
    q[3:7] *= 2.0                                               # any norm in
    d = np.array([0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.25])          # move along the base x axis
    out = retract(q, d, free=True)
    assert np.allclose(out[:3], [0.5, 1.0, 0.0], atol=TOL)      # base x = inertial y
    assert np.allclose(quaternion_to_matrix(out[3:7]), quaternion_to_matrix(q[3:7]), atol=TOL)
    assert abs(np.linalg.norm(out[3:7]) - 1.0) < 1e-15 and out[7] == 0.55
    w = np.array([0.3, -0.2, 0.7])
    out = retract(q, np.concatenate([w, [0.1, 0.2, 0.3], [0.0]]), free=True)
    R = quaternion_to_matrix(q[3:7])
    Rw = rodrigues(w / np.linalg.norm(w), np.linalg.norm(w))
    assert np.allclose(quaternion_to_matrix(out[3:7]), R @ Rw, atol=TOL)          # not Rw @ R
    assert not np.allclose(R @ Rw, Rw @ R, atol=1e-3)
    assert np.allclose(out[:3], q[:3] + R @ [0.1, 0.2, 0.3], atol=TOL)           # start rotation
    np.testing.assert_array_equal(retract([1.0, 2.0], [0.5, -1.0], free=False), [1.5, 1.0])


def test_rkmk_chart_is_the_retraction():
    """A constant body twist integrated by the RKMK4 step (chart q0 (+) y) follows the exact rigid motion
    R0 Exp(w t), p0 + R0 int_0^t Exp(w s) v ds, to RK4 accuracy, and converges at 4th order."""
    from soadyn.model.rotations import rodrigues
    from soadyn.runtime.integrate import rk4_step

    w, v = np.array([0.4, -0.3, 0.9]), np.array([0.2, 0.5, -0.1])
    q0 = np.array([1.0, 2.0, 3.0, *matrix_to_quaternion(rodrigues(np.array([0, 0.6, 0.8]), 0.7)), 0.1])
    R0, T = quaternion_to_matrix(q0[3:7]), 1.0
    n = np.linalg.norm(w)
    u, W = w / n, np.array([[0, -w[2], w[1]], [w[2], 0, -w[0]], [-w[1], w[0], 0]])
    Vt = T * np.eye(3) + (1 - np.cos(n * T)) / n**2 * W + (n * T - np.sin(n * T)) / n**3 * W @ W
    R_exact, p_exact = R0 @ rodrigues(u, n * T), q0[:3] + R0 @ Vt @ v
    errs = []
    for steps in (4, 8):
        q, x = q0, np.zeros(0)
        for i in range(steps):
            q, x = rk4_step(lambda t, qq, xx: (np.concatenate([w, v, [0.5]]), xx), i * T / steps, q, x,
                            T / steps, True)
        errs.append(np.abs(q[:3] - p_exact).max() + np.abs(quaternion_to_matrix(q[3:7]) - R_exact).max())
        assert abs(q[7] - (0.1 + 0.5 * T)) < 1e-14
    assert errs[1] < 1e-5 and errs[1] < errs[0] / 12                              # 4th order: / 16


def test_rk4_vector_is_classical_rk4():
    """rk4_vector on dx/dt = x, x(0) = 1: e^T to RK4 accuracy, error down by ~16 per halving of the step."""
    from soadyn.runtime.integrate import rk4_vector

    e1 = abs(rk4_vector(lambda t, x: x, np.ones(1), 1.0, 0.1)[0] - np.e)
    e2 = abs(rk4_vector(lambda t, x: x, np.ones(1), 1.0, 0.05)[0] - np.e)
    assert e1 < 3e-6 and 14 < e1 / e2 < 17
    t_dep = rk4_vector(lambda t, x: np.array([np.cos(t)]), np.zeros(1), 2.0, 0.01, t0=0.5)[0]
    assert abs(t_dep - (np.sin(2.5) - np.sin(0.5))) < 1e-10                          # t is passed on
    np.testing.assert_array_equal(rk4_vector(lambda t, x: x, np.ones(2), 0.0, 0.1), np.ones(2))


def test_matrix_to_quaternion_round_trip(rng):
    for _ in range(50):
        quat = rng.normal(size=4)
        quat /= np.linalg.norm(quat)
        back = matrix_to_quaternion(quaternion_to_matrix(quat))
        assert np.allclose(back, quat if quat[3] >= 0 else -quat, atol=1e-12)
    for axis in np.eye(3):                                    # 180 deg turns (w = 0)
        R = 2 * np.outer(axis, axis) - np.eye(3)
        assert np.allclose(quaternion_to_matrix(matrix_to_quaternion(R)), R, atol=1e-12)
    with pytest.raises(ValueError, match="rotation"):
        matrix_to_quaternion(np.diag([1.0, 1.0, -1.0]))


# ---- Pinocchio ----------------------------------------------------------------------------------------
def test_pinocchio_round_trip_and_block_swap(panda_urdf, rng):
    pin = pytest.importorskip("pinocchio")
    robot = load_urdf(panda_urdf, "free")
    model = pin.buildModelFromUrdf(str(panda_urdf), pin.JointModelFreeFlyer())
    pm = PinocchioMap(robot, model)
    assert np.array_equal(pm.perm @ pm.perm.T, np.eye(robot.nv))
    for _ in range(5):
        q, v = robot.random_configuration(rng), rng.normal(size=robot.nv)
        A = rng.normal(size=(robot.nv, robot.nv))
        J = rng.normal(size=(6, robot.nv))
        assert np.array_equal(pm.q_from_pin(pm.q_to_pin(q)), q)
        assert np.array_equal(pm.v_from_pin(pm.v_to_pin(v)), v)
        assert np.array_equal(pm.matrix_from_pin(pm.matrix_to_pin(A)), A)
        assert np.array_equal(pm.jacobian_from_pin(pm.jacobian_to_pin(J)), J)
        vp = pm.v_to_pin(v)
        assert np.array_equal(vp[:3], v[3:6]) and np.array_equal(vp[3:6], v[:3])
        qp, vp2, ap, tp = to_pinocchio(robot, model, q, v, v, v)
        assert np.array_equal(qp, pm.q_to_pin(q)) and np.array_equal(ap, vp)
        back = from_pinocchio(robot, model, qp, vp2, ap, tp)
        assert all(np.array_equal(b, x) for b, x in zip(back, (q, v, v, v)))
    # joint coordinates land on the Pinocchio joint of the same name
    q = robot.random_configuration(rng)
    qp = pm.q_to_pin(q)
    for k in range(1, robot.n_bodies):
        jid = model.getJointId(robot.joints[k].name)
        assert qp[model.joints[jid].idx_q] == q[robot.q_index(k)]


def test_pinocchio_map_rejects_mismatched_base(ur5_urdf):
    pin = pytest.importorskip("pinocchio")
    robot = load_urdf(ur5_urdf, "fixed")
    with pytest.raises(ValueError, match="free-flyer"):
        PinocchioMap(robot, pin.buildModelFromUrdf(str(ur5_urdf), pin.JointModelFreeFlyer()))
    with pytest.raises(ValueError, match="free-flyer"):
        PinocchioMap(robot.with_base("free"), pin.buildModelFromUrdf(str(ur5_urdf)))


# ---- MuJoCo -------------------------------------------------------------------------------------------
def test_mujoco_map_round_trip(rng):
    mujoco = pytest.importorskip("mujoco")
    robot = load_robot(TEST_ARM, base="free")
    xml = """<mujoco><worldbody><body name="b"><freejoint/><geom size=".1" mass="1"/>
      <body name="c"><joint name="{}" axis="0 0 1"/><geom size=".1" mass="1"/>
      <body name="d"><joint name="{}" axis="0 1 0"/><geom size=".1" mass="1"/>
      <body name="e"><joint name="{}" type="slide"/><geom size=".1" mass="1"/></body></body></body>
      <body name="f"><joint name="{}"/><geom size=".1" mass="1"/></body>
      </body></worldbody></mujoco>""".format(*robot.joint_names)
    m = mujoco.MjModel.from_xml_string(xml)
    mm = MujocoMap(robot, m)
    for _ in range(5):
        q, v, a = robot.random_configuration(rng), rng.normal(size=robot.nv), rng.normal(size=robot.nv)
        qm = mm.q_to_mj(q)
        assert np.allclose(qm[3:7], [q[6], q[3], q[4], q[5]])            # [w, x, y, z]
        assert np.allclose(mm.q_from_mj(qm), q, atol=TOL)
        vm = mm.v_to_mj(q, v)
        assert np.allclose(vm[:3], quaternion_to_matrix(q[3:7]) @ v[3:6])  # world linear first
        assert np.allclose(vm[3:6], v[:3])                                  # then body angular
        assert rel_err(mm.v_from_mj(q, vm), v) < TOL
        assert rel_err(mm.a_from_mj(q, v, mm.a_to_mj(q, v, a)), a) < TOL
        assert rel_err(mm.tau_from_mj(q, mm.tau_to_mj(q, a)), a) < TOL
        # power is invariant: tau . v = qfrc . qvel
        assert abs(mm.tau_to_mj(q, a) @ vm - a @ v) < 1e-12 * np.abs(a).sum() * np.abs(v).sum()


# ---- SpaceDyn -----------------------------------------------------------------------------------------
def test_spacedyn_round_trip_and_base_com_velocity(rng):
    robot = load_robot(TEST_ARM, base="free")
    h = 1e-6
    for _ in range(5):
        q, v, a = robot.random_configuration(rng), rng.normal(size=robot.nv), rng.normal(size=robot.nv)
        s = to_spacedyn(robot, q, v)
        q2, v2 = from_spacedyn(robot, s)
        qn = q.copy()
        qn[3:7] *= np.sign(q[6])
        assert rel_err(q2, qn) < TOL and rel_err(v2, v) < TOL
        # R0 is the base CoM: v0, w0 are its inertial velocities (finite differences, rtol 1e-8)
        qd = _qdot(robot, q, v)
        sp, sm = to_spacedyn(robot, q + h * qd, v + h * a), to_spacedyn(robot, q - h * qd, v - h * a)
        assert rel_err((sp.R0 - sm.R0) / (2 * h), s.v0) < 1e-8
        W = (sp.A0 - sm.A0) / (2 * h) @ s.A0.T
        assert rel_err(np.array([W[2, 1], W[0, 2], W[1, 0]]), s.w0) < 1e-8
        vd0, wd0, qdd = spacedyn_acceleration(robot, q, v, a)
        assert rel_err((sp.v0 - sm.v0) / (2 * h), vd0) < 1e-7
        assert rel_err((sp.w0 - sm.w0) / (2 * h), wd0) < 1e-7
        assert np.array_equal(qdd, a[6:])
        # the system CoM moves with linear momentum / total mass
        dc = (ref.center_of_mass(robot, q + h * qd) - ref.center_of_mass(robot, q - h * qd)) / (2 * h)
        assert rel_err(dc, ref.momentum(robot, q, v)[3:] / robot.total_mass) < 1e-8
    with pytest.raises(ValueError, match="fixed base"):
        to_spacedyn(robot.with_base("fixed"), robot.with_base("fixed").neutral(), np.zeros(robot.n_joints))
