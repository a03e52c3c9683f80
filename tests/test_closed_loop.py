"""Closed-loop dynamics in independent coordinates (seed 003 section 2.4.2 + Appendix B, seed 004 eq. 2-5)
and the seed 004 examples (Example 1: grappling; dual-arm capture of seed 003 section 5.4)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import EXAMPLES, TEST_ARM, module_cache_dir

from soadyn import load_robot
from soadyn.model.configuration import retract
from soadyn.model.robot import Inertia, Joint, Placement
from soadyn.model.rotations import matrix_to_quaternion
from soadyn.reference import closed_loop as cl
from soadyn.reference import dense as ref
from soadyn.reference.kinematics import frame_motion
from soadyn.runtime import closed_loop as run
from soadyn.runtime.trajectory import Trajectory
from soadyn.structure import operations as st
from soadyn.symbolic.algorithms import closed_loop as gcl
from soadyn.symbolic.scalar import Numeric

CTX = Numeric()
DUAL = EXAMPLES / "seed004_dual_arm.yaml"
EX1 = EXAMPLES / "seed004_example1.yaml"
Q_CAPTURE = np.array([80, 10, 10, -80, -10, -10]) * np.pi / 180
SEED_INDEPENDENT = ["base_wx", "base_wy", "base_wz", "base_vx", "base_vy", "base_vz", "j1", "j3", "j5"]


# ---- Gauss-Jordan partitioning: seed 003 Appendix B --------------------------------------------


def test_gauss_jordan_appendix_b():
    """Eq. B.1 -> B.2: pivots in columns 1, 2, 4; the free column 5 becomes [-0.51, 0.86, 0.84]; R of B.8."""
    A = np.array(
        [[0.75, 0.63, 0.75, 0.54, 0.62], [0.76, 0.06, 0.76, 0.48, 0.07], [0.80, 0.63, 0.80, 0.44, 0.51]]
    )
    R, piv = cl.gauss_jordan(A)
    assert piv == [0, 1, 3]
    np.testing.assert_allclose(R[:, [0, 1, 3]], np.eye(3), atol=1e-12)
    np.testing.assert_allclose(R[:, 2], [1, 0, 0], atol=1e-12)  # column 3 = column 1
    np.testing.assert_allclose(R[:, 4], [-0.51, 0.86, 0.84], atol=0.01)  # printed with two decimals
    part = cl.Partition((0, 1, 3), (2, 4))
    Pi = cl.projection_matrix(A, part)
    np.testing.assert_allclose(Pi, [[-1, 0.51], [0, -0.86], [1, 0], [0, -0.84], [0, 1]], atol=0.01)
    np.testing.assert_allclose(A @ Pi, 0, atol=1e-12)


# ---- constraint terms --------------------------------------------------------------------------


def _grappled_arm(kind, axis=None):
    r = load_robot(TEST_ARM).replace(gravity=[0.0, 0.0, -9.81])
    rng = np.random.default_rng(0)
    q = r.random_configuration(rng)
    fm = frame_motion(r, q, frame="tcp")
    rc = st.close_loop(r, "tcp", "world", kind, axis=axis, world_placement=Placement(fm.R, fm.p))
    return rc, q, rng


CUTS = [("weld", None), ("revolute", [0, 1, 0]), ("prismatic", [1, 0, 0]), ("spherical", None)]


@pytest.mark.parametrize("kind,axis", CUTS)
def test_constraint_derivatives_by_finite_differences(kind, axis):
    """dg/dt = J_c v (position/velocity consistency) and d(J_c v)/dt = gamma0 along a motion with a = 0."""
    rc, q, rng = _grappled_arm(kind, axis)
    assert np.max(np.abs(cl.constraint_residual(rc, q))) < 1e-14
    q = retract(q, 0.05 * rng.normal(size=rc.nv), rc.is_free)  # off the manifold too
    v = rng.normal(size=rc.nv)
    h = 1e-6
    qp, qm = retract(q, h * v, True), retract(q, -h * v, True)
    J = cl.constraint_jacobian(rc, q)
    gdot = (cl.constraint_residual(rc, qp) - cl.constraint_residual(rc, qm)) / (2 * h)
    # the angular rows are exact only on the manifold (vee(R - R^T)/2 ~ rotation vector): compare the
    # linear rows exactly and all rows on the manifold below
    g_on = cl.constraint_residual(rc, cl.project_configuration(rc, q))
    assert np.max(np.abs(g_on)) < 1e-11
    S = cl.constraint_rows(rc.loops[0])
    lin = S[:, 3:].any(axis=1)
    np.testing.assert_allclose(gdot[lin], (J @ v)[lin], atol=1e-7)
    Jdot_v = (cl.constraint_jacobian(rc, qp) @ v - cl.constraint_jacobian(rc, qm) @ v) / (2 * h)
    np.testing.assert_allclose(cl.constraint_bias(rc, q, v), Jdot_v, atol=1e-6)
    qc = cl.project_configuration(rc, q)
    qp, qm = retract(qc, h * v, True), retract(qc, -h * v, True)
    gdot = (cl.constraint_residual(rc, qp) - cl.constraint_residual(rc, qm)) / (2 * h)
    np.testing.assert_allclose(gdot, cl.constraint_jacobian(rc, qc) @ v, atol=1e-7)


@pytest.mark.parametrize("kind,axis", CUTS)
def test_projected_dynamics_equal_lagrange_multipliers(kind, axis):
    """Seed 004 eq. 5 (Pi^T H Pi a_I = ...) gives the same accelerations as the KKT system
    H a + c = tau + J^T lambda, J a = -gamma0 (an independent formulation), with gravity."""
    rc, q, rng = _grappled_arm(kind, axis)
    for _ in range(2):
        v = cl.project_velocity(rc, q, rng.normal(size=rc.nv))
        tau = rng.normal(size=rc.nv) * 5
        a = cl.forward_dynamics(rc, q, v, tau)
        H, c = ref.mass_matrix(rc, q), ref.bias_forces(rc, q, v)
        J = cl.constraint_jacobian(rc, q)
        m = J.shape[0]
        K = np.block([[H, -J.T], [J, np.zeros((m, m))]])
        sol = np.linalg.solve(K, np.concatenate([tau - c, -cl.constraint_bias(rc, q, v)]))
        np.testing.assert_allclose(a, sol[: rc.nv], atol=1e-10)
        np.testing.assert_allclose(cl.constraint_forces(rc, q, v, a, tau), sol[rc.nv :], atol=1e-8)
        np.testing.assert_allclose(J @ a, -cl.constraint_bias(rc, q, v), atol=1e-10)


@pytest.mark.parametrize("kind,axis", [("revolute", [0, 1, 0]), ("weld", None)])
def test_forward_mode_derivatives_of_the_closed_loop_functions(kind, axis):
    """``closed_loop_*_derivatives`` (forward mode over the staged program with the generation-time
    partition; the float run of what the C computes) against central differences of the reference path
    with the same partition (a, v_full, the constraint rows), and the status rows against central
    differences of the algorithm's own float run (no reference computes them); off the manifold too."""
    from soadyn.reference import derivatives as fd
    from soadyn.symbolic import algorithms

    rc, q, rng = _grappled_arm(kind, axis)
    dep, rows = gcl.generation_partition(rc)
    part = cl.Partition(dep, tuple(i for i in range(rc.nv) if i not in dep), rows=rows)
    kw = {"dependent": dep, "rows": rows}
    v, tau = rng.normal(size=rc.nv), rng.normal(size=rc.nv)
    q = retract(q, 0.02 * rng.normal(size=rc.nv), rc.is_free)

    def tangent(of, *args, **k):
        names = ("q", "v", "tau")[:len(args)]
        return algorithms.tangent_derivatives(rc, CTX, *args, of=of, inputs=names, **k)

    def close(got, ref):
        assert np.abs(got - ref).max() <= 1e-6 * max(1.0, np.abs(ref).max()), np.abs(got - ref).max()

    da_dq, da_dv, da_dtau, ds_dq, ds_dv, ds_dtau = tangent("closed_loop_forward_dynamics", q, v, tau, **kw)
    def a_ref(q, v, tau):
        return cl.forward_dynamics(rc, q, v, tau, part)
    close(da_dq, fd.tangent_jacobian(rc, lambda x: a_ref(x, v, tau), q))
    close(da_dv, fd.vector_jacobian(lambda x: a_ref(q, x, tau), v))
    close(da_dtau, fd.vector_jacobian(lambda x: a_ref(q, v, x), tau))
    def status(x):
        return gcl.closed_loop_forward_dynamics(rc, CTX, x, v, tau, **kw)[1]
    close(ds_dq, fd.tangent_jacobian(rc, status, q))
    assert np.abs(ds_dq).max() > 1e-3 and not ds_dv.any() and not ds_dtau.any()   # status: of q only

    dvf_dq, dvf_dv, _, _ = tangent("closed_loop_dependent_velocities", q, v, **kw)
    def vf_ref(q, v):
        return cl.dependent_velocities(rc, q, v[list(part.independent)], part)
    close(dvf_dq, fd.tangent_jacobian(rc, lambda x: vf_ref(x, v), q))
    close(dvf_dv, fd.vector_jacobian(lambda x: vf_ref(q, x), v))

    got = tangent("closed_loop_constraints", q, v)
    ref = fd.tangent_derivatives(rc, q, v, of="closed_loop_constraints", inputs=("q", "v"))
    for g, r in zip(got, ref, strict=True):
        close(g, r)


def test_closed_loop_derivatives_in_the_module_and_casadi(request, tmp_path_factory):
    """The generated ``closed_loop_forward_dynamics_derivatives`` equals the float run of its program, and
    CasADi's Jacobian of ``closed_loop_forward_dynamics`` (a and status, from it) matches central
    differences of the module's own function off the manifold."""
    ca = pytest.importorskip("casadi")
    from binding_modules import central

    import soadyn.casadi as sc
    from soadyn.codegen.pipeline import compile_robot
    from soadyn.symbolic import algorithms

    rc, q, rng = _grappled_arm("revolute", [0, 1, 0])
    rc = rc.replace(name="grappled_loop")
    funcs = ["closed_loop_forward_dynamics", "closed_loop_forward_dynamics_derivatives"]
    m = compile_robot(rc, module_cache_dir(request, tmp_path_factory, "soadyn_loop_modules"), functions=funcs,
                      progress=False)
    dep, rows = gcl.generation_partition(rc)
    q = retract(q, 0.02 * rng.normal(size=rc.nv), rc.is_free)
    v, tau = rng.normal(size=rc.nv), rng.normal(size=rc.nv)
    got = m.closed_loop_forward_dynamics_derivatives(q, v, tau)
    flt = algorithms.tangent_derivatives(rc, CTX, q, v, tau, of="closed_loop_forward_dynamics",
                                         inputs=("q", "v", "tau"), dependent=dep, rows=rows)
    for g, f in zip(got, flt, strict=True):
        np.testing.assert_allclose(g, f, rtol=1e-10, atol=1e-10)
    fn = sc.function(m, "closed_loop_forward_dynamics", jacobian=True)
    a, st = fn(q, v, tau)
    blocks = fn.jacobian()(q, v, tau, a, st)
    J = np.vstack([np.hstack([np.asarray(ca.DM(b).full()) for b in blocks[k * 3:(k + 1) * 3]])
                   for k in (0, 1)])

    def flat(z):
        a, st = m.closed_loop_forward_dynamics(*np.split(z, np.cumsum([m.nq, m.nv])))
        return np.concatenate([a, st])

    Jfd = central(flat, np.concatenate([q, v, tau]))
    assert np.abs(J - Jfd).max() <= 1e-6 * np.abs(Jfd).max()


@pytest.mark.parametrize("kind,axis", CUTS)
def test_generic_algorithm_matches_reference(kind, axis):
    """The codegen algorithm on floats = the reference path (O(N) tree terms vs dense operators)."""
    rc, q, rng = _grappled_arm(kind, axis)
    dep, rows = gcl.generation_partition(rc)
    part = cl.Partition(dep, tuple(i for i in range(rc.nv) if i not in dep), rows=rows)
    v, tau = rng.normal(size=rc.nv), rng.normal(size=rc.nv)
    q2 = retract(q, 0.02 * rng.normal(size=rc.nv), rc.is_free)
    for qq in (q, q2):
        a, status = gcl.closed_loop_forward_dynamics(
            rc, CTX, qq, v, tau, dependent=dep, rows=rows, baumgarte=(3.0, 4.0)
        )
        np.testing.assert_allclose(
            a, cl.forward_dynamics(rc, qq, v, tau, part, baumgarte=(3.0, 4.0)), atol=1e-10
        )
        assert np.all(status > 0) and np.all(status <= 1 + 1e-12)
        g, Jv = gcl.closed_loop_constraints(rc, CTX, qq, v)
        np.testing.assert_allclose(g, cl.constraint_residual(rc, qq), atol=1e-12)
        np.testing.assert_allclose(Jv, cl.constraint_jacobian(rc, qq) @ v, atol=1e-12)
        vf, _ = gcl.closed_loop_dependent_velocities(rc, CTX, qq, v, dependent=dep, rows=rows)
        np.testing.assert_allclose(
            vf, cl.dependent_velocities(rc, qq, v[list(part.independent)], part), atol=1e-10
        )


@pytest.mark.parametrize("kind,axis", CUTS)
def test_core_rows_and_partition_agree_with_the_reference(kind, axis):
    """The generic algorithm has its own constrained directions and its own pivoting (orthogonal residuals);
    they must give the reference's rows (same convention) and Gauss-Jordan's dependent set."""
    rc, q, rng = _grappled_arm(kind, axis)
    angular, linear = gcl.constrained_directions(rc.loops[0])
    S = cl.constraint_rows(rc.loops[0])
    assert S.shape[0] == len(angular) + len(linear) == gcl.n_constraint_rows(rc)
    np.testing.assert_allclose(S[: len(angular), :3], angular, atol=1e-15)
    np.testing.assert_allclose(S[len(angular) :, 3:], linear, atol=1e-15)
    assert not S[: len(angular), 3:].any() and not S[len(angular) :, :3].any()
    for qq in (q, rc.random_configuration(rng)):
        part = cl.partition(rc, qq)
        assert gcl.generation_partition(rc, qq) == (part.dependent, part.rows)


def test_core_partition_drops_redundant_rows_like_the_reference(captured):
    """Planar dual arm: 3 of the 6 weld rows vanish identically; both routes keep w_z, v_x, v_y and pick
    the same dependent joints at the capture configuration and at the generation configuration."""
    r, rc, q = captured
    rng = np.random.default_rng(7)
    q_gen = rc.random_configuration(np.random.default_rng(2024))  # generation_partition's default
    for qq, q_ref in ((q, q), (None, q_gen)):
        ref_part = cl.partition(rc, q_ref)
        assert gcl.generation_partition(rc, qq) == (ref_part.dependent, ref_part.rows)
    assert gcl.generation_partition(rc, q)[1] == (2, 3, 4)
    qs = q.copy()
    qs[7:] += 0.3 * rng.normal(size=6)
    assert gcl.generation_partition(rc, qs) == (cl.partition(rc, qs).dependent, cl.partition(rc, qs).rows)


def test_partition_errors():
    rc, q, _ = _grappled_arm("weld")
    with pytest.raises(cl.ClosedLoopError, match="unknown coordinates"):
        cl.partition(rc, q, independent=["j9"])
    with pytest.raises(cl.ClosedLoopError, match="give 4 independent"):
        cl.partition(rc, q, independent=["j4"])
    # base translation cannot be dependent on its own together with j4 ... choose a singular J_D:
    # with the 3 base translations independent + j4 the rest is fine; with j4 dependent and base_vx
    # independent the base rotation columns are all that remain: check that the error names the fix
    J = cl.constraint_jacobian(rc, q)
    bad = cl.Partition((0, 1, 2, 3, 4, 9), (5, 6, 7, 8))
    JD = J[:, list(bad.dependent)]
    if np.linalg.cond(JD) < 1e8:  # pragma: no cover - depends on the geometry
        pytest.skip("partition not singular for this geometry")
    with pytest.raises(cl.ClosedLoopError, match="ill-conditioned"):
        cl.check_partition(J, bad)
    with pytest.raises(cl.ClosedLoopError, match="no loop closures"):
        cl.constraint_jacobian(load_robot(TEST_ARM), q)


# ---- seed 004 Example 1: grappling a fixed point -----------------------------------------------


def test_example1_grappled_free_flyer_is_fixed_base_2dof():
    """Seed 004 Example 1: add a one-DOF fixture link, invert, fix the base -> a 2-DOF fixed-base model
    that moves exactly like the free flyer whose end-effector is held by a revolute cut joint."""
    r = load_robot(EX1)
    fixture = st.add_body(
        r, "fixture", "ee", Joint("jf", "revolute", np.array([0.0, 0.0, 1.0]), Placement.identity())
    )
    grappled = st.fix_base(st.invert(fixture, "fixture"))
    assert grappled.nv == 2 and not grappled.is_free and grappled.joint_names == ["jf", "j1"]
    rows = st.connectivity_table(grappled)
    assert [(x.parent, x.end_effector) for x in rows] == [(0, 0), (1, 1)]

    # the same system as a closed loop: free flyer + revolute cut between ee and the world origin
    rng = np.random.default_rng(1)
    q = r.neutral()
    q[7] = 0.7
    ee = frame_motion(r, q, frame="ee")  # base at the origin; move it so that ee sits on the world frame
    q[3:7] = matrix_to_quaternion(ee.R.T)
    q[:3] = -ee.R.T @ ee.p
    fm = frame_motion(r, q, frame="ee")
    np.testing.assert_allclose(fm.p, 0, atol=1e-12)
    np.testing.assert_allclose(fm.R, np.eye(3), atol=1e-12)
    closed = st.close_loop(r, "ee", "world", "revolute", axis=[0, 0, 1])
    part = cl.partition(closed, q)
    assert part.n_independent == 2
    for _ in range(3):
        v = cl.project_velocity(closed, q, rng.normal(size=r.nv))
        tau = np.zeros(r.nv)
        tau[6] = rng.normal() * 3
        a = cl.forward_dynamics(closed, q, v, tau, part)
        # state of the grappled model: fixture angle 0 (ee on the grapple frame), its rate = -w_ee.z
        w_ee = frame_motion(r, q, v, frame="ee").w
        qg = np.array([0.0, q[7]])
        vg = np.array([-w_ee[2], v[6]])
        ag = ref.forward_dynamics(grappled, qg, vg, np.array([0.0, tau[6]]))
        f1 = frame_motion(r, q, v, a)
        f2 = frame_motion(grappled, qg, vg, ag)
        for name in ("base", "link1", "ee"):
            for attr in ("R", "p", "w", "v", "wdot", "vdot"):
                np.testing.assert_allclose(
                    getattr(f2[name], attr), getattr(f1[name], attr), atol=1e-10, err_msg=f"{name}.{attr}"
                )


# ---- dual-arm capture (seed 003 section 5.4, Tables F.4-F.5) -----------------------------------


@pytest.fixture(scope="module")
def captured():
    r = load_robot(DUAL)
    rc = st.close_loop(r, "ee2", "grasp2", "weld")
    q = r.neutral()
    q[7:] = Q_CAPTURE
    return r, rc, q


def test_dual_arm_loop_closed_at_capture(captured):
    r, rc, q = captured
    assert np.max(np.abs(cl.constraint_residual(rc, q))) < 1e-14
    part = cl.partition(rc, q, independent=SEED_INDEPENDENT)  # seed 003 section 5.4: joints 1, 3, 5
    assert part.rows == (2, 3, 4)  # planar: only w_z, v_x, v_y of the weld are independent
    assert [part.names[i] for i in part.dependent] == ["j2", "j4", "j6"]
    rows = st.connectivity_table(rc)
    by = {x.name: x for x in rows}
    assert by["link6"].cflag == 3  # hand 2 (link 6) closes a loop with link 3 (holding the target)


def test_dual_arm_closed_loop_simulation_invariants(captured):
    """Free-floating closed chain, joint torques only: momentum is conserved, energy changes by the work of
    the torques only, and the constraint violation stays below the documented bounds (see
    docs/structure-changes.md:
    Baumgarte alpha = beta = 10 1/s, RK4, dt = 10 ms: |g| < 1e-6, |J v| < 1e-5 over 1 s of fast motion)."""
    r, rc, q = captured
    part = cl.partition(rc, q, independent=SEED_INDEPENDENT)
    vI = np.zeros(9)
    vI[2] = 0.05
    vI[6:] = [0.4, -0.3, 0.5]
    v = cl.dependent_velocities(rc, q, vI, part)

    def tau(t, q_, v_):
        out = np.zeros(r.nv)
        out[6:] = 50 * np.sin(np.array([1, 2, 3, 1.5, 2.5, 0.7]) * t)
        return out

    tr = run.simulate(
        rc, q, v, tau, dt=0.01, steps=100, stabilisation="baumgarte", baumgarte=(10.0, 10.0), part=part
    )
    assert np.max(np.abs(tr.q[-1, 7:] - q[7:])) > 0.1  # it moved
    assert tr.position_error.max() < 1e-6
    assert tr.velocity_error.max() < 1e-5
    h0 = ref.momentum(r, tr.q[0], tr.v[0])
    h1 = ref.momentum(r, tr.q[-1], tr.v[-1])
    assert np.max(np.abs(h1 - h0)) < 1e-4 * max(1.0, np.max(np.abs(h0)))
    # without torques the kinetic energy is conserved (cut-joint forces do no work)
    tr0 = run.simulate(rc, q, v, np.zeros(r.nv), dt=0.01, steps=50, stabilisation="projection", part=part)
    E = [ref.kinetic_energy(r, qq, vv) for qq, vv in zip(tr0.q, tr0.v)]
    assert abs(E[-1] - E[0]) < 1e-6 * E[0]
    assert tr0.position_error.max() < 1e-10


def test_closed_loop_trajectory_round_trip(captured, tmp_path):
    """The closed-loop simulator returns the one Trajectory type; its constraint record and partitions
    survive save/load."""
    r, rc, q = captured
    part = cl.partition(rc, q, independent=SEED_INDEPENDENT)
    vI = np.zeros(9)
    vI[6:] = [0.4, -0.3, 0.5]
    tr = run.simulate(rc, q, cl.dependent_velocities(rc, q, vI, part), np.zeros(r.nv), dt=0.01, steps=3,
                      part=part)
    assert isinstance(tr, Trajectory) and tr.momentum is None and len(tr.t) == 4
    back = Trajectory.load(tr.save(tmp_path / "loop"))
    for name in ("t", "q", "v", "position_error", "velocity_error"):
        np.testing.assert_array_equal(getattr(back, name), getattr(tr, name))
    assert back.partitions == tr.partitions == [part]
    assert back.joint_names == rc.joint_names and back.dt == 0.01
    with pytest.raises(ValueError, match="no 'momentum' samples"):
        back.momentum_drift()


@pytest.mark.parametrize("kind,axis", CUTS)
def test_runtime_float_path_matches_reference(kind, axis):
    """The runtime's float closed loop (the generic core on floats, no soadyn.reference) agrees with the dense
    reference path: constraint rows, residual, partition, accelerations, projections."""
    rc, q, rng = _grappled_arm(kind, axis)
    q = retract(q, 0.03 * rng.normal(size=rc.nv), rc.is_free)          # off the manifold
    np.testing.assert_allclose(run.constraint_jacobian(rc, q), cl.constraint_jacobian(rc, q), atol=1e-12)
    np.testing.assert_allclose(run.constraint_residual(rc, q), cl.constraint_residual(rc, q), atol=1e-13)
    assert np.max(np.abs(run.constraint_residual(rc, q))) > 1e-4             # the check can fail
    qc = run.project_configuration(rc, q)
    assert np.max(np.abs(cl.constraint_residual(rc, qc))) < 1e-11
    part = run.partition(rc, qc)
    ref_part = cl.partition(rc, qc)
    assert (part.dependent, part.rows, part.names) == (ref_part.dependent, ref_part.rows, ref_part.names)
    v = run.project_velocity(rc, qc, rng.normal(size=rc.nv), part)
    np.testing.assert_allclose(cl.constraint_jacobian(rc, qc) @ v, 0, atol=1e-11)
    np.testing.assert_allclose(v, cl.project_velocity(rc, qc, v, ref_part), atol=1e-11)
    tau = 5 * rng.normal(size=rc.nv)
    for bg in (None, (3.0, 4.0)):
        np.testing.assert_allclose(run.forward_dynamics(rc, q, v, tau, part, baumgarte=bg),
                                   cl.forward_dynamics(rc, q, v, tau, part, baumgarte=bg), atol=1e-9)


def test_runtime_forward_dynamics_refuses_a_singular_partition(captured):
    """The planar capture cannot move base_wx, base_wy: as dependent coordinates they make J_D singular."""
    r, rc, q = captured
    part = run.partition(rc, q)
    ind = tuple(i for i in range(rc.nv) if i not in (0, 1, 2))
    bad = run.Partition((0, 1, 2), ind, part.names, part.rows)
    with pytest.raises(run.ClosedLoopError, match="ill-conditioned"):
        run.forward_dynamics(rc, q, np.zeros(rc.nv), np.zeros(rc.nv), bad)


def test_dual_arm_without_stabilisation_drifts_more(captured):
    """The stabilisation matters: with none, |g| grows beyond the Baumgarte run (the bound can fail)."""
    r, rc, q = captured
    part = cl.partition(rc, q, independent=SEED_INDEPENDENT)
    vI = np.zeros(9)
    vI[6:] = [0.8, -0.6, 1.0]
    v = cl.dependent_velocities(rc, q, vI, part)
    free = run.simulate(rc, q, v, np.zeros(r.nv), dt=0.02, steps=40, stabilisation="none", part=part)
    stab = run.simulate(rc, q, v, np.zeros(r.nv), dt=0.02, steps=40, stabilisation="projection", part=part)
    assert stab.position_error.max() < free.position_error.max()


# ---- generated C -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def compiled(captured, tmp_path_factory):
    from soadyn.codegen.pipeline import compile_robot

    r, rc, q = captured
    module = compile_robot(rc, tmp_path_factory.mktemp("gen"), progress=False)
    return run.CompiledClosedLoop(module, rc)


def test_generated_closed_loop_matches_reference(captured, compiled):
    r, rc, q = captured
    rng = np.random.default_rng(3)
    part = compiled.partition
    for _ in range(3):
        qq = cl.project_configuration(rc, retract(q, 0.1 * rng.normal(size=r.nv), rc.is_free))
        v = rng.normal(size=r.nv)
        tau = rng.normal(size=r.nv) * 10
        a = compiled.forward_dynamics(qq, v, tau)
        np.testing.assert_allclose(a, cl.forward_dynamics(rc, qq, v, tau, part), rtol=1e-9, atol=1e-9)
        vf = compiled.dependent_velocities(qq, v)
        np.testing.assert_allclose(cl.constraint_jacobian(rc, qq)[list(part.rows)] @ vf, 0, atol=1e-10)
        g, Jv = compiled.constraints(qq, v)
        np.testing.assert_allclose(g, cl.constraint_residual(rc, qq), atol=1e-12)


def test_verify_checks_a_closed_loop_module(captured, compiled):
    """``soadyn verify`` on a robot with loops: the constraint rows against the reference's own, the
    partition-dependent functions listed as checked by their float run only (not skipped, not a crash)."""
    from soadyn.codegen.verify import verify

    r, rc, q = captured
    checks = {c.function: c for c in verify(rc, Path(compiled.module.__file__).parent.parent, states=4)}
    assert all(c.ok for c in checks.values()), [c for c in checks.values() if not c.ok]
    assert checks["closed_loop_constraints"].independent
    assert checks["closed_loop_constraints"].err_reference < 1e-10
    for name in ("closed_loop_forward_dynamics", "closed_loop_dependent_velocities"):
        assert not checks[name].independent and "partition" in checks[name].note
        assert checks[name].err_algorithm < 1e-10


def test_generated_closed_loop_raises_when_ill_conditioned(captured, compiled):
    """Stretch arm 2 straight along the line of the hand: its dependent columns become degenerate."""
    r, rc, q = captured
    dep_names = [compiled.partition.names[i] for i in compiled.partition.dependent]
    assert dep_names == ["j4", "j5", "j6"]
    qs = q.copy()
    qs[7 + 4 :] = 0.0  # j5 = j6 = 0: links 4-6 aligned, J_D loses rank
    with pytest.raises(cl.ClosedLoopError, match="ill-conditioned"):
        compiled.forward_dynamics(qs, np.zeros(r.nv), np.zeros(r.nv))


def test_dual_arm_yaml_is_current():
    """examples/seed004_dual_arm.yaml is what examples/seed004_models.py writes."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("seed004_models", EXAMPLES / "seed004_models.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    built = mod.dual_arm()
    loaded = load_robot(DUAL)
    assert built.body_names == loaded.body_names and built.frame_names == loaded.frame_names
    np.testing.assert_allclose(built.frames[-1].placement.p, loaded.frames[-1].placement.p, atol=1e-12)
    assert Path(DUAL).read_text().startswith("# Generated by examples/seed004_models.py")
    _ = Inertia  # noqa: F841
