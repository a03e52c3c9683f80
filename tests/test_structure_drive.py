"""Structure changes of robots with a drive train (armature, damping, friction) and with mimic couplings
(issue 25): every operation carries the joints' drive-train terms and couplings (docs/structure-changes.md,
"Drive train and couplings").  Each result is checked against the dense reference path
(:mod:`soadyn.reference.dense`, which adds the drive terms and projects couplings with its own G) of the
original robot: the same physical system seen in other coordinates, or the original with constraints.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from soadyn import load_robot
from soadyn import structure as st
from soadyn.model import to_yaml
from soadyn.model.robot import Joint, Mimic, Placement
from soadyn.reference import dense, frame_motion

DATA = Path(__file__).parent / "data"
GRAVITY = [0.3, -0.2, -9.81]
TOL = 1e-9


def _drive() -> object:
    """4-DOF free tree, armature/damping/friction on j1-j3 (tests/data/drive_tree.yaml)."""
    return load_robot(DATA / "drive_tree.yaml").replace(gravity=GRAVITY)


def _coupled_drive() -> object:
    """tests/data/mimic_tree.urdf (j2 = -0.7 j1 + 0.2, g2 = g1) with drive terms on every joint, coupled
    ones included (a coupled joint's armature enters M as a^2 * armature on its source's diagonal)."""
    r = load_robot(DATA / "mimic_tree.urdf", base="free").replace(gravity=GRAVITY)
    terms = {"j1": (0.3, 0.2, 0.1), "j2": (0.2, 0.5, 0.3), "j3": (0.05, 0.1, 0.0), "g1": (0.4, 1.0, 0.2),
             "g2": (0.1, 0.7, 0.5)}
    return r.replace(joints=[None if j is None else dataclasses.replace(
        j, armature=terms[j.name][0], damping=terms[j.name][1], friction=terms[j.name][2])
        for j in r.joints])


ROBOTS = {"drive": _drive, "coupled_drive": _coupled_drive}
#: bodies / frames to re-root at, per robot (path bodies with drive terms and coupled joints on the path)
NEW_BASES = {"drive": ["l3", "tcp", "l4"], "coupled_drive": ["l3", "f2", "l2"]}
#: joints to lock (independent ones; locking j1 of the coupled robot locks j2 too)
LOCKS = {"drive": {"j2": 0.7, "j4": -0.3}, "coupled_drive": {"j1": 0.4, "g1": 0.05}}


def _state(robot, rng):
    return (robot.random_configuration(rng), rng.normal(size=robot.nv), rng.normal(size=robot.nv))


def _joint_terms(robot) -> dict[str, tuple]:
    return {j.name: (j.armature, j.damping, j.friction, j.friction_velocity, j.mimic)
            for j in robot.joints[1:] if j.type != "fixed"}


@pytest.fixture(params=sorted(ROBOTS))
def robot(request):
    return request.param, ROBOTS[request.param]()


# ---- invert / rebase ------------------------------------------------------------------------------------
def test_invert_keeps_every_joints_drive_and_coupling(robot):
    name, r = robot
    for nb in NEW_BASES[name]:
        inv = st.invert(r, nb)
        assert _joint_terms(inv) == _joint_terms(r), nb
        assert inv.has_drive and inv.is_coupled == r.is_coupled


def test_rebase_is_the_same_system(robot):
    """Free base: the rebased robot is the same system in other coordinates (seed 000 eq. A.3-A.6), so
    ``M_new = T^T M T`` and ``tau_new = T^T tau`` with ``T = T_{n,k}``; armature, damping, friction and the
    couplings must come through for this to hold (the reference adds them on its own)."""
    name, r = robot
    rng = np.random.default_rng(1)
    for nb in NEW_BASES[name]:
        new = st.rebase(r, nb)
        for _ in range(2):
            q, v, a = _state(r, rng)
            maps = st.rebase_transform(r, new, q)
            q2, v2, a2 = st.map_state(r, new, q, v, a)
            T = maps.T_old_from_new
            np.testing.assert_allclose(T @ v2, v, atol=1e-12)
            M_old, M_new = dense.mass_matrix(r, q), dense.mass_matrix(new, q2)
            np.testing.assert_allclose(M_new, T.T @ M_old @ T, atol=TOL)
            np.testing.assert_allclose(dense.inverse_dynamics(new, q2, v2, a2),
                                       T.T @ dense.inverse_dynamics(r, q, v, a), atol=TOL)


def test_invert_fixed_base_weld_keeps_drive(robot):
    """Fixed base: inversion welds another body.  The grappled system is the free original with the new
    base held still (v_b = -J_b^-1 J_m v_m, so ``T = [-J_b^-1 J_m; I]``): ``M_inv = T^T M_free T`` (armature
    on the joint diagonal) and the gravity forces ``T^T g_free``; the damping and friction of each joint are
    the original joint's, at the same joint rate."""
    name, r = robot
    nb = NEW_BASES[name][0]
    rng = np.random.default_rng(2)
    fixed = st.fix_base(r)
    qj = fixed.random_configuration(rng)
    inv = st.invert(fixed, nb, at=qj)
    assert _joint_terms(inv) == _joint_terms(r)
    perm = [fixed.joint_names.index(n) for n in inv.joint_names]
    qf = r.neutral()
    qf[7:] = qj
    J = dense.jacobian(r, qf, nb)
    T = np.vstack([-np.linalg.solve(J[:, :6], J[:, 6:]), np.eye(r.n_joints)])
    np.testing.assert_allclose(dense.mass_matrix(inv, qj[perm]),
                               (T.T @ dense.mass_matrix(r, qf) @ T)[np.ix_(perm, perm)], atol=TOL)
    g_free = dense.bias_forces(r.rigid(), qf, np.zeros(r.nv))
    np.testing.assert_allclose(dense.bias_forces(inv, qj[perm], np.zeros(inv.nv)), (T.T @ g_free)[perm],
                               atol=TOL)
    vm = rng.normal(size=r.n_joints)
    if r.is_coupled:  # generalised passive forces of the coupled joints: G^T of the full ones (reference)
        G, _ = r.expansion()
        passive = (G.T @ dense.passive_forces(r.uncoupled(), G @ np.r_[np.zeros(6), vm]))[6:]
    else:
        passive = dense.passive_forces(r, np.r_[np.zeros(6), vm])[6:]
    got = dense.bias_forces(inv, qj[perm], vm[perm]) - dense.bias_forces(inv.rigid(), qj[perm], vm[perm])
    np.testing.assert_allclose(got, passive[perm], atol=TOL)
    assert np.max(np.abs(passive)) > 0.1  # the drive terms are really there


# ---- lock joints ---------------------------------------------------------------------------------------
def test_lock_joints_is_the_constrained_original(robot):
    """Locked model = original with the locked coordinates held by constraint forces (KKT solve on the
    reference's M and C, drive terms included); every body and frame moves the same (this checks that the
    joints coupled to a locked one are locked at ``multiplier * at + offset``)."""
    name, r = robot
    at = LOCKS[name]
    red = st.lock_joints(r, list(at), at)
    locked_too = {j.name for j in r.joints[1:] if j.mimic is not None and j.mimic.joint in at}
    for j in red.joints[1:]:
        assert j.name not in locked_too and j.mimic is None or j.mimic.joint not in at
    assert red.joint_names == [n for n in r.joint_names if n not in at]
    assert {k: v for k, v in _joint_terms(red).items()} == {
        k: v for k, v in _joint_terms(r).items() if k not in at and k not in locked_too}
    lk = [6 + r.joint_names.index(n) for n in at]
    keep = [i for i in range(r.nv) if i not in lk]
    rng = np.random.default_rng(3)
    for _ in range(3):
        q, v, tau = _state(r, rng)
        for n, x in at.items():
            q[7 + r.joint_names.index(n)] = x
        v[lk] = 0.0
        M, C = dense.mass_matrix(r, q), dense.bias_forces(r, q, v)
        E = np.zeros((len(lk), r.nv))
        E[range(len(lk)), lk] = 1.0
        K = np.block([[M, -E.T], [E, np.zeros((len(lk), len(lk)))]])
        a = np.linalg.solve(K, np.concatenate([tau - C, np.zeros(len(lk))]))[: r.nv]
        q2, v2, a2 = st.map_state(r, red, q, v, a)
        ar = dense.forward_dynamics(red, q2, v2, tau[keep])
        np.testing.assert_allclose(ar, a2, atol=TOL)
        f1, f2 = frame_motion(r, q, v, a), frame_motion(red, q2, v2, ar)
        for fr, m in f1.items():
            for attr in ("R", "p", "w", "v", "wdot", "vdot"):
                np.testing.assert_allclose(getattr(f2[fr], attr), getattr(m, attr), atol=TOL, err_msg=fr)


def test_lock_a_coupled_joint_is_refused():
    r = _coupled_drive()
    with pytest.raises(st.StructureError, match=r"^lock_joints: joint 'j2' of robot 'mimic_tree' is coupled "
                       r"\(mimics 'j1'.*lock 'j1' instead"):
        st.lock_joints(r, ["j2"], [0.1])


# ---- fix / free base -------------------------------------------------------------------------------------
def test_fix_base_is_joint_rows_with_drive(robot):
    """Seed 004 III-C with a drive train and couplings: the fixed-base ID is the joint rows of the free ID
    with the base at rest (identity orientation), armature, damping and friction included."""
    _, r = robot
    fixed = st.fix_base(r)
    assert _joint_terms(fixed) == _joint_terms(r)
    rng = np.random.default_rng(4)
    q, v, a = _state(r, rng)
    q[3:7] = [0, 0, 0, 1]
    v[:6] = a[:6] = 0.0
    np.testing.assert_allclose(dense.inverse_dynamics(fixed, q[7:], v[6:], a[6:]),
                               dense.inverse_dynamics(r, q, v, a)[6:], atol=TOL)
    back = st.free_base(fixed)
    assert _joint_terms(back) == _joint_terms(r) and back.nv == r.nv


# ---- add a body, close a loop ------------------------------------------------------------------------------
def test_add_body_keeps_drive_and_resolves_coupling():
    r = _coupled_drive()
    j = Joint("g3", "prismatic", np.array([0.0, 0.0, 1.0]), Placement.from_xyz_rpy([0.1, 0, 0.03], [0, 0, 0]),
              armature=0.2, damping=0.4, friction=0.1, friction_velocity=0.05, mimic=Mimic("g2", 2.0, 0.01))
    new = st.add_body(r, "f3", "l3", j, r.inertias[-1])
    g3 = next(x for x in new.joints[1:] if x.name == "g3")
    # g2 = 1.0 g1 + 0 -> g3 = 2 g1 + 0.01; drive terms kept
    assert (g3.mimic, g3.armature, g3.damping, g3.friction, g3.friction_velocity) == (
        Mimic("g1", 2.0, 0.01), 0.2, 0.4, 0.1, 0.05)
    assert new.nv == r.nv
    rng = np.random.default_rng(5)
    q, v, a = _state(r, rng)
    # the new finger moves with g1: its frame is l3's frame * placement * translation (2 g1 + 0.01) z
    fm, f3 = frame_motion(r, q, v, a, "l3"), frame_motion(new, q, v, a, "f3")
    s = 2.0 * q[7 + r.joint_names.index("g1")] + 0.01
    np.testing.assert_allclose(f3.p, fm.p + fm.R @ np.array([0.1, 0.0, 0.03 + s]), atol=1e-12)
    # armature of g3 adds 2^2 * 0.2 to g1's diagonal; damping 2 * 0.4 * (2 v_g1) to its force
    i = 6 + r.joint_names.index("g1")
    M0 = dense.mass_matrix(r, q)
    M1 = dense.mass_matrix(new, q)
    M1r = dense.mass_matrix(new.rigid(), q)
    M0r = dense.mass_matrix(r.rigid(), q)
    assert abs((M1 - M1r)[i, i] - (M0 - M0r)[i, i] - 4 * 0.2) < 1e-12
    with pytest.raises(st.StructureError, match="add_body: joint g3: mimics joint 'nope'"):
        st.add_body(r, "f4", "l3", dataclasses.replace(j, mimic=Mimic("nope")), r.inertias[-1])
    with pytest.raises(st.StructureError, match="joint name 'j2' already used"):
        st.add_body(r, "f4", "l3", dataclasses.replace(j, name="j2"), r.inertias[-1])


def test_close_loop_on_a_coupled_robot_is_refused():
    with pytest.raises(st.StructureError, match=r"^close_loop: robot 'mimic_tree' has mimic couplings "
                       r"\(joint 'j2' mimics 'j1'\).*mimic='independent'"):
        st.close_loop(_coupled_drive(), "f1", "f2")
    d = st.close_loop(_drive(), "tcp", "world")
    assert _joint_terms(d) == _joint_terms(_drive())


# ---- the results are robot files ---------------------------------------------------------------------------
@pytest.mark.parametrize("op", ["invert", "lock", "invert_fixed"])
def test_results_round_trip_through_yaml(robot, op, tmp_path):
    name, r = robot
    model = {"invert": lambda: st.invert(r, NEW_BASES[name][1]),
             "lock": lambda: st.lock_joints(r, list(LOCKS[name])[:1], [0.3]),
             "invert_fixed": lambda: st.invert(st.fix_base(r), NEW_BASES[name][0])}[op]()
    to_yaml(model, tmp_path / "out.yaml")
    back = load_robot(tmp_path / "out.yaml")
    assert _joint_terms(back) == _joint_terms(model)
    q, v, a = _state(model, np.random.default_rng(6))
    np.testing.assert_allclose(dense.inverse_dynamics(back, q, v, a), dense.inverse_dynamics(model, q, v, a),
                               atol=1e-10)


def test_connectivity_counts_coupled_joints_as_locked():
    """g2 mimics g1: locking g1 locks both fingers (two groups of one body each, as lock_joints does);
    locking j1 locks l1 and l2 (j2 mimics j1) into one group of two."""
    r = _coupled_drive()
    rows = {row.name: row.connect for row in st.connectivity_table(r, ["g1", "j1"])}
    assert rows == {"l1": 2, "l2": 2, "l3": 0, "f1": 1, "f2": 1}
    assert st.lock_joints(r, ["g1", "j1"]).n_bodies == r.n_bodies - 4
    with pytest.raises(st.StructureError, match=r"^connectivity_table: joint 'g2' .* give 'g1' instead"):
        st.connectivity_table(r, ["g2"])
