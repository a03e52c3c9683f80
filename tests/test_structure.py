"""Structure changes (seed 004 section III): invert, lock_joints, fix/free base, close_loop, connectivity,
YAML round trip.  Physics invariants are checked with the O(N) tree algorithms on floats against an
independent forward-kinematics routine (reference.frame_motion) and the dense mass matrix."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TEST_ARM

from soadyn import load_robot
from soadyn import structure as st
from soadyn.model import to_yaml
from soadyn.model.robot import Placement
from soadyn.model.rotations import matrix_to_quaternion, matrix_to_rpy, quaternion_to_matrix
from soadyn.reference import frame_motion
from soadyn.symbolic.algorithms import (
    bias_forces,
    forward_dynamics,
    inverse_dynamics,
    jacobian,
    kinetic_energy,
    mass_matrix,
    momentum,
)
from soadyn.symbolic.scalar import Numeric

CTX = Numeric()


@pytest.fixture
def arm():
    return load_robot(TEST_ARM).replace(gravity=[0.3, -0.2, -9.81])  # gravity must not break the invariants


def _random_state(robot, rng):
    q = robot.random_configuration(rng)
    v = rng.normal(size=robot.nv)
    tau = rng.normal(size=robot.nv) * 3.0
    return q, v, tau


def _joint_perm(src, dst):
    return [src.joint_names.index(n) for n in dst.joint_names]


def _max_motion_error(r1, s1, r2, s2):
    f1 = frame_motion(r1, *s1)
    f2 = frame_motion(r2, *s2)
    assert set(f1) <= set(f2), "every body/frame of the original must be findable after the change"
    err = 0.0
    for name, m in f1.items():
        o = f2[name]
        for attr in ("R", "p", "w", "v", "wdot", "vdot"):
            err = max(err, float(np.max(np.abs(getattr(m, attr) - getattr(o, attr)))))
    return err


# ---- invert ------------------------------------------------------------------------------------


@pytest.mark.parametrize("new_base", ["l2", "l3", "tcp", "tool", "l4", "l1"])
def test_invert_same_physics(arm, new_base):
    """Inverted chain: same accelerations of every link frame, same momentum and kinetic energy, for the
    same joint torques and zero base wrench, with gravity (seed 004 III-B, 'equations structurally (1)')."""
    rng = np.random.default_rng(7)
    inv = st.invert(arm, new_base)
    assert inv.nv == arm.nv and sorted(inv.joint_names) == sorted(arm.joint_names)
    for _ in range(3):
        q, v, tau = _random_state(arm, rng)
        tau[:6] = 0.0
        a = forward_dynamics(arm, CTX, q, v, tau)
        q2, v2, _ = st.map_state(arm, inv, q, v)
        tau2 = np.zeros(inv.nv)
        tau2[6:] = tau[6:][_joint_perm(arm, inv)]
        a2 = forward_dynamics(inv, CTX, q2, v2, tau2)
        assert _max_motion_error(arm, (q, v, a), inv, (q2, v2, a2)) < 1e-10
        np.testing.assert_allclose(momentum(inv, CTX, q2, v2), momentum(arm, CTX, q, v), atol=1e-10)
        assert abs(kinetic_energy(inv, CTX, q2, v2) - kinetic_energy(arm, CTX, q, v)) < 1e-10
        # joint accelerations carry over unchanged (q_new = q_old convention, axis reversed)
        np.testing.assert_allclose(a2[6:], a[6:][_joint_perm(arm, inv)], atol=1e-10)


def test_invert_reversed_joint_convention(arm):
    """A reversed joint keeps its coordinate and flips its axis; off-path joints keep their axis."""
    inv = st.invert(arm, "l3")
    for name in ("j1", "j2", "j3"):
        old = arm.joints[arm.joint_names.index(name) + 1]
        new = inv.joints[inv.joint_names.index(name) + 1]
        np.testing.assert_array_equal(new.axis, -old.axis)
    np.testing.assert_array_equal(
        inv.joints[inv.joint_names.index("j4") + 1].axis, arm.joints[arm.joint_names.index("j4") + 1].axis
    )
    # the seed's numbering rule: the chain from the new base to the old one comes first
    assert inv.body_names[:4] == ("l3", "l2__j3", "l1__j2", "base__j1")
    assert inv.parent == (-1, 0, 1, 2, 3)


def test_invert_jacobians_of_same_frame(arm):
    """Frame Jacobians of the same physical frame agree through the velocity map (joint columns)."""
    rng = np.random.default_rng(11)
    inv = st.invert(arm, "tcp")
    q, v, _ = _random_state(arm, rng)
    q2, v2, _ = st.map_state(arm, inv, q, v)
    for frame in ("l2", "l4", "base", "tcp"):
        J1 = jacobian(arm, CTX, q, frame, world_aligned=True)
        J2 = jacobian(inv, CTX, q2, frame, world_aligned=True)
        np.testing.assert_allclose(J2 @ v2, J1 @ v, atol=1e-10)


def test_invert_round_trip_state(arm):
    """Inverting back: the state maps compose to the identity (quaternion up to sign)."""
    rng = np.random.default_rng(5)
    inv = st.invert(arm, "l4")
    back = st.invert(inv, "base")
    q, v, tau = _random_state(arm, rng)
    a = forward_dynamics(arm, CTX, q, v, tau * 0)
    q2, v2, a2 = st.map_state(arm, inv, q, v, a)
    q3, v3, a3 = st.map_state(inv, back, q2, v2, a2)
    assert abs(abs(q3[3:7] @ q[3:7]) - 1.0) < 1e-12
    np.testing.assert_allclose(q3[:3], q[:3], atol=1e-12)
    np.testing.assert_allclose(v3, v[np.r_[0:6, 6 + np.array(_joint_perm(arm, back))]], atol=1e-12)
    np.testing.assert_allclose(a3[:6], a[:6], atol=1e-10)


def test_invert_base_wrench_as_external_force(arm):
    """A wrench on the old base equals an external wrench on the renamed old-base body after inversion."""
    rng = np.random.default_rng(2)
    inv = st.invert(arm, "l2")
    q, v, tau = _random_state(arm, rng)
    a = forward_dynamics(arm, CTX, q, v, tau)
    q2, v2, _ = st.map_state(arm, inv, q, v)
    tau2 = np.zeros(inv.nv)
    tau2[6:] = tau[6:][_joint_perm(arm, inv)]
    k, X = inv.frame_of("base")  # old base frame on its new body
    f = tau[:6]  # [n; f] at old base origin, old base coordinates
    n_new = X.R @ f[:3] + np.cross(X.p, X.R @ f[3:])
    fext = np.zeros((inv.n_bodies, 6))
    fext[k] = np.concatenate([n_new, X.R @ f[3:]])
    a2 = forward_dynamics(inv, CTX, q2, v2, tau2, fext)
    assert _max_motion_error(arm, (q, v, a), inv, (q2, v2, a2)) < 1e-10


def test_invert_errors(arm):
    with pytest.raises(st.StructureError, match="no body or frame 'nope'"):
        st.invert(arm, "nope")


def test_invert_fixed_base_welds_new_base(arm):
    """Fixed base: the new base is welded instead; gravity is re-expressed in its frame (seed 004 Ex. 1)."""
    fixed = st.fix_base(arm)
    at = {"j1": 0.4, "j2": -0.3, "j3": 0.1, "j4": 0.2}
    inv = st.invert(fixed, "l2", at=at)
    q = np.array([at[n] for n in fixed.joint_names])
    fm = frame_motion(fixed, q, frame="l2")
    np.testing.assert_allclose(inv.gravity, fm.R.T @ fixed.gravity, atol=1e-12)
    # same physics as the free original with frame l2 held still: choose the base twist that cancels
    # l2's twist, v_b = -J_b^-1 J_m v_m; kinetic energies and gravity torques must then agree.
    free = arm
    rng = np.random.default_rng(8)
    qf = free.neutral()
    qf[7:] = q
    J = jacobian(free, CTX, qf, "l2", world_aligned=False)
    vm = rng.normal(size=free.n_joints)
    vf = np.concatenate([-np.linalg.solve(J[:, :6], J[:, 6:] @ vm), vm])
    perm = _joint_perm(free, inv)
    assert abs(kinetic_energy(inv, CTX, q[perm], vm[perm]) - kinetic_energy(free, CTX, qf, vf)) < 1e-10
    # generalised gravity forces of the grappled system: G_inv = T^T G_free with T = dv_f / dv_m
    T = np.vstack([-np.linalg.solve(J[:, :6], J[:, 6:]), np.eye(free.n_joints)])
    Gf = bias_forces(free, CTX, qf, np.zeros(free.nv))
    Ginv = bias_forces(inv, CTX, q[perm], np.zeros(inv.nv))
    np.testing.assert_allclose(Ginv, (T.T @ Gf)[perm], atol=1e-9)


# ---- lock joints -------------------------------------------------------------------------------


def test_lock_joints_matches_constrained_full_model(arm):
    """Locked model = full model with the locked joints held by their constraint torques (KKT solve)."""
    rng = np.random.default_rng(3)
    at = {"j2": 0.7, "j4": -0.3}
    red = st.lock_joints(arm, ["j2", "j4"], at)
    assert red.joint_names == ["j1", "j3"] and red.nv == arm.nv - 2
    assert "l2" in red.frame_names and "l4" in red.frame_names
    lk = [6 + arm.joint_names.index(n) for n in ("j2", "j4")]
    keep = [i for i in range(arm.nv) if i not in lk]
    for _ in range(3):
        q, v, tau = _random_state(arm, rng)
        for n, x in at.items():
            q[7 + arm.joint_names.index(n)] = x
        v[lk] = 0.0
        M = mass_matrix(arm, CTX, q)
        C = bias_forces(arm, CTX, q, v)
        E = np.zeros((2, arm.nv))
        E[[0, 1], lk] = 1.0
        K = np.block([[M, -E.T], [E, np.zeros((2, 2))]])
        a = np.linalg.solve(K, np.concatenate([tau - C, np.zeros(2)]))[: arm.nv]
        q2, v2, a2 = st.map_state(arm, red, q, v, a)
        ar = forward_dynamics(red, CTX, q2, v2, tau[keep])
        np.testing.assert_allclose(ar, a2, atol=1e-10)
        assert _max_motion_error(arm, (q, v, a), red, (q2, v2, ar)) < 1e-10


def test_lock_joints_composite_inertia(arm):
    """Locking every joint leaves one rigid body with the total mass and the composite CoM."""
    vals = [0.3, -0.5, 0.2, 1.1]
    rigid = st.lock_joints(arm, arm.joint_names, vals)
    assert rigid.n_bodies == 1 and rigid.nv == 6
    assert abs(rigid.inertias[0].mass - arm.total_mass) < 1e-12
    q = arm.neutral()
    q[7:] = vals
    from soadyn.symbolic.algorithms import center_of_mass

    np.testing.assert_allclose(rigid.inertias[0].com, center_of_mass(arm, CTX, q), atol=1e-12)
    # rigid-body kinetic energy equals the full model's for a base-only motion
    v = np.r_[0.3, -0.2, 0.5, 0.1, 0.4, -0.6, 0, 0, 0, 0]
    assert abs(kinetic_energy(rigid, CTX, rigid.neutral(), v[:6]) - kinetic_energy(arm, CTX, q, v)) < 1e-12


def test_lock_joints_errors(arm):
    with pytest.raises(st.StructureError, match="no moving joint 'jx'"):
        st.lock_joints(arm, ["jx"])
    with pytest.raises(st.StructureError, match="one value per joint"):
        st.lock_joints(arm, ["j1", "j2"], [0.1])
    with pytest.raises(st.StructureError, match="not the string"):
        st.lock_joints(arm, "j1")


# ---- fix / free base ---------------------------------------------------------------------------


def test_fix_base_is_joint_rows_of_free_equations(arm):
    """Seed 004 III-C: the fixed-base equations are the joint rows of eq. (1) with the base at rest."""
    rng = np.random.default_rng(4)
    quat = np.array([0.1, -0.3, 0.2, 0.9])
    fixed = st.fix_base(arm, base_orientation=quat)
    q, v, tau = _random_state(arm, rng)
    q[:3] = [0.3, -1.0, 2.0]
    q[3:7] = quat
    v[:6] = 0.0
    M = mass_matrix(arm, CTX, q)
    C = bias_forces(arm, CTX, q, v)
    a_expected = np.linalg.solve(M[6:, 6:], tau[6:] - C[6:])
    a = forward_dynamics(fixed, CTX, q[7:], v[6:], tau[6:])
    np.testing.assert_allclose(a, a_expected, atol=1e-10)
    back = st.free_base(fixed)
    assert back.is_free and back.nv == arm.nv


def test_free_base_needs_mass(arm):
    fixed = st.fix_base(arm)
    from soadyn.model.robot import Inertia

    fixed = fixed.replace(inertias=[Inertia(0.0, np.zeros(3), np.zeros((3, 3))), *fixed.inertias[1:]])
    with pytest.raises(st.StructureError, match="needs both"):
        st.free_base(fixed)


# ---- close loop + connectivity -----------------------------------------------------------------


def test_close_loop_records_cut_and_connectivity(arm):
    closed = st.close_loop(arm, "tcp", "l4", joint="revolute", axis=[0, 0, 2])
    assert len(closed.loops) == 1 and not arm.loops
    lc = closed.loops[0]
    np.testing.assert_allclose(lc.axis, [0, 0, 1])
    rows = st.connectivity_table(closed)
    by = {r.name: r for r in rows}
    assert [r.parent for r in rows] == [0, 1, 2, 0]
    assert by["l3"].end_effector == 1 and by["l4"].end_effector == 2 and by["l1"].end_effector == 0
    assert by["l4"].cflag == 3 and by["l3"].cflag == -1  # cflag(j) = i on the later body (Table II)
    text = st.format_connectivity(rows)
    assert "cflag" in text and "l4" in text
    assert closed.fingerprint() != arm.fingerprint()
    with pytest.raises(st.StructureError, match="needs 'axis'"):
        st.close_loop(arm, "tcp", "l4", joint="revolute")
    with pytest.raises(st.StructureError, match="not one of"):
        st.close_loop(arm, "tcp", "l4", joint="ball")
    with pytest.raises(st.StructureError, match="no body or frame"):
        st.close_loop(arm, "tcp", "nowhere")


def test_connectivity_connect_counts_locked_groups(arm):
    """Seed 004 Table III: 'connect' counts the links joined by locked joints."""
    rows = st.connectivity_table(arm, locked=["j2", "j3", "j4"])
    by = {r.name: r for r in rows}
    assert by["l1"].connect == 0
    assert by["l2"].connect == 2 and by["l3"].connect == 2  # l2 + l3 welded onto l1
    assert by["l4"].connect == 1


# ---- YAML round trip ---------------------------------------------------------------------------


def _assert_same_model(a, b, tol=1e-12):
    assert a.name == b.name and a.base == b.base
    assert a.body_names == b.body_names and a.parent == b.parent
    assert a.joint_names == b.joint_names and a.frame_names == b.frame_names
    np.testing.assert_allclose(a.gravity, b.gravity, atol=tol)
    for ja, jb in zip(a.joints[1:], b.joints[1:]):
        assert ja.type == jb.type
        np.testing.assert_allclose(ja.axis, jb.axis, atol=tol)
        np.testing.assert_allclose(ja.placement.R, jb.placement.R, atol=tol)
        np.testing.assert_allclose(ja.placement.p, jb.placement.p, atol=tol)
    for ia, ib in zip(a.inertias, b.inertias):
        assert abs(ia.mass - ib.mass) < tol
        np.testing.assert_allclose(ia.com, ib.com, atol=tol)
        np.testing.assert_allclose(ia.inertia, ib.inertia, atol=tol)
    for fa, fb in zip(a.frames, b.frames):
        assert fa.body == fb.body
        np.testing.assert_allclose(fa.placement.R, fb.placement.R, atol=tol)
        np.testing.assert_allclose(fa.placement.p, fb.placement.p, atol=tol)
    assert [(lc.name, lc.frame_a, lc.frame_b, lc.type) for lc in a.loops] == [
        (lc.name, lc.frame_a, lc.frame_b, lc.type) for lc in b.loops
    ]
    for la, lb in zip(a.loops, b.loops):
        assert (la.axis is None) == (lb.axis is None) and (la.world_placement is None) == (
            lb.world_placement is None
        )
        if la.axis is not None:
            np.testing.assert_allclose(la.axis, lb.axis, atol=tol)
        if la.world_placement is not None:
            np.testing.assert_allclose(
                la.world_placement.homogeneous(), lb.world_placement.homogeneous(), atol=tol
            )


@pytest.mark.parametrize("change", ["none", "invert", "lock", "fixed", "free", "invert_fixed", "loop"])
def test_to_yaml_round_trip(arm, tmp_path, change):
    model = {
        "none": lambda r: r,
        "invert": lambda r: st.invert(r, "tcp"),
        "lock": lambda r: st.lock_joints(r, ["j2"], [0.4]),
        "fixed": st.fix_base,
        "free": lambda r: st.free_base(st.fix_base(r, [0.1, -0.3, 0.2, 0.9])),
        "invert_fixed": lambda r: st.fix_base(st.invert(st.lock_joints(r, ["j4"], [-0.7]), "l2")),
        "loop": lambda r: st.close_loop(
            st.invert(r, "l2"), "tcp", "world", "revolute", axis=[0.3, -0.5, 0.8],
            world_placement=Placement.from_xyz_rpy([0.2, 0.1, 0.4], [0.3, 0.2, -1.1])),
    }[change](arm)
    path = tmp_path / "out.yaml"
    to_yaml(model, path)
    back = load_robot(path)
    _assert_same_model(model, back)
    rng = np.random.default_rng(0)
    q, v, tau = _random_state(model, rng)
    np.testing.assert_allclose(
        inverse_dynamics(back, CTX, q, v, tau), inverse_dynamics(model, CTX, q, v, tau), atol=1e-10
    )


def test_to_yaml_round_trip_keeps_fingerprint(arm, tmp_path):
    """Models whose rotations come from rpy angles (file-built, fixed/freed, closed loops of every kind)
    read back bit for bit: same fingerprint.  (Rotations composed by invert/lock_joints are generally not
    exactly rpy-representable; those round-trip to 1e-15, test above.)"""
    from conftest import EXAMPLES

    dual = load_robot(EXAMPLES / "seed004_dual_arm.yaml")
    closed = st.close_loop(dual, "ee2", "grasp2", "weld", name="grasp")
    closed = st.close_loop(closed, "ee1", "world", "revolute", axis=[0, 0, 1],
                           world_placement=Placement.identity())
    closed = st.close_loop(closed, "link2", "world", "spherical",
                           world_placement=Placement.from_xyz_rpy([1.5, -0.25, 0.0], [0.0, 0.0, 0.3]))
    closed = st.close_loop(closed, "link1", "link4", "prismatic", axis=[0.3, 0.5, 0.8])
    closed = st.close_loop(closed, "target", "link5")
    models = {
        "dual_closed": closed,
        "arm_closed": st.close_loop(arm, "tcp", "l4", "revolute", axis=[0.2, -0.4, 0.9], name="hinge"),
        "arm": arm,
        "arm_fixed": st.fix_base(arm, [0.1, -0.3, 0.2, 0.9]),
        "arm_freed": st.free_base(st.fix_base(arm)),
        "dual_fixed_closed": st.fix_base(closed),
    }
    for name, model in models.items():
        path = tmp_path / f"{name}.yaml"
        to_yaml(model, path)
        back = load_robot(path)
        assert back.fingerprint() == model.fingerprint(), name
        assert [(lc.name, lc.frame_a, lc.frame_b, lc.type) for lc in back.loops] == [
            (lc.name, lc.frame_a, lc.frame_b, lc.type) for lc in model.loops
        ]
    back = load_robot(tmp_path / "dual_closed.yaml")
    assert back.loops[1].world_placement is not None  # identity grapple pose is kept, not dropped to None
    assert [r.cflag for r in st.connectivity_table(back)] == [r.cflag for r in st.connectivity_table(closed)]


def test_matrix_to_rpy_and_quaternion():
    rng = np.random.default_rng(9)
    for rpy in [*rng.uniform(-3, 3, (20, 3)), [0.2, np.pi / 2, -0.4], [0.1, -np.pi / 2, 0.3]]:
        R = Placement.from_xyz_rpy([0, 0, 0], rpy).R
        np.testing.assert_allclose(Placement.from_xyz_rpy([0, 0, 0], matrix_to_rpy(R)).R, R, atol=1e-12)
        np.testing.assert_allclose(quaternion_to_matrix(matrix_to_quaternion(R)), R, atol=1e-12)


def test_seed004_example3_reduction_37_to_9():
    """Seed 004 Example 3 / Table III: the 37-DOF four-arm robot with 28 joints locked is a 9-DOF model
    that reproduces the full model's motion when the locked joints are held (numeric algorithms; the
    generated-C timing is in examples/seed004_example3.py)."""
    from conftest import EXAMPLES

    full = load_robot(EXAMPLES / "seed004_four_arm_37dof.yaml")
    assert full.nv == 37 and full.is_free
    active = ["a1_j1", "a1_j2", "a1_j3"]
    locked = [n for n in full.joint_names if n not in active]
    red = st.lock_joints(full, locked, {n: 0.3 for n in locked})
    assert red.nv == 9 and red.joint_names == active and red.n_bodies == 4
    rows = st.connectivity_table(full, locked)
    assert sum(r.connect > 0 for r in rows) == 28 and all(r.connect == 0 for r in rows[:3])
    rng = np.random.default_rng(1)
    q, v, tau = _random_state(full, rng)
    idx = [6 + full.joint_names.index(n) for n in locked]
    q[[i + 1 for i in idx]] = 0.3
    v[idx] = 0.0
    M = mass_matrix(full, CTX, q)
    C = bias_forces(full, CTX, q, v)
    E = np.zeros((len(idx), full.nv))
    E[range(len(idx)), idx] = 1.0
    K = np.block([[M, -E.T], [E, np.zeros((len(idx), len(idx)))]])
    a = np.linalg.solve(K, np.concatenate([tau - C, np.zeros(len(idx))]))[: full.nv]
    q2, v2, a2 = st.map_state(full, red, q, v, a)
    keep = [i for i in range(full.nv) if i not in idx]
    np.testing.assert_allclose(forward_dynamics(red, CTX, q2, v2, tau[keep]), a2, atol=1e-9)
