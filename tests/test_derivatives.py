"""Derivatives of the dynamics: generated C against central differences on the manifold and the float run;
the float run of the same staged program against Pinocchio's computeRNEADerivatives /
computeABADerivatives (Panda, UR5, random trees; free and fixed base); the tangent convention.

The compiled modules hold only the derivative functions of the test arm (cached per session like the
other tests); the Pinocchio comparisons evaluate the identical staged program in Python floats
(``soadyn.symbolic.algorithms.derivatives`` on a Numeric context), which the C is checked against here.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml
from conftest import TEST_ARM, module_cache_dir, pinocchio_pair, record, rel_err, with_gravity

from soadyn import load_robot
from soadyn.codegen.pipeline import compile_robot, resolve_robot
from soadyn.model.configuration import retract
from soadyn.model.conventions import PinocchioMap
from soadyn.reference import dense
from soadyn.reference import derivatives as fd
from soadyn.symbolic.algorithms import derivatives as alg
from soadyn.symbolic.scalar import Numeric
from soadyn.symbolic.spatial import quaternion_to_matrix, skew

CTX = Numeric()
DERIVS = ["inverse_dynamics_derivatives", "forward_dynamics_derivatives", "frame_acceleration_derivatives"]
FD_TOL = 1e-6       # against central differences (issue 12)
C_TOL = 1e-10       # C against the float run of the same program
PIN_TOL = 1e-9      # against Pinocchio
GRAVITY = np.array([0.7, -1.3, -9.81])


@pytest.fixture(scope="session")
def deriv_dir(request, tmp_path_factory) -> Path:
    return module_cache_dir(request, tmp_path_factory, "soadyn_derivative_modules")


@pytest.fixture(scope="session", params=["free", "fixed"])
def arm(request, deriv_dir):
    robot, _ = resolve_robot(TEST_ARM, request.param)
    robot = with_gravity(robot, GRAVITY)      # the file has none; gravity exercises the attitude tangent
    return robot, compile_robot(robot, deriv_dir, functions=DERIVS, progress=False)


def _states(robot, n, seed):
    rng = np.random.default_rng(seed)
    q = np.array([robot.random_configuration(rng) for _ in range(n)])
    if robot.is_free:
        q[:, 3:7] *= rng.uniform(0.5, 2.0, size=(n, 1))      # the norm must be divided out
    return (q, rng.normal(size=(n, robot.nv)), rng.normal(size=(n, robot.nv)),
            rng.normal(size=(n, robot.n_bodies, 6)))


# ---- generated C ------------------------------------------------------------------------------------
@pytest.mark.parametrize("with_fext", [False, True])
def test_generated_derivatives_match_differences_and_float_run(arm, with_fext):
    robot, mod = arm
    Q, V, A, F = _states(robot, 4, 11 if with_fext else 12)
    kw = {"f_ext": F} if with_fext else {}
    id_c = mod.inverse_dynamics_derivatives(Q, V, A, **kw)       # batched entry point
    fd_c = mod.forward_dynamics_derivatives(Q, V, A, **kw)
    for i in range(len(Q)):
        fe = F[i] if with_fext else None
        one = mod.inverse_dynamics_derivatives(Q[i], V[i], A[i], **({"f_ext": fe} if with_fext else {}))
        ref_id = fd.inverse_dynamics_derivatives(robot, Q[i], V[i], A[i], fe)
        flt_id = alg.inverse_dynamics_derivatives(robot, CTX, Q[i], V[i], A[i], fe)
        for got, ref_d, ref_f, single in zip((x[i] for x in id_c), ref_id, flt_id, one):
            assert rel_err(got, ref_d) <= FD_TOL
            assert rel_err(got, ref_f) <= C_TOL
            assert np.array_equal(got, single)
        for got, ref_d, ref_f in zip((x[i] for x in fd_c),
                                     fd.forward_dynamics_derivatives(robot, Q[i], V[i], A[i], fe),
                                     alg.forward_dynamics_derivatives(robot, CTX, Q[i], V[i], A[i], fe)):
            assert rel_err(got, ref_d) <= FD_TOL
            assert rel_err(got, ref_f) <= C_TOL
        # da/dtau is M^-1 of the dense reference
        assert rel_err(fd_c[2][i], dense.mass_matrix_inverse(robot, Q[i])) <= C_TOL


def test_generated_frame_acceleration_derivatives(arm):
    robot, mod = arm
    Q, V, A, _ = _states(robot, 2, 13)
    frame = robot.frame_names[0] if robot.frame_names else robot.body_names[-1]
    for i in range(len(Q)):
        got = mod.frame_acceleration_derivatives(Q[i], V[i], A[i], frame)
        ref = fd.frame_acceleration_derivatives(robot, Q[i], V[i], A[i], frame)
        flt = alg.frame_acceleration_derivatives(robot, CTX, Q[i], V[i], A[i], frame)
        for g, r, f in zip(got, ref, flt):
            assert rel_err(g, r) <= FD_TOL
            assert rel_err(g, f) <= C_TOL
        # dV/dv is the world-aligned Jacobian (V is linear in v)
        J = dense.jacobian(robot, Q[i], frame, world_aligned=True)
        assert rel_err(got[0], J @ V[i]) <= C_TOL


def test_sparsity_survives(arm):
    """A joint does not move the bodies inboard of it: exact zeros in the generated derivatives, and the
    free base's position does not enter anything written in body coordinates."""
    robot, mod = arm
    Q, V, A, _ = _states(robot, 1, 14)
    dq, dv = mod.inverse_dynamics_derivatives(Q[0], V[0], A[0])
    if robot.is_free:
        assert np.all(dq[:, 3:6] == 0.0)
    leaves = [k for k in range(1, robot.n_bodies) if not robot.children[k]]
    for k in leaves:
        j = robot.v_index(k).start
        others = [m for m in range(1, robot.n_bodies) if m != k and not _is_ancestor(robot, m, k)]
        for m in others:   # a leaf's q cannot change the torque of a joint on another branch
            assert dq[robot.v_index(m).start, j] == 0.0


#: forward-mode derivatives (tangent_derivatives) checked in floats against the dense reference: (function,
#: inputs, keyword arguments, free base only)
TANGENT_CASES = [
    ("mass_matrix", ("q",), {}, False), ("center_of_mass", ("q",), {}, False),
    ("bias_forces", ("q", "v"), {}, False), ("mass_matrix_inverse", ("q",), {}, False),
    ("kinetic_energy", ("q", "v"), {}, False), ("momentum", ("q", "v"), {}, False),
    ("jacobian", ("q",), {"frame": "tcp", "world_aligned": True}, False),
    ("jacobian", ("q",), {"frame": "l4"}, False),
    ("forward_dynamics_schur", ("q", "v", "tau"), {}, False),
    ("generalized_bias", ("q", "v"), {}, True), ("operational_space_inertias", ("q",), {}, True),
    ("momentum_frame_twist", ("q", "h"), {"frame": "tcp"}, True),
    ("base_velocity", ("q", "qd", "h"), {}, True),
    # the variants with external wrenches: d/df_ext among the derivatives
    ("forward_dynamics_schur", ("q", "v", "tau", "f_ext"), {}, False),
    ("forward_dynamics_decoupled", ("q", "v", "tau", "f_ext"), {}, True),
    ("generalized_bias", ("q", "v", "f_ext"), {}, True),
    ("angular_reduced_dynamics", ("q", "v", "f_ext"), {}, True),
]


@pytest.mark.parametrize("base", ["free", "fixed"])
def test_forward_mode_derivatives_of_other_functions(base):
    """``<api>_derivatives`` (forward mode over the staged program, the float run of what the C computes)
    against central differences of the independent dense reference, for functions of every family."""
    from soadyn.symbolic import algorithms

    robot, _ = resolve_robot(TEST_ARM, base)
    robot = with_gravity(robot, GRAVITY)
    rng = np.random.default_rng(21)
    q = robot.random_configuration(rng)
    if robot.is_free:
        q[3:7] *= 1.7                                # the norm must be divided out
    vals = {"q": q, "v": rng.normal(size=robot.nv), "tau": rng.normal(size=robot.nv),
            "h": rng.normal(size=6), "qd": rng.normal(size=robot.n_joints),
            "f_ext": rng.normal(size=(robot.n_bodies, 6))}
    checked = 0
    for api, names, kw, free_only in TANGENT_CASES:
        if free_only and not robot.is_free:
            continue
        args = [vals[n] for n in names if n != "f_ext"]
        if "f_ext" in names:
            kw = {**kw, "f_ext": vals["f_ext"]}
        got = algorithms.tangent_derivatives(robot, CTX, *args, of=api, inputs=names, **kw)
        ref = fd.tangent_derivatives(robot, *args, of=api, inputs=names, **kw)
        got, ref = (x if isinstance(x, tuple) else (x,) for x in (got, ref))
        assert len(got) == len(ref)
        for g, r in zip(got, ref):
            assert np.shape(g) == np.shape(r)
            if np.max(np.abs(r), initial=0.0) < 1e-9:   # identically zero (an inertia's d/df_ext): the
                assert np.max(np.abs(g), initial=0.0) < 1e-9, api    # differences leave rounding noise
            else:
                assert rel_err(g, r) <= FD_TOL, (api, rel_err(g, r))
        checked += 1
    assert checked >= (17 if robot.is_free else 10)


def test_forward_mode_derivatives_with_parameters(request, tmp_path_factory):
    """A robot with run-time inertial parameters: the generated ``<api>_derivatives`` include d/dparams
    (forward mode seeded along the parameters; with f_ext too) and agree with central differences of the
    dense reference on the model with those parameter values, on random states and parameter sets."""
    from binding_modules import params_module, params_robot

    from soadyn.model.parameters import random_params, with_param_values

    robot, mod = params_robot(), params_module(request, tmp_path_factory)
    rng = np.random.default_rng(23)
    cases = [("mass_matrix", ("q", "params"), {}), ("center_of_mass", ("q", "params"), {}),
             ("forward_dynamics_schur", ("q", "v", "tau", "f_ext", "params"), {}),
             ("jacobian", ("q",), {"frame": "tcp", "world_aligned": True})]    # reads no inertia
    for _ in range(2):
        q = robot.random_configuration(rng)
        q[3:7] *= 1.3
        P = random_params(robot, rng)
        vals = {"q": q, "v": rng.normal(size=robot.nv), "tau": rng.normal(size=robot.nv),
                "f_ext": rng.normal(size=(robot.n_bodies, 6)), "params": P}
        model = with_param_values(robot, P)
        for api, names, kw in cases:
            pos = [vals[n] for n in names if n not in ("f_ext", "params")]
            extra = {n: vals[n] for n in names if n in ("f_ext", "params")}
            got = getattr(mod, api + "_derivatives")(*pos, **kw, **extra)
            ref = fd.tangent_derivatives(model, *pos, of=api, inputs=names, f_ext=extra.get("f_ext"), **kw)
            got, ref = (x if isinstance(x, tuple) else (x,) for x in (got, ref))
            assert len(got) == len(ref) == len(names)
            for g, r in zip(got, ref):
                assert np.shape(g) == np.shape(r)
                assert rel_err(g, r) <= FD_TOL, (api, rel_err(g, r))
            if "params" in names:          # the parameters move the result: the block is not all zero
                assert np.abs(got[-1]).max() > 1e-3, api


def _is_ancestor(robot, a, k):
    while k >= 0:
        if k == a:
            return True
        k = robot.parent[k]
    return False


# ---- tangent convention --------------------------------------------------------------------------
def test_integrate_matches_pinocchio_to_first_order():
    pin = pytest.importorskip("pinocchio")
    robot, model = pinocchio_pair("ur5", "free", np.zeros(3))
    pm = PinocchioMap(robot, model)
    rng = np.random.default_rng(3)
    q = robot.random_configuration(rng)
    d = rng.normal(size=robot.nv)
    errs = []
    for t in (1e-2, 1e-3):
        ours = retract(q, t * d, robot.is_free)
        theirs = pm.q_from_pin(pin.integrate(model, pm.q_to_pin(q), pm.v_to_pin(t * d)))
        errs.append(np.abs(ours[:3] - theirs[:3]).max()
                    + np.abs(quaternion_to_matrix(ours[3:7]) - quaternion_to_matrix(theirs[3:7])).max()
                    + np.abs(ours[7:] - theirs[7:]).max())
    assert errs[1] < 2e-2 * errs[0] and errs[1] < 1e-5     # second-order agreement


def test_quaternion_norm_does_not_leak():
    robot, _ = resolve_robot(TEST_ARM, "free")
    robot = with_gravity(robot, GRAVITY)
    Q, V, A, _ = _states(robot, 1, 15)
    q1 = Q[0].copy()
    q2 = q1.copy()
    q2[3:7] *= 3.7
    for a, b in zip(alg.inverse_dynamics_derivatives(robot, CTX, q1, V[0], A[0]),
                    alg.inverse_dynamics_derivatives(robot, CTX, q2, V[0], A[0])):
        assert rel_err(a, b) <= 1e-13
    # attitude columns are dR/d delta_w = R e_i~: the gravity torque on the base changes as R^T g does
    dq, _ = alg.inverse_dynamics_derivatives(robot, CTX, q2, np.zeros(robot.nv), np.zeros(robot.nv))
    R = quaternion_to_matrix(q2[3:7])
    g_base = dense.inverse_dynamics(robot, q2, np.zeros(robot.nv), np.zeros(robot.nv))[3:6]
    assert rel_err(g_base, -robot.total_mass * R.T @ GRAVITY) <= 1e-12
    # base force -m R^T g: its derivative along delta_w is -m (R e_i~)^T g = e_i x (-m R^T g)... = -e_i~ f
    for i in range(3):
        assert rel_err(dq[3:6, i], -skew(np.eye(3)[i]) @ g_base) <= 1e-12


# ---- Pinocchio ------------------------------------------------------------------------------------


def _pin_compare(robot, model, seed, n):
    pin = pytest.importorskip("pinocchio")
    data = model.createData()
    pm = PinocchioMap(robot, model)
    rng = np.random.default_rng(seed)
    worst = {}
    for _ in range(n):
        q = robot.random_configuration(rng)
        v, a, tau = (rng.normal(size=robot.nv) for _ in range(3))
        fe = rng.normal(size=(robot.n_bodies, 6))
        qp, vp, ap, tp = pm.q_to_pin(q), pm.v_to_pin(v), pm.v_to_pin(a), pm.tau_to_pin(tau)
        for f_ext in (None, fe):
            extra = () if f_ext is None else (pm.fext_to_pin(f_ext),)
            dq, dv, _ = pin.computeRNEADerivatives(model, data, qp, vp, ap, *extra)
            ours = alg.inverse_dynamics_derivatives(robot, CTX, q, v, a, f_ext)
            for name, o, t in (("dtau/dq", ours[0], dq), ("dtau/dv", ours[1], dv)):
                e = rel_err(o, pm.matrix_from_pin(np.asarray(t)))
                worst[name] = max(worst.get(name, 0.0), e)
            pin.computeABADerivatives(model, data, qp, vp, tp, *extra)
            Minv = np.triu(data.Minv) + np.triu(data.Minv, 1).T
            ours = alg.forward_dynamics_derivatives(robot, CTX, q, v, tau, f_ext)
            for name, o, t in (("da/dq", ours[0], data.ddq_dq), ("da/dv", ours[1], data.ddq_dv),
                               ("da/dtau", ours[2], Minv)):
                e = rel_err(o, pm.matrix_from_pin(np.asarray(t)))
                worst[name] = max(worst.get(name, 0.0), e)
    return worst


@pytest.mark.parametrize("base", ["free", "fixed"])
@pytest.mark.parametrize("name", ["panda", "ur5"])
def test_derivatives_match_pinocchio(name, base):
    robot, model = pinocchio_pair(name, base, GRAVITY)
    worst = _pin_compare(robot, model, 21 if base == "free" else 22, 10)
    for k, e in worst.items():
        record(f"pinocchio {name}/{base}", k, e)
    bad = {k: e for k, e in worst.items() if not e <= PIN_TOL}
    assert not bad, f"{name}/{base}: relative errors above {PIN_TOL}: {bad}"


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("base", ["free", "fixed"])
def test_random_tree_derivatives_match_pinocchio(tmp_path, seed, base):
    pytest.importorskip("pinocchio")
    from test_random_trees_vs_pinocchio import _pinocchio_model, _random_doc

    doc = _random_doc(seed, base)
    path = tmp_path / "robot.yaml"
    path.write_text(yaml.safe_dump(doc))
    robot = load_robot(path)
    worst = _pin_compare(robot, _pinocchio_model(doc), 200 + seed, 3)
    bad = {k: e for k, e in worst.items() if not e <= PIN_TOL}
    assert not bad, f"random tree {seed}/{base}: relative errors above {PIN_TOL}: {bad}"


@pytest.mark.parametrize("kind", ["full", "diagonal"])
def test_rotated_body_inertia_forms_equal_the_plain_product(kind):
    """The sweep's ``R Jc R^T`` (:func:`rnea_derivatives._rotated_inertia`): every factorisation of a
    constant inertia gives Jc back, and the form picked for a rotation with exact zeros (about x, symbols
    c and s), evaluated at an angle, equals numpy's ``R @ Jc @ R.T``; an indefinite Jc has none."""
    import symengine as se

    from soadyn.symbolic.algorithms import rnea_derivatives as rd
    from soadyn.symbolic.scalar import Symbolic

    rng = np.random.default_rng(5)
    A = rng.normal(size=(3, 3))
    Jc = A @ A.T + 0.1 * np.eye(3) if kind == "full" else np.diag([0.3, 0.2, 0.05])
    factors = rd._inertia_factors(Jc)
    assert len(factors) == (6 if kind == "full" else 3)
    for shift, pairs in factors:
        back = shift * np.eye(3) + sum(w * np.outer(lv, lv) for w, lv in pairs)
        assert np.max(np.abs(back - Jc)) <= 4e-16 * np.max(np.abs(Jc))
    c, s = se.symbols("c s")
    one, zero = se.Integer(1), se.Integer(0)
    R = np.array([[one, zero, zero], [zero, c, -s], [zero, s, c]], dtype=object)
    got = rd._rotated_inertia(Symbolic(), R, Jc)
    th = 0.7
    Rn = np.array([[1, 0, 0], [0, np.cos(th), -np.sin(th)], [0, np.sin(th), np.cos(th)]])
    want = Rn @ Jc @ Rn.T
    for i in range(3):
        for j in range(i, 3):
            val = float(se.sympify(got[i][j]).subs({c: np.cos(th), s: np.sin(th)}))
            assert abs(val - want[i, j]) <= 1e-15, (i, j, val, want[i, j])
    assert rd._inertia_factors(np.array([[1.0, 2.0, 0.0], [2.0, 1.0, 0.0], [0.0, 0.0, 1.0]])) == []
    assert rd._inertia_factors(np.diag([1.0, 0.0, 1.0])) == []


def test_fixed_base_sweep_in_its_child_axes(tmp_path, deriv_dir):
    """A fixed base with one child body (a chain of 7 joints): the derivative sweep runs in that child's
    axes (:func:`rnea_derivatives.reference_body`), where the first joint drops out of every pose: the
    first two hinges are constants there (in the base's axes the second turns with the first joint), and a
    gravity oblique to the first joint's axis is turned into them.  The C of the ID and FD derivatives
    agrees with central differences of the reference path and with the float run (which
    test_derivatives_match_pinocchio compares with Pinocchio on the fixed Panda and UR5, one child each),
    its batch has the bits of its single call.  A fixed base with two children (the test arm), and a free
    base, keep the base's axes."""
    from soadyn.symbolic.algorithms import rnea_derivatives as rd
    from soadyn.symbolic.algorithms.kinematics import joint_transforms
    from soadyn.symbolic.scalar import Symbolic

    robot = with_gravity(_robot(tmp_path, _two_branch_doc("fixed", joints=7, second=0)), GRAVITY)
    top = rd.reference_body(robot)
    assert top is not None and tuple(robot.children[0]) == (top,) and robot.nv == 7
    assert rd.reference_body(resolve_robot(TEST_ARM, "free")[0]) is None
    assert rd.reference_body(resolve_robot(TEST_ARM, "fixed")[0]) is None
    mod = compile_robot(robot, deriv_dir, functions=DERIVS[:2], progress=False)
    Q, V, A, _ = _states(robot, 3, 37)
    for name in DERIVS[:2]:
        _agrees_with_references(mod, robot, name, Q, V, A)
        batch = getattr(mod, name)(Q, V, A)
        for i in range(len(Q)):
            for b, s1 in zip(batch, getattr(mod, name)(Q[i], V[i], A[i])):
                assert np.array_equal(b[i].view(np.int64), s1.view(np.int64)), (name, i)
    ctx = Symbolic()
    q, v, a = ctx.input("q", robot.nq), ctx.input("v", robot.nv), ctx.input("a", robot.nv)
    sw = rd.base_aligned_sweep(joint_transforms(robot, ctx, q), v, a)
    second = next(k for k in range(robot.n_bodies) if robot.parent[k] == top)
    assert all(_number(e) for e in [*sw.S[top][0], *sw.S[second][0]])
    assert not all(_number(e) for e in sw.grav[3:])          # GRAVITY is oblique to the first joint


def _number(e) -> bool:
    """A constant of the staged program (a Python or SymEngine number), not a value computed at run time."""
    return isinstance(e, (int, float)) or bool(getattr(e, "is_Number", False))


def test_attitude_tangent_is_right_trivialised():
    """The staged attitude gets dR/d delta_w_i = R e_i~: compare with R(q (+) t e_i) by differences."""
    robot, _ = resolve_robot(TEST_ARM, "free")
    rng = np.random.default_rng(5)
    q = robot.random_configuration(rng)
    R = quaternion_to_matrix(q[3:7])
    for i in range(3):
        e = np.zeros(robot.nv)
        e[i] = 1.0
        h = 1e-4
        num = (quaternion_to_matrix(retract(q, h * e, robot.is_free)[3:7])
               - quaternion_to_matrix(retract(q, -h * e, robot.is_free)[3:7])) / (2 * h)
        assert np.abs(num - R @ skew(np.eye(3)[i])).max() < 1e-8


def test_quaternion_seed_without_staged_attitude():
    """Where the attitude is not staged, the quaternion's own tangent 1/2 quat (x) [e_i; 0] gives
    dR/d delta_w_i = R e_i~ exactly, for a quaternion of any norm."""
    import symengine as se

    from soadyn.symbolic.scalar import Symbolic
    from soadyn.symbolic.tangent import configuration_directions, jacobians

    robot, _ = resolve_robot(TEST_ARM, "free")
    ctx = Symbolic()
    q = ctx.input("q", robot.nq)
    Rexpr = quaternion_to_matrix(q[3:7]) * se.Integer(1)        # not staged
    dirs = configuration_directions(robot, ctx, q)
    assert not dirs.overrides
    (J,) = jacobians(ctx, [Rexpr], dirs.seeds, robot.nv, dirs.overrides)
    rng = np.random.default_rng(9)
    qv = robot.random_configuration(rng)
    qv[3:7] *= 2.3
    from soadyn.symbolic.tangent import python_function

    f = python_function(list(ctx.inputs.items()), ctx.program, [J])
    (Jv,) = f(qv)
    R = quaternion_to_matrix(qv[3:7])
    for i in range(3):
        assert np.abs(Jv[:, :, i] - R @ skew(np.eye(3)[i])).max() < 1e-14
    assert np.all(Jv[:, :, 3:] == 0.0)


# ---- the product -M^-1 dtau/dx in blocks (issue 26) -----------------------------------------------
def _base_body() -> list[dict]:
    """The free or fixed base body of the synthetic trees below."""
    return [{"name": "base", "mass": 20.0, "com": [0.02, -0.01, 0.03],
             "inertia": {"ixx": 1.0, "iyy": 1.2, "izz": 1.4, "ixy": 0.01}}]


def _add_chain(bodies: list[dict], rng: np.random.Generator, parent: str,
               names: list[tuple[str, str]]) -> str:
    """Append a chain of revolute bodies ``(body, joint)`` below ``parent`` (random masses, offsets and
    axes, every other one along a coordinate axis); returns the tip's name."""
    for i, (name, joint) in enumerate(names):
        axis = np.eye(3)[i % 3] if i % 2 else rng.normal(size=3)
        bodies.append({"name": name, "parent": parent, "mass": float(rng.uniform(0.5, 3.0)),
                       "com": rng.normal(0, 0.1, 3).tolist(),
                       "inertia": {"ixx": 0.03, "iyy": 0.04, "izz": 0.05, "ixz": 0.002},
                       "joint": {"name": joint, "type": "revolute",
                                 "axis": (axis / np.linalg.norm(axis)).tolist(),
                                 "xyz": rng.normal(0, 0.3, 3).tolist(),
                                 "rpy": rng.uniform(-3, 3, 3).tolist()}})
        parent = name
    return parent


def _two_branch_doc(base: str, joints: int = 5, second: int | None = None) -> dict:
    """A base with two branches of ``joints`` joints (a leg-and-arm tree; ``second``: the second branch's
    count if it differs): blocks large enough to be loops."""
    rng = np.random.default_rng(5)
    bodies = _base_body()
    for b in range(2):
        count = joints if b == 0 or second is None else second
        _add_chain(bodies, rng, "base", [(f"b{b}_{i}", f"j{b}_{i}") for i in range(count)])
    name = (f"two_branch_{base}" + ("" if joints == 5 else f"_{joints}")
            + ("" if second is None else f"_{second}"))
    return {"name": name, "base": base, "gravity": [0.3, -0.4, -9.81], "bodies": bodies}


@pytest.mark.parametrize("base", ["free", "fixed"])
def test_product_blocks_cover_every_nonzero(tmp_path, base):
    """Every entry of dtau/dx (dense reference, by differences) that is not zero lies in a block's rows and
    columns, and every row of M^-1 it reaches in the block's result rows; the blocks hold fewer entries than
    the dense product on a tree."""
    for robot in (resolve_robot(TEST_ARM, base)[0], _robot(tmp_path, _two_branch_doc(base))):
        robot = with_gravity(robot, GRAVITY)
        Q, V, A, _ = _states(robot, 1, 31)
        nv = robot.nv
        J = np.concatenate(fd.inverse_dynamics_derivatives(robot, Q[0], V[0], A[0]), axis=1)
        Minv = dense.mass_matrix_inverse(robot, Q[0])
        covered = np.zeros_like(J, dtype=bool)
        reached = np.zeros((nv, 2 * nv), dtype=bool)
        blocks = alg.product_blocks(robot, skip_base=True)
        for cols, rows, out in blocks:
            covered[np.ix_(rows, cols)] = True
            reached[np.ix_(out, cols)] = True
        J[:, :robot.base_nv] = 0.0          # the free base's configuration and linear velocity
        J[:, nv + 3:nv + robot.base_nv] = 0.0   # columns: closed form
        assert not np.any((np.abs(J) > 1e-9) & ~covered)
        reach = np.abs(Minv) @ (np.abs(J) > 1e-9)
        assert not np.any((reach > 1e-9) & ~reached)
        assert sum(len(r) * len(cols) for cols, r, _ in blocks) < nv * 2 * nv


def _robot(tmp_path, doc):
    path = tmp_path / f"{doc['name']}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return load_robot(path)


@pytest.mark.parametrize("base", ["free", "fixed"])
def test_block_products_in_generated_c(tmp_path, deriv_dir, base):
    """The two-branch tree's forward-dynamics derivatives: the products are loops over the blocks' rows only
    (fewer than nv), and the C agrees with the differences and with the float run."""
    from soadyn.codegen.derive import derive
    from soadyn.codegen.functions import function_table

    robot = with_gravity(_robot(tmp_path, _two_branch_doc(base)), GRAVITY)
    spec = next(s for s in function_table(robot, derivatives=True)
                if s.name == "forward_dynamics_derivatives")
    program = derive(robot, spec)
    if robot.is_free:     # one block of each branch's columns: base and branch rows, a loop
        inner = sorted(p.inner for p in program.products)
        assert inner and min(inner) < robot.nv, inner
        # ... reading its block of M^-1 in place from da_dtau (not copied into a scratch array; the symmetric
        # product is M^-1's base terms, added to da_dtau before them)
        assert all(p.source[0] == "da_dtau" for p in program.products
                   if p.inner < robot.nv and not p.symmetric)
    else:                 # the two branches do not reach each other: exact zeros, no product entry
        da_dq = np.array(dict(program.outputs)["da_dq"], dtype=object).reshape(robot.nv, robot.nv)
        assert all(e == 0 for e in da_dq[5:, :5].ravel()) and all(e == 0 for e in da_dq[:5, 5:].ravel())
        assert not any(e == 0 for e in da_dq[:5, :5].ravel())
        assert all(p.m < robot.nv for p in program.products)     # no product over every row of M^-1
    mod = compile_robot(robot, deriv_dir, functions=["forward_dynamics_derivatives"], progress=False)
    Q, V, T, _ = _states(robot, 2, 32)
    _agrees_with_references(mod, robot, "forward_dynamics_derivatives", Q, V, T)


def _agrees_with_references(mod, robot, name: str, Q, V, X) -> None:
    """The module's ``name`` at every state: within FD_TOL of central differences of the reference path
    and within C_TOL of the float run of the algorithm."""
    for i in range(len(Q)):
        got = getattr(mod, name)(Q[i], V[i], X[i])
        for g, r, f in zip(got, getattr(fd, name)(robot, Q[i], V[i], X[i]),
                           getattr(alg, name)(robot, CTX, Q[i], V[i], X[i])):
            assert rel_err(g, r) <= FD_TOL
            assert rel_err(g, f) <= C_TOL


def test_block_products_read_in_place_give_the_same_bits(cc, tmp_path, deriv_dir):
    """The two-branch free tree's loops read their blocks of M^-1 in place from da_dtau, through a list of
    columns (base and branch): vectors of the compiler's default target, -march=native and scalar loops
    give the same bits."""
    from test_products import _build_variants, _same_bits

    robot = with_gravity(_robot(tmp_path, _two_branch_doc("free")), GRAVITY)
    mod = compile_robot(robot, deriv_dir, functions=["forward_dynamics_derivatives"], progress=False)
    src = next(Path(mod.__file__).parent.glob("*.c"))
    assert "A read in place from da_dtau" in src.read_text() and "prod_ci[" in src.read_text()
    assert "prod_s = (prod_v){" in src.read_text()     # 16 rows, 5 columns: down the columns
    Q, V, T, _ = _states(robot, 1, 33)
    _same_bits(_build_variants(cc, src, tmp_path), f"{mod.module_name}_forward_dynamics_derivatives",
               (Q[0], V[0], T[0]), mod.forward_dynamics_derivatives(Q[0], V[0], T[0]), robot.nv)


def test_block_products_leave_their_entries_to_the_loops(tmp_path):
    """The two-branch free tree's block products store their results (they add nothing to what the
    statements stored): the statements store nothing in those entries, which the loops write anyway
    (B1 + Z1: 864 stores of zeros), and every entry of every output is still written, by a statement, a
    loop or a loop's copy below the diagonal (the test above fills the outputs with NaN first)."""
    import soadyn.codegen.cprogram as cp
    from soadyn.codegen.pipeline import generate
    from soadyn.codegen.products import mirrored_entries, product_entries

    robot = with_gravity(_robot(tmp_path, _two_branch_doc("free")), GRAVITY)
    (f,) = [f for f in generate(robot, functions=["forward_dynamics_derivatives"]).functions
            if f.cname.endswith("_forward_dynamics_derivatives")]
    stored = [(s.target, i) for s in f.body if s.kind in (cp.STORE, cp.ZEROS)
              for i in (range(s.index, s.end) if s.kind == cp.ZEROS else (s.index,))]
    stores = [p for p in f.products if p.k and not p.accumulate]
    looped = {(n, i) for n, es in product_entries(stores).items() for i in es}
    assert stores and looped and not looped & set(stored)
    written = set(stored) | {(n, i) for n, es in product_entries(f.products).items() for i in es}
    written |= mirrored_entries(f.products)
    assert written >= {(n, i) for n in ("da_dq", "da_dv", "da_dtau") for i in range(robot.nv ** 2)}


def test_product_down_the_columns_in_place_gives_the_same_bits(cc, tmp_path, deriv_dir):
    """Few columns and many rows of M^-1 (exactly symmetric): the loops run down each result column, whole
    vectors of a row of M^-1 plus its last entries one by one: here the product over all of M^-1 in place
    (the 3 base angular columns; branches of 3 and 4 joints: 13 rows = 3 vectors + 1; the branches'
    blocks run down the columns in the test above).  Vectors of 4, of -march=native and scalar loops give
    the same bits, the SIMD batch too, and the result agrees with the differences."""
    from test_products import _build_variants, _same_bits

    from soadyn.codegen.derive import derive
    from soadyn.codegen.functions import function_table
    from soadyn.codegen.products import row_vectors

    robot = with_gravity(_robot(tmp_path, _two_branch_doc("free", joints=3, second=4)), GRAVITY)
    spec = next(s for s in function_table(robot, derivatives=True)
                if s.name == "forward_dynamics_derivatives")
    products = derive(robot, spec).products
    assert all(p.left_symmetric for p in products)
    assert any(p.k == 0 and row_vectors(p, 4) for p in products) and robot.nv % 4
    mod = compile_robot(robot, deriv_dir, functions=["forward_dynamics_derivatives"], progress=False)
    src = next(Path(mod.__file__).parent.glob("*.c"))
    assert "prod_bj[" in src.read_text()                   # the in-place product by columns
    Q, V, T, _ = _states(robot, 4, 35)
    first = _same_bits(_build_variants(cc, src, tmp_path), f"{mod.module_name}_forward_dynamics_derivatives",
                       (Q[0], V[0], T[0]), mod.forward_dynamics_derivatives(Q[0], V[0], T[0]), robot.nv)
    for g, r in zip(first, fd.forward_dynamics_derivatives(robot, Q[0], V[0], T[0])):
        assert rel_err(g, r) <= FD_TOL
    batch = mod.forward_dynamics_derivatives(Q, V, T)
    for i in range(len(Q)):
        for b, s1 in zip(batch, mod.forward_dynamics_derivatives(Q[i], V[i], T[i])):
            assert np.array_equal(b[i].view(np.int64), s1.view(np.int64))


def test_block_products_read_in_place_in_the_simd_batch(tmp_path, deriv_dir):
    """A fixed base with two 8-joint branches: only block products (each branch's 8 x 8 block of M^-1, read
    in place), so the SIMD batch evaluates them as expressions of the stored M^-1 entries: every state of
    the batch has the bits of the single call, which agrees with the differences."""
    from soadyn.codegen.pipeline import generate

    robot = with_gravity(_robot(tmp_path, _two_branch_doc("fixed", joints=8)), GRAVITY)
    gen = generate(robot, functions=["forward_dynamics_derivatives"])
    f = next(x for x in gen.functions if x.cname.endswith("_forward_dynamics_derivatives"))
    assert f.lanes_body is not None and any("da_dtau_s" in repr(x) for x in f.lanes_body)
    mod = compile_robot(robot, deriv_dir, functions=["forward_dynamics_derivatives"], progress=False)
    Q, V, T, _ = _states(robot, 5, 34)
    batch = mod.forward_dynamics_derivatives(Q, V, T)
    for i in range(len(Q)):
        single = mod.forward_dynamics_derivatives(Q[i], V[i], T[i])
        for b, s1 in zip(batch, single):
            assert np.array_equal(b[i].view(np.int64), s1.view(np.int64))
    for g, r in zip(single, fd.forward_dynamics_derivatives(robot, Q[-1], V[-1], T[-1])):
        assert rel_err(g, r) <= FD_TOL


def test_derivative_batches_through_the_simd_lanes_equal_single_calls(arm, tmp_path):
    """The ID and FD derivatives' batches run through the SIMD lanes (issue 26; a build with 4 lanes and
    stages, the tests' default profile has none), the in-place product ``-M^-1 B`` of the free test arm
    (B read back from the outputs) evaluated as expressions there: every state of a batch (7: one lanes
    group and a scalar remainder) has the bits of its single call."""
    from soadyn.codegen.pipeline import generate
    from soadyn.codegen.profiles import IEEE_FLAGS, Profile

    robot, _ = arm
    prof = Profile("lanes_stages_O0", ("-O0", *IEEE_FLAGS), stage_ops=300, lanes=4)
    mod = compile_robot(robot, tmp_path, functions=DERIVS, progress=False, profile=prof)
    gen = generate(robot, functions=["forward_dynamics_derivatives"], profile=prof)
    f = next(x for x in gen.functions if x.cname.endswith("_forward_dynamics_derivatives"))
    inplace = any("B read back from the outputs" in h for h in f.helpers)
    assert inplace == robot.is_free                   # the free arm's product is in place
    assert f.extra.vectorised and f.batch_body[1] == "#ifdef SOADYN_V4D"
    if inplace:                                       # B's entries as locals <output>_b<i> in the lanes
        outs = {a.name for a in f.outputs}
        assert any(s.target.rpartition("_b")[0] in outs for s in f.lanes_body if s.target)
    Q, V, T, _ = _states(robot, 7, 35)
    for name, third in (("forward_dynamics_derivatives", T), ("inverse_dynamics_derivatives", T)):
        batch = getattr(mod, name)(Q, V, third)
        for i in range(len(Q)):
            for b, s1 in zip(batch, getattr(mod, name)(Q[i], V[i], third[i])):
                assert np.array_equal(b[i].view(np.int64), s1.view(np.int64)), (name, i)


@pytest.mark.parametrize("per_state", [False, True], ids=["expressions", "per_state"])
def test_products_read_m_inverse_after_its_base_terms_loop(tmp_path, monkeypatch, per_state):
    """The two-branch free tree (12 hinges): M^-1's base rows and columns ``W0* = Y(n)* D(n)^-1`` and
    ``W0 = D(n)^-1 Y(n)`` are loops stored into da_dtau, then its base terms a symmetric loop that reads
    ``W0*`` in place from da_dtau and adds to its hinges' block (qdd from M^-1's factors, not its
    entries), and the products -M^-1 dtau/dx read da_dtau in place after them, by columns (M^-1 is
    symmetric symbol by symbol: W0 is W0*'s twin).  The single call agrees with the differences and the
    float run, and its M^-1 is exactly symmetric; the SIMD batch has the bits of the single call on every
    state (7: one lanes group and a scalar remainder), both ways it can run the products
    (``units.PER_STATE_PRODUCT_OPS`` set for each): as expressions in the lanes (the later ones reading
    the finished entries), or the lanes' statements filling the outputs and the factors' scratch arrays,
    then the single call's product loops per state (there with the outputs' rows prefetched between the
    lanes' stages: ``lanes.PREFETCH_OUTPUT_MIN`` set to 0).  Blocks of the same shape and offsets share
    one loop function, called with their own arrays."""
    import soadyn.codegen.lanes as lanes
    import soadyn.codegen.units as units
    from soadyn.codegen.derive import derive
    from soadyn.codegen.functions import function_table
    from soadyn.codegen.pipeline import generate
    from soadyn.codegen.profiles import IEEE_FLAGS, Profile

    monkeypatch.setattr(units, "PER_STATE_PRODUCT_OPS", 0 if per_state else 10 ** 9)
    # the lanes driver prefetches its outputs' rows (lanes.prefetched_outputs) in the per-state build
    monkeypatch.setattr(lanes, "PREFETCH_OUTPUT_MIN", 0 if per_state else 10 ** 9)

    robot = with_gravity(_robot(tmp_path, _two_branch_doc("free", joints=6)), GRAVITY)
    nh = robot.nv - 6
    spec = next(s for s in function_table(robot, derivatives=True)
                if s.name == "forward_dynamics_derivatives")
    products = derive(robot, spec).products
    # each branch's chain pairs (6 joints): masked loops into the factors of the block products
    assert all(p.runs[0][0].startswith("prodf_dadx") for p in products if p.ranges)
    w0t, w0, first, *rest = [p for p in products if not p.ranges]
    assert (w0t.m, w0t.k, w0t.columns, w0t.row0, w0t.runs[0][:3]) == (nh, 6, 6, 6, ("da_dtau", robot.nv, 0))
    assert (w0.m, w0.k, w0.columns, w0.row0, w0.runs[0][:3]) == (6, 6, nh, 0, ("da_dtau", robot.nv, 6))
    assert not (w0t.accumulate or w0.accumulate)
    assert first.symmetric and first.accumulate and first.runs[0][0] == "da_dtau" and first.m == nh
    assert first.source == ("da_dtau", robot.nv, tuple(range(6, robot.nv)), tuple(range(6)))
    assert rest and all((p.source or (p.left,))[0] == "da_dtau" for p in rest)
    assert all(p.left_symmetric for p in rest)
    prof = Profile("lanes_stages_O0", ("-O0", *IEEE_FLAGS), stage_ops=300, lanes=4)
    mod = compile_robot(robot, tmp_path, functions=["forward_dynamics_derivatives"], progress=False,
                        profile=prof)
    f = next(x for x in generate(robot, functions=["forward_dynamics_derivatives"], profile=prof).functions
             if x.cname.endswith("_forward_dynamics_derivatives"))
    batch_c = "\n".join(f.batch_body)
    # the product loops' calls after each lanes group (per state), or only in the single call
    assert f.extra.vectorised and "_forward_dynamics_derivatives_lanes(" in batch_c
    per_state_calls = "for (l = 0; l < 4; ++l)" in batch_c and "_prod_W0T(prodf_W0T + l * " in batch_c
    assert per_state_calls == per_state
    # blocks of dq and dv of the same shape and columns share one loop function (products.shared_functions)
    calls = [s for s in f.epilogue if s.kind == "product"]
    assert len(f.helpers) < len(calls) and len({s.target for s in calls}) == len(f.helpers)
    assert ("__builtin_prefetch(da_dq + " in "\n".join(f.extra.pieces)) == per_state
    Q, V, T, _ = _states(robot, 7, 36)
    if per_state:
        _agrees_with_references(mod, robot, "forward_dynamics_derivatives", Q[:2], V[:2], T[:2])
    batch = mod.forward_dynamics_derivatives(Q, V, T)
    for i in range(len(Q)):
        single = mod.forward_dynamics_derivatives(Q[i], V[i], T[i])
        assert np.array_equal(single[2], single[2].T), i
        for b, s1 in zip(batch, single):
            assert np.array_equal(b[i].view(np.int64), s1.view(np.int64)), i


def test_prefetched_outputs_cover_every_line_after_the_top_level_stages():
    """``lanes.prefetched_outputs``: every 64-byte line of the lanes' rows of every output is prefetched
    (whatever the rows' alignment to 8 bytes), by ``prefetch`` statements in slices after the driver's
    stage calls before a frame family's switch, none inside it; below ``PREFETCH_OUTPUT_MIN`` bytes, or
    without such a call, the statements are unchanged.  The lines are checked as the lanes printer
    (``lanes.vectorise``) prints them."""
    import re

    import soadyn.codegen.cprogram as cp
    from soadyn.codegen.cprogram import Stmt
    from soadyn.codegen.lanes import PREFETCH_OUTPUT_MIN, prefetched_outputs, vectorise

    outputs = [("A", 1444), ("B", 1443), ("C", 5)]

    def call(name: str) -> Stmt:
        return cp.call(name, ("q", "A", "w"))

    body = [Stmt(cp.SCRATCH, "w", index=9), call("f_s0"), cp.comment("x"), call("f_s1"), call("f_s2"),
            Stmt(cp.SWITCH, cases=[cp.Case("F0", None, [call("f_c0")])])]
    stages = {"f_s0", "f_s1", "f_s2", "f_c0"}
    out = prefetched_outputs(body, outputs, 4, stages)
    assert [s for s in out if s.kind != cp.PREFETCH] == body
    # prefetches only right after the three top-level calls, each slice no longer than a third
    where = [i for i, s in enumerate(out) if s.kind == cp.PREFETCH]
    assert where and all(out[i - 1].kind == cp.PREFETCH or out[i - 1].target.startswith("f_s") for i in where)
    assert max(where) < next(i for i, s in enumerate(out) if s.kind == cp.SWITCH)
    printed = vectorise(out, {"q": 7}, dict(outputs), 4, {n: n + "_lanes" for n in stages})
    assert printed is not None
    seen: dict[str, set[int]] = {}
    for x in printed:
        m = re.fullmatch(r"for \(int k = (\d+); k <= (\d+); k \+= 8\) "
                         r"__builtin_prefetch\((\w+) \+ k, 0, 3\);", x)
        if m:
            seen.setdefault(m[3], set()).update(range(int(m[1]), int(m[2]) + 1, 8))
        for name, k in re.findall(r"^__builtin_prefetch\((\w+) \+ (\d+), 0, 3\);$", x):
            seen.setdefault(name, set()).add(int(k))
    assert sum("prefetch" in x for x in printed) >= len(where)
    for name, size in outputs:
        entries = seen[name]
        assert max(entries) < 4 * size
        for offset in range(8):                       # the rows' first entry at any 8-byte offset in a line
            lines = {(offset + k) // 8 for k in entries}
            assert lines == {(offset + k) // 8 for k in range(4 * size)}, (name, offset)
    small = [("A", PREFETCH_OUTPUT_MIN // 32 - 1)]
    assert prefetched_outputs(body, small, 4, {"f_s0"}) == body
    assert prefetched_outputs(body, outputs, 4, {"g"}) == body


@pytest.mark.parametrize("base", ["free", "fixed"])
def test_chain_products_of_the_id_derivatives(cc, tmp_path, deriv_dir, base):
    """Two branches of 7 joints: the pairs j on the path of i within a branch are masked products (the lower
    triangle of the branch's block, 7 x 7; 6 x 6 on the fixed base, whose first joint stays out; the
    second product reads ``[Fr Gr]`` from the first's scratch array); the C
    agrees with central differences of the reference and with the float run, vectors of 4, of 2 and none
    give the same bits, and the SIMD batch gives the bits of the single call."""
    from test_products import _build_variants, _same_bits

    from soadyn.codegen.derive import derive
    from soadyn.codegen.functions import function_table

    robot = with_gravity(_robot(tmp_path, _two_branch_doc(base, joints=7)), GRAVITY)
    spec = next(s for s in function_table(robot, derivatives=True)
                if s.name == "inverse_dynamics_derivatives")
    products = derive(robot, spec).products
    m = 7 if base == "free" else 6
    assert sorted(p.name[:3] for p in products) == ["dqL", "dqL", "dvL", "dvL"]   # one pair per branch
    assert all(p.m == m and p.ranges == tuple((0, r + 1) for r in range(m)) for p in products)
    assert sorted(p.source is not None for p in products) == [False, False, True, True]
    mod = compile_robot(robot, deriv_dir, functions=["inverse_dynamics_derivatives"], progress=False)
    Q, V, A, _ = _states(robot, 4, 35)
    _agrees_with_references(mod, robot, "inverse_dynamics_derivatives", Q, V, A)
    batch = mod.inverse_dynamics_derivatives(Q, V, A)
    for i in range(len(Q)):
        for b, s1 in zip(batch, mod.inverse_dynamics_derivatives(Q[i], V[i], A[i])):
            assert np.array_equal(b[i].view(np.int64), s1.view(np.int64))
    src = next(Path(mod.__file__).parent.glob("*.c"))
    assert "(a mask)" in src.read_text()
    _same_bits(_build_variants(cc, src, tmp_path), f"{mod.module_name}_inverse_dynamics_derivatives",
               (Q[0], V[0], A[0]), mod.inverse_dynamics_derivatives(Q[0], V[0], A[0]), robot.nv)


def _legs_and_arms_doc() -> dict:
    """A free base with a trunk of 2 joints carrying two arms of 4, and two legs of 3 (16 hinges, a
    small TALOS): the trunk's hinges are inboard of both arms, and the trunk and the first arm are one
    chain of 6 bodies (the ID derivatives' masked chain products)."""
    rng = np.random.default_rng(8)
    bodies = _base_body()

    def chain(prefix: str, parent: str, joints: int) -> str:
        return _add_chain(bodies, rng, parent, [(f"{prefix}_{i}", f"j{prefix}_{i}") for i in range(joints)])

    trunk = chain("trunk", "base", 2)
    for arm in ("arm_l", "arm_r"):
        chain(arm, trunk, 4)
    for leg in ("leg_l", "leg_r"):
        chain(leg, "base", 3)
    return {"name": "legs_and_arms", "base": "free", "gravity": [0.3, -0.4, -9.81], "bodies": bodies}


def test_qdd_from_the_hinges_factors_on_a_trunk(tmp_path):
    """A trunk inboard of two arms (and two legs off the base): ``M^-1 rhs`` takes the hinges' part of
    ``Y* D^-1 Y rhs`` from the factors (``innovations.hinge_solve``: 102 against 118 multiply-adds here,
    312 against 472 on TALOS) and equals the dense reference's ``M^-1 rhs``; the forward-dynamics
    derivatives built on it agree with central differences of the reference path, and the SIMD batch
    has the single call's bits.  The two-branch tree (two chains off the base) keeps M^-1's hinges'
    terms (the factors are no cheaper on a chain).  This tree's chain products (``dqL``, ``dvL``) are
    expanded into statements, recorded at the position of the block products that read them: the
    expansion puts them first (on d4713c3 the readers came first: ``dvL_0`` unknown)."""
    from soadyn.codegen.derive import derive
    from soadyn.codegen.functions import function_table
    from soadyn.codegen.profiles import IEEE_FLAGS, Profile
    from soadyn.symbolic.algorithms.articulated_body import articulated_body
    from soadyn.symbolic.algorithms.innovations import mass_matrix_inverse_from

    def solved(robot) -> bool:
        spec = next(s for s in function_table(robot, derivatives=True)
                    if s.name == "forward_dynamics_derivatives")
        return any(s.startswith("Minvz") for s in derive(robot, spec).stages.values())

    robot = with_gravity(_robot(tmp_path, _legs_and_arms_doc()), GRAVITY)
    assert robot.nv == 22 and solved(robot)
    assert not solved(with_gravity(_robot(tmp_path, _two_branch_doc("free", joints=6)), GRAVITY))
    Q, V, T, _ = _states(robot, 5, 37)
    for q, r in zip(Q, T):
        _, x = mass_matrix_inverse_from(articulated_body(robot, CTX, q), rhs=r)
        assert rel_err(x, dense.mass_matrix_inverse(robot, q) @ r) <= 1e-12
    prof = Profile("lanes_stages_O0", ("-O0", *IEEE_FLAGS), stage_ops=300, lanes=4)   # a quick compile
    mod = compile_robot(robot, tmp_path, functions=["forward_dynamics_derivatives"], progress=False,
                        profile=prof)
    _agrees_with_references(mod, robot, "forward_dynamics_derivatives", Q[:2], V[:2], T[:2])
    batch = mod.forward_dynamics_derivatives(Q, V, T)
    for i in range(len(Q)):
        for b, s1 in zip(batch, mod.forward_dynamics_derivatives(Q[i], V[i], T[i])):
            assert np.array_equal(b[i].view(np.int64), s1.view(np.int64)), i


def _fd_derivatives_agree_and_batch_bits(robot, tmp_path, seed: int) -> None:
    """The FD derivatives compiled in short stages (-O0): the C agrees with central differences of the
    reference path and the float run at two states, and the SIMD batch of 7 states has the single calls'
    bits."""
    from soadyn.codegen.profiles import IEEE_FLAGS, Profile

    prof = Profile("lanes_stages_O0", ("-O0", *IEEE_FLAGS), stage_ops=300, lanes=4)
    mod = compile_robot(robot, tmp_path, functions=["forward_dynamics_derivatives"], progress=False,
                        profile=prof)
    Q, V, T, _ = _states(robot, 7, seed)
    _agrees_with_references(mod, robot, "forward_dynamics_derivatives", Q[:2], V[:2], T[:2])
    batch = mod.forward_dynamics_derivatives(Q, V, T)
    for i in range(len(Q)):
        for b, s1 in zip(batch, mod.forward_dynamics_derivatives(Q[i], V[i], T[i])):
            assert np.array_equal(b[i].view(np.int64), s1.view(np.int64)), i


def test_short_legs_blocks_are_loops_reading_m_inverse_in_place(tmp_path):
    """A free base with four legs of 3 joints (a quadruped, nv 18), forward-dynamics derivatives: each leg's
    block ``-M^-1 dtau/dx`` has 18 x 3 result entries, below ``GENERAL_PRODUCT_MIN``, but reads its left
    factor in place from da_dtau (``IN_PLACE_PRODUCT_MIN``): loops, not the ~7,000 operations of
    statements that also pulled M^-1's base terms out of their loop (Go2, nv 18: 2.43 -> 1.81-1.94 us a
    call, benchmarks/README.md).  The C agrees with central differences of the reference path and the
    float run, and the SIMD batch has the single call's bits."""
    from soadyn.codegen.derive import GENERAL_PRODUCT_MIN, IN_PLACE_PRODUCT_MIN, derive
    from soadyn.codegen.functions import function_table

    rng = np.random.default_rng(11)
    bodies = _base_body()
    for leg in range(4):
        _add_chain(bodies, rng, "base", [(f"l{leg}_{i}", f"j{leg}_{i}") for i in range(3)])
    robot = with_gravity(_robot(tmp_path, {"name": "four_legs", "base": "free", "gravity": [0.3, -0.4, -9.81],
                                           "bodies": bodies}), GRAVITY)
    assert IN_PLACE_PRODUCT_MIN <= robot.nv * 3 < GENERAL_PRODUCT_MIN
    spec = next(s for s in function_table(robot, derivatives=True)
                if s.name == "forward_dynamics_derivatives")
    products = derive(robot, spec).products
    legs = [p for p in products if p.inner == 9]          # rows: the base's 6 and the leg's 3
    assert len(legs) == 8 and all(p.source and p.source[0] == "da_dtau" and p.m == robot.nv for p in legs)
    assert any(p.symmetric and p.name.startswith("MinvB") for p in products)   # the base terms: a loop
    _fd_derivatives_agree_and_batch_bits(robot, tmp_path, 39)


@pytest.mark.parametrize("per_state", [False, True], ids=["expressions", "per_state"])
def test_chain_products_write_the_block_products_factors(tmp_path, monkeypatch, per_state):
    """Two branches of 7 joints on a free base, forward-dynamics derivatives: each branch's chain pairs
    (``dqL``, ``dvL``: entries of dtau/dx that only the blocks ``-M^-1 dtau/dx`` read) are masked product
    loops that store their results straight into those blocks' factors ``B`` (the scratch arrays
    ``prodf_dadx*``), instead of statements; where a joint's damping and friction add to the diagonal of
    dtau/dv the loop adds to what the statements stored there.  The C agrees with central differences of
    the reference path and with the float run, and the SIMD batch has the single call's bits, with the
    products as expressions in the lanes or per state after them."""
    import soadyn.codegen.units as units
    from soadyn.codegen.derive import derive
    from soadyn.codegen.functions import function_table

    monkeypatch.setattr(units, "PER_STATE_PRODUCT_OPS", 0 if per_state else 10 ** 9)
    doc = _two_branch_doc("free", joints=7)
    doc["name"] += "_damped"
    for body in doc["bodies"][2:4]:
        body["joint"].update(damping=0.4, friction=0.3)
    robot = with_gravity(_robot(tmp_path, doc), GRAVITY)
    spec = next(s for s in function_table(robot, derivatives=True)
                if s.name == "forward_dynamics_derivatives")
    products = derive(robot, spec).products
    chain = [p for p in products if p.ranges]
    assert sorted(p.name[:3] for p in chain) == ["dqL", "dqL", "dvL", "dvL"]
    assert all(p.runs[0][0].startswith("prodf_dadx") for p in chain)
    order = [p.name for p in products]
    readers = {p.left: p.name for p in products if p.k}       # the product whose factors a scratch holds
    assert all(order.index(p.name) < order.index(readers[p.runs[0][0]]) for p in chain)
    assert sorted(p.accumulate for p in chain) == [False, False, False, True]   # the damped diagonal
    _fd_derivatives_agree_and_batch_bits(robot, tmp_path, 38)


@pytest.mark.parametrize("per_state", [False, True], ids=["expressions", "per_state"])
def test_chain_products_write_the_in_place_products_columns(tmp_path, monkeypatch, per_state):
    """One chain of 7 joints on a free base (an xArm7): ``-M^-1 dtau/dx`` is one product over all of M^-1,
    in place in the outputs (its ``B`` stored into the columns it overwrites); the chain's masked
    products store their results into those columns of ``da_dq`` and ``da_dv`` before it runs.  The C
    agrees with central differences of the reference path and with the float run, and the SIMD batch has
    the single call's bits either way it runs the products."""
    import soadyn.codegen.units as units
    from soadyn.codegen.derive import derive
    from soadyn.codegen.functions import function_table

    monkeypatch.setattr(units, "PER_STATE_PRODUCT_OPS", 0 if per_state else 10 ** 9)
    bodies = _base_body()
    _add_chain(bodies, np.random.default_rng(9), "base", [(f"l{i}", f"j{i}") for i in range(7)])
    doc = {"name": "one_chain_free_7", "base": "free", "gravity": [0.3, -0.4, -9.81], "bodies": bodies}
    robot = with_gravity(_robot(tmp_path, doc), GRAVITY)
    spec = next(s for s in function_table(robot, derivatives=True)
                if s.name == "forward_dynamics_derivatives")
    products = derive(robot, spec).products
    chain = [p for p in products if p.ranges]
    assert sorted((p.name[:3], p.runs[0][0]) for p in chain) == [("dqL", "da_dq"), ("dvL", "da_dv")]
    in_place = [i for i, p in enumerate(products) if not p.k and p.m == robot.nv]
    assert in_place and all(products.index(p) < in_place[0] for p in chain)
    _fd_derivatives_agree_and_batch_bits(robot, tmp_path, 39)


def test_chain_products_cut_where_the_chain_branches(tmp_path):
    """A waist of 2 joints carrying two arms of 7, and a leg of 2, on a free base (a G1's trunk): the waist
    and the first arm are one chain of 9 bodies, whose pairs are entries of two blocks of ``-M^-1 dtau/dx``
    (the waist's columns and the arm's).  The forward-dynamics derivatives cut the chain's masked
    products where it branches: the waist's columns over the rows of its whole subtree (16 rows: its
    pairs with the second arm too) and the arm's lower triangle, each a loop that stores its results
    into one block's factors (on 216da7d the chain of 9 was one product with entries in two blocks:
    statements).  The C agrees with central differences of the reference path and the float run, and
    the SIMD batch has the single call's bits."""
    from soadyn.codegen.derive import derive
    from soadyn.codegen.functions import function_table

    rng = np.random.default_rng(12)
    bodies = _base_body()
    _add_chain(bodies, rng, "base", [(f"leg_{i}", f"jleg_{i}") for i in range(2)])
    waist = _add_chain(bodies, rng, "base", [(f"w_{i}", f"jw_{i}") for i in range(2)])
    for arm in ("l", "r"):
        _add_chain(bodies, rng, waist, [(f"{arm}_{i}", f"j{arm}_{i}") for i in range(7)])
    doc = {"name": "waist_arms", "base": "free", "gravity": [0.3, -0.4, -9.81], "bodies": bodies}
    robot = with_gravity(_robot(tmp_path, doc), GRAVITY)
    assert robot.nv == 24
    spec = next(s for s in function_table(robot, derivatives=True)
                if s.name == "forward_dynamics_derivatives")
    products = derive(robot, spec).products
    chain = [p for p in products if p.ranges]
    assert sorted((p.name[:3], p.m, p.columns) for p in chain) == [
        ("dqL", 7, 7), ("dqL", 7, 7), ("dqL", 16, 2), ("dvL", 7, 7), ("dvL", 7, 7), ("dvL", 16, 2)]
    assert all(p.runs[0][0].startswith("prodf_dadx") for p in chain)
    assert len({p.runs[0][0] for p in chain}) == 6                  # each into one block's factors
    order = [p.name for p in products]
    readers = {p.left: p.name for p in products if p.k}
    assert all(order.index(p.name) < order.index(readers[p.runs[0][0]]) for p in chain)
    _fd_derivatives_agree_and_batch_bits(robot, tmp_path, 40)
